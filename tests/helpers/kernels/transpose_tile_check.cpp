// Checks every register transpose of cpp/src/transpose_tile.cpp that this CPU
// can run, not only the widest one tile_transposer() hands out: each tile
// function, for 1-, 2-, 4- and 8-byte items and several source row strides,
// against the item-by-item definition
//   buf[ii * kTileBytes + jj * N] = src[ii * N + jj * cs].
// The source file is included whole so that the functions in its anonymous
// namespace are reachable.  Prints one line per kernel checked; exits 1 at
// the first wrong byte.
#include <cstdio>
#include <cstring>
#include <vector>

#include "../../../cpp/src/transpose_tile.cpp"

namespace {

using Tile = void (*)(const unsigned char*, int64_t, unsigned char*);

bool check(const char* isa, int64_t n, Tile tile) {
  const int64_t items = dla::kTileBytes / n;
  for (int64_t cs : {int64_t(64), int64_t(80), int64_t(4096), int64_t(4099) * n}) {
    std::vector<unsigned char> src(size_t(cs * items + 64));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    alignas(64) unsigned char buf[dla::kTileBytes * dla::kTileBytes];
    std::memset(buf, 0, sizeof(buf));
    // An unaligned start: the loads must not assume alignment.
    const unsigned char* s = src.data() + 3;
    tile(s, cs, buf);
    for (int64_t ii = 0; ii < items; ++ii) {
      for (int64_t jj = 0; jj < items; ++jj) {
        if (std::memcmp(buf + ii * dla::kTileBytes + jj * n, s + ii * n + jj * cs, size_t(n))) {
          std::printf("MISMATCH %s N=%lld cs=%lld at (%lld, %lld)\n", isa, (long long)n,
                      (long long)cs, (long long)ii, (long long)jj);
          return false;
        }
      }
    }
  }
  std::printf("ok %s N=%lld\n", isa, (long long)n);
  return true;
}

template <int64_t N>
bool check_all() {
  bool ok = check("sse2", N, dla::tile_sse2<N>);
  if (__builtin_cpu_supports("avx2")) ok = check("avx2", N, dla::tile_avx2<N>) && ok;
  if (__builtin_cpu_supports("avx512bw")) ok = check("avx512", N, dla::tile_avx512<N>) && ok;
  return ok;
}

}  // namespace

int main() {
  const bool ok = check_all<1>() && check_all<2>() && check_all<4>() && check_all<8>();
  return ok ? 0 : 1;
}
