// Zero-copy view arithmetic on TensorView: basic indexing, reshape, axis
// permutation and dtype reinterpretation.  Every function reads `in`, writes a
// new descriptor to `out` (never the memory) and throws dla::Error when the
// request cannot be served without a copy or is invalid.  All index/stride
// arithmetic is overflow-checked in int64.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla {

// One entry of a basic-indexing key, as Python's `x[...]` spells it.
struct IndexItem {
  enum Kind : int32_t { kInteger = 0, kSlice = 1, kEllipsis = 2, kNewAxis = 3 };
  int32_t kind = kInteger;
  // kInteger: the index (negative counts from the end).
  // kSlice: start/stop/step exactly as PySlice_Unpack returns them, i.e.
  // omitted bounds are INT64_MIN/INT64_MAX sentinels and step != 0.
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
};

// Longest key index_view accepts: every dimension indexed, up to kMaxNdim
// new axes, and one Ellipsis; anything longer cannot be valid.
inline constexpr int32_t kMaxIndexItems = 2 * kMaxNdim + 1;

// NumPy basic indexing.  Integers drop a dimension (IndexError when out of
// range), slices keep it with the stride multiplied by the step, None adds a
// length-1 dimension, one Ellipsis stands for the remaining dimensions.
void index_view(const TensorView& in, const IndexItem* items, int32_t nitems, TensorView* out);

// C-order reshape without copying.  One entry of `shape` may be -1 (inferred).
// Throws ValueError when the sizes disagree or when the existing strides
// cannot express the new shape (the caller must copy explicitly).
void reshape_view(const TensorView& in, const int64_t* shape, int32_t ndim, TensorView* out);

// Reorders the dimensions: out dimension i is in dimension axes[i].  Axes may
// be negative; they must form a permutation of 0..ndim-1.
void permute_view(const TensorView& in, const int64_t* axes, int32_t naxes, TensorView* out);

// Reinterprets the bytes as `dtype`.  With a different item size the last
// dimension must be contiguous and its byte length divisible by the new item
// size, and every other stride must be a whole number of new items (NumPy's
// `ndarray.view(dtype)` rule).
void dtype_view(const TensorView& in, DLDataType dtype, TensorView* out);

}  // namespace dla
