#!/usr/bin/env bash
# A profile-guided wheel (CMakeLists.txt DLPACKARRAY_PGO; docs/install.rst):
#   bash tools/pgo_wheel.sh PYTHON SOURCE_DIR WHEEL_DIR WORK_DIR
# 1. builds an instrumented wheel of SOURCE_DIR (an unpacked sdist or a checkout) with
#    PYTHON, in WORK_DIR/build;
# 2. installs it with NumPy and pyarrow into a venv of its own and runs
#    tools/pgo_train.py there, which writes the profiles to WORK_DIR/profiles and fails
#    when a trained route gives a wrong result;
# 3. rebuilds from the profiles in the same build directory (GCC names a profile after
#    its object file) and puts the wheel in WHEEL_DIR.
# PGO_TRAIN_ROUNDS sets the training's --rounds (default 1000).  pyarrow is required
# where a binary wheel of it exists for PYTHON, so the Arrow routes are trained.
set -euo pipefail
py=$1
src=$(realpath "$2")
wheel_dir=$(realpath -m "$3")
work=$(realpath -m "$4")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
profiles=$work/profiles
rm -rf "$work/build" "$work/generate" "$profiles" "$work/train"
mkdir -p "$wheel_dir" "$work/generate" "$profiles"

build() {  # build STAGE OUT_DIR
  # The long option: the -C alias needs pip 23.1, and CPython 3.10's bundled pip is older.
  "$py" -m pip wheel -q --no-deps --wheel-dir "$2" "$src" \
    --config-settings=build-dir="$work/build" \
    --config-settings=cmake.define.DLPACKARRAY_PGO="$1" \
    --config-settings=cmake.define.DLPACKARRAY_PGO_DIR="$profiles"
}

echo "pgo_wheel: instrumented build ($py)"
build generate "$work/generate"
"$py" -m venv "$work/train"
"$work/train/bin/python" -m pip install -q --upgrade pip
"$work/train/bin/python" -m pip install -q --only-binary=:all: "$work"/generate/dlpackarray-*.whl numpy
require=()
if "$work/train/bin/python" -m pip install -q --only-binary=:all: pyarrow; then
  require=(--require arrow)
else
  echo "pgo_wheel: no pyarrow wheel for $py; the Arrow routes are not trained" >&2
fi

echo "pgo_wheel: training"
trained_at=$SECONDS
(
  cd "$work"  # not the checkout: the installed package must be the one imported
  unset PYTHONPATH
  "$work/train/bin/python" "$repo/tools/pgo_train.py" --rounds "${PGO_TRAIN_ROUNDS:-1000}" "${require[@]}"
)
count=$(find "$profiles" -name '*.gcda' | wc -l)
if [ "$count" -eq 0 ]; then
  echo "pgo_wheel: the training wrote no profiles to $profiles" >&2
  exit 1
fi
echo "pgo_wheel: trained in $((SECONDS - trained_at)) s, $count profiles; optimised build"
# Same object paths, fresh objects: the instrumented ones must not be reused.
rm -rf "$work/build"
build use "$wheel_dir"
rm -rf "$work/train" "$work/generate" "$work/build"
