// CPU twin of the DeepGEMM tile kernel: C[m,n] = A[m,k] @ B[k,n], fp32 accumulation.
#pragma once
#include <cstdint>

namespace deepgemm_tile {

// Row-major float32 operands. The tile shape is fixed at compile time by
// TILE_M / TILE_N / TILE_K (defines made by opgate from tile_config.json).
void gemm_f32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

}  // namespace deepgemm_tile
