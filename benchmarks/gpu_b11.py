"""B11 on a real GPU: ``python -m benchmarks.gpu_b11 [--out FILE.md]`` (docs/cuda.md).

Cross-stream export overhead: ``DLPackArray.__dlpack__(stream=S)`` for data
ready on another stream against ``torch.Tensor.__dlpack__(stream=S)`` under
the same conditions (target <= 0.5x).  Device-to-host bandwidth:
``DLPackArray(x, device="cpu")`` against ``x.cpu()`` for 256 MB float32
(target >= 0.9x).  Results: docs/cuda_gpu_results.md (H100: 0.05x and 2.41x).
"""

from __future__ import annotations

import argparse
import statistics
import time


def _per_call_ns(fn, number=2000, repeats=7):
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter_ns() - t0) / number)
    return statistics.median(samples)


def main(argv=None):
    import torch

    import dlpackarray

    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit(
            "B11 needs a CUDA GPU; the fake-driver variant is `-m benchmarks.run --cases B11`"
        )
    ready, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.ones(1024, device="cuda")
    with torch.cuda.stream(ready):
        d = dlpackarray.DLPackArray(x, stream=ready.cuda_stream)
        t_torch = _per_call_ns(lambda: x.__dlpack__(stream=consumer.cuda_stream))
    t_ours = _per_call_ns(lambda: d.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 3)))
    big = torch.ones(64 << 20, device="cuda")  # 256 MB
    dbig = dlpackarray.DLPackArray(big)
    torch.cuda.synchronize()
    t_cpu = _per_call_ns(lambda: big.cpu(), number=3, repeats=5)
    t_d2h = _per_call_ns(lambda: dlpackarray.DLPackArray(dbig, device="cpu"), number=3, repeats=5)
    nbytes = big.numel() * 4
    rows = [
        ("cross-stream __dlpack__(stream=S)", f"{t_ours:.0f} ns", f"{t_torch:.0f} ns",
         f"{t_ours / t_torch:.2f}x", "<= 0.5x"),
        ("device-to-host 256 MB", f"{nbytes / t_d2h:.2f} GB/s", f"{nbytes / t_cpu:.2f} GB/s",
         f"{t_cpu / t_d2h:.2f}x", ">= 0.9x"),
    ]  # fmt: skip
    text = [
        f"# B11 on {torch.cuda.get_device_name()} (torch {torch.__version__})",
        "",
        "| case | dlpackarray | torch | ratio | target |",
        "| --- | --- | --- | --- | --- |",
    ] + [f"| {' | '.join(r)} |" for r in rows]
    print("\n".join(text))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
