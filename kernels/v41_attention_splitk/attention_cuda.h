// Launchers of the split-K prefill attention kernels (attention_cuda.cu); plain CUDA, no torch headers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#if !defined(SPLIT_K) || !defined(BLOCK_N)
#error "SPLIT_K and BLOCK_N must be defined (opgate passes them from splitk_config.json)"
#endif

namespace v41_attention {

constexpr int kHeadDim = 128;
constexpr int kSplitK = SPLIT_K;

// Layout: q[bh, sq, 128], k/v[bh, skv, 128] bf16 row-major (bh = batch * heads); query row i sits at
// position skv - sq + i and sees keys 0 .. skv - sq + i (causal, sq <= skv).
// Workspace, fp32: o_part[kSplitK, bh, sq, 128] (each split's normalized output), m_part and
// l_part[kSplitK, bh, sq] (each split's max of log2-scaled scores and its sum of exp2(score - max)).

// Kernel 1: each CTA reduces 64 query rows over one split's keys into the workspace.
cudaError_t launch_splitk_partial(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  float* o_part, float* m_part, float* l_part, int bh, int sq, int skv,
                                  cudaStream_t stream);

// Kernel 2: log-sum-exp merge of the kSplitK partials into out[bh, sq, 128] and lse[bh, sq] (natural log).
cudaError_t launch_splitk_merge(const float* o_part, const float* m_part, const float* l_part, float* out,
                                float* lse, int bh, int sq, cudaStream_t stream);

}  // namespace v41_attention
