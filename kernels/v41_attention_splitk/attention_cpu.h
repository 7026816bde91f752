// CPU twin of the split-K prefill attention kernel: causal softmax(q k^T / sqrt(128)) v, fp32 accumulation.
#pragma once
#include <cstdint>

namespace v41_attention {

constexpr int kHeadDim = 128;

// Row-major float32 operands, `bh` = batch * heads independent heads:
//   q[bh, sq, 128], k[bh, skv, 128], v[bh, skv, 128] -> out[bh, sq, 128], lse[bh, sq] (natural log).
// Query row i sits at position skv - sq + i and sees keys 0 .. skv - sq + i (sq <= skv).
// The key range is cut into SPLIT_K chunks of whole BLOCK_N blocks (defines made by opgate from
// splitk_config.json); each chunk yields a partial (out, max, sum) that a log-sum-exp merge combines.
void attention_splitk_f32(const float* q, const float* k, const float* v, float* out, float* lse,
                          int64_t bh, int64_t sq, int64_t skv);

}  // namespace v41_attention
