// Split-K prefill attention for sm_90a: a FlashAttention-2 style partial kernel on bf16 tensor cores
// (mma.sync m16n8k16, fp32 accumulate) over one key split per CTA, then a log-sum-exp merge kernel.
#include <cstdint>

#include "attention_cuda.h"

namespace v41_attention {
namespace {

constexpr int kBlockN = BLOCK_N;          // keys per smem tile / online-softmax block
constexpr int kWarps = 4;                 // each warp owns 16 query rows
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kWarps * 16;      // query rows per CTA
constexpr int kStride = kHeadDim + 8;     // smem row pitch in bf16: +16 B keeps ldmatrix conflict-free
constexpr int kKSteps = kHeadDim / 16;    // k16 steps of q k^T
constexpr int kDTiles = kHeadDim / 8;     // n8 tiles of the output row
constexpr int kNTiles = kBlockN / 8;      // n8 tiles of one score block
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kInf = __builtin_huge_valf();
static_assert(kBlockN % 16 == 0, "BLOCK_N must be a multiple of 16");

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Keys per split: whole kBlockN blocks, so only the last block of the sequence is ragged.
__host__ __device__ constexpr int split_chunk(int skv) { return ceil_div(ceil_div(skv, kBlockN), kSplitK) * kBlockN; }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 bf16 matrices from smem; lane l gives the row address of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// The same, transposed: what a B operand stored [k][n] row-major needs.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// d[16x8] += a[16x16] * b[16x8], bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rows [j0, j0 + kBlockN) of a [skv, 128] bf16 matrix into smem, 16 B per thread and step; rows past
// the sequence are zero so that masked keys never multiply garbage.
__device__ __forceinline__ void load_tile(__nv_bfloat16 (*dst)[kStride], const __nv_bfloat16* src, int j0, int skv) {
  constexpr int kChunksPerRow = kHeadDim * 2 / 16;
  for (int c = threadIdx.x; c < kBlockN * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (j0 + r < skv) val = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(j0 + r) * kHeadDim + col);
    *reinterpret_cast<uint4*>(&dst[r][col]) = val;
  }
}

// Max (or sum) over the 4 lanes of a quad, which together hold one row of an mma C fragment.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// grid (ceil(sq / kBlockM), bh, kSplitK). Lane layout of the m16n8 C fragment: element e of a tile is
// row lane/4 + 8*(e/2), column 2*(lane%4) + e%2; so each thread owns two rows, h = 0 and h = 1.
__global__ void __launch_bounds__(kThreads) splitk_partial_kernel(const __nv_bfloat16* __restrict__ q,
                                                                  const __nv_bfloat16* __restrict__ k,
                                                                  const __nv_bfloat16* __restrict__ v,
                                                                  float* __restrict__ o_part,
                                                                  float* __restrict__ m_part,
                                                                  float* __restrict__ l_part, int sq, int skv,
                                                                  float scale_log2) {
  __shared__ __align__(16) __nv_bfloat16 k_s[kBlockN][kStride];
  __shared__ __align__(16) __nv_bfloat16 v_s[kBlockN][kStride];
  const int bh = blockIdx.y, split = blockIdx.z, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * kBlockM;
  const int q_offset = skv - sq;
  const int begin = split * split_chunk(skv);
  const int cta_last_row = min(row0 + kBlockM, sq) - 1;
  // Keys of this split that any row of the CTA may see; empty when the split lies after all its queries.
  const int end = min(min(begin + split_chunk(skv), skv), q_offset + cta_last_row + 1);
  q += static_cast<size_t>(bh) * sq * kHeadDim;
  k += static_cast<size_t>(bh) * skv * kHeadDim;
  v += static_cast<size_t>(bh) * skv * kHeadDim;
  const int rows[2] = {row0 + warp * 16 + lane / 4, row0 + warp * 16 + lane / 4 + 8};

  // The warp's 16 x 128 slice of q as mma A fragments, straight from global memory (read once).
  uint32_t qf[kKSteps][4];
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = rows[i % 2], col = kk * 16 + (lane % 4) * 2 + (i / 2) * 8;
      qf[kk][i] = row < sq ? *reinterpret_cast<const uint32_t*>(q + static_cast<size_t>(row) * kHeadDim + col) : 0u;
    }
  }

  float o[kDTiles][4] = {};
  float m[2] = {-kInf, -kInf};  // running max of the log2-scaled scores
  float l[2] = {0.0f, 0.0f};    // this thread's share of the running sum of exp2(score - m)
  for (int j0 = begin; j0 < end; j0 += kBlockN) {
    __syncthreads();  // every warp is done with the previous tile
    load_tile(k_s, k, j0, skv);
    load_tile(v_s, v, j0, skv);
    __syncthreads();

    // s = q k^T for this block; ldmatrix x4 yields the B fragments of two k16 steps of one n8 tile.
    float s[kNTiles][4] = {};
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; kk += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, &k_s[nt * 8 + lane % 8][(kk + lane / 16) * 16 + (lane / 8) % 2 * 8]);
        mma_16816(s[nt], qf[kk], b[0], b[1]);
        mma_16816(s[nt], qf[kk + 1], b[2], b[3]);
      }
    }

    // Causal and split-end mask, scale into the log2 domain, and the online-softmax update.
    float block_max[2] = {-kInf, -kInf};
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + nt * 8 + (lane % 4) * 2 + e % 2;
        const bool visible = j < end && j <= q_offset + rows[e / 2];
        s[nt][e] = visible ? s[nt][e] * scale_log2 : -kInf;
        block_max[e / 2] = fmaxf(block_max[e / 2], s[nt][e]);
      }
    }
    float m_use[2], rescale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(m[h], quad_max(block_max[h]));
      m_use[h] = m_new == -kInf ? 0.0f : m_new;  // no visible key yet: keep exp2 away from inf - inf
      rescale[h] = exp2f(m[h] - m_use[h]);
      m[h] = m_new;
      l[h] *= rescale[h];
    }
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2f(s[nt][e] - m_use[e / 2]);
        l[e / 2] += s[nt][e];
      }
    }
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= rescale[e / 2];
    }

    // o += p v: the C fragments of two adjacent n8 score tiles are the A fragment of one k16 step.
#pragma unroll
    for (int ks = 0; ks < kNTiles / 2; ++ks) {
      const uint32_t a[4] = {pack_bf16(s[2 * ks][0], s[2 * ks][1]), pack_bf16(s[2 * ks][2], s[2 * ks][3]),
                             pack_bf16(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                             pack_bf16(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#pragma unroll
      for (int dt = 0; dt < kDTiles; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, &v_s[ks * 16 + (lane / 8) % 2 * 8 + lane % 8][(dt + lane / 16) * 8]);
        mma_16816(o[dt], a, b[0], b[1]);
        mma_16816(o[dt + 1], a, b[2], b[3]);
      }
    }
  }

  // Epilogue: the split's normalized output and its (max, sum); a row with no visible key stores 0, -inf, 0.
  const int bh_count = gridDim.y;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float row_sum = quad_sum(l[h]);
    if (rows[h] >= sq) continue;
    const size_t row = (static_cast<size_t>(split) * bh_count + bh) * sq + rows[h];
    const float inv_l = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      const float2 pair = make_float2(o[dt][2 * h] * inv_l, o[dt][2 * h + 1] * inv_l);
      *reinterpret_cast<float2*>(o_part + row * kHeadDim + dt * 8 + (lane % 4) * 2) = pair;
    }
    if (lane % 4 == 0) {
      m_part[row] = m[h];
      l_part[row] = row_sum;
    }
  }
}

// grid ceil(bh * sq / kWarps): one warp per query row, lane owning 4 of the 128 output columns.
__global__ void __launch_bounds__(kThreads) splitk_merge_kernel(const float* __restrict__ o_part,
                                                                const float* __restrict__ m_part,
                                                                const float* __restrict__ l_part,
                                                                float* __restrict__ out, float* __restrict__ lse,
                                                                int rows) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float m = -kInf;
#pragma unroll
  for (int s = 0; s < kSplitK; ++s) m = fmaxf(m, m_part[static_cast<size_t>(s) * rows + row]);
  float total = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < kSplitK; ++s) {
    const size_t at = static_cast<size_t>(s) * rows + row;
    const float weight = l_part[at] * exp2f(m_part[at] - m);  // 0 for a split with no visible key
    const float4 part = reinterpret_cast<const float4*>(o_part + at * kHeadDim)[lane];
    total += weight;
    acc.x += weight * part.x;
    acc.y += weight * part.y;
    acc.z += weight * part.z;
    acc.w += weight * part.w;
  }
  const float inv = 1.0f / total;  // every row sees key 0, so total > 0
  reinterpret_cast<float4*>(out + static_cast<size_t>(row) * kHeadDim)[lane] =
      make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
  if (lane == 0) lse[row] = (m + log2f(total)) * kLn2;
}

}  // namespace

cudaError_t launch_splitk_partial(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  float* o_part, float* m_part, float* l_part, int bh, int sq, int skv,
                                  cudaStream_t stream) {
  const dim3 grid(ceil_div(sq, kBlockM), bh, kSplitK);
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  splitk_partial_kernel<<<grid, kThreads, 0, stream>>>(q, k, v, o_part, m_part, l_part, sq, skv, scale_log2);
  return cudaGetLastError();
}

cudaError_t launch_splitk_merge(const float* o_part, const float* m_part, const float* l_part, float* out,
                                float* lse, int bh, int sq, cudaStream_t stream) {
  const int rows = bh * sq;
  splitk_merge_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(o_part, m_part, l_part, out, lse, rows);
  return cudaGetLastError();
}

}  // namespace v41_attention
