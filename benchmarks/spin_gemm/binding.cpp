// Benchmark-only variant of deepgemm_tile: the same GEMM, then spin_gemm::burn() (spin.cpp), whose amount of
// extra work is a tunable. The binding itself depends on no tunable, so it is compiled once. Never gated.
#include <torch/extension.h>

#include "gemm_cpu.h"
#include "spin.h"

torch::Tensor gemm(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a32 = a.to(torch::kFloat).contiguous();
  const auto b32 = b.to(torch::kFloat).contiguous();
  auto c = torch::empty({a.size(0), b.size(1)}, a32.options());
  deepgemm_tile::gemm_f32(a32.data_ptr<float>(), b32.data_ptr<float>(), c.data_ptr<float>(), a.size(0), b.size(1),
                          a.size(1));
  spin_gemm::burn();
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm); }
