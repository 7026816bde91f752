// MLA decode body for the CPU, walking the cache the way decode_cuda.cu does. No torch headers here.
#include "decode_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if !defined(BLOCK_H) || !defined(BLOCK_N)
#error "BLOCK_H and BLOCK_N must be defined (opgate passes them from kernel_config.json)"
#endif

namespace flashmla_decode {
namespace {

constexpr int64_t kBlockH = BLOCK_H;
constexpr int64_t kBlockN = BLOCK_N;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// One past the last cache position that query row `row` may see: the mask branch.
int64_t row_end(const MlaDecodeShape& p, int64_t seqlen, int64_t row) {
  if (p.causal) {
    return seqlen - p.s_q + row / p.h_q + 1;
  }
  return seqlen;
}

// Working set of one group of kBlockH query rows (the CTA's shared memory and registers on the GPU).
struct Group {
  explicit Group(const MlaDecodeShape& p)
      : q(kBlockH * p.d), k(kBlockN * p.d), acc(kBlockH * p.dv), m(kBlockH), l(kBlockH), end(kBlockH) {}
  std::vector<float> q;    // [kBlockH][d], pre-scaled by softmax_scale
  std::vector<float> k;    // [kBlockN][d], the tile (V is its first dv dims); zero past the last visible position
  std::vector<float> acc;  // [kBlockH][dv], unnormalised output
  std::vector<float> m, l;  // running max and sum of exp per row
  std::vector<int64_t> end;  // row_end of each row (0 for rows past the last)
};

// Load tile [n0, n0 + kBlockN) through the block table; positions >= kv_end are never read.
void load_tile(Group& g, const uint16_t* kcache, const int32_t* table, const MlaDecodeShape& p, int64_t n0,
               int64_t kv_end) {
  std::fill(g.k.begin(), g.k.end(), 0.0f);
  for (int64_t n = 0; n < kBlockN && n0 + n < kv_end; ++n) {
    const int64_t pos = n0 + n;
    const int64_t page = table[pos / p.block_size];
    const uint16_t* row = kcache + (page * p.block_size + pos % p.block_size) * p.d;
    std::transform(row, row + p.d, g.k.begin() + n * p.d, bf16_to_float);
  }
}

// a . b over d elements, in eight interleaved partial sums (so the loop vectorises without -ffast-math).
float dot(const float* a, const float* b, int64_t d) {
  float part[8] = {};
  int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    for (int i = 0; i < 8; ++i) {
      part[i] += a[c + i] * b[c + i];
    }
  }
  float sum = 0.0f;
  for (; c < d; ++c) {
    sum += a[c] * b[c];
  }
  for (const float x : part) {
    sum += x;
  }
  return sum;
}

// Scores of row j against the tile, masked, then the online-softmax update of its state and accumulator.
void update_row(Group& g, const MlaDecodeShape& p, int64_t j, int64_t n0) {
  float s[kBlockN];
  for (int64_t n = 0; n < kBlockN; ++n) {
    s[n] = dot(g.q.data() + j * p.d, g.k.data() + n * p.d, p.d);
  }
  float tile_max = kNegInf;
  for (int64_t n = 0; n < kBlockN; ++n) {
    if (n0 + n >= g.end[j]) {
      s[n] = kNegInf;
    }
    tile_max = std::max(tile_max, s[n]);
  }
  const float m_new = std::max(g.m[j], tile_max);
  const float m_use = m_new == kNegInf ? 0.0f : m_new;  // a row with nothing visible yet stays at 0
  const float alpha = std::exp(g.m[j] - m_use);
  float sum = 0.0f;
  for (int64_t n = 0; n < kBlockN; ++n) {
    s[n] = std::exp(s[n] - m_use);
    sum += s[n];
  }
  g.m[j] = m_new;
  g.l[j] = g.l[j] * alpha + sum;
  float* acc = g.acc.data() + j * p.dv;
  for (int64_t c = 0; c < p.dv; ++c) {
    acc[c] *= alpha;
  }
  for (int64_t n = 0; n < kBlockN; ++n) {
    const float pn = s[n];
    const float* vn = g.k.data() + n * p.d;
    for (int64_t c = 0; c < p.dv; ++c) {
      acc[c] += pn * vn[c];
    }
  }
}

// Rows [r0, r0 + kBlockH) of sequence b: one pass over its cache, kBlockN positions per tile. Kept out of line,
// so its code does not depend on how many call sites a change adds.
[[gnu::noinline]] void decode_group(Group& g, const uint16_t* q, const uint16_t* kcache, const int32_t* block_table, int64_t seqlen,
                  float* out, float* lse, const MlaDecodeShape& p, int64_t b, int64_t r0) {
  const int64_t rows = p.s_q * p.h_q;
  const int64_t count = std::min(kBlockH, rows - r0);
  std::fill(g.q.begin(), g.q.end(), 0.0f);
  std::fill(g.end.begin(), g.end.end(), 0);
  for (int64_t j = 0; j < count; ++j) {
    g.end[j] = row_end(p, seqlen, r0 + j);
    for (int64_t c = 0; c < p.d; ++c) {
      g.q[j * p.d + c] = bf16_to_float(q[(b * rows + r0 + j) * p.d + c]) * p.softmax_scale;
    }
  }
  const int64_t kv_end = g.end[count - 1];  // row_end grows with the row
  std::fill(g.m.begin(), g.m.end(), kNegInf);
  std::fill(g.l.begin(), g.l.end(), 0.0f);
  std::fill(g.acc.begin(), g.acc.end(), 0.0f);
  const int32_t* table = block_table + b * p.max_blocks_per_seq;
  for (int64_t n0 = 0; n0 < kv_end; n0 += kBlockN) {
    load_tile(g, kcache, table, p, n0, kv_end);
    for (int64_t j = 0; j < count; ++j) {
      update_row(g, p, j, n0);
    }
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t r = r0 + j;
    const float l = g.l[j];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t c = 0; c < p.dv; ++c) {
      out[(b * rows + r) * p.dv + c] = g.acc[j * p.dv + c] * inv;
    }
    lse[(b * p.h_q + r % p.h_q) * p.s_q + r / p.h_q] =
        l > 0.0f ? g.m[j] + std::log(l) : std::numeric_limits<float>::infinity();
  }
}

}  // namespace

void mla_decode_cpu(const uint16_t* q, const uint16_t* kcache, const int32_t* block_table,
                    const int32_t* cache_seqlens, float* out, float* lse, const MlaDecodeShape& shape) {
  Group group(shape);
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t r0 = 0; r0 < shape.s_q * shape.h_q; r0 += kBlockH) {
      decode_group(group, q, kcache, block_table, cache_seqlens[b], out, lse, shape, b, r0);
    }
  }
}

}  // namespace flashmla_decode
