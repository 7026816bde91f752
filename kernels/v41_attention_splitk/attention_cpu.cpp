// Split-K attention body for the CPU, structured like the GPU kernels: per-split online-softmax partials
// over BLOCK_N key blocks, then a log-sum-exp merge. No torch headers here.
#include "attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#if !defined(SPLIT_K) || !defined(BLOCK_N)
#error "SPLIT_K and BLOCK_N must be defined (opgate passes them from splitk_config.json)"
#endif

namespace v41_attention {
namespace {

constexpr int kRowTile = 16;  // query rows sharing one pass over a K/V block (cache blocking only)
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kScale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));

// One split's view of one query row: running max, running sum, and output (normalized at the end).
struct Partial {
  float m;            // running max of the scaled scores
  float l;            // running sum of exp(score - m)
  float o[kHeadDim];  // running sum of exp(score - m) * v, divided by l at the end
};

// q . k with eight interleaved partial sums (a fixed order the compiler can vectorize).
float dot(const float* a, const float* b) {
  float part[8] = {};
  for (int d = 0; d < kHeadDim; d += 8) {
    for (int t = 0; t < 8; ++t) part[t] += a[d + t] * b[d + t];
  }
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// One BLOCK_N block of keys [j0, j1) folded into a row's partial with the online-softmax update.
void online_block(const float* qrow, const float* k, const float* v, int64_t j0, int64_t j1, Partial& p) {
  float s[BLOCK_N];
  float block_max = -kInf;
  for (int64_t j = j0; j < j1; ++j) {
    s[j - j0] = dot(qrow, k + j * kHeadDim) * kScale;
    block_max = std::max(block_max, s[j - j0]);
  }
  const float m_new = std::max(p.m, block_max);
  const float rescale = std::exp(p.m - m_new);  // 0 on the row's first block (p.m = -inf)
  p.l *= rescale;
  for (float& d : p.o) d *= rescale;
  for (int64_t j = j0; j < j1; ++j) {
    const float e = std::exp(s[j - j0] - m_new);
    p.l += e;
    const float* vrow = v + j * kHeadDim;
    for (int d = 0; d < kHeadDim; ++d) p.o[d] += e * vrow[d];
  }
  p.m = m_new;
}

// Partials of `rows` query rows over the keys [begin, end) of one split: one CTA of the partial kernel. Kept out of
// line, so its code does not depend on how many call sites a change adds.
[[gnu::noinline]] void split_partials(const float* q, const float* k, const float* v, int64_t row0, int rows, int64_t q_offset,
                    int64_t begin, int64_t end, Partial* part) {
  for (int r = 0; r < rows; ++r) {
    part[r].m = -kInf;
    part[r].l = 0.0f;
    std::fill_n(part[r].o, kHeadDim, 0.0f);
  }
  for (int64_t j0 = begin; j0 < end; j0 += BLOCK_N) {
    for (int r = 0; r < rows; ++r) {
      const int64_t causal_end = q_offset + row0 + r + 1;  // keys after the query's position are masked
      const int64_t j1 = std::min({j0 + BLOCK_N, end, causal_end});
      if (j1 > j0) online_block(q + (row0 + r) * kHeadDim, k, v, j0, j1, part[r]);
    }
  }
  for (int r = 0; r < rows; ++r) {
    const float inv_l = part[r].l > 0.0f ? 1.0f / part[r].l : 0.0f;  // a split after the query: no keys
    for (float& d : part[r].o) d *= inv_l;
  }
}

// Log-sum-exp merge of one row's SPLIT_K partials: the merge kernel.
void merge_row(const Partial* const* parts, float* out, float* lse) {
  float m = -kInf;
  for (int s = 0; s < SPLIT_K; ++s) m = std::max(m, parts[s]->m);
  float weight[SPLIT_K];
  float total = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) {
    weight[s] = parts[s]->l * std::exp(parts[s]->m - m);
    total += weight[s];
  }
  for (int d = 0; d < kHeadDim; ++d) {
    float acc = 0.0f;
    for (int s = 0; s < SPLIT_K; ++s) acc += weight[s] * parts[s]->o[d];
    out[d] = acc / total;
  }
  *lse = m + std::log(total);
}

}  // namespace

void attention_splitk_f32(const float* q, const float* k, const float* v, float* out, float* lse,
                          int64_t bh, int64_t sq, int64_t skv) {
  const int64_t q_offset = skv - sq;
  const int64_t blocks = (skv + BLOCK_N - 1) / BLOCK_N;
  const int64_t chunk = (blocks + SPLIT_K - 1) / SPLIT_K * BLOCK_N;  // keys per split, whole blocks
  std::vector<Partial> part(static_cast<size_t>(SPLIT_K) * kRowTile);
  for (int64_t h = 0; h < bh; ++h) {
    const float* qh = q + h * sq * kHeadDim;
    const float* kh = k + h * skv * kHeadDim;
    const float* vh = v + h * skv * kHeadDim;
    for (int64_t row0 = 0; row0 < sq; row0 += kRowTile) {
      const int rows = static_cast<int>(std::min<int64_t>(kRowTile, sq - row0));
      for (int s = 0; s < SPLIT_K; ++s) {
        const int64_t begin = std::min(s * chunk, skv);
        const int64_t end = std::min(begin + chunk, skv);
        split_partials(qh, kh, vh, row0, rows, q_offset, begin, end, &part[s * kRowTile]);
      }
      for (int r = 0; r < rows; ++r) {
        const Partial* parts[SPLIT_K];
        for (int s = 0; s < SPLIT_K; ++s) parts[s] = &part[s * kRowTile + r];
        const int64_t row = h * sq + row0 + r;
        merge_row(parts, out + row * kHeadDim, lse + row);
      }
    }
  }
}

}  // namespace v41_attention
