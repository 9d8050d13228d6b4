#include "transpose_tile.hpp"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 intrinsics build their "undefined" pass-through operand
// from a self-initialised variable, which -Wall reports at every inlined
// call; the operand is ignored under an all-ones mask.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dla {

namespace {

#if defined(__x86_64__)

// Register transposes.  A block is B = 16 / N source rows (j) of one
// register each, loaded along the dense loop i; every 16-byte lane of the
// registers is a B x B square of its own.  Register k starts as source row
// j + k.  One round pairs register m with register m + B/2 and interleaves
// their N-byte items into registers 2m and 2m + 1: with a register index K
// and an item index L of log2(B) bits each, a round rotates the bit string
// K.L left by one bit, so log2(B) rounds turn it into L.K, the transpose.
// Afterwards lane l of register k holds destination row i + l * B + k.
//
// One struct per register width; every member compiles for its instruction
// set only, and is called only from a tile function compiled for it, which
// tile_transposer() hands out only where the CPU has that instruction set.
#define DLA_SIMD inline __attribute__((always_inline, target(DLA_ISA)))

#define DLA_ISA "sse2"
struct Sse2 {
  using V = __m128i;
  static constexpr int64_t kWidth = 16;
  static DLA_SIMD V load(const unsigned char* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  template <int64_t N>
  static DLA_SIMD void interleave(V a, V b, V* lo, V* hi) {
    if constexpr (N == 1) {
      *lo = _mm_unpacklo_epi8(a, b), *hi = _mm_unpackhi_epi8(a, b);
    } else if constexpr (N == 2) {
      *lo = _mm_unpacklo_epi16(a, b), *hi = _mm_unpackhi_epi16(a, b);
    } else if constexpr (N == 4) {
      *lo = _mm_unpacklo_epi32(a, b), *hi = _mm_unpackhi_epi32(a, b);
    } else {
      *lo = _mm_unpacklo_epi64(a, b), *hi = _mm_unpackhi_epi64(a, b);
    }
  }
  // Lane l to p + l * step.
  static DLA_SIMD void store_lanes(V v, unsigned char* p, int64_t) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
  }
};
#undef DLA_ISA

#define DLA_ISA "avx2"
struct Avx2 {
  using V = __m256i;
  static constexpr int64_t kWidth = 32;
  static DLA_SIMD V load(const unsigned char* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  template <int64_t N>
  static DLA_SIMD void interleave(V a, V b, V* lo, V* hi) {
    if constexpr (N == 1) {
      *lo = _mm256_unpacklo_epi8(a, b), *hi = _mm256_unpackhi_epi8(a, b);
    } else if constexpr (N == 2) {
      *lo = _mm256_unpacklo_epi16(a, b), *hi = _mm256_unpackhi_epi16(a, b);
    } else if constexpr (N == 4) {
      *lo = _mm256_unpacklo_epi32(a, b), *hi = _mm256_unpackhi_epi32(a, b);
    } else {
      *lo = _mm256_unpacklo_epi64(a, b), *hi = _mm256_unpackhi_epi64(a, b);
    }
  }
  static DLA_SIMD void store_lanes(V v, unsigned char* p, int64_t step) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + step), _mm256_extracti128_si256(v, 1));
  }
};
#undef DLA_ISA

#define DLA_ISA "avx512f,avx512bw"
struct Avx512 {
  using V = __m512i;
  static constexpr int64_t kWidth = 64;
  static DLA_SIMD V load(const unsigned char* p) { return _mm512_loadu_si512(p); }
  template <int64_t N>
  static DLA_SIMD void interleave(V a, V b, V* lo, V* hi) {
    if constexpr (N == 1) {
      *lo = _mm512_unpacklo_epi8(a, b), *hi = _mm512_unpackhi_epi8(a, b);
    } else if constexpr (N == 2) {
      *lo = _mm512_unpacklo_epi16(a, b), *hi = _mm512_unpackhi_epi16(a, b);
    } else if constexpr (N == 4) {
      *lo = _mm512_unpacklo_epi32(a, b), *hi = _mm512_unpackhi_epi32(a, b);
    } else {
      *lo = _mm512_unpacklo_epi64(a, b), *hi = _mm512_unpackhi_epi64(a, b);
    }
  }
  static DLA_SIMD void store_lanes(V v, unsigned char* p, int64_t step) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_extracti32x4_epi32(v, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + step), _mm512_extracti32x4_epi32(v, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * step), _mm512_extracti32x4_epi32(v, 2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 3 * step), _mm512_extracti32x4_epi32(v, 3));
  }
};
#undef DLA_ISA

// One tile (see TileTransposer) with registers of S: for each band of B
// source rows, each register-wide step along i is one block.  The source
// rows of a band are used whole (a 64-byte line each) before the next band.
#define DLA_TILE(NAME, S, ISA)                                                        \
  template <int64_t N>                                                                \
  __attribute__((target(ISA))) void NAME(const unsigned char* src, int64_t cs,        \
                                         unsigned char* buf) {                        \
    constexpr int64_t kB = 16 / N;                                                    \
    for (int64_t jj = 0; jj < kTileBytes / N; jj += kB) {                             \
      for (int64_t ib = 0; ib < kTileBytes; ib += S::kWidth) {                        \
        S::V r[kB];                                                                   \
        S::V t[kB];                                                                   \
        for (int64_t k = 0; k < kB; ++k) r[k] = S::load(src + ib + (jj + k) * cs);    \
        for (int64_t round = 1; round < kB; round *= 2) {                             \
          for (int64_t m = 0; m < kB / 2; ++m) {                                      \
            S::template interleave<N>(r[m], r[m + kB / 2], &t[2 * m], &t[2 * m + 1]); \
          }                                                                           \
          for (int64_t k = 0; k < kB; ++k) r[k] = t[k];                               \
        }                                                                             \
        unsigned char* out = buf + (ib / N) * kTileBytes + jj * N;                    \
        for (int64_t k = 0; k < kB; ++k)                                              \
          S::store_lanes(r[k], out + k * kTileBytes, kB * kTileBytes);                \
      }                                                                               \
    }                                                                                 \
  }

DLA_TILE(tile_sse2, Sse2, "sse2")
DLA_TILE(tile_avx2, Avx2, "avx2")
DLA_TILE(tile_avx512, Avx512, "avx512f,avx512bw")

#undef DLA_TILE
#undef DLA_SIMD

template <int64_t N>
TileTransposer widest() noexcept {
  if (__builtin_cpu_supports("avx512bw")) return tile_avx512<N>;
  if (__builtin_cpu_supports("avx2")) return tile_avx2<N>;
  return tile_sse2<N>;
}

#endif  // __x86_64__

}  // namespace

TileTransposer tile_transposer(int64_t itemsize) noexcept {
#if defined(__x86_64__)
  switch (itemsize) {
    case 1: return widest<1>();
    case 2: return widest<2>();
    case 4: return widest<4>();
    case 8: return widest<8>();
    default: return nullptr;
  }
#else
  (void)itemsize;
  return nullptr;
#endif
}

void write_tile_rows(const unsigned char* buf, int64_t rows, unsigned char* dst, int64_t drs,
                     bool stream) noexcept {
#if defined(__x86_64__)
  // Non-temporal stores only for whole aligned lines: a partial line would
  // be merged in memory, slower than an ordinary store.
  if (stream && reinterpret_cast<uintptr_t>(dst) % 64 == 0 && drs % 64 == 0) {
    for (int64_t r = 0; r < rows; ++r) {
      auto* out = reinterpret_cast<__m128i*>(dst + r * drs);
      const auto* in = reinterpret_cast<const __m128i*>(buf + r * kTileBytes);
      for (int q = 0; q < int(kTileBytes / 16); ++q) _mm_stream_si128(out + q, in[q]);
    }
    return;
  }
#else
  (void)stream;
#endif
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * drs, buf + r * kTileBytes, kTileBytes);
}

void finish_streaming() noexcept {
#if defined(__x86_64__)
  // Orders the non-temporal stores before every later store (and so before
  // the release that hands the destination to another thread).
  _mm_sfence();
#endif
}

}  // namespace dla
