// Launcher of the CUDA FlashMLA decode kernel in decode_cuda.cu: raw pointers and a stream, no torch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mla_shape.h"

namespace flashmla_decode {

// bf16 tensors are passed as their raw 16-bit patterns. The kernel is built for FlashMLA's dims,
// d = 576 and dv = 512, and for batch <= 65535; other shapes return cudaErrorInvalidValue.
cudaError_t launch_mla_decode(const uint16_t* q, const uint16_t* kcache, const int32_t* block_table,
                              const int32_t* cache_seqlens, float* out, float* lse, const MlaDecodeShape& shape,
                              cudaStream_t stream);

}  // namespace flashmla_decode
