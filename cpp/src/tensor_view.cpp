#include "dlpackarray/tensor_view.hpp"

#include <cstdint>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

int64_t mul_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
  }
  return r;
}

int64_t add_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
  }
  return r;
}

void move_to_heap(int64_t*& heap, int64_t*& shape, int64_t*& strides, int32_t keep) {
  int64_t* block = new int64_t[2 * kMaxNdim];
  for (int32_t i = 0; i < keep; ++i) {
    block[i] = shape[i];
    block[kMaxNdim + i] = strides[i];
  }
  heap = block;
  shape = block;
  strides = block + kMaxNdim;
}

}  // namespace

TensorView::TensorView(const TensorView& other) : TensorView() { *this = other; }

TensorView& TensorView::operator=(const TensorView& other) {
  if (this == &other) return *this;
  data = other.data;
  byte_offset = other.byte_offset;
  dtype = other.dtype;
  device = other.device;
  readonly = other.readonly;
  ready_stream = other.ready_stream;
  if (other.ndim > kInlineNdim && heap_ == nullptr) move_to_heap(heap_, shape, strides, 0);
  ndim = other.ndim;
  for (int32_t i = 0; i < ndim; ++i) {
    shape[i] = other.shape[i];
    strides[i] = other.strides[i];
  }
  return *this;
}

void TensorView::set_ndim(int32_t n) {
  if (n < 0 || n > kMaxNdim) {
    fail(ErrorKind::Value, "ndim " + std::to_string(n) + " is outside the supported range 0.." +
                               std::to_string(kMaxNdim));
  }
  if (n > kInlineNdim && heap_ == nullptr) {
    move_to_heap(heap_, shape, strides, ndim < n ? ndim : n);
  }
  ndim = n;
}

Extent validate(const TensorView& v) {
  if (v.ndim < 0 || v.ndim > kMaxNdim) {
    fail(ErrorKind::Value, "ndim " + std::to_string(v.ndim) +
                               " is outside the supported range 0.." + std::to_string(kMaxNdim));
  }
  check_dtype_supported(v.dtype);
  const int64_t itemsize = dtype_itemsize(v.dtype);
  if (v.byte_offset > uint64_t(INT64_MAX)) {
    fail(ErrorKind::Overflow, "byte_offset " + std::to_string(v.byte_offset) + " overflows int64");
  }
  Extent e;
  int64_t size = 1;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] < 0) {
      fail(ErrorKind::Value,
           "shape[" + std::to_string(i) + "] = " + std::to_string(v.shape[i]) + " is negative");
    }
    size = mul_checked(size, v.shape[i], "number of elements");
  }
  e.size = size;
  if (size == 0) return e;
  int64_t lo = 0, hi = 0;
  for (int32_t i = 0; i < v.ndim; ++i) {
    // A length-1 dimension touches one element whatever its stride claims.
    if (v.shape[i] == 1) continue;
    const int64_t step = mul_checked(v.strides[i], itemsize, "stride in bytes");
    const int64_t span = mul_checked(v.shape[i] - 1, step, "array extent");
    if (span >= 0) {
      hi = add_checked(hi, span, "array extent");
    } else {
      lo = add_checked(lo, span, "array extent");
    }
  }
  e.lo = lo;
  e.hi = add_checked(hi, itemsize, "array extent");
  if (v.data == nullptr) {
    fail(ErrorKind::Value,
         "data pointer is NULL but the array has " + std::to_string(size) + " element(s)");
  }
  const auto first = uintptr_t(v.data) + v.byte_offset;
  if (first < uintptr_t(v.data) || (e.lo < 0 && uintptr_t(-e.lo) > first) ||
      uintptr_t(e.hi) > UINTPTR_MAX - first) {
    fail(ErrorKind::Overflow, "array extent wraps around the address space");
  }
  return e;
}

Extent validate_within(const TensorView& v, const void* base, int64_t length) {
  const Extent e = validate(v);
  if (e.size == 0) return e;
  const auto b = uintptr_t(base);
  const auto first = uintptr_t(v.data) + v.byte_offset;
  const auto lo = first - uintptr_t(-e.lo);
  const auto hi = first + uintptr_t(e.hi);
  if (length < 0 || lo < b || hi > b + uint64_t(length)) {
    fail(ErrorKind::Value, "shape/strides/offset reach bytes [" + std::to_string(int64_t(lo - b)) +
                               ", " + std::to_string(int64_t(hi - b)) +
                               ") outside the source buffer of " + std::to_string(length) +
                               " bytes");
  }
  return e;
}

int64_t view_size(const TensorView& v) {
  int64_t n = 1;
  for (int32_t i = 0; i < v.ndim; ++i) n *= v.shape[i];
  return n;
}

bool is_c_contiguous(const TensorView& v) {
  int64_t expected = 1;
  for (int32_t i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[i] == 0) return true;
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    expected *= v.shape[i];
  }
  return true;
}

bool is_f_contiguous(const TensorView& v) {
  int64_t expected = 1;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return true;
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    expected *= v.shape[i];
  }
  return true;
}

void set_c_strides(TensorView& v) {
  int64_t s = 1;
  for (int32_t i = v.ndim - 1; i >= 0; --i) {
    v.strides[i] = s;
    s *= (v.shape[i] > 0 ? v.shape[i] : 1);
  }
}

bool device_is_host_accessible(DLDevice d) {
  return d.device_type == kDLCPU || d.device_type == kDLCUDAHost ||
         d.device_type == kDLCUDAManaged || d.device_type == kDLROCMHost;
}

bool device_has_opaque_data(DLDevice d) {
  return d.device_type == kDLOpenCL || d.device_type == kDLVulkan || d.device_type == kDLMetal;
}

void fold_byte_offset(TensorView& v) noexcept {
  if (v.byte_offset == 0 || device_has_opaque_data(v.device)) return;
  // A NULL data pointer belongs to an empty array: no element to point at,
  // and NULL + offset would be a made-up address.
  if (v.data != nullptr) v.data = reinterpret_cast<void*>(uintptr_t(v.data) + v.byte_offset);
  v.byte_offset = 0;
}

}  // namespace dla
