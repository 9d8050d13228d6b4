// Square tiles of a transpose, moved through registers: the inner step of
// strided_copy_to_contiguous for a plane whose source is dense along one loop
// and whose destination is dense along another.
#pragma once

#include <cstdint>

namespace dla {

// A tile is kTileBytes of source along its dense loop i by kTileBytes of
// destination along j: kTileBytes / N items each way, one 64-byte cache line
// per source row and per destination row, so every line a tile touches is
// used whole while it is in L1.
inline constexpr int64_t kTileBytes = 64;

// buf[ii * kTileBytes + jj * N] = src[ii * N + jj * cs] for ii, jj < kTileBytes / N:
// the tile's destination rows, packed one after another into a 4 KiB buffer.
using TileTransposer = void (*)(const unsigned char* src, int64_t cs, unsigned char* buf);

// The widest register transpose of N-byte items (N = 1, 2, 4 or 8) that the
// running CPU executes, or nullptr where there is none (another item size,
// or a processor without SSE2).  Decided per call: the CPU never changes.
TileTransposer tile_transposer(int64_t itemsize) noexcept;

// Copies `rows` rows of kTileBytes from `buf` (packed) to dst + r * drs.
// With `stream`, whole 64-byte-aligned destination lines are written with
// non-temporal stores where the CPU has them: a destination larger than the
// caches would otherwise be read into them first (a read for ownership) and
// then evict the source lines the next tiles need.  A copy that streamed
// calls finish_streaming() before anything else may read its destination.
void write_tile_rows(const unsigned char* buf, int64_t rows, unsigned char* dst, int64_t drs,
                     bool stream) noexcept;
void finish_streaming() noexcept;

// Copies at least this large stream their tiles: a destination that does not
// fit in a last-level cache (the smallest of today's server processors is
// a few times this) is not in the caches when it is next read anyway.
inline constexpr int64_t kStreamBytes = int64_t(8) << 20;

}  // namespace dla
