// The torch baselines the GPU benchmark (benchmarks/kernels_vs_torch.py) times through opgate's judge, exactly
// like a kernel under review: the same build, worker and clock. Benchmark-only; never gated.
#include <torch/extension.h>

#include <optional>

// torch.matmul of bf16 operands (cuBLAS): bf16 C, fp32 accumulation.
torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b); }

// F.scaled_dot_product_attention(q, k, v, is_causal=True): whichever backend torch picks for bf16, d = 128.
// Its causal mask is aligned top-left: the kernel's function only where q_len == kv_len (every cuda case).
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/std::nullopt, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("matmul", &matmul, "torch.matmul(a, b)");
  m.def("sdpa", &sdpa, "F.scaled_dot_product_attention(q, k, v, is_causal=True)");
}
