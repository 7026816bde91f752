// Thin torch binding for the CUDA kernels; the arithmetic lives in attention_cuda.cu.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <tuple>

#include "attention_cuda.h"

std::tuple<torch::Tensor, torch::Tensor> attention_splitk(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v) {
  using v41_attention::kHeadDim;
  using v41_attention::kSplitK;
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "expects q, k, v of shape [batch, heads, seq, 128]");
  TORCH_CHECK(q.size(3) == kHeadDim, "head_dim must be ", kHeadDim, ", got ", q.size(3));
  TORCH_CHECK(k.sizes() == v.sizes(), "k and v differ in shape: ", k.sizes(), " vs ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "q ", q.sizes(), " does not match k ", k.sizes());
  TORCH_CHECK(q.size(2) <= k.size(2), "q_len ", q.size(2), " exceeds kv_len ", k.size(2));
  TORCH_CHECK(q.scalar_type() == torch::kBFloat16 && k.scalar_type() == torch::kBFloat16 &&
                  v.scalar_type() == torch::kBFloat16,
              "q, k and v must be bfloat16");
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(),
              "q, k and v must be on one CUDA device");
  const int64_t bh = q.size(0) * q.size(1), sq = q.size(2), skv = k.size(2);
  TORCH_CHECK(bh <= 65535 && bh * skv * kHeadDim < (int64_t{1} << 31), "batch * heads * kv_len * 128 must be < 2^31");

  const c10::cuda::CUDAGuard guard(q.device());
  const auto qc = q.contiguous();
  const auto kc = k.contiguous();
  const auto vc = v.contiguous();
  const auto f32 = q.options().dtype(torch::kFloat);
  auto out = torch::empty({q.size(0), q.size(1), sq, kHeadDim}, f32);
  auto lse = torch::empty({q.size(0), q.size(1), sq}, f32);
  auto o_part = torch::empty({kSplitK, bh, sq, kHeadDim}, f32);
  auto m_part = torch::empty({kSplitK, bh, sq}, f32);
  auto l_part = torch::empty({kSplitK, bh, sq}, f32);
  const auto as_bf16 = [](const torch::Tensor& t) {
    return reinterpret_cast<const __nv_bfloat16*>(t.data_ptr<at::BFloat16>());
  };
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  cudaError_t err = v41_attention::launch_splitk_partial(as_bf16(qc), as_bf16(kc), as_bf16(vc), o_part.data_ptr<float>(),
                                                         m_part.data_ptr<float>(), l_part.data_ptr<float>(),
                                                         static_cast<int>(bh), static_cast<int>(sq),
                                                         static_cast<int>(skv), stream);
  TORCH_CHECK(err == cudaSuccess, "splitk_partial_kernel: ", cudaGetErrorString(err));
  err = v41_attention::launch_splitk_merge(o_part.data_ptr<float>(), m_part.data_ptr<float>(), l_part.data_ptr<float>(),
                                           out.data_ptr<float>(), lse.data_ptr<float>(), static_cast<int>(bh),
                                           static_cast<int>(sq), stream);
  TORCH_CHECK(err == cudaSuccess, "splitk_merge_kernel: ", cudaGetErrorString(err));
  return {out, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attention_splitk", &attention_splitk,
        "(out fp32, lse fp32) of causal split-K attention (split_k, block_n from splitk_config.json)");
}
