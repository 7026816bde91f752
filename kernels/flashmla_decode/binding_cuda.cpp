// Thin torch binding for the CUDA kernel; the arithmetic lives in decode_cuda.cu.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cmath>
#include <tuple>

#include "decode_cuda.h"

std::tuple<torch::Tensor, torch::Tensor> mla_decode(const torch::Tensor& q, const torch::Tensor& kcache,
                                                    const torch::Tensor& block_table,
                                                    const torch::Tensor& cache_seqlens,
                                                    const torch::Tensor& head_dim_v, const torch::Tensor& causal) {
  TORCH_CHECK(q.dim() == 4 && kcache.dim() == 4, "q must be [batch, s_q, h_q, d], kcache [blocks, block_size, 1, d]");
  TORCH_CHECK(q.scalar_type() == torch::kBFloat16 && kcache.scalar_type() == torch::kBFloat16,
              "q and kcache must be bfloat16");
  TORCH_CHECK(kcache.size(2) == 1, "MLA has a single KV head, got ", kcache.size(2));
  TORCH_CHECK(kcache.size(3) == q.size(3), "q and kcache head dims differ: ", q.size(3), " vs ", kcache.size(3));
  TORCH_CHECK(block_table.dim() == 2 && block_table.scalar_type() == torch::kInt32 && block_table.size(0) == q.size(0),
              "block_table must be int32 [batch, max_blocks_per_seq]");
  TORCH_CHECK(cache_seqlens.dim() == 1 && cache_seqlens.scalar_type() == torch::kInt32 &&
                  cache_seqlens.size(0) == q.size(0),
              "cache_seqlens must be int32 [batch]");
  TORCH_CHECK(q.is_cuda() && kcache.device() == q.device() && block_table.device() == q.device() &&
                  cache_seqlens.device() == q.device(),
              "q, kcache, block_table and cache_seqlens must be on one CUDA device");
  const int64_t dv = head_dim_v.item<int64_t>();

  const flashmla_decode::MlaDecodeShape shape{
      q.size(0), q.size(1), q.size(2), q.size(3), dv, kcache.size(1), block_table.size(1),
      causal.item<int64_t>() != 0, static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(3))))};
  const c10::cuda::CUDAGuard guard(q.device());
  const auto qc = q.contiguous();
  const auto kc = kcache.contiguous();
  const auto table = block_table.contiguous();
  const auto seqlens = cache_seqlens.contiguous();
  auto out = torch::empty({q.size(0), q.size(1), q.size(2), dv}, q.options().dtype(torch::kFloat));
  auto lse = torch::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(torch::kFloat));
  const cudaError_t err = flashmla_decode::launch_mla_decode(
      reinterpret_cast<const uint16_t*>(qc.data_ptr<at::BFloat16>()),
      reinterpret_cast<const uint16_t*>(kc.data_ptr<at::BFloat16>()), table.data_ptr<int32_t>(),
      seqlens.data_ptr<int32_t>(), out.data_ptr<float>(), lse.data_ptr<float>(), shape,
      at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "mla_decode: ", cudaGetErrorString(err),
              " (the kernel takes d = 576, dv = 512, batch <= 65535)");
  return {out, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("mla_decode", &mla_decode,
        "(out, lse) of paged MLA decode attention, softmax scale d**-0.5 (tiles from kernel_config.json)");
}
