// Tiled bf16 GEMM for sm_90a (H200): C[m,n] (fp32) = A[m,k] (bf16) @ B[k,n] (bf16), fp32 accumulation.
// No torch headers here: the binding is binding_cuda.cpp.
//
// Design (one thread block per TILE_M x TILE_N output tile):
//   * tensor cores through mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (inline PTX);
//     A fragments with ldmatrix.x4, B fragments with ldmatrix.x4.trans (B is [k,n] row-major in
//     shared memory, the mma wants it "col", i.e. k-contiguous per n);
//   * a kStages-deep cp.async ring of shared-memory stages (16-byte copies, zero-filled past the
//     edges of A and B), one __syncthreads per K tile;
//   * XOR-swizzled shared-memory layout (16-byte chunks), so ldmatrix and cp.async are free of
//     bank conflicts;
//   * each warp owns a kWM x kWN sub-tile (64x64 at most: 128 fp32 accumulators per thread);
//     256x256 would need 65,536 accumulators, the whole register file of an SM, so that tile is
//     computed as two passes of 256x128 by the same block (no spills, A is read twice);
//   * split-K (fp32 atomics into a zeroed C) when the output has fewer tiles than the GPU has SMs,
//     e.g. m = 128;
//   * a fallback path (plain predicated loads, scalar stores) when k or n is not a multiple of 8 or
//     a pointer is not 16-byte aligned, since cp.async needs 16-byte aligned sources.
// The block body is written against a small set of primitives (DevOps below) so that the same code
// can be checked on a CPU by an emulation of those primitives.
#include "gemm_cuda.h"

#include <atomic>
#include <cstdint>

#if !defined(TILE_M) || !defined(TILE_N) || !defined(TILE_K)
#error "TILE_M, TILE_N and TILE_K must be defined (opgate passes them from tile_config.json)"
#endif

#define OPG_HD __host__ __device__ __forceinline__

namespace deepgemm_tile {

constexpr int kSmemPerBlockMax = 232448;  // 227 KB: the most dynamic shared memory one block may use on sm_90
constexpr int kSmemTwoBlocks = 115712;    // each of two blocks per SM (228 KB per SM, 1 KB reserved per block)

constexpr int clamp_int(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }

// Everything that follows from the tile shape.
template <int TM, int TN, int TK>
struct TileCfg {
  static_assert(TM == 64 || TM == 128 || TM == 256, "TILE_M must be 64, 128 or 256");
  static_assert(TN == 64 || TN == 128 || TN == 256, "TILE_N must be 64, 128 or 256");
  static_assert(TK == 32 || TK == 64 || TK == 128, "TILE_K must be 32, 64 or 128");

  // Width (in n) of one pass over K: the TM x kPN accumulators of a pass stay in registers.
  static constexpr int kPN = (TM * TN > 256 * 128) ? TN / 2 : TN;
  static constexpr int kPasses = TN / kPN;
  // Warp layout: warp tiles of at most 64x64 (MI x NI mma tiles of 16x8).
  static constexpr int kWM = TM >= 128 ? 64 : 32;
  static constexpr int kWN = kPN >= 128 ? 64 : 32;
  static constexpr int kWarpsM = TM / kWM;
  static constexpr int kWarpsN = kPN / kWN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kMI = kWM / 16;
  static constexpr int kNI = kWN / 8;
  static constexpr int kKSteps = TK / 16;
  // Shared memory: A stage [TM][TK], B stage [TK][kPN], bf16, in 16-byte chunks.
  static constexpr int kACpr = TK / 8;   // chunks per A row
  static constexpr int kBCpr = kPN / 8;  // chunks per B row
  static constexpr int kAIters = TM * kACpr / kThreads;  // A chunks per thread per stage
  static constexpr int kBIters = TK * kBCpr / kThreads;
  static constexpr int kARowsPerIter = kThreads / kACpr;
  static constexpr int kBRowsPerIter = kThreads / kBCpr;
  static constexpr int kAStageBytes = TM * TK * 2;
  static constexpr int kStageBytes = kAStageBytes + TK * kPN * 2;
  // 256 threads need more than 128 registers each (ptxas: 135..246), so only one block fits in an
  // SM's 64K registers and it may take all the shared memory; 128-thread blocks (<= 255 registers)
  // leave room for a second block.
  static constexpr bool kOneBlockPerSM = kThreads >= 256;
  static constexpr int kStages =
      clamp_int((kOneBlockPerSM ? kSmemPerBlockMax : kSmemTwoBlocks) / kStageBytes, 2, 4);
  static constexpr int kSmemBytes = kStages * kStageBytes;

  static_assert(kThreads == 128 || kThreads == 256, "warp layout");
  static_assert(kNI % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  static_assert(kAIters >= 1 && kAIters * kThreads == TM * kACpr, "A loader mapping");
  static_assert(kBIters >= 1 && kBIters * kThreads == TK * kBCpr, "B loader mapping");
  static_assert(kThreads % kACpr == 0 && kThreads % kBCpr == 0, "loader rows");
  static_assert(kSmemBytes <= kSmemPerBlockMax, "shared memory per block");

  // XOR swizzle of the 16-byte chunk index within a row. An ldmatrix phase reads the same logical
  // chunk of 8 consecutive rows; the swizzle spreads them over the 8 distinct 16-byte bank groups
  // (and 8 consecutive cp.async writers, which cover distinct chunks, stay distinct too).
  template <int CPR>
  static OPG_HD int swz(int row, int chunk) {
    if constexpr (CPR >= 8) {
      return chunk ^ (row & 7);
    } else {  // CPR == 4 (64-byte rows): two rows share a 128-byte line
      return chunk ^ ((row >> 1) & 3);
    }
  }
  // Byte offsets inside an A stage ([TM][TK]) and inside a B stage ([TK][kPN]).
  static OPG_HD uint32_t a_off(int row, int chunk) {
    return static_cast<uint32_t>((row * kACpr + swz<kACpr>(row, chunk)) * 16);
  }
  static OPG_HD uint32_t b_off(int krow, int chunk) {
    return static_cast<uint32_t>((krow * kBCpr + swz<kBCpr>(krow, chunk)) * 16);
  }
};

// Output tile of linear block `bid`, in groups of 8 tile rows so that concurrent blocks share
// A panels and B panels in L2.
OPG_HD void tile_coords(int bid, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  constexpr int kGroup = 8;
  const int per_group = kGroup * tiles_n;
  const int first_m = (bid / per_group) * kGroup;
  const int rows = (tiles_m - first_m) < kGroup ? (tiles_m - first_m) : kGroup;
  const int in_group = bid % per_group;
  tile_m = first_m + in_group % rows;
  tile_n = in_group / rows;
}

// The device primitives. Shared-memory addresses are 32-bit shared-window addresses.
struct DevOps {
  static __device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
    // src-size 0 reads nothing and zero-fills the 16 bytes.
    const int src_bytes = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
  }
  static __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
  template <int N>
  static __device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
  }
  static __device__ __forceinline__ void sync() { __syncthreads(); }
  static __device__ __forceinline__ void st_shared16(uint32_t dst, uint32_t w0, uint32_t w1, uint32_t w2,
                                                     uint32_t w3) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                 : "memory");
  }
  static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  static __device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  // c += a (16x16, row) * b (16x8, col)
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ void red_add(float* p, float v) { atomicAdd(p, v); }
};

// One block's work: output tile (tile_m, tile_n) over K tiles [kt_begin, kt_end).
// kVec: k % 8 == 0, n % 8 == 0 and A, B 16-byte aligned (cp.async path, float2 stores).
// atomic: add into C (split-K; C was zeroed) instead of storing.
#pragma nv_exec_check_disable
template <int TM, int TN, int TK, bool kVec, class Ops>
OPG_HD void gemm_block(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C,
                       int m, int n, int k, int tile_m, int tile_n, int kt_begin, int kt_end, bool atomic,
                       int tid, uint32_t smem) {
  using Cfg = TileCfg<TM, TN, TK>;
  constexpr int kStages = Cfg::kStages;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % Cfg::kWarpsM;
  const int warp_n = warp / Cfg::kWarpsM;
  const int m0 = tile_m * TM;
  const int ntiles = kt_end - kt_begin;

  // Loader mapping: thread tid copies chunk (tid % CPR) of rows tid / CPR + i * kRowsPerIter.
  const int a_row0 = tid / Cfg::kACpr;
  const int a_chunk = tid % Cfg::kACpr;
  const int b_row0 = tid / Cfg::kBCpr;
  const int b_chunk = tid % Cfg::kBCpr;

  for (int pass = 0; pass < Cfg::kPasses; ++pass) {
    const int n0 = tile_n * TN + pass * Cfg::kPN;
    if (pass > 0) {
      // Every warp is done with the previous pass's stages before they are refilled.
      Ops::template wait<0>();
      Ops::sync();
    }
    if (n0 >= n) break;  // the same for the whole block

    // Issue the copies of K tile `kt` into ring slot `slot`.
    auto load_tile = [&](int kt, int slot) {
      const uint32_t sA = smem + static_cast<uint32_t>(slot * Cfg::kStageBytes);
      const uint32_t sB = sA + Cfg::kAStageBytes;
      const int k0 = kt * TK;
      const int a_gk = k0 + a_chunk * 8;  // first k of this thread's A chunks
      const int b_gn = n0 + b_chunk * 8;  // first n of this thread's B chunks
      if constexpr (kVec) {
        // Whole 16-byte chunks: k and n are multiples of 8, so a chunk is all in or all out.
#pragma unroll
        for (int i = 0; i < Cfg::kAIters; ++i) {
          const int row = a_row0 + i * Cfg::kARowsPerIter;
          const int gm = m0 + row;
          const bool p = gm < m && a_gk < k;
          const uint16_t* src = p ? A + (static_cast<int64_t>(gm) * k + a_gk) : A;
          Ops::cp_async16(sA + Cfg::a_off(row, a_chunk), src, p);
        }
#pragma unroll
        for (int i = 0; i < Cfg::kBIters; ++i) {
          const int krow = b_row0 + i * Cfg::kBRowsPerIter;
          const int gk = k0 + krow;
          const bool p = gk < k && b_gn < n;
          const uint16_t* src = p ? B + (static_cast<int64_t>(gk) * n + b_gn) : B;
          Ops::cp_async16(sB + Cfg::b_off(krow, b_chunk), src, p);
        }
      } else {
        // Element-wise predicated loads, one chunk at a time (not unrolled: bounded registers).
#pragma unroll 1
        for (int i = 0; i < Cfg::kAIters; ++i) {
          const int row = a_row0 + i * Cfg::kARowsPerIter;
          const int gm = m0 + row;
          const bool row_ok = gm < m;
          const uint16_t* src = A + static_cast<int64_t>(row_ok ? gm : 0) * k;
          uint32_t w[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c0 = a_gk + 2 * j;
            const uint32_t lo = (row_ok && c0 < k) ? src[c0] : 0u;
            const uint32_t hi = (row_ok && c0 + 1 < k) ? src[c0 + 1] : 0u;
            w[j] = lo | (hi << 16);
          }
          Ops::st_shared16(sA + Cfg::a_off(row, a_chunk), w[0], w[1], w[2], w[3]);
        }
#pragma unroll 1
        for (int i = 0; i < Cfg::kBIters; ++i) {
          const int krow = b_row0 + i * Cfg::kBRowsPerIter;
          const int gk = k0 + krow;
          const bool row_ok = gk < k;
          const uint16_t* src = B + static_cast<int64_t>(row_ok ? gk : 0) * n;
          uint32_t w[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c0 = b_gn + 2 * j;
            const uint32_t lo = (row_ok && c0 < n) ? src[c0] : 0u;
            const uint32_t hi = (row_ok && c0 + 1 < n) ? src[c0 + 1] : 0u;
            w[j] = lo | (hi << 16);
          }
          Ops::st_shared16(sB + Cfg::b_off(krow, b_chunk), w[0], w[1], w[2], w[3]);
        }
      }
    };

    float acc[Cfg::kMI][Cfg::kNI][4];
#pragma unroll
    for (int mi = 0; mi < Cfg::kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kNI; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

    // Prologue: K tiles 0 .. kStages-2 in flight, one commit group each (empty past the end).
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ntiles) load_tile(kt_begin + s, s);
      Ops::commit();
    }

    for (int it = 0; it < ntiles; ++it) {
      // Groups committed so far: kStages-1+it, group g holding K tile g. Leaving kStages-2 pending
      // means groups 0..it are complete: tile `it` landed (this thread's copies) ...
      Ops::template wait<kStages - 2>();
      // ... and after the barrier everyone's copies are visible, and every warp has finished
      // reading slot (it-1) % kStages, which the next load refills.
      Ops::sync();
      const int next = it + kStages - 1;
      if (next < ntiles) load_tile(kt_begin + next, next % kStages);
      Ops::commit();

      const int slot = it % kStages;
      const uint32_t sA = smem + static_cast<uint32_t>(slot * Cfg::kStageBytes);
      const uint32_t sB = sA + Cfg::kAStageBytes;
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
        uint32_t af[Cfg::kMI][4];
        uint32_t bf[Cfg::kNI][2];
#pragma unroll
        for (int mi = 0; mi < Cfg::kMI; ++mi) {
          // lanes 0-15: rows 0-15 at k 0-7, lanes 16-31: rows 0-15 at k 8-15 -> a0..a3
          const int row = warp_m * Cfg::kWM + mi * 16 + (lane & 15);
          const int chunk = kk * 2 + (lane >> 4);
          Ops::ldsm_x4(af[mi], sA + Cfg::a_off(row, chunk));
        }
#pragma unroll
        for (int nj = 0; nj < Cfg::kNI / 2; ++nj) {
          // lanes 0-15: k rows 0-15 at n 0-7, lanes 16-31: k rows 0-15 at n 8-15;
          // transposed: r0,r1 = b0,b1 of n tile 2nj, r2,r3 = b0,b1 of n tile 2nj+1
          const int krow = kk * 16 + (lane & 15);
          const int chunk = (warp_n * Cfg::kWN + nj * 16) / 8 + (lane >> 4);
          uint32_t r[4];
          Ops::ldsm_x4_trans(r, sB + Cfg::b_off(krow, chunk));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < Cfg::kMI; ++mi)
#pragma unroll
          for (int ni = 0; ni < Cfg::kNI; ++ni) Ops::mma(acc[mi][ni], af[mi], bf[ni]);
      }
    }

    // Epilogue: c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g+8 (g = lane / 4, t = lane % 4).
#pragma unroll
    for (int mi = 0; mi < Cfg::kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < Cfg::kNI; ++ni) {
        const int col = n0 + warp_n * Cfg::kWN + ni * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + warp_m * Cfg::kWM + mi * 16 + (lane >> 2) + h * 8;
          if (row >= m) continue;
          float* dst = C + (static_cast<int64_t>(row) * n + col);
          const float v0 = acc[mi][ni][2 * h];
          const float v1 = acc[mi][ni][2 * h + 1];
          if (atomic) {
            if (col < n) Ops::red_add(dst, v0);
            if (col + 1 < n) Ops::red_add(dst + 1, v1);
          } else if constexpr (kVec) {
            if (col < n) *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);  // n even: col+1 < n
          } else {
            if (col < n) dst[0] = v0;
            if (col + 1 < n) dst[1] = v1;
          }
        }
      }
    }
  }
  Ops::template wait<0>();  // nothing left in flight when the block exits (only empty groups remain)
}

// K tiles [kt_begin, kt_end) of split `split`.
OPG_HD void split_range(int split, int ktiles, int per_split, int& kt_begin, int& kt_end) {
  kt_begin = split * per_split;
  kt_end = (kt_begin + per_split) < ktiles ? (kt_begin + per_split) : ktiles;
}

template <int TM, int TN, int TK, bool kVec>
__global__ void __launch_bounds__(TileCfg<TM, TN, TK>::kThreads, 1)
    gemm_bf16_kernel(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int m,
                     int n, int k, int tiles_m, int tiles_n, int ktiles, int per_split) {
  extern __shared__ __align__(128) unsigned char smem[];
  int tile_m, tile_n, kt_begin, kt_end;
  tile_coords(static_cast<int>(blockIdx.x), tiles_m, tiles_n, tile_m, tile_n);
  split_range(static_cast<int>(blockIdx.y), ktiles, per_split, kt_begin, kt_end);
  gemm_block<TM, TN, TK, kVec, DevOps>(A, B, C, m, n, k, tile_m, tile_n, kt_begin, kt_end, gridDim.y > 1,
                                       static_cast<int>(threadIdx.x),
                                       static_cast<uint32_t>(__cvta_generic_to_shared(smem)));
}

// What the launcher decides on the host (a function of its own so that it can be checked).
struct LaunchPlan {
  bool vec;       // cp.async path: k % 8 == 0, n % 8 == 0, A and B 16-byte aligned, C 8-byte aligned
  int tiles_m;    // grid.x = tiles_m * tiles_n
  int tiles_n;
  int ktiles;     // K tiles in all
  int per_split;  // K tiles per split
  int splits;     // grid.y; > 1: C is zeroed first and the blocks add into it
};

template <int TM, int TN, int TK>
LaunchPlan make_plan(const void* a, const void* b, const float* c, int m, int n, int k, int sms) {
  LaunchPlan p;
  p.vec = k % 8 == 0 && n % 8 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(b) % 16 == 0 && reinterpret_cast<uintptr_t>(c) % 8 == 0;
  p.tiles_m = (m + TM - 1) / TM;
  p.tiles_n = (n + TN - 1) / TN;
  p.ktiles = (k + TK - 1) / TK;
  // Split K when the output has fewer tiles than the GPU has SMs (about one wave of blocks),
  // keeping at least 4 K tiles per split.
  int64_t splits = 1;
  const int64_t tiles = static_cast<int64_t>(p.tiles_m) * p.tiles_n;
  if (tiles < sms) {
    splits = (sms + tiles - 1) / tiles;
    if (splits > p.ktiles / 4) splits = p.ktiles / 4;
    if (splits > 32) splits = 32;
    if (splits < 1) splits = 1;
  }
  p.per_split = static_cast<int>((p.ktiles + splits - 1) / splits);
  p.splits = (p.ktiles + p.per_split - 1) / p.per_split;  // no empty split
  return p;
}

template <int TM, int TN, int TK, bool kVec>
void launch_plan(const LaunchPlan& p, const uint16_t* a, const uint16_t* b, float* c, int m, int n, int k,
                 int dev, cudaStream_t stream) {
  using Cfg = TileCfg<TM, TN, TK>;
  auto kernel = gemm_bf16_kernel<TM, TN, TK, kVec>;
  if (Cfg::kSmemBytes > 48 * 1024) {
    // Opt in to more than 48 KB of dynamic shared memory, once per device.
    static std::atomic<bool> opted_in[64];
    if (dev < 0 || dev >= 64 || !opted_in[dev].load(std::memory_order_relaxed)) {
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) !=
          cudaSuccess) {
        return;  // the error stays set for cudaGetLastError()
      }
      if (dev >= 0 && dev < 64) opted_in[dev].store(true, std::memory_order_relaxed);
    }
  }
  const dim3 grid(static_cast<unsigned>(p.tiles_m * p.tiles_n), static_cast<unsigned>(p.splits));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a, b, c, m, n, k, p.tiles_m, p.tiles_n, p.ktiles,
                                                           p.per_split);
}

void launch_gemm_bf16(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k,
                      cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  const size_t c_bytes = static_cast<size_t>(m) * static_cast<size_t>(n) * sizeof(float);
  if (k <= 0) {
    cudaMemsetAsync(c, 0, c_bytes, stream);
    return;
  }
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const LaunchPlan p = make_plan<TILE_M, TILE_N, TILE_K>(a, b, c, mi, ni, ki, sms);
  if (p.splits > 1) cudaMemsetAsync(c, 0, c_bytes, stream);
  const auto* A = static_cast<const uint16_t*>(a);
  const auto* B = static_cast<const uint16_t*>(b);
  if (p.vec) {
    launch_plan<TILE_M, TILE_N, TILE_K, true>(p, A, B, c, mi, ni, ki, dev, stream);
  } else {
    launch_plan<TILE_M, TILE_N, TILE_K, false>(p, A, B, c, mi, ni, ki, dev, stream);
  }
}

}  // namespace deepgemm_tile
