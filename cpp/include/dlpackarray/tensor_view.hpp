// TensorView: the descriptor every DLPackArray holds.  It is a plain value
// (no ownership); whoever builds one also keeps the memory alive.
#pragma once

#include <cstdint>

#include "dlpackarray/dlpack_abi.hpp"

namespace dla {

// NumPy 2's limit; enough for every library we exchange with.
inline constexpr int32_t kMaxNdim = 64;

// Shape and strides of up to this many dimensions live inside the view, so the
// common case never allocates and a DLPackArray stays small (objects are
// zeroed on allocation: a 1 KB inline descriptor cost every exchange ~15 ns).
inline constexpr int32_t kInlineNdim = 8;

class TensorView {
 public:
  void* data = nullptr;      // DLTensor.data: may be NULL when size == 0
  uint64_t byte_offset = 0;  // bytes from data to the first element
  // Read freely; change only through set_ndim(), which makes room.
  int32_t ndim = 0;
  DLDataType dtype{kDLUInt, 8, 1};
  DLDevice device{kDLCPU, 0};
  bool readonly = false;
  // Slot for the CUDA issue: the stream on which the data is ready (NULL means
  // "ready on the legacy default stream / host").
  void* ready_stream = nullptr;
  // Point at inline storage or, past kInlineNdim dimensions, at a heap block
  // of room for kMaxNdim.  Strides are in elements, like DLTensor.strides.
  int64_t* shape;
  int64_t* strides;

  TensorView() noexcept : shape(inline_), strides(inline_ + kInlineNdim) {}
  TensorView(const TensorView& other);
  TensorView& operator=(const TensorView& other);
  ~TensorView() { delete[] heap_; }

  // Sets ndim after making room for it; the first min(old, new) entries of
  // shape and strides are kept.  Throws ValueError outside 0..kMaxNdim.
  // Inline where the inline room suffices (every import sets it).
  void set_ndim(int32_t n) {
    if (n >= 0 && n <= kInlineNdim) {
      ndim = n;
    } else {
      set_ndim_beyond_inline(n);
    }
  }

 private:
  void set_ndim_beyond_inline(int32_t n);

  int64_t inline_[2 * kInlineNdim];
  int64_t* heap_ = nullptr;
};

struct Extent {
  // Byte offsets, relative to data + byte_offset, of the lowest byte touched
  // and one past the highest byte touched.  Both 0 for size-0 views.
  // validate() guarantees lo <= 0 < hi for non-empty views and that hi - lo
  // (the bytes spanned) fits int64, so -lo and hi - lo never overflow.
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size = 0;  // number of elements
  // size * itemsize: the bytes of a dense copy (copy(), nbytes, Py_buffer.len).
  // -1 when that overflows int64, which a legal view can do: a broadcast
  // (stride-0) view of 2**61 int64 elements touches only 8 bytes.  Consumers
  // go through view_nbytes(), which turns -1 into OverflowError.
  int64_t nbytes = 0;
};

// Checks ndim, shape, dtype, strides and computes the extent with every
// product and sum overflow-checked in int64.  As in NumPy, the product of the
// non-zero extents must fit in int64 even when another extent is 0, so every
// C-contiguous stride of a valid shape fits too.  Throws dla::Error.
Extent validate(const TensorView& v);

// validate() plus: the bytes touched must lie inside [base, base + length),
// and the first element's address inside [base, base + length] even when the
// view is empty.
// Used when the source's length is known (buffer protocol, from_buffer).
Extent validate_within(const TensorView& v, const void* base, int64_t length);

// Number of elements of a validated view (which cannot overflow).
int64_t view_size(const TensorView& v);

// size * itemsize of a validated view: the one byte count behind copies,
// `nbytes` and Py_buffer.len (the same computation as Extent::nbytes).
// Throws OverflowError when it does not fit in int64.
int64_t view_nbytes(const TensorView& v);

bool is_c_contiguous(const TensorView& v);
bool is_f_contiguous(const TensorView& v);

// The part of a PEP 3118 buffer export of a view that no request changes.
// Zeroed memory (a freshly allocated or recycled object) reads "not known".
struct BufferLayout {
  bool known;          // false until measure_buffer_layout() has filled it
  bool c_contiguous;   // is_c_contiguous(v)
  bool f_contiguous;   // is_f_contiguous(v)
  const char* format;  // pep3118_from_dtype(v.dtype): NULL where no code exists
  int64_t itemsize;    // dtype_itemsize(v.dtype)
  int64_t len;         // view_nbytes(v), or -1 where that overflows int64
};

// Fills *out, and byte_strides[i] = byte_stride(v, i) for every dimension
// unless byte_strides is NULL, in one call: the first buffer export of a
// view (np.asarray(DLPackArray(x))) makes one call into the core instead of
// one per quantity (each function above inlined into it; one dimension
// takes a pass of its own).  The caller checks that the host can read the
// memory first (require_host_memory).  Throws BufferError for a dtype of no
// whole-byte item size, before anything is written.
void measure_buffer_layout(const TensorView& v, int64_t* byte_strides, BufferLayout* out);

// Fills strides for a C-contiguous layout of v.shape (zero extents count as
// 1).  A shape that validate() refuses may get meaningless strides.
void set_c_strides(TensorView& v);

// Whether dimension i's stride ever moves between elements: false for a
// length-1 dimension and for every dimension of an empty array.  Such a
// stride is unchecked by validate() and free to take any value.
bool stride_is_used(const TensorView& v, int32_t i);

// Dimension i's stride in bytes, for the byte-stride exports (buffer
// protocol, array interface and struct).  A validated view's used strides
// always fit; an unused one that does not is replaced by the C-contiguous
// byte stride (or, if even that overflows, the item size).
int64_t byte_stride(const TensorView& v, int32_t i);

// Sets v.strides from strides in bytes (NULL: C-contiguous).  A used stride
// must be a whole number of items (BufferError naming `source`: DLPack
// strides count elements); an unused one that is not (NumPy allows
// np.ndarray((10, 5, 1), "f8", strides=(8, 80, 4))) gets its C-contiguous
// value instead.  v.ndim, v.shape and v.dtype must be set.
void set_strides_from_bytes(TensorView& v, const int64_t* byte_strides, const char* source);

// True when device memory can be read directly by the host.
bool device_is_host_accessible(DLDevice d);

// True for devices whose DLTensor.data is an opaque handle (OpenCL cl_mem,
// Vulkan, Metal buffers), where the first element can only be reached
// through byte_offset: the DLPack header forbids pointer arithmetic on it.
bool device_has_opaque_data(DLDevice d);

// Moves byte_offset into data (byte_offset becomes 0) unless the device's
// data is an opaque handle, as NumPy and PyTorch export: then data means the
// first element everywhere, and consumers that refuse or ignore a nonzero
// byte_offset (PyTorch) accept every view.  Call after validate(), which
// rules out an offset that wraps the address space.
void fold_byte_offset(TensorView& v) noexcept;

}  // namespace dla
