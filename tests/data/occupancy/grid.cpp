// NVIDIA's own occupancy calculator (cuda_occupancy.h, header-only, shipped with nvcc) over a grid of
// launches read from stdin, one per line: registers threads static_smem dynamic_smem barriers.
// Prints one line per launch: active_blocks limiting_factors regs_limit smem_limit warps_limit
// blocks_limit barriers_limit allocated_registers allocated_smem (INT_MAX printed as -1).
// Host-only: nothing runs on a GPU. The device is an H100/H200 (sm_90) as cudaGetDeviceProperties
// reports it, or with arguments `10 0` a B200 (sm_100: the same per-SM limits, 148 SMs);
// tests/test_occupancy.py compares every line with bot/verdict/occupancy.py.
#include <climits>
#include <cstdio>
#include <cstdlib>

#include <cuda_occupancy.h>

static long long shown(int x) { return x == INT_MAX ? -1 : x; }

int main(int argc, char** argv) {
  cudaOccDeviceProp prop;
  prop.computeMajor = argc > 2 ? std::atoi(argv[1]) : 9;
  prop.computeMinor = argc > 2 ? std::atoi(argv[2]) : 0;
  prop.maxThreadsPerBlock = 1024;
  prop.maxThreadsPerMultiprocessor = 2048;
  prop.regsPerBlock = 65536;
  prop.regsPerMultiprocessor = 65536;
  prop.warpSize = 32;
  prop.sharedMemPerBlock = 49152;
  prop.sharedMemPerMultiprocessor = 233472;
  prop.numSms = prop.computeMajor == 10 ? 148 : 132;
  prop.sharedMemPerBlockOptin = 232448;
  prop.reservedSharedMemPerBlock = 1024;
  cudaOccDeviceState state;  // default carveout and cache preference

  int regs, threads, barriers;
  size_t static_smem, dynamic_smem;
  while (std::scanf("%d %d %zu %zu %d", &regs, &threads, &static_smem, &dynamic_smem, &barriers) == 5) {
    cudaOccFuncAttributes attr;
    attr.maxThreadsPerBlock = 1024;
    attr.numRegs = regs;
    attr.sharedSizeBytes = static_smem;
    attr.partitionedGCConfig = PARTITIONED_GC_OFF;
    attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;  // as cudaFuncGetAttributes converts
    attr.maxDynamicSharedSizeBytes = dynamic_smem;   // the launcher opts in to what it launches with
    attr.numBlockBarriers = barriers;
    attr.virtualResourceCount = 0;
    cudaOccResult r;
    const cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, threads, dynamic_smem);
    if (err != CUDA_OCC_SUCCESS) {
      std::printf("error %d\n", static_cast<int>(err));
      continue;
    }
    std::printf("%d %u %lld %lld %lld %lld %lld %d %zu\n", r.activeBlocksPerMultiprocessor, r.limitingFactors,
                shown(r.blockLimitRegs), shown(r.blockLimitSharedMem), shown(r.blockLimitWarps),
                shown(r.blockLimitBlocks), shown(r.blockLimitBarriers), r.allocatedRegistersPerBlock,
                r.allocatedSharedMemPerBlock);
  }
  return 0;
}
