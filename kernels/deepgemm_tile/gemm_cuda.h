// CUDA twin of the DeepGEMM tile kernel: C[m,n] = A[m,k] @ B[k,n], bf16 in, fp32 accumulation.
// No torch headers here (nor in gemm_cuda.cu): the binding is binding_cuda.cpp.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace deepgemm_tile {

// a: bf16 A[m,k] row-major, b: bf16 B[k,n] row-major, c: float32 C[m,n] row-major (all contiguous,
// device memory). The tile shape is fixed at compile time by TILE_M / TILE_N / TILE_K (defines made
// by opgate from tile_config.json). Asynchronous on `stream`; launch errors are left for the caller
// to pick up with cudaGetLastError(). m, n, k must each be < 2^31.
void launch_gemm_bf16(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k,
                      cudaStream_t stream);

}  // namespace deepgemm_tile
