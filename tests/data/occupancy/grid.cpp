// NVIDIA's own occupancy calculator (cuda_occupancy.h, header-only, shipped with the CUDA toolkit) over a grid of
// launches read from stdin, one per line: registers threads static_smem dynamic_smem barriers.
// Prints one line per launch: active_blocks limiting_factors regs_limit smem_limit warps_limit
// blocks_limit barriers_limit allocated_registers allocated_smem (INT_MAX printed as -1).
// Host-only (g++ is enough): nothing runs on a GPU. Arguments: the compute capability (`8 6`) and optionally the
// function's preferred shared-memory carve-out in % (cudaFuncAttributePreferredSharedMemoryCarveout; -1 for none).
// The device is described as cudaGetDeviceProperties reports it, from the CUDA C++ Programming Guide's
// "Technical Specifications per Compute Capability" (this file's own statement of those figures, independent of
// bot/verdict/occupancy.py); tests/test_occupancy.py compares every line with bot/verdict/occupancy.py.
#include <climits>
#include <cstdio>
#include <cstdlib>

#include <cuda_occupancy.h>

static long long shown(int x) { return x == INT_MAX ? -1 : x; }

struct Device {
  int major, minor, threads_per_sm, smem_per_sm_kib, smem_optin_kib, reserved;
};

// compute capability, resident threads per SM, shared memory per SM and per block opted in (KiB), the reserve per
// block (B); every one has 64K registers per SM and per block, 1024 threads and 48 KiB per block by default
static const Device DEVICES[] = {
    {7, 5, 1024, 64, 64, 0},      {8, 0, 2048, 164, 163, 1024}, {8, 6, 1536, 100, 99, 1024},
    {8, 7, 1536, 164, 163, 1024}, {8, 9, 1536, 100, 99, 1024},  {9, 0, 2048, 228, 227, 1024},
    {10, 0, 2048, 228, 227, 1024}, {10, 3, 2048, 228, 227, 1024}, {12, 0, 1536, 100, 99, 1024},
};

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: grid MAJOR MINOR [CARVEOUT_PCT] < cells\n");
    return 2;
  }
  const int major = std::atoi(argv[1]), minor = std::atoi(argv[2]);
  const Device* d = nullptr;
  for (const Device& candidate : DEVICES) {
    if (candidate.major == major && candidate.minor == minor) d = &candidate;
  }
  if (d == nullptr) {
    std::fprintf(stderr, "no device of compute capability %d.%d\n", major, minor);
    return 2;
  }
  cudaOccDeviceProp prop;
  prop.computeMajor = major;
  prop.computeMinor = minor;
  prop.maxThreadsPerBlock = 1024;
  prop.maxThreadsPerMultiprocessor = d->threads_per_sm;
  prop.regsPerBlock = 65536;
  prop.regsPerMultiprocessor = 65536;
  prop.warpSize = 32;
  prop.sharedMemPerBlock = 49152;
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(d->smem_per_sm_kib) * 1024;
  prop.numSms = 1;  // must be positive; no per-SM figure depends on it
  prop.sharedMemPerBlockOptin = static_cast<size_t>(d->smem_optin_kib) * 1024;
  prop.reservedSharedMemPerBlock = d->reserved;
  cudaOccDeviceState state;  // default cache preference
  if (argc > 3) state.carveoutConfig = std::atoi(argv[3]);

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
