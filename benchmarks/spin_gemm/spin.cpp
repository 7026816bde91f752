// Benchmark-only: a calibrated amount of extra work after the GEMM. EXTRA_ITERS (a tunable define) adds that
// many dependent multiply-adds, so a build with EXTRA_ITERS > 0 is a known, injected slowdown for
// benchmarks/gate_power.py; VARIANT changes nothing but the build (an A/A twin). No torch header here.
#include "spin.h"

#ifndef EXTRA_ITERS
#define EXTRA_ITERS 0
#endif
#ifndef VARIANT
#define VARIANT 0
#endif

namespace spin_gemm {

volatile float g_sink;  // the burn's result goes here, so the chain cannot be folded away
volatile int g_variant = VARIANT;

void burn() {
  float x = 1.0f;
  for (long i = 0; i < EXTRA_ITERS; ++i) {
    x = x * 0.999999f + 1e-7f;  // each step depends on the last: a fixed cost per iteration
  }
  g_sink = x;
}

}  // namespace spin_gemm
