// Tiled GEMM body for the CPU. No torch headers here: editing this file recompiles in a second.
#include "gemm_cpu.h"

#include <algorithm>
#include <vector>

#if !defined(TILE_M) || !defined(TILE_N) || !defined(TILE_K)
#error "TILE_M, TILE_N and TILE_K must be defined (opgate passes them from tile_config.json)"
#endif

namespace deepgemm_tile {
namespace {

// One output tile of TM x TN, accumulated over K in steps of TK, the way a GPU
// thread block walks its K loop: the accumulator stays in fast memory (here, a
// cache-resident buffer) and A/B panels are streamed through it.
// Kept out of line: its code is then the same however many call sites a change adds, so a change's cost is its own
// work, not a different inlining of this body (which moved a planted +8 % to -4 % on one CPU).
template <int TM, int TN, int TK>
[[gnu::noinline]] void gemm_tiled(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::vector<float> acc(static_cast<size_t>(TM) * TN);
  for (int64_t i0 = 0; i0 < m; i0 += TM) {
    const int64_t rows = std::min<int64_t>(TM, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += TN) {
      const int64_t cols = std::min<int64_t>(TN, n - j0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p0 = 0; p0 < k; p0 += TK) {
        const int64_t depth = std::min<int64_t>(TK, k - p0);
        for (int64_t ii = 0; ii < rows; ++ii) {
          const float* arow = a + (i0 + ii) * k + p0;
          float* crow = acc.data() + ii * TN;
          for (int64_t pp = 0; pp < depth; ++pp) {
            const float a_ip = arow[pp];
            const float* brow = b + (p0 + pp) * n + j0;
            for (int64_t jj = 0; jj < cols; ++jj) {
              crow[jj] += a_ip * brow[jj];
            }
          }
        }
      }
      for (int64_t ii = 0; ii < rows; ++ii) {
        std::copy_n(acc.data() + ii * TN, cols, c + (i0 + ii) * n + j0);
      }
    }
  }
}

}  // namespace

void gemm_f32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);
}

}  // namespace deepgemm_tile
