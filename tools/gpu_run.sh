#!/usr/bin/env bash
# The real-GPU checks, as one script for a lent GPU machine (docs/cuda_gpu_results.md).
#
#   tools/gpu_run.sh WHEEL OUTDIR
#
# WHEEL is a dlpackarray wheel built for that machine's python3 (it has no
# registry: build the wheel beside the repository and carry it).  Each step
# writes its own log to OUTDIR and a failing step does not stop the next: one
# lease has to bring back every result.
set -uo pipefail
wheel=$1
out=$2
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=python3

step() { echo "== $* ($(date +%T))"; }

step "machine"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $py -c 'import sys, numpy, torch, cupy; print(sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cupy", cupy.__version__)'
} 2>&1 | tee "$out/machine.txt"

step "install"
$py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$wheel" || exit 1
export PYTHONPATH=/tmp/site
$py -c 'import dlpackarray; print("dlpackarray", dlpackarray.__version__)' | tee -a "$out/machine.txt"

step "tests/cuda/test_cuda_gpu.py"
JAX_PLATFORMS=cuda,cpu timeout 240 $py -m pytest -p no:cacheprovider -v -rs \
    tests/cuda/test_cuda_gpu.py 2>&1 | tee "$out/test_cuda_gpu.log" | tail -60

step "torch pinned memory and stream values, each in a fresh process"
$py - <<'EOF2' 2>&1 | tee "$out/facts.txt"
import torch, dlpackarray as dla
t = torch.zeros(4).pin_memory()
print("torch.cuda._initialized after pin_memory():", torch.cuda._initialized)
print("pinned __dlpack_device__():", t.__dlpack_device__())
print("pinned capsule device:", dla.DLPackArray(t.__dlpack__()).device)
EOF2
for lib in torch jax cupy; do
    for s in 0 -2; do
        case $lib in
        torch) mk="import torch; x = torch.zeros(4, device='cuda')" ;;
        jax) mk="import jax.numpy as jnp; x = jnp.zeros(4)" ;;
        cupy) mk="import cupy; x = cupy.zeros(4)" ;;
        esac
        JAX_PLATFORMS=cuda timeout 60 $py -c "$mk
try:
    x.__dlpack__(stream=$s); print('accepted')
except Exception as e:
    print('refused', type(e).__name__, str(e)[:80])" >/tmp/o 2>&1
        echo "$lib __dlpack__(stream=$s): exit $? $(tail -c 200 /tmp/o | tr '\n' ' ')" | tee -a "$out/facts.txt"
    done
done

step "B11"
timeout 120 $py -m benchmarks.gpu_b11 --out "$out/b11.md" 2>&1 | tail -20

step "the CUDA-adjacent test files (fake driver beside a real one)"
timeout 60 $py -m pytest -p no:cacheprovider -q -rs -n 8 tests/cuda/test_cuda_fake.py tests/cuda/test_cuda_streams.py \
    tests/cuda/test_cuda_abi.py tests/cuda/test_cuda_driver_layer.py tests/cuda/test_fake_cuda_model.py \
    tests/arrow/test_arrow_cuda_export.py tests/arrow/test_arrow_cuda_import.py \
    tests/cuda/test_pickle_cuda.py 2>&1 | tee "$out/test_cuda_fake.log" | tail -15

step "the whole suite, 14 workers (this image's numpy/torch/jax versions)"
timeout 150 $py -m pytest -p no:cacheprovider -q -rs -n 14 tests 2>&1 | tee "$out/suite.log" | tail -40

# Last: its report is written subject by subject, so a cut-off run still brings back the
# subjects it finished.
step "conformance of CUDA producers (tools/gpu_conform.py: a crashing probe is named and skipped)"
timeout 130 $py tools/gpu_conform.py --timeout 30 --out "$out" 2>&1 | tail -60

step "done"
