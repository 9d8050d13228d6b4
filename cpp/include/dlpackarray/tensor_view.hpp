// TensorView: the descriptor every DLPackArray holds.  It is a plain value
// (no ownership); whoever builds one also keeps the memory alive.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"

namespace dla {

// NumPy 2's limit; enough for every library we exchange with.  Shape and
// strides live inline so a view never allocates.
inline constexpr int32_t kMaxNdim = 64;

struct TensorView {
  void* data = nullptr;      // DLTensor.data: may be NULL when size == 0
  uint64_t byte_offset = 0;  // bytes from data to the first element
  int32_t ndim = 0;
  DLDataType dtype{kDLUInt, 8, 1};
  DLDevice device{kDLCPU, 0};
  bool readonly = false;
  // Slot for the CUDA issue: the stream on which the data is ready (NULL means
  // "ready on the legacy default stream / host").
  void* ready_stream = nullptr;
  int64_t shape[kMaxNdim];
  int64_t strides[kMaxNdim];  // in elements, like DLTensor.strides
};

struct Extent {
  // Byte offsets, relative to data + byte_offset, of the lowest byte touched
  // and one past the highest byte touched.  Both 0 for size-0 views.
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size = 0;  // number of elements
};

// Checks ndim, shape, dtype, strides and computes the extent with every
// product and sum overflow-checked in int64.  Throws dla::Error.
Extent validate(const TensorView& v);

// validate() plus: the bytes touched must lie inside [base, base + length).
// Used when the source's length is known (buffer protocol, from_buffer).
Extent validate_within(const TensorView& v, const void* base, int64_t length);

int64_t view_size(const TensorView& v);
bool is_c_contiguous(const TensorView& v);
bool is_f_contiguous(const TensorView& v);

// Fills strides for a C-contiguous layout of v.shape.
void set_c_strides(TensorView& v);

// True when device memory can be read directly by the host.
bool device_is_host_accessible(DLDevice d);

}  // namespace dla
