#!/usr/bin/env bash
# Builds a libFuzzer harness with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (no recovery: the first report is a crash).
#
# Usage: bash fuzz/build.sh [OUTPUT] [HARNESS]
#   HARNESS: core (default; fuzz/core_fuzz.cpp, the C++ core) or arrow
#   (fuzz/arrow_fuzz.cpp, the Arrow C struct import and the export's
#   requested_schema path).
#   OUTPUT defaults to build/fuzz/<HARNESS>_fuzz.
# Run:   build/fuzz/core_fuzz -max_total_time=60 CORPUS_DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
harness=${2:-core}
out=${1:-build/fuzz/${harness}_fuzz}
mkdir -p "$(dirname "$out")"
CXX=${CXX:-clang++}
core_sources=(
  cpp/src/errors.cpp cpp/src/rules.cpp cpp/src/dtype.cpp cpp/src/tensor_view.cpp
  cpp/src/strided_copy.cpp cpp/src/transpose_tile.cpp
)
case "$harness" in
  core)
    sources=(fuzz/core_fuzz.cpp "${core_sources[@]}"
      cpp/src/managed_tensor.cpp cpp/src/view_ops.cpp cpp/src/array_interface.cpp)
    libs=()
    ;;
  arrow)
    # The import and the export plus what they link: metadata, and the CUDA
    # copies behind device bitmaps and device exports (never reached: the
    # harness imports and exports CPU data only).
    sources=(fuzz/arrow_fuzz.cpp "${core_sources[@]}"
      cpp/src/arrow_import.cpp cpp/src/arrow_schema_memo.cpp cpp/src/arrow_metadata.cpp
      cpp/src/arrow_export.cpp
      cpp/src/cuda_copy.cpp cpp/src/cuda_driver.cpp cpp/src/cuda_sync.cpp)
    libs=(-ldl -pthread)
    ;;
  *)
    echo "unknown harness '$harness' (core or arrow)" >&2
    exit 2
    ;;
esac
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I cpp/include \
  "${sources[@]}" "${libs[@]}" \
  -o "$out"
echo "built $out"
