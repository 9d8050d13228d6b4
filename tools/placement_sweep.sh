#!/usr/bin/env bash
# Profile-guided builds of one source at several code placements (CMakeLists.txt
# DLPACKARRAY_CODE_SHIFT; benchmarks/README.md, "Placement sweeps"):
#   bash tools/placement_sweep.sh SOURCE_DIR OUT_DIR LABEL [SHIFT ...]
# installs SOURCE_DIR into OUT_DIR/LABEL-shiftN (pip --target) for each SHIFT
# (default 0 1024 2048 3072 bytes), all from one training, in the current Python
# (which needs scikit-build-core, Cython, NumPy and pyarrow installed).  Extra
# CMake definitions come from SWEEP_DEFINES, e.g. SWEEP_DEFINES="DLPACKARRAY_NO_PLT=OFF".
# Then run each build, alternating, with
#   PYTHONPATH=OUT_DIR/LABEL-shiftN python -m benchmarks.run ... --name P-LABEL-shiftN-setK
# and read the runs back with python -m benchmarks.placement DIR.
set -euo pipefail
src=$(realpath "$1")
out=$(realpath -m "$2")
label=$3
shift 3
shifts=("$@")
[ ${#shifts[@]} -gt 0 ] || shifts=(0 1024 2048 3072)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$out/.work-$label
profiles=$work/profiles
rm -rf "$work"
mkdir -p "$profiles"
defines=()
for d in ${SWEEP_DEFINES:-}; do defines+=(-C "cmake.define.$d"); done

install() {  # install STAGE TARGET [DEFINE ...]
  local stage=$1 target=$2
  shift 2
  rm -rf "$target"
  python -m pip install -q --no-build-isolation --no-deps --upgrade -t "$target" \
    -C build-dir="$work/build" -C cmake.define.DLPACKARRAY_PGO="$stage" \
    -C cmake.define.DLPACKARRAY_PGO_DIR="$profiles" "${defines[@]}" "$@" "$src"
}

install generate "$work/generate"
(cd "$work" && PYTHONPATH="$work/generate" python "$repo/tools/pgo_train.py" \
  --rounds "${PGO_TRAIN_ROUNDS:-1000}" --require arrow)
for n in "${shifts[@]}"; do
  # Same object paths, fresh objects (GCC names a profile after its object file).
  rm -rf "$work/build"
  install use "$out/$label-shift$n" -C cmake.define.DLPACKARRAY_CODE_SHIFT="$n"
  echo "placement_sweep: $out/$label-shift$n"
done
rm -rf "$work"
