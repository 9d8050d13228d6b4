#include "dlpackarray/tensor_view.hpp"

#include <cstdint>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

// Out of line, so that the checked arithmetic below inlines into validate().
[[noreturn, gnu::noinline, gnu::cold]] void fail_overflow(const char* what) {
  fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
}

inline int64_t mul_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail_overflow(what);
  return r;
}

inline int64_t add_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail_overflow(what);
  return r;
}

// validate()'s refusals, out of line and cold: the messages' string
// building stays out of the frame of every import's validation.
[[noreturn, gnu::noinline, gnu::cold]] void fail_ndim(int32_t ndim) {
  fail(ErrorKind::Value, "ndim " + std::to_string(ndim) + " is outside the supported range 0.." +
                             std::to_string(kMaxNdim));
}

[[noreturn, gnu::noinline, gnu::cold]] void fail_byte_offset(uint64_t byte_offset) {
  fail(ErrorKind::Overflow, "byte_offset " + std::to_string(byte_offset) + " overflows int64");
}

[[noreturn, gnu::noinline, gnu::cold]] void fail_negative_extent(int32_t i, int64_t extent) {
  fail(ErrorKind::Value,
       "shape[" + std::to_string(i) + "] = " + std::to_string(extent) + " is negative");
}

[[noreturn, gnu::noinline, gnu::cold]] void fail_null_data(int64_t size) {
  fail(ErrorKind::Value,
       "data pointer is NULL but the array has " + std::to_string(size) + " element(s)");
}

// The stride, in elements, of dimension i in a C-contiguous array of v's
// shape (zero extents count as 1); 0 for shapes whose element count
// overflows, which validate() refuses.
int64_t c_contiguous_stride(const TensorView& v, int32_t i) {
  int64_t s = 1;
  for (int32_t j = v.ndim - 1; j > i; --j) {
    if (__builtin_mul_overflow(s, v.shape[j] > 0 ? v.shape[j] : 1, &s)) return 0;
  }
  return s;
}

bool has_zero_extent(const TensorView& v) {
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return true;
  }
  return false;
}

// How many bytes below data + byte_offset the view reaches: -lo, negated in
// unsigned arithmetic (an int64 negation of INT64_MIN is undefined).
inline uintptr_t below(const Extent& e) { return uintptr_t(0) - uintptr_t(e.lo); }

// Extent::nbytes: size * itemsize, or -1 when it overflows int64.
int64_t dense_nbytes(int64_t size, int64_t itemsize) {
  int64_t n;
  return __builtin_mul_overflow(size, itemsize, &n) ? -1 : n;
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

void TensorView::set_ndim_beyond_inline(int32_t n) {
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
  if (v.ndim < 0 || v.ndim > kMaxNdim) fail_ndim(v.ndim);
  const int64_t itemsize = supported_itemsize(v.dtype);
  if (v.byte_offset > uint64_t(INT64_MAX)) fail_byte_offset(v.byte_offset);
  Extent e;
  int64_t lo = 0, hi = 0;
  if (v.ndim == 1) {
    // One dimension (every Arrow column, most imports): the loops below
    // with their one pass written out, the same checks in the same order
    // (tests/array/test_extent_arithmetic.py holds both to one model).
    const int64_t n = v.shape[0];
    if (n < 0) fail_negative_extent(0, n);
    e.size = n;
    e.nbytes = dense_nbytes(n, itemsize);
    if (n == 0) return e;
    if (n != 1) {
      const int64_t step = mul_checked(v.strides[0], itemsize, "stride in bytes");
      const int64_t span = mul_checked(n - 1, step, "array extent");
      (span >= 0 ? hi : lo) = span;
    }
  } else {
    // NumPy's rule: the non-zero extents' product must fit even when another
    // extent is 0, so the verdict does not depend on the order of dimensions.
    int64_t nonzero = 1;
    bool empty = false;
    for (int32_t i = 0; i < v.ndim; ++i) {
      if (v.shape[i] < 0) fail_negative_extent(i, v.shape[i]);
      if (v.shape[i] == 0) {
        empty = true;
        continue;
      }
      nonzero = mul_checked(nonzero, v.shape[i], "number of elements");
    }
    const int64_t size = empty ? 0 : nonzero;
    e.size = size;
    e.nbytes = dense_nbytes(size, itemsize);
    if (size == 0) return e;
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
  }
  e.lo = lo;
  e.hi = add_checked(hi, itemsize, "array extent");
  // Callers size spans and copies with hi - lo and negate lo: both must be
  // int64 values.  hi >= 1, so this also keeps lo above INT64_MIN.
  int64_t span;
  if (__builtin_sub_overflow(e.hi, e.lo, &span)) fail_overflow("array extent");
  if (v.data == nullptr) fail_null_data(e.size);
  const auto first = uintptr_t(v.data) + v.byte_offset;
  if (first < uintptr_t(v.data) || below(e) > first || uintptr_t(e.hi) > UINTPTR_MAX - first) {
    fail(ErrorKind::Overflow, "array extent wraps around the address space");
  }
  return e;
}

Extent validate_within(const TensorView& v, const void* base, int64_t length) {
  const Extent e = validate(v);
  const auto b = uintptr_t(base);
  const auto first = uintptr_t(v.data) + v.byte_offset;
  if (e.size == 0) {
    // No element is read, but the data pointer still has to point into the
    // buffer or one past its end (numpy.frombuffer's rule: 0 <= offset <=
    // len), or a consumer would get an address the buffer does not own.
    if (length < 0 || first < b || first - b > uint64_t(length)) {
      fail(ErrorKind::Value, "offset " + std::to_string(int64_t(first - b)) +
                                 " is beyond the end of the source buffer of " +
                                 std::to_string(length) + " bytes (an empty array's offset " +
                                 "may be at most the buffer's length)");
    }
    return e;
  }
  const auto lo = first - below(e);
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
  // validate() checked the non-zero extents' product: no overflow before a 0.
  int64_t n = 1;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return 0;
    n *= v.shape[i];
  }
  return n;
}

int64_t view_nbytes(const TensorView& v) {
  const int64_t size = view_size(v);
  const int64_t itemsize = dtype_itemsize(v.dtype);
  const int64_t n = dense_nbytes(size, itemsize);
  if (n < 0) {
    fail(ErrorKind::Overflow, "the array's size in bytes (" + std::to_string(size) +
                                  " elements of " + std::to_string(itemsize) +
                                  " bytes) overflows int64; a broadcast view this large cannot "
                                  "be copied or exported as one buffer");
  }
  return n;
}

// An array with a zero extent has no element to misplace: it is contiguous
// in both orders whatever its strides (as NumPy flags it).  That must be
// decided before any stride is looked at.
bool is_c_contiguous(const TensorView& v) {
  if (has_zero_extent(v)) return true;
  int64_t expected = 1;
  for (int32_t i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    // Only a shape validate() refuses overflows here.
    if (__builtin_mul_overflow(expected, v.shape[i], &expected)) return false;
  }
  return true;
}

bool is_f_contiguous(const TensorView& v) {
  if (has_zero_extent(v)) return true;
  int64_t expected = 1;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] != 1 && v.strides[i] != expected) return false;
    // Only a shape validate() refuses overflows here.
    if (__builtin_mul_overflow(expected, v.shape[i], &expected)) return false;
  }
  return true;
}

void set_c_strides(TensorView& v) {
  int64_t s = 1;
  for (int32_t i = v.ndim - 1; i >= 0; --i) {
    v.strides[i] = s;
    if (__builtin_mul_overflow(s, v.shape[i] > 0 ? v.shape[i] : 1, &s)) s = 0;
  }
}

bool stride_is_used(const TensorView& v, int32_t i) {
  return v.shape[i] > 1 && !has_zero_extent(v);
}

namespace {

// byte_stride() once the item size is known.
inline int64_t byte_stride_of(const TensorView& v, int32_t i, int64_t itemsize) {
  int64_t bytes;
  if (!__builtin_mul_overflow(v.strides[i], itemsize, &bytes)) return bytes;
  if (__builtin_mul_overflow(c_contiguous_stride(v, i), itemsize, &bytes)) return itemsize;
  return bytes;
}

}  // namespace

int64_t byte_stride(const TensorView& v, int32_t i) {
  return byte_stride_of(v, i, dtype_itemsize(v.dtype));
}

void measure_buffer_layout(const TensorView& v, int64_t* byte_strides, BufferLayout* out) {
  const int64_t itemsize = dtype_itemsize(v.dtype);  // the one throw: before any write
  out->itemsize = itemsize;
  out->format = pep3118_from_dtype(v.dtype);
  if (v.ndim == 1) {
    // One dimension (every Arrow column, most arrays read once): the
    // functions below with their one pass written out, the same answers
    // (tests/buffer/test_buffer_layout.py holds both to NumPy's own buffer export).
    const int64_t n = v.shape[0];
    const bool dense = n == 0 || n == 1 || v.strides[0] == 1;
    out->c_contiguous = dense;
    out->f_contiguous = dense;
    out->len = dense_nbytes(n, itemsize);
    if (byte_strides != nullptr) byte_strides[0] = byte_stride_of(v, 0, itemsize);
  } else {
    out->c_contiguous = is_c_contiguous(v);
    out->f_contiguous = is_f_contiguous(v);
    // view_nbytes without its OverflowError: a broadcast view of more than
    // int64 bytes is a legal view, refused only by the export that reads len.
    out->len = dense_nbytes(view_size(v), itemsize);
    if (byte_strides != nullptr) {
      for (int32_t i = 0; i < v.ndim; ++i) byte_strides[i] = byte_stride_of(v, i, itemsize);
    }
  }
  out->known = true;
}

void set_strides_from_bytes(TensorView& v, const int64_t* byte_strides, const char* source) {
  if (byte_strides == nullptr) {
    set_c_strides(v);
    return;
  }
  const int64_t itemsize = dtype_itemsize(v.dtype);
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (byte_strides[i] % itemsize == 0) {
      v.strides[i] = byte_strides[i] / itemsize;
    } else if (!stride_is_used(v, i)) {
      // Never multiplied by a non-zero index, so no element is misplaced.
      v.strides[i] = c_contiguous_stride(v, i);
    } else {
      fail(ErrorKind::Buffer, std::string(source) + " has a stride of " +
                                  std::to_string(byte_strides[i]) + " bytes in dimension " +
                                  std::to_string(i) + ", not a multiple of the item size " +
                                  std::to_string(itemsize) + "; DLPack strides count elements");
    }
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
