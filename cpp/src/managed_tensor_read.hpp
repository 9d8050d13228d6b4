// The consumer's reading of a managed tensor, inline.  Every DLPack import
// reads one; the capsule consumer (python_shim.cpp), which takes over nearly
// all of them, reads it through these, so that the read, its checks and its
// call into validate() cost no call frame of their own (~20 instructions
// per import, callgrind).  managed_tensor.cpp's out-of-line
// view_from_managed() is the same code for every other caller.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla::detail {

// Out of line and cold: the messages' string building stays out of the
// frames of the inline readers below.
[[noreturn, gnu::cold, gnu::noinline]] void fail_dlpack_major_version(DLPackVersion v);
[[noreturn, gnu::cold, gnu::noinline]] void fail_dltensor_ndim(int32_t ndim);
[[noreturn, gnu::cold, gnu::noinline]] void fail_dltensor_null_shape(int32_t ndim);

// Shape (and strides) into the view: plain loops, out of line (they are
// compiled without the loop-to-memcpy rewrite, which GCC will not inline).
void copy_dims(int64_t* __restrict dst, const int64_t* __restrict src, int32_t n);
void copy_dims_and_strides(int64_t* __restrict shape, int64_t* __restrict strides,
                           const int64_t* __restrict src_shape,
                           const int64_t* __restrict src_strides, int32_t n);

inline void read_dltensor(const DLTensor& t, TensorView* out) {
  if (t.ndim < 0 || t.ndim > kMaxNdim) fail_dltensor_ndim(t.ndim);
  if (t.ndim > 0 && t.shape == nullptr) fail_dltensor_null_shape(t.ndim);
  out->data = t.data;
  out->byte_offset = t.byte_offset;
  out->set_ndim(t.ndim);
  out->dtype = t.dtype;
  out->device = t.device;
  out->ready_stream = nullptr;
  if (t.ndim > 0 && t.strides == nullptr) {
    copy_dims(out->shape, t.shape, t.ndim);
    // Pre-1.2 producers: NULL strides mean compact row-major.
    set_c_strides(*out);
  } else {
    copy_dims_and_strides(out->shape, out->strides, t.shape, t.strides, t.ndim);
  }
}

// view_from_managed (managed_tensor.hpp), inline.
inline void read_managed(const DLManagedTensorVersioned& m, TensorView* out, bool* copied) {
  // Another major version: the spec allows a consumer only the deleter,
  // which the caller runs.
  if (m.version.major != kDLPackMajorVersion) fail_dlpack_major_version(m.version);
  read_dltensor(m.dl_tensor, out);
  out->readonly = (m.flags & kFlagReadOnly) != 0;
  *copied = (m.flags & kFlagIsCopied) != 0;
  validate(*out);
  fold_byte_offset(*out);
}

inline void read_managed(const DLManagedTensor& m, TensorView* out) {
  read_dltensor(m.dl_tensor, out);
  out->readonly = false;  // legacy tensors carry no flags: writable by contract
  validate(*out);
  fold_byte_offset(*out);
}

}  // namespace dla::detail
