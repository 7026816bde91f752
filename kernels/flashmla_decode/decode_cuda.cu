// FlashMLA-style decode for sm_90: one CTA per (BLOCK_H query rows, sequence), BLOCK_N-position KV
// tiles in shared memory through the block table, fp32 SIMT math with an online softmax per tile.
#include "decode_cuda.h"

#include <cstdint>

#if !defined(BLOCK_H) || !defined(BLOCK_N)
#error "BLOCK_H and BLOCK_N must be defined (opgate passes them from kernel_config.json)"
#endif

namespace flashmla_decode {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlockH = BLOCK_H;
constexpr int kBlockN = BLOCK_N;
constexpr int kD = 576;   // MLA latent dim of q and k
constexpr int kDv = 512;  // value dim: the first kDv dims of each cache row
constexpr int kChunks = kD / 8;     // 16-byte chunks (8 bf16) per row
constexpr int kStride = kD / 2 + 4;  // shared row stride in 32-bit words: 16-byte aligned, rows 4 banks apart
constexpr int kRowGroups = kThreads / kBlockN;  // score phase: a thread is (position, group of rows)
constexpr int kRowsPerThread = kBlockH > kRowGroups ? kBlockH / kRowGroups : 1;
constexpr int kPerLane = (kBlockN + 31) / 32;  // softmax phase: positions per lane of a row's warp
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

static_assert(kDv == 2 * kThreads, "each thread owns two value columns");
static_assert((kBlockH & (kBlockH - 1)) == 0 && kBlockH <= kThreads, "BLOCK_H: a power of two up to 256");
static_assert((kBlockN & (kBlockN - 1)) == 0 && kBlockN >= 4 && kBlockN <= 64, "BLOCK_N: a power of two in [4, 64]");

// Shared memory, in 32-bit words, every part 16-byte aligned.
constexpr int kKWords = kBlockN * kStride;  // K tile, bf16 pairs
constexpr int kQWords = kBlockH * kStride;  // query rows, bf16 pairs
constexpr int kSWords = kBlockH * kBlockN;  // scores, then probabilities
constexpr size_t kSmemBytes = sizeof(uint32_t) * (kKWords + kQWords + kSWords + 4 * kBlockH);

__device__ __forceinline__ float2 unpack(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__device__ __forceinline__ float dot8(uint4 a, uint4 b, float acc) {
  const uint32_t aw[4] = {a.x, a.y, a.z, a.w};
  const uint32_t bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = unpack(aw[i]), y = unpack(bw[i]);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
  }
  return acc;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One past the last cache position that query row `row` may see: the mask branch.
__device__ __forceinline__ int row_end(const MlaDecodeShape& p, int seqlen, int row) {
  return p.causal ? seqlen - static_cast<int>(p.s_q) + row / static_cast<int>(p.h_q) + 1 : seqlen;
}

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ kcache,
                      const int32_t* __restrict__ block_table, const int32_t* __restrict__ cache_seqlens,
                      float* __restrict__ out, float* __restrict__ lse, const MlaDecodeShape p, float scale_log2) {
  extern __shared__ __align__(16) uint32_t smem[];
  uint32_t* k_s = smem;
  uint32_t* q_s = k_s + kKWords;
  float* s_s = reinterpret_cast<float*>(q_s + kQWords);
  float* m_s = s_s + kSWords;   // running max per row (log2 domain)
  float* l_s = m_s + kBlockH;   // running sum of exp2 per row
  float* alpha_s = l_s + kBlockH;  // this tile's rescale of each row's accumulator
  int* end_s = reinterpret_cast<int*>(alpha_s + kBlockH);  // row_end per row, 0 past the last row

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int b = blockIdx.y;
  const int rows = static_cast<int>(p.s_q * p.h_q);
  const int r0 = blockIdx.x * kBlockH;
  const int count = min(kBlockH, rows - r0);
  const int seqlen = cache_seqlens[b];
  const int kv_end = row_end(p, seqlen, r0 + count - 1);  // row_end grows with the row
  const int block_size = static_cast<int>(p.block_size);
  const int32_t* table = block_table + b * p.max_blocks_per_seq;

  const uint4* q_rows = reinterpret_cast<const uint4*>(q + (static_cast<int64_t>(b) * rows + r0) * kD);
  for (int i = tid; i < kBlockH * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    *reinterpret_cast<uint4*>(q_s + r * kStride + 4 * c) = r < count ? q_rows[i] : make_uint4(0, 0, 0, 0);
  }
  if (tid < kBlockH) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    end_s[tid] = tid < count ? row_end(p, seqlen, r0 + tid) : 0;
  }
  float2 acc[kBlockH];
#pragma unroll
  for (int r = 0; r < kBlockH; ++r) acc[r] = make_float2(0.0f, 0.0f);
  __syncthreads();

  for (int n0 = 0; n0 < kv_end; n0 += kBlockN) {
    // K tile through the block table; positions >= kv_end are zero-filled, never read.
    for (int i = tid; i < kBlockN * kChunks; i += kThreads) {
      const int n = i / kChunks, c = i % kChunks, pos = n0 + n;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (pos < kv_end) {
        const int64_t page = table[pos / block_size];
        v = reinterpret_cast<const uint4*>(kcache + (page * block_size + pos % block_size) * kD)[c];
      }
      *reinterpret_cast<uint4*>(k_s + n * kStride + 4 * c) = v;
    }
    __syncthreads();

    // Scores (log2 domain) of kRowsPerThread rows against position n; -inf where the row may not look.
    const int n = tid % kBlockN, g = tid / kBlockN;
    if (g * kRowsPerThread < kBlockH) {
      float dot[kRowsPerThread] = {};
      const uint4* krow = reinterpret_cast<const uint4*>(k_s + n * kStride);
#pragma unroll 2
      for (int c = 0; c < kChunks; ++c) {
        const uint4 kw = krow[c];
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          dot[i] = dot8(reinterpret_cast<const uint4*>(q_s + (g * kRowsPerThread + i) * kStride)[c], kw, dot[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = g * kRowsPerThread + i;
        s_s[r * kBlockN + n] = n0 + n < end_s[r] ? dot[i] * scale_log2 : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax: a warp per row, its lanes over the tile's positions.
    for (int r = warp; r < kBlockH; r += kWarps) {
      float x[kPerLane];
      float tile_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        x[i] = j < kBlockN ? s_s[r * kBlockN + j] : -INFINITY;
        tile_max = fmaxf(tile_max, x[i]);
      }
      const float m_old = m_s[r];
      const float m_new = fmaxf(m_old, warp_max(tile_max));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet stays at 0
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        const float pr = exp2f(x[i] - m_use);
        if (j < kBlockN) s_s[r * kBlockN + j] = pr;
        sum += pr;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_use);
        alpha_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();

    // acc = acc * alpha + P V; this thread's value columns are 2 * tid and 2 * tid + 1.
#pragma unroll
    for (int r = 0; r < kBlockH; ++r) {
      const float alpha = alpha_s[r];
      acc[r].x *= alpha;
      acc[r].y *= alpha;
    }
    for (int j = 0; j < kBlockN; j += 4) {
      float2 v[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = unpack(k_s[(j + t) * kStride + tid]);
#pragma unroll
      for (int r = 0; r < kBlockH; ++r) {
        const float4 pr = *reinterpret_cast<const float4*>(s_s + r * kBlockN + j);
        acc[r].x = fmaf(pr.x, v[0].x, fmaf(pr.y, v[1].x, fmaf(pr.z, v[2].x, fmaf(pr.w, v[3].x, acc[r].x))));
        acc[r].y = fmaf(pr.x, v[0].y, fmaf(pr.y, v[1].y, fmaf(pr.z, v[2].y, fmaf(pr.w, v[3].y, acc[r].y))));
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < kBlockH; ++r) {
    if (r < count) {
      const float l = l_s[r];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float2* dst = reinterpret_cast<float2*>(out + (static_cast<int64_t>(b) * rows + r0 + r) * kDv) + tid;
      *dst = make_float2(acc[r].x * inv, acc[r].y * inv);
    }
  }
  if (tid < count) {
    const int row = r0 + tid;
    const float l = l_s[tid];
    lse[(static_cast<int64_t>(b) * p.h_q + row % p.h_q) * p.s_q + row / p.h_q] =
        l > 0.0f ? (m_s[tid] + log2f(l)) * kLn2 : INFINITY;
  }
}

}  // namespace

cudaError_t launch_mla_decode(const uint16_t* q, const uint16_t* kcache, const int32_t* block_table,
                              const int32_t* cache_seqlens, float* out, float* lse, const MlaDecodeShape& shape,
                              cudaStream_t stream) {
  if (shape.d != kD || shape.dv != kDv || shape.batch > 65535) {
    return cudaErrorInvalidValue;
  }
  const int64_t rows = shape.s_q * shape.h_q;
  if (shape.batch == 0 || rows == 0) {
    return cudaSuccess;
  }
  const cudaError_t attr = cudaFuncSetAttribute(mla_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) {
    return attr;
  }
  const dim3 grid(static_cast<unsigned>((rows + kBlockH - 1) / kBlockH), static_cast<unsigned>(shape.batch));
  mla_decode_kernel<<<grid, kThreads, kSmemBytes, stream>>>(q, kcache, block_table, cache_seqlens, out, lse, shape,
                                                           shape.softmax_scale * kLog2e);
  return cudaGetLastError();
}

}  // namespace flashmla_decode
