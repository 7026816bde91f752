// CPU twin of the FlashMLA decode kernel: paged MLA attention, bf16 in, fp32 accumulate and out.
#pragma once
#include <cstdint>

#include "mla_shape.h"

namespace flashmla_decode {

// bf16 tensors are passed as their raw 16-bit patterns. Rows are processed BLOCK_H at a time and
// the cache BLOCK_N positions at a time (defines made by opgate from kernel_config.json).
void mla_decode_cpu(const uint16_t* q, const uint16_t* kcache, const int32_t* block_table,
                    const int32_t* cache_seqlens, float* out, float* lse, const MlaDecodeShape& shape);

}  // namespace flashmla_decode
