// Thin torch binding for the CPU twin; the arithmetic lives in attention_cpu.cpp.
#include <torch/extension.h>

#include <tuple>

#include "attention_cpu.h"

std::tuple<torch::Tensor, torch::Tensor> attention_splitk(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "expects q, k, v of shape [batch, heads, seq, 128]");
  TORCH_CHECK(q.size(3) == v41_attention::kHeadDim, "head_dim must be ", v41_attention::kHeadDim, ", got ", q.size(3));
  TORCH_CHECK(k.sizes() == v.sizes(), "k and v differ in shape: ", k.sizes(), " vs ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "q ", q.sizes(), " does not match k ", k.sizes());
  TORCH_CHECK(q.size(2) <= k.size(2), "q_len ", q.size(2), " exceeds kv_len ", k.size(2));
  TORCH_CHECK(q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu(), "the CPU twin takes CPU tensors");
  const auto q32 = q.to(torch::kFloat).contiguous();
  const auto k32 = k.to(torch::kFloat).contiguous();
  const auto v32 = v.to(torch::kFloat).contiguous();
  auto out = torch::empty(q.sizes(), q32.options());
  auto lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q32.options());
  v41_attention::attention_splitk_f32(q32.data_ptr<float>(), k32.data_ptr<float>(), v32.data_ptr<float>(),
                                      out.data_ptr<float>(), lse.data_ptr<float>(), q.size(0) * q.size(1),
                                      q.size(2), k.size(2));
  return {out, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attention_splitk", &attention_splitk,
        "(out fp32, lse fp32) of causal split-K attention (split_k, block_n from splitk_config.json)");
}
