// Thin torch binding for the CPU twin; the arithmetic lives in gemm_cpu.cpp.
#include <torch/extension.h>

#include "gemm_cpu.h"

torch::Tensor gemm(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "gemm expects 2-D operands");
  TORCH_CHECK(a.size(1) == b.size(0), "gemm: inner dimensions differ: ", a.size(1), " vs ", b.size(0));
  TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu(), "the CPU twin takes CPU tensors");
  const auto a32 = a.to(torch::kFloat).contiguous();
  const auto b32 = b.to(torch::kFloat).contiguous();
  auto c = torch::empty({a.size(0), b.size(1)}, a32.options());
  deepgemm_tile::gemm_f32(a32.data_ptr<float>(), b32.data_ptr<float>(), c.data_ptr<float>(),
                          a.size(0), b.size(1), a.size(1));
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gemm", &gemm, "C = A @ B with fp32 accumulation (tile from tile_config.json)");
}
