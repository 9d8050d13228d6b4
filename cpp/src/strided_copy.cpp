#include "dlpackarray/strided_copy.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

namespace dla {

namespace {

// A view reduced to its essential loops: length-1 dimensions dropped and
// neighbours that walk memory as one dimension merged.  Strides in bytes.
struct Loops {
  int32_t ndim = 0;
  int64_t shape[kMaxNdim];
  int64_t stride[kMaxNdim];
};

Loops coalesce(const TensorView& v, int64_t itemsize) {
  Loops l;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 1) continue;
    const int64_t s = v.strides[i] * itemsize;
    if (l.ndim > 0 && l.stride[l.ndim - 1] == s * v.shape[i]) {
      l.shape[l.ndim - 1] *= v.shape[i];
      l.stride[l.ndim - 1] = s;
      continue;
    }
    l.shape[l.ndim] = v.shape[i];
    l.stride[l.ndim] = s;
    ++l.ndim;
  }
  return l;
}

template <int64_t N>
struct Item {
  unsigned char b[N];
};

template <int64_t N>
void copy_row(const unsigned char* src, int64_t stride, int64_t n, unsigned char* dst) {
  using T = Item<N>;
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i, src + i * stride, N);
  }
}

void copy_row_any(const unsigned char* src, int64_t stride, int64_t n, int64_t itemsize,
                  unsigned char* dst) {
  switch (itemsize) {
    case 1: return copy_row<1>(src, stride, n, dst);
    case 2: return copy_row<2>(src, stride, n, dst);
    case 4: return copy_row<4>(src, stride, n, dst);
    case 8: return copy_row<8>(src, stride, n, dst);
    case 16: return copy_row<16>(src, stride, n, dst);
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * itemsize, src + i * stride, size_t(itemsize));
  }
}

// dst[i, j] = src[i * rs + j * cs] for an (rows x cols) plane, tiled so both
// the reads and the writes stay in cache when src is column-major-ish.
template <int64_t N>
void copy_plane_tiled(const unsigned char* src, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                      unsigned char* dst) {
  constexpr int64_t kTile = 64 / N > 8 ? 64 / N : 8;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        const unsigned char* s = src + i * rs;
        unsigned char* d = dst + (i * cols) * N;
        for (int64_t j = j0; j < j1; ++j) std::memcpy(d + j * N, s + j * cs, N);
      }
    }
  }
}

bool copy_plane(const unsigned char* src, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                int64_t itemsize, unsigned char* dst) {
  switch (itemsize) {
    case 1: copy_plane_tiled<1>(src, rs, cs, rows, cols, dst); return true;
    case 2: copy_plane_tiled<2>(src, rs, cs, rows, cols, dst); return true;
    case 4: copy_plane_tiled<4>(src, rs, cs, rows, cols, dst); return true;
    case 8: copy_plane_tiled<8>(src, rs, cs, rows, cols, dst); return true;
    case 16: copy_plane_tiled<16>(src, rs, cs, rows, cols, dst); return true;
    default: return false;
  }
}

// Recursive walk over the outer loops; the innermost one (or two, when tiled)
// is done by a kernel.  Returns the advanced destination pointer.
unsigned char* walk(const Loops& l, int32_t dim, const unsigned char* src, int64_t itemsize,
                    unsigned char* dst) {
  const int32_t last = l.ndim - 1;
  if (dim == last) {
    const int64_t n = l.shape[dim];
    if (l.stride[dim] == itemsize) {
      std::memcpy(dst, src, size_t(n * itemsize));
    } else {
      copy_row_any(src, l.stride[dim], n, itemsize, dst);
    }
    return dst + n * itemsize;
  }
  // Two innermost loops where the outer one has the smaller stride: a
  // transpose-like plane.  Tiling keeps both sides cache-friendly.
  if (dim == last - 1 && std::llabs(l.stride[dim]) < std::llabs(l.stride[last]) &&
      l.stride[last] != itemsize) {
    const int64_t rows = l.shape[dim], cols = l.shape[last];
    if (copy_plane(src, l.stride[dim], l.stride[last], rows, cols, itemsize, dst)) {
      return dst + rows * cols * itemsize;
    }
  }
  for (int64_t i = 0; i < l.shape[dim]; ++i) {
    dst = walk(l, dim + 1, src + i * l.stride[dim], itemsize, dst);
  }
  return dst;
}

}  // namespace

void strided_copy_to_contiguous(const TensorView& src, void* dst) {
  const int64_t itemsize = dtype_itemsize(src.dtype);
  if (view_size(src) == 0) return;
  const auto* base = static_cast<const unsigned char*>(src.data) + src.byte_offset;
  const Loops l = coalesce(src, itemsize);
  if (l.ndim == 0) {
    std::memcpy(dst, base, size_t(itemsize));
    return;
  }
  walk(l, 0, base, itemsize, static_cast<unsigned char*>(dst));
}

void* aligned_allocate(int64_t nbytes) {
  constexpr int64_t kAlign = 64;
  const int64_t n = std::max<int64_t>(nbytes, 1);
  const int64_t rounded = (n + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(size_t(kAlign), size_t(rounded));
  if (p == nullptr) {
    fail(ErrorKind::Memory, "could not allocate " + std::to_string(nbytes) + " bytes");
  }
  return p;
}

void aligned_free(void* p) noexcept { std::free(p); }

}  // namespace dla
