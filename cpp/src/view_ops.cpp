#include "dlpackarray/view_ops.hpp"

#include <cstdint>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

int64_t mul_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
  return r;
}

int64_t add_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
  return r;
}

std::string tuple_text(const int64_t* values, int32_t n) {
  std::string s = "(";
  for (int32_t i = 0; i < n; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(values[i]);
  }
  if (n == 1) s += ",";
  return s + ")";
}

bool has_zero_dim(const TensorView& v) {
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return true;
  }
  return false;
}

// Moves the first element by `delta` bytes.  The whole offset is folded into
// the data pointer (byte_offset becomes 0), as NumPy and PyTorch export views:
// some consumers ignore byte_offset (torch for 0-d tensors, see
// docs/legacy_protocols.md), and byte_offset is unsigned while a view of a
// negatively strided source may start below `data`.
void move_first(TensorView& v, int64_t delta) {
  if (delta == 0 && v.byte_offset == 0) return;
  const int64_t off = add_checked(int64_t(v.byte_offset), delta, "byte offset");
  // Where `data` is an opaque handle (OpenCL, Vulkan, Metal) the DLPack header
  // forbids pointer arithmetic on it: the offset stays in byte_offset.
  if (device_has_opaque_data(v.device)) {
    if (off < 0) fail(ErrorKind::Value, "view starts before the device allocation's handle");
    v.byte_offset = uint64_t(off);
    return;
  }
  v.data = static_cast<char*>(v.data) + off;
  v.byte_offset = 0;
}

// PySlice_AdjustIndices: clamps start/stop to the dimension and returns the
// number of selected elements.
int64_t adjust_slice(int64_t length, int64_t* start, int64_t* stop, int64_t step) {
  if (*start < 0) {
    *start += length;
    if (*start < 0) *start = step < 0 ? -1 : 0;
  } else if (*start >= length) {
    *start = step < 0 ? length - 1 : length;
  }
  if (*stop < 0) {
    *stop += length;
    if (*stop < 0) *stop = step < 0 ? -1 : 0;
  } else if (*stop >= length) {
    *stop = step < 0 ? length - 1 : length;
  }
  if (step < 0) return *stop < *start ? (*start - *stop - 1) / (-step) + 1 : 0;
  return *start < *stop ? (*stop - *start - 1) / step + 1 : 0;
}

}  // namespace

void index_view(const TensorView& in, const IndexItem* items, int32_t nitems, TensorView* out) {
  if (nitems < 0 || nitems > kMaxIndexItems) {
    fail(ErrorKind::Index, "an index of " + std::to_string(nitems) + " items cannot be valid");
  }
  int32_t consumed = 0, ellipses = 0, integers = 0, new_axes = 0;
  for (int32_t i = 0; i < nitems; ++i) {
    switch (items[i].kind) {
      case IndexItem::kInteger: ++integers; [[fallthrough]];
      case IndexItem::kSlice: ++consumed; break;
      case IndexItem::kEllipsis: ++ellipses; break;
      case IndexItem::kNewAxis: ++new_axes; break;
      default: fail(ErrorKind::Type, "unknown index item kind " + std::to_string(items[i].kind));
    }
  }
  if (ellipses > 1) fail(ErrorKind::Index, "an index can only have a single ellipsis ('...')");
  if (consumed > in.ndim) {
    fail(ErrorKind::Index, "too many indices: the array is " + std::to_string(in.ndim) +
                               "-dimensional, but " + std::to_string(consumed) + " were indexed");
  }
  const int64_t itemsize = dtype_itemsize(in.dtype);
  const int32_t out_ndim = in.ndim - integers + new_axes;
  if (out_ndim > kMaxNdim) {
    fail(ErrorKind::Index,
         "the indexing result would have more than " + std::to_string(kMaxNdim) + " dimensions");
  }
  // The strides of an empty array are unchecked and never used: an empty
  // input gives an empty result, so it needs no offset arithmetic at all.
  const bool empty = has_zero_dim(in);
  TensorView r = in;
  // Room for every output dimension before emit() writes them.
  if (out_ndim > r.ndim) r.set_ndim(out_ndim);
  bool new_axis[kMaxNdim] = {};
  int32_t src = 0, dst = 0;
  int64_t delta = 0;
  auto emit = [&](int64_t extent, int64_t stride) {
    if (dst >= kMaxNdim) {
      fail(ErrorKind::Index,
           "the indexing result would have more than " + std::to_string(kMaxNdim) + " dimensions");
    }
    r.shape[dst] = extent;
    r.strides[dst] = stride;
    ++dst;
  };
  for (int32_t i = 0; i < nitems; ++i) {
    const IndexItem& it = items[i];
    if (it.kind == IndexItem::kInteger) {
      const int64_t length = in.shape[src];
      int64_t idx = it.start;
      if (idx < 0) idx += length;  // cannot overflow: length >= 0
      if (idx < 0 || idx >= length) {
        fail(ErrorKind::Index, "index " + std::to_string(it.start) + " is out of bounds for axis " +
                                   std::to_string(src) + " with size " + std::to_string(length));
      }
      // idx > 0 only in a dimension that moves between elements, whose
      // stride validate() checked in bytes; a length-1 one may hold anything.
      if (idx > 0 && !empty) {
        const int64_t step = mul_checked(in.strides[src], itemsize, "stride in bytes");
        delta = add_checked(delta, mul_checked(idx, step, "index offset"), "index offset");
      }
      ++src;
    } else if (it.kind == IndexItem::kSlice) {
      int64_t step = it.step;
      if (step == 0) fail(ErrorKind::Value, "slice step cannot be zero");
      if (step == INT64_MIN) step = -INT64_MAX;  // PySlice_Unpack's clamp: -step must exist
      int64_t start = it.start, stop = it.stop;
      const int64_t n = adjust_slice(in.shape[src], &start, &stop, step);
      // With at most one element selected the step never moves: keep the
      // stride (NumPy returns this view for x[::2**62]).  Otherwise the
      // selection lies inside the dimension, so stride * step cannot
      // overflow in a non-empty array, and an empty one never uses it.
      int64_t stride = in.strides[src];
      if (n > 1 && !empty) stride = mul_checked(stride, step, "sliced stride");
      emit(n, stride);
      if (start > 0 && n > 0 && !empty) {
        const int64_t bytes = mul_checked(in.strides[src], itemsize, "stride in bytes");
        delta = add_checked(delta, mul_checked(start, bytes, "slice offset"), "slice offset");
      }
      ++src;
    } else if (it.kind == IndexItem::kEllipsis) {
      const int32_t rest = in.ndim - consumed;
      for (int32_t k = 0; k < rest; ++k, ++src) emit(in.shape[src], in.strides[src]);
    } else {
      emit(1, 0);
      new_axis[dst - 1] = true;
    }
  }
  for (; src < in.ndim; ++src) emit(in.shape[src], in.strides[src]);
  r.set_ndim(dst);
  // A new axis has length 1, so its stride is free; give it the value a
  // C-contiguous layout would have, because some consumers read contiguity
  // from the strides of length-1 dimensions too.
  for (int32_t i = dst - 1; i >= 0; --i) {
    if (!new_axis[i]) continue;
    int64_t s = 1;
    if (i + 1 < dst && __builtin_mul_overflow(r.strides[i + 1], r.shape[i + 1], &s)) s = 0;
    r.strides[i] = s;
  }
  // An empty result touches no memory: keep the pointer where it was.
  if (!has_zero_dim(r)) move_first(r, delta);
  validate(r);
  *out = r;
}

void reshape_view(const TensorView& in, const int64_t* shape, int32_t ndim, TensorView* out) {
  if (ndim < 0 || ndim > kMaxNdim) {
    fail(ErrorKind::Value, "cannot reshape into " + std::to_string(ndim) + " dimensions; at most " +
                               std::to_string(kMaxNdim) + " are supported");
  }
  const int64_t size = validate(in).size;
  TensorView r = in;
  r.set_ndim(ndim);
  int32_t inferred = -1;
  int64_t known = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) fail(ErrorKind::Value, "can only specify one unknown dimension (-1)");
      inferred = i;
    } else if (shape[i] < 0) {
      fail(ErrorKind::Value, "negative dimension " + std::to_string(shape[i]) + " in new shape " +
                                 tuple_text(shape, ndim));
    } else {
      known = mul_checked(known, shape[i], "new size");
    }
    r.shape[i] = shape[i];
  }
  if (inferred >= 0) {
    if (known == 0 || size % known != 0) {
      fail(ErrorKind::Value, "cannot reshape array of size " + std::to_string(size) +
                                 " into shape " + tuple_text(shape, ndim));
    }
    r.shape[inferred] = size / known;
  } else if (known != size) {
    fail(ErrorKind::Value, "cannot reshape array of size " + std::to_string(size) + " into shape " +
                               tuple_text(shape, ndim));
  }
  if (size <= 1) {
    // No two elements to keep apart: any strides describe the data.
    set_c_strides(r);
    validate(r);
    *out = r;
    return;
  }
  // Length-1 dimensions carry no layout information: drop them from the
  // source, then match groups of source and target dimensions with equal
  // products.  Each source group must be one evenly strided block; its target
  // dimensions then take C-order strides inside that block.
  int64_t os[kMaxNdim], ost[kMaxNdim];
  int32_t on = 0;
  for (int32_t i = 0; i < in.ndim; ++i) {
    if (in.shape[i] != 1) {
      os[on] = in.shape[i];
      ost[on] = in.strides[i];
      ++on;
    }
  }
  int32_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < ndim && oi < on) {
    // Products never exceed `size` (all extents are >= 1 here), so plain
    // multiplication cannot overflow.
    int64_t np = r.shape[ni], op = os[oi];
    while (np != op) {
      if (np < op) {
        np *= r.shape[nj++];
      } else {
        op *= os[oj++];
      }
    }
    for (int32_t k = oi; k < oj - 1; ++k) {
      if (ost[k] != ost[k + 1] * os[k + 1]) {
        fail(ErrorKind::Value, "cannot reshape a view of shape " + tuple_text(in.shape, in.ndim) +
                                   " and strides " + tuple_text(in.strides, in.ndim) +
                                   " (in elements) into shape " + tuple_text(r.shape, ndim) +
                                   " without copying; reshape never copies, call .copy() first");
      }
    }
    r.strides[nj - 1] = ost[oj - 1];
    for (int32_t k = nj - 1; k > ni; --k) {
      r.strides[k - 1] = mul_checked(r.strides[k], r.shape[k], "reshaped stride");
    }
    ni = nj++;
    oi = oj++;
  }
  for (int32_t k = ni; k < ndim; ++k) r.strides[k] = 1;  // trailing length-1 dimensions
  validate(r);
  *out = r;
}

void permute_view(const TensorView& in, const int64_t* axes, int32_t naxes, TensorView* out) {
  if (naxes != in.ndim) {
    fail(ErrorKind::Value, "axes " + tuple_text(axes, naxes) + " do not match an array of " +
                               std::to_string(in.ndim) + " dimensions");
  }
  TensorView r = in;
  bool seen[kMaxNdim] = {};
  for (int32_t i = 0; i < naxes; ++i) {
    int64_t a = axes[i];
    if (a < -int64_t(in.ndim) || a >= in.ndim) {
      fail(ErrorKind::Value, "axis " + std::to_string(a) + " is out of bounds for an array of " +
                                 std::to_string(in.ndim) + " dimensions");
    }
    if (a < 0) a += in.ndim;
    if (seen[a])
      fail(ErrorKind::Value,
           "repeated axis " + std::to_string(a) + " in " + tuple_text(axes, naxes));
    seen[a] = true;
    r.shape[i] = in.shape[a];
    r.strides[i] = in.strides[a];
  }
  *out = r;
}

void dtype_view(const TensorView& in, DLDataType dtype, TensorView* out) {
  check_dtype_supported(dtype);
  const int64_t old_size = dtype_itemsize(in.dtype);
  const int64_t new_size = dtype_itemsize(dtype);
  TensorView r = in;
  r.dtype = dtype;
  if (old_size == new_size) {
    *out = r;
    return;
  }
  const std::string what = "cannot view " + dtype_name(in.dtype) + " data as " + dtype_name(dtype);
  if (in.ndim == 0) {
    fail(ErrorKind::Value, what + ": a 0-d view cannot change its item size (" +
                               std::to_string(old_size) + " -> " + std::to_string(new_size) +
                               " bytes)");
  }
  const int32_t last = in.ndim - 1;
  if (stride_is_used(in, last) && in.strides[last] != 1) {
    fail(ErrorKind::Value, what + ": changing the item size needs a contiguous last dimension");
  }
  const int64_t last_bytes = mul_checked(in.shape[last], old_size, "last dimension in bytes");
  if (last_bytes % new_size != 0) {
    fail(ErrorKind::Value, what + ": the last dimension holds " + std::to_string(last_bytes) +
                               " bytes, not a multiple of the new item size " +
                               std::to_string(new_size));
  }
  r.shape[last] = last_bytes / new_size;
  r.strides[last] = 1;
  for (int32_t i = 0; i < last; ++i) {
    const int64_t bytes = byte_stride(in, i);  // exact for every stride that is used
    if (stride_is_used(in, i) && bytes % new_size != 0) {
      fail(ErrorKind::Value, what + ": the stride of dimension " + std::to_string(i) + " is " +
                                 std::to_string(bytes) +
                                 " bytes, not a multiple of the new item size " +
                                 std::to_string(new_size));
    }
    r.strides[i] = bytes / new_size;
  }
  validate(r);
  *out = r;
}

}  // namespace dla
