// Benchmark-only variant of deepgemm_tile: the same GEMM plus a calibrated amount of extra work.
// EXTRA_ITERS (a define) adds that many dependent multiply-adds after the GEMM, so a build with
// EXTRA_ITERS > 0 is a known, injected slowdown for benchmarks/gate_power.py. Never gated.
#include <torch/extension.h>

#include "gemm_cpu.h"

#ifndef EXTRA_ITERS
#define EXTRA_ITERS 0
#endif

namespace {

volatile float g_sink;  // the burn's result goes here, so the chain cannot be folded away

void burn(long iters) {
  float x = 1.0f;
  for (long i = 0; i < iters; ++i) {
    x = x * 0.999999f + 1e-7f;  // each step depends on the last: a fixed cost per iteration
  }
  g_sink = x;
}

}  // namespace

torch::Tensor gemm(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a32 = a.to(torch::kFloat).contiguous();
  const auto b32 = b.to(torch::kFloat).contiguous();
  auto c = torch::empty({a.size(0), b.size(1)}, a32.options());
  deepgemm_tile::gemm_f32(a32.data_ptr<float>(), b32.data_ptr<float>(), c.data_ptr<float>(), a.size(0), b.size(1),
                          a.size(1));
  if (EXTRA_ITERS > 0) {
    burn(EXTRA_ITERS);
  }
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm); }
