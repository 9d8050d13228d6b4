#include "dlpackarray/strided_copy.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"

#include "transpose_tile.hpp"

namespace dla {

namespace {

// A view reduced to its essential loops: length-1 dimensions dropped and
// neighbours that walk memory as one dimension merged.  Strides in bytes;
// `dst` holds the C-order destination strides of the same loops.
struct Loops {
  int32_t ndim = 0;
  int64_t shape[kMaxNdim];
  int64_t src[kMaxNdim];
  int64_t dst[kMaxNdim];
};

Loops coalesce(const TensorView& v, int64_t itemsize) {
  Loops l;
  for (int32_t i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 1) continue;
    // Used strides of a validated non-empty view fit in bytes; s * shape,
    // one step past the extent, may not, and then cannot match.
    const int64_t s = v.strides[i] * itemsize;
    int64_t block;
    if (l.ndim > 0 && !__builtin_mul_overflow(s, v.shape[i], &block) &&
        l.src[l.ndim - 1] == block) {
      l.shape[l.ndim - 1] *= v.shape[i];
      l.src[l.ndim - 1] = s;
      continue;
    }
    l.shape[l.ndim] = v.shape[i];
    l.src[l.ndim] = s;
    ++l.ndim;
  }
  int64_t d = itemsize;
  for (int32_t i = l.ndim - 1; i >= 0; --i) {
    l.dst[i] = d;
    d *= l.shape[i];
  }
  return l;
}

template <int64_t N>
struct Item {
  unsigned char b[N];
};

// dst[i] = src[i * stride]: a gather along one loop into a dense row.
// Every other item (``x[..., ::2]``, interleaved real/imaginary or RGBA
// planes) gets a loop with a compile-time stride, which the compiler turns
// into vector loads and shuffles.
template <int64_t N>
void gather_row(const unsigned char* src, int64_t stride, int64_t n, unsigned char* dst) {
  if (stride == 2 * N) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * N, src + i * 2 * N, N);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * N, src + i * stride, N);
}

// dst[i * drs + j * N] = src[i * rs + j * cs] for items (i, j) of
// [i0, i1) x [j0, j1): the item-by-item transpose, for the edges of a tiled
// plane and for planes whose source is not dense along i.
template <int64_t N>
void transpose_items(const unsigned char* src, int64_t rs, int64_t cs, int64_t i0, int64_t i1,
                     int64_t j0, int64_t j1, int64_t drs, unsigned char* dst) {
  for (int64_t i = i0; i < i1; ++i) {
    const unsigned char* s = src + i * rs;
    unsigned char* d = dst + i * drs;
    for (int64_t j = j0; j < j1; ++j) std::memcpy(d + j * N, s + j * cs, N);
  }
}

// The innermost work of one outer index.  `kind` picks the kernel once per
// copy instead of once per row.
struct Kernel {
  enum Kind { kMemcpy, kGather, kTranspose } kind = kMemcpy;
  int64_t itemsize = 1;
  int32_t row_dim = -1;  // kTranspose: the loop walked by plane rows
  int32_t last = 0;
  TileTransposer tile = nullptr;  // kTranspose: the register transpose, if any
  bool stream = false;            // tiles write around the caches (write_tile_rows)
};

// dst[i * drs + j * N] = src[i * rs + j * cs] for a rows x cols plane whose
// source is dense-ish along i and whose destination is dense along j (a
// transpose).
//
// Where the source is dense along i and the CPU has a register transpose for
// N-byte items (`tile`), the plane goes tile by tile (transpose_tile.hpp):
// each tile is turned in registers into a small buffer whose rows are then
// written out as whole destination lines.  With power-of-two strides every
// source line of a tile, and every destination line, falls into the same L1
// set; the buffer keeps partial destination lines out of those sets, and the
// register blocks use each source line whole, so no line is fetched twice.
// Tiles go in strips kStripTiles wide along i, so each visit to a source row
// reads kStripTiles consecutive lines (DRAM bursts, not one line per
// page).  The rows and columns of a plane that make no whole tile go item by
// item.  Without `tile`, small tiles (one 64-byte line wide, at least 8
// items) go item by item.
template <int64_t N>
void transpose_plane(const Kernel& k, const unsigned char* src, int64_t rs, int64_t cs,
                     int64_t rows, int64_t cols, int64_t drs, unsigned char* dst) {
  if (rs == -N) {
    // Source rows dense but walked backwards (a reversed transpose): walk
    // them forwards and write the destination rows from the last one up.
    src += (rows - 1) * rs;
    dst += (rows - 1) * drs;
    rs = N;
    drs = -drs;
  }
  if (k.tile != nullptr && rs == N) {
    constexpr int64_t kT = kTileBytes / N;
    constexpr int64_t kStripTiles = 8;
    alignas(64) unsigned char buf[kTileBytes * kTileBytes];
    const int64_t rows_tiled = rows / kT * kT;
    const int64_t cols_tiled = cols / kT * kT;
    for (int64_t strip = 0; strip < rows_tiled; strip += kStripTiles * kT) {
      const int64_t strip_end = std::min(rows_tiled, strip + kStripTiles * kT);
      for (int64_t j0 = 0; j0 < cols_tiled; j0 += kT) {
        for (int64_t i0 = strip; i0 < strip_end; i0 += kT) {
          k.tile(src + i0 * N + j0 * cs, cs, buf);
          write_tile_rows(buf, kT, dst + i0 * drs + j0 * N, drs, k.stream);
        }
      }
    }
    transpose_items<N>(src, rs, cs, 0, rows_tiled, cols_tiled, cols, drs, dst);
    transpose_items<N>(src, rs, cs, rows_tiled, rows, 0, cols, drs, dst);
    return;
  }
  constexpr int64_t kTile = 64 / N > 8 ? 64 / N : 8;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      transpose_items<N>(src, rs, cs, i0, i1, j0, std::min(cols, j0 + kTile), drs, dst);
    }
  }
}

template <int64_t N>
void run_kernel(const Kernel& k, const Loops& l, const unsigned char* src, unsigned char* dst) {
  const int64_t n = l.shape[k.last];
  switch (k.kind) {
    case Kernel::kMemcpy: std::memcpy(dst, src, size_t(n * N)); return;
    case Kernel::kGather: gather_row<N>(src, l.src[k.last], n, dst); return;
    case Kernel::kTranspose:
      transpose_plane<N>(k, src, l.src[k.row_dim], l.src[k.last], l.shape[k.row_dim], n,
                         l.dst[k.row_dim], dst);
      return;
  }
}

void run_kernel_any(const Kernel& k, const Loops& l, const unsigned char* src, unsigned char* dst) {
  switch (k.itemsize) {
    case 1: return run_kernel<1>(k, l, src, dst);
    case 2: return run_kernel<2>(k, l, src, dst);
    case 4: return run_kernel<4>(k, l, src, dst);
    case 8: return run_kernel<8>(k, l, src, dst);
    case 16: return run_kernel<16>(k, l, src, dst);
    default: break;
  }
  // Odd item sizes (e.g. 3-lane vectors): plain per-item copies.
  const int64_t n = l.shape[k.last];
  const size_t size = size_t(k.itemsize);
  if (k.kind == Kernel::kMemcpy) {
    std::memcpy(dst, src, size * size_t(n));
    return;
  }
  const int64_t rows = k.kind == Kernel::kTranspose ? l.shape[k.row_dim] : 1;
  for (int64_t i = 0; i < rows; ++i) {
    const unsigned char* s = src + (k.kind == Kernel::kTranspose ? i * l.src[k.row_dim] : 0);
    unsigned char* d = dst + (k.kind == Kernel::kTranspose ? i * l.dst[k.row_dim] : 0);
    for (int64_t j = 0; j < n; ++j) std::memcpy(d + j * k.itemsize, s + j * l.src[k.last], size);
  }
}

// Visits every index of the outer loops (all but the kernel's) in C order.
void walk(const Loops& l, const Kernel& k, int32_t dim, const unsigned char* src,
          unsigned char* dst) {
  while (dim == k.row_dim) ++dim;
  if (dim >= k.last) {
    run_kernel_any(k, l, src, dst);
    return;
  }
  for (int64_t i = 0; i < l.shape[dim]; ++i) {
    walk(l, k, dim + 1, src + i * l.src[dim], dst + i * l.dst[dim]);
  }
}

Kernel choose_kernel(const Loops& l, int64_t itemsize) {
  Kernel k;
  k.itemsize = itemsize;
  k.last = l.ndim - 1;
  if (l.src[k.last] == itemsize) {
    k.kind = Kernel::kMemcpy;
    return k;
  }
  // The loop with the smallest source stride, when it is not the innermost,
  // is where the source is (nearly) dense: walking it as the rows of a tiled
  // plane against the innermost loop turns a gather that touches a new
  // cache line per item into a blocked transpose.
  // validate() keeps each used byte stride within the span hi - lo, which
  // fits int64, so none is INT64_MIN and llabs is defined.
  int32_t best = -1;
  for (int32_t i = 0; i < k.last; ++i) {
    if (best < 0 || std::llabs(l.src[i]) < std::llabs(l.src[best])) best = i;
  }
  if (best >= 0 && std::llabs(l.src[best]) < std::llabs(l.src[k.last]) && l.shape[k.last] >= 8 &&
      l.shape[best] >= 8) {
    k.kind = Kernel::kTranspose;
    k.row_dim = best;
    if (std::llabs(l.src[best]) == itemsize) k.tile = tile_transposer(itemsize);
    // The destination holds l.dst[0] * l.shape[0] bytes (C order).
    k.stream = l.dst[0] * l.shape[0] >= kStreamBytes;
    return k;
  }
  k.kind = Kernel::kGather;
  return k;
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
  const Kernel k = choose_kernel(l, itemsize);
  walk(l, k, 0, base, static_cast<unsigned char*>(dst));
  if (k.stream) finish_streaming();
}

namespace {
constexpr int64_t kHuge = int64_t(1) << 21;
constexpr int64_t kHugeThreshold = int64_t(4) << 20;
}  // namespace

void* aligned_allocate(int64_t nbytes) {
  // Large blocks are aligned to 2 MiB and marked for transparent huge pages
  // (as NumPy does): a fresh copy's cost is dominated by first-touch page
  // faults, and one 2 MiB fault replaces 512 4 KiB ones.
  constexpr int64_t kAlign = 64;
  const int64_t n = std::max<int64_t>(nbytes, 1);
  const int64_t align = n >= kHugeThreshold ? kHuge : kAlign;
  // Refuse sizes whose rounding would overflow (and negative ones) before
  // asking the allocator: a wrapped size would be a short allocation.
  if (nbytes < 0 || n > INT64_MAX - align) {
    fail(ErrorKind::Memory, "could not allocate " + std::to_string(nbytes) + " bytes");
  }
  const int64_t rounded = (n + align - 1) / align * align;
  void* p = std::aligned_alloc(size_t(align), size_t(rounded));
  if (p == nullptr) {
    fail(ErrorKind::Memory, "could not allocate " + std::to_string(nbytes) + " bytes");
  }
#ifdef MADV_HUGEPAGE
  if (align == kHuge) madvise(p, size_t(rounded), MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  return p;
}

void aligned_free(void* p) noexcept { std::free(p); }

void advise_huge_pages(void* p, int64_t nbytes) noexcept {
#ifdef MADV_HUGEPAGE
  if (nbytes < kHugeThreshold) return;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (start + uintptr_t(kHuge) - 1) & ~uintptr_t(kHuge - 1);
  const uintptr_t hi = (start + uintptr_t(nbytes)) & ~uintptr_t(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), size_t(hi - lo), MADV_HUGEPAGE);
#else
  (void)p;
  (void)nbytes;
#endif
}

}  // namespace dla
