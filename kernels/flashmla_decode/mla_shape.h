// Problem shape shared by the CPU twin and the CUDA launcher (plain C++: no torch, no CUDA headers).
#pragma once
#include <cstdint>

namespace flashmla_decode {

// Layouts (all contiguous): q [batch, s_q, h_q, d] bf16; kcache [num_blocks, block_size, 1, d] bf16,
// the value being its first dv dims; block_table [batch, max_blocks_per_seq] int32;
// cache_seqlens [batch] int32; out [batch, s_q, h_q, dv] fp32; lse [batch, h_q, s_q] fp32.
// Query rows are flattened as r = s * h_q + h, as FlashMLA does.
struct MlaDecodeShape {
  int64_t batch;
  int64_t s_q;
  int64_t h_q;
  int64_t d;
  int64_t dv;
  int64_t block_size;
  int64_t max_blocks_per_seq;
  bool causal;  // query s sees positions [0, seqlen - s_q + s]; otherwise [0, seqlen)
  float softmax_scale;
};

}  // namespace flashmla_decode
