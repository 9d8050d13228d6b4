#!/usr/bin/env bash
# Builds the libFuzzer harness over the C++ core with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer (no recovery: the first report is a crash).
#
# Usage: bash fuzz/build.sh [OUTPUT]   (default build/fuzz/core_fuzz)
# Run:   build/fuzz/core_fuzz -max_total_time=60 fuzz/corpus/core
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-build/fuzz/core_fuzz}
mkdir -p "$(dirname "$out")"
CXX=${CXX:-clang++}
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I cpp/include \
  fuzz/core_fuzz.cpp \
  cpp/src/errors.cpp cpp/src/rules.cpp cpp/src/dtype.cpp cpp/src/tensor_view.cpp \
  cpp/src/strided_copy.cpp \
  cpp/src/managed_tensor.cpp cpp/src/view_ops.cpp cpp/src/array_interface.cpp \
  -o "$out"
echo "built $out"
