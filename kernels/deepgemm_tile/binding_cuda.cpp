// Thin torch binding for the CUDA kernel; the arithmetic lives in gemm_cuda.cu.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <limits>

#include "gemm_cuda.h"

torch::Tensor gemm(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "gemm expects 2-D operands");
  TORCH_CHECK(a.size(1) == b.size(0), "gemm: inner dimensions differ: ", a.size(1), " vs ", b.size(0));
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "the CUDA kernel takes CUDA tensors");
  TORCH_CHECK(a.device() == b.device(), "gemm: operands on different devices: ", a.device(), " vs ", b.device());
  TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
              "gemm expects bfloat16 operands, got ", a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "gemm expects contiguous (row-major) operands");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(m <= kMax && n <= kMax && k <= kMax, "gemm: each of m, n, k must be below 2^31");

  const c10::cuda::CUDAGuard guard(a.device());
  auto c = torch::empty({m, n}, a.options().dtype(torch::kFloat));
  deepgemm_tile::launch_gemm_bf16(a.data_ptr(), b.data_ptr(), c.data_ptr<float>(), m, n, k,
                                  at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gemm", &gemm, "C = A @ B, bf16 in, fp32 out and accumulation (tile from tile_config.json)");
}
