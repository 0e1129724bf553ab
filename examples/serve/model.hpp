// The serving demo's model: a small decoder-only transformer with random weights (token
// embedding, pre-norm layers of grouped-query attention with rotary positions and a SwiGLU
// MLP, a final norm, a projection to the vocabulary, greedy sampling), run on the CPU.
//
// Attention goes through rungs' paged-attention host reference (rungs/attention/reference.hpp):
// this step's keys and values are written into the paged KV pools by slot mapping, then every
// new token attends to its sequence's cached context through its block table, exactly the
// contract of the CUDA kernels (kernels/rungs/attention/). The forward reads nothing but the
// engine's staged batch (rungs::engine::batch_view), so it runs the same whether the engine
// replays a padded bucket or runs the live batch eagerly.
//
// Every per-row computation (matrix products, norms, attention) is a fixed sequence of
// floating-point operations that depends only on that row's inputs, never on which other rows
// share the batch or how many padded rows follow. So the tokens a sequence gets are the same
// whether it was batched, padded, chunked, preempted and recomputed, or served alone: the
// serving tests compare the engine's tokens with a plain loop (plain_generate) bit for bit.
#pragma once

#include <rungs/attention/layout.hpp>
#include <rungs/attention/reference.hpp>
#include <rungs/engine/backend.hpp>
#include <rungs/engine/batch.hpp>
#include <rungs/engine/model.hpp>
#include <rungs/kv/types.hpp>
#include <rungs/numeric/float16.hpp>
#include <rungs/numeric/float8.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace demo {

using rungs::kv::token_id;

/// The host model's attention: 4 query heads sharing 2 KV heads of 32 dimensions, 2 layers,
/// 16-token KV blocks, fp32 cache. Small enough that the default run takes seconds on 2 cores.
inline constexpr rungs::engine::model_shape tiny_model{.dtype = rungs::dtype::fp32, .num_qo_heads = 4,
                                                       .num_kv_heads = 2, .head_dim = 32, .block_size = 16,
                                                       .num_layers = 2};

/// What the engine's model_shape does not say: vocabulary, MLP width, RoPE base, seed.
struct model_config {
  std::int32_t vocab = 512;
  std::int32_t ffn = 256;         ///< SwiGLU hidden width
  double rope_theta = 10000.0;
  float norm_eps = 1e-5f;
  std::uint64_t seed = 1;         ///< weights are a function of the seed alone
  /// The KV cache's element type (--kv-cache-dtype). The host model keeps f32 pools and rounds
  /// each new key and value to this type before the cache write (fp8: saturating, scale 1), so
  /// its attention reads exactly what a cache of this type holds.
  rungs::dtype kv_cache = rungs::dtype::fp32;
};

/// splitmix64: a tiny, portable generator (std::*_distribution differ between standard
/// libraries; the demo's weights and prompts must not).
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  double symmetric() { return static_cast<double>(next() >> 11) * 0x1p-52 - 1.0; }
  /// Uniform integer in [lo, hi).
  std::int32_t between(std::int32_t lo, std::int32_t hi) {
    return lo + static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(hi - lo));
  }
};

/// Tensor sizes of a decoder with `Shape`'s attention and `c`'s vocabulary and MLP: what
/// both the host and the CUDA model allocate, and what the memory plan charges for weights.
template <rungs::engine::model_shape Shape>
struct decoder_dims {
  static constexpr std::int64_t hidden = std::int64_t{Shape.num_qo_heads} * Shape.head_dim;
  static constexpr std::int64_t q_cols = hidden;
  static constexpr std::int64_t kv_cols = std::int64_t{Shape.num_kv_heads} * Shape.head_dim;
  static constexpr std::int64_t qkv_cols = q_cols + 2 * kv_cols;

  static std::int64_t layer_params(const model_config& c) {
    // norms, fused QKV, output projection, SwiGLU gate+up (fused), down
    return 2 * hidden + hidden * qkv_cols + hidden * hidden + hidden * 2 * c.ffn + std::int64_t{c.ffn} * hidden;
  }
  static std::int64_t params(const model_config& c) {
    return 2 * std::int64_t{c.vocab} * hidden + hidden + Shape.num_layers * layer_params(c);
  }
};

/// The paged KV cache: per layer, a K and a V pool of [num_blocks][kv_heads][block_size][head]
/// floats (rungs' attention layout), indexed by the block ids of a rungs::kv allocator.
template <rungs::engine::model_shape Shape>
class kv_pools {
 public:
  explicit kv_pools(std::int64_t num_blocks)
      : shape_{rungs::attention::attention_shape::of(Shape, num_blocks)},
        k_(static_cast<std::size_t>(Shape.num_layers)),
        v_(static_cast<std::size_t>(Shape.num_layers)) {
    if (num_blocks <= 0) throw std::invalid_argument("kv_pools: num_blocks must be positive");
    for (int l = 0; l < Shape.num_layers; ++l) {
      k_[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(shape_.pool_elements()), 0.0f);
      v_[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(shape_.pool_elements()), 0.0f);
    }
  }

  const rungs::attention::attention_shape& shape() const { return shape_; }
  std::span<float> k(int layer) { return k_[static_cast<std::size_t>(layer)]; }
  std::span<float> v(int layer) { return v_[static_cast<std::size_t>(layer)]; }

  /// Copy-on-write: block `src`'s keys and values, every layer, into block `dst`.
  void copy_block(rungs::kv::block_id src, rungs::kv::block_id dst) {
    const std::int64_t n = std::int64_t{Shape.num_kv_heads} * Shape.block_size * Shape.head_dim;
    for (int l = 0; l < Shape.num_layers; ++l)
      for (auto* pool : {&k_[static_cast<std::size_t>(l)], &v_[static_cast<std::size_t>(l)]})
        std::copy_n(pool->begin() + src * n, n, pool->begin() + dst * n);
  }

 private:
  rungs::attention::attention_shape shape_;
  std::vector<std::vector<float>> k_, v_;
};

/// A hybrid model's layers (--layers with a pattern, gpt-oss style): per layer, its sliding
/// window in keys (0: full attention) and the attention group whose blocks hold its KV. Group 0
/// is the staged batch's table and slots; another group's layers read that group's tables
/// (host_step::groups) and write at the slots those tables give. Without groups (the plain
/// reference loop, a capture's warm-up on padding) every layer uses the staged table, with its
/// window.
struct layer_attention {
  std::vector<int> window;  ///< [layer]
  std::vector<int> group;   ///< [layer]
};

template <rungs::engine::model_shape Shape>
class host_decoder {
  static_assert(Shape.dtype == rungs::dtype::fp32, "the host decoder keeps its KV cache in f32");
  static_assert(Shape.head_dim % 2 == 0, "rotary embeddings rotate pairs of dimensions");
  using dims = decoder_dims<Shape>;

 public:
  static constexpr rungs::engine::model_shape shape = Shape;
  static constexpr std::int64_t hidden = dims::hidden;

  explicit host_decoder(model_config c) : c_(c) {
    if (c_.vocab < 2) throw std::invalid_argument("model: vocab = " + std::to_string(c_.vocab) + " must be at least 2");
    if (c_.ffn < 1) throw std::invalid_argument("model: ffn = " + std::to_string(c_.ffn) + " must be positive");
    splitmix64 rng{c_.seed};
    // Uniform weights with variance 1 / fan_in (embeddings: variance 1), norms at 1.
    auto fill = [&](std::vector<float>& w, std::int64_t n, std::int64_t fan_in) {
      const double a = std::sqrt(3.0 / static_cast<double>(fan_in));
      w.resize(static_cast<std::size_t>(n));
      for (float& x : w) x = static_cast<float>(a * rng.symmetric());
    };
    fill(embed_, std::int64_t{c_.vocab} * hidden, 1);
    layers_.resize(static_cast<std::size_t>(Shape.num_layers));
    for (layer& l : layers_) {
      l.attn_norm.assign(static_cast<std::size_t>(hidden), 1.0f);
      l.mlp_norm.assign(static_cast<std::size_t>(hidden), 1.0f);
      fill(l.wqkv, hidden * dims::qkv_cols, hidden);
      fill(l.wo, hidden * hidden, hidden);
      fill(l.w_gate_up, hidden * 2 * c_.ffn, hidden);
      fill(l.w_down, std::int64_t{c_.ffn} * hidden, c_.ffn);
    }
    final_norm_.assign(static_cast<std::size_t>(hidden), 1.0f);
    fill(lm_head_, hidden * c_.vocab, hidden);
    // Rotary tables: angle(p, i) = p * theta^(-2i/D), computed per position on demand.
    inv_freq_.resize(static_cast<std::size_t>(Shape.head_dim / 2));
    for (std::size_t i = 0; i < inv_freq_.size(); ++i)
      inv_freq_[i] = std::pow(c_.rope_theta, -2.0 * static_cast<double>(i) / Shape.head_dim);
  }

  const model_config& config() const { return c_; }
  std::int64_t weight_bytes() const { return dims::params(c_) * static_cast<std::int64_t>(sizeof(float)); }

  /// Workspace bytes of a step with `tokens` token rows (activations live there, like the
  /// CUDA model's; the engine sizes it once for its largest bucket).
  std::int64_t workspace_bytes(std::int64_t /*seqs*/, std::int64_t tokens) const {
    const std::int64_t floats = tokens * (3 * hidden + dims::qkv_cols + 2 * std::int64_t{c_.ffn});
    return floats * static_cast<std::int64_t>(sizeof(float));
  }

  /// One step over a staged batch: writes this step's K and V into `kv` at the batch's slots
  /// (slot -1: a padded token, nothing written) and the final hidden state of each sequence's
  /// last new token into its row of `out` ([batch.seqs][hidden]; a padded sequence gets zeros).
  /// A hybrid model passes `layers` (and, from the engine, `groups`).
  void forward(const rungs::engine::batch_view& b, kv_pools<Shape>& kv, std::span<float> out,
               std::span<std::byte> workspace, const layer_attention* layers = nullptr,
               const rungs::engine::group_tables& groups = {}) const {
    namespace ref = rungs::attention::reference;
    const std::int64_t T = b.tokens, S = b.seqs, H = hidden, F = c_.ffn;
    if (static_cast<std::int64_t>(workspace.size()) < workspace_bytes(S, T))
      throw std::invalid_argument("model: the workspace holds " + std::to_string(workspace.size()) + " bytes; " +
                                  std::to_string(T) + " tokens need " + std::to_string(workspace_bytes(S, T)));
    if (static_cast<std::int64_t>(out.size()) < S * H) throw std::invalid_argument("model: output rows too small");
    float* x = reinterpret_cast<float*>(workspace.data());  // residual stream [T][H]
    float* h = x + T * H;                                   // normed input [T][H]
    float* attn = h + T * H;                                // attention output [T][H]
    float* qkv = attn + T * H;                              // [T][qkv_cols]
    float* mlp = qkv + T * dims::qkv_cols;                  // [T][2F]

    for (std::int64_t t = 0; t < T; ++t) {
      const token_id id = b.token_ids[t];
      if (id < 0 || id >= c_.vocab)
        throw std::invalid_argument("model: token " + std::to_string(id) + " is outside the vocabulary");
      std::copy_n(embed_.data() + std::int64_t{id} * H, H, x + t * H);
    }
    const std::span<const std::int32_t> q_indptr(b.query_start, static_cast<std::size_t>(S + 1));
    const std::span<const std::int32_t> kv_lens(b.seq_lens, static_cast<std::size_t>(S));
    const ref::block_table_view tables{{b.block_tables, static_cast<std::size_t>(S * b.width)}, b.width};
    const auto rows = [](float* p, std::int64_t n) { return std::span<float>(p, static_cast<std::size_t>(n)); };
    const auto crows = [](const float* p, std::int64_t n) { return std::span<const float>(p, static_cast<std::size_t>(n)); };
    std::vector<std::int64_t> group_slots;  // a hybrid layer's group: its slots and table
    std::vector<std::int32_t> group_table;

    for (int li = 0; li < Shape.num_layers; ++li) {
      const layer& l = layers_[static_cast<std::size_t>(li)];
      rms_norm(x, T, l.attn_norm.data(), h);
      matmul(h, T, H, l.wqkv.data(), dims::qkv_cols, qkv, false);
      for (std::int64_t t = 0; t < T; ++t) {
        float* row = qkv + t * dims::qkv_cols;
        rope(row, Shape.num_qo_heads, b.positions[t]);                // queries
        rope(row + dims::q_cols, Shape.num_kv_heads, b.positions[t]);  // keys
      }
      // K and V of this step's tokens into the paged pools, then attention over the context.
      if (c_.kv_cache != rungs::dtype::fp32)
        for (std::int64_t t = 0; t < T; ++t) {
          float* kv_cols = qkv + t * dims::qkv_cols + dims::q_cols;
          for (std::int64_t j = 0; j < 2 * dims::kv_cols; ++j) kv_cols[j] = in_cache_type(kv_cols[j]);
        }
      const std::int64_t strided = (T - 1) * dims::qkv_cols + dims::kv_cols;
      const int group = layers && groups.groups > 0 ? layers->group[static_cast<std::size_t>(li)] : 0;
      if (group != 0) group_view(b, groups, group, group_slots, group_table);
      ref::cache_write<float>(kv.shape(), kv.k(li), kv.v(li), crows(qkv + dims::q_cols, strided),
                              crows(qkv + dims::q_cols + dims::kv_cols, strided),
                              group != 0 ? std::span<const std::int64_t>(group_slots)
                                         : std::span<const std::int64_t>(b.slot_mapping, static_cast<std::size_t>(T)),
                              dims::qkv_cols, dims::qkv_cols);
      for (std::int64_t t = 0; t < T; ++t) std::copy_n(qkv + t * dims::qkv_cols, H, h + t * H);  // dense queries
      std::fill(attn, attn + T * H, 0.0f);  // prefill writes the rows of real tokens only
      const ref::score_options window{.values = {.window = layers ? layers->window[static_cast<std::size_t>(li)] : 0}};
      ref::prefill<float, float, float>(kv.shape(), kv.k(li), kv.v(li), crows(h, T * H), q_indptr, kv_lens,
                                        group != 0 ? ref::block_table_view{group_table, b.width} : tables, 0.0,
                                        rows(attn, T * H), window);
      matmul(attn, T, H, l.wo.data(), H, x, true);
      rms_norm(x, T, l.mlp_norm.data(), h);
      matmul(h, T, H, l.w_gate_up.data(), 2 * F, mlp, false);
      for (std::int64_t t = 0; t < T; ++t) {
        float* g = mlp + t * 2 * F;
        for (std::int64_t j = 0; j < F; ++j) g[j] = g[j] / (1.0f + std::exp(-g[j])) * g[F + j];
      }
      matmul_strided(mlp, T, F, 2 * F, l.w_down.data(), H, x);
    }
    // One row per sequence: the final hidden state of its last new token.
    for (std::int64_t s = 0; s < S; ++s) {
      float* row = out.data() + s * H;
      const std::int32_t last = b.query_start[s + 1] - 1;
      if (b.seq_lens[s] <= 0 || last < b.query_start[s]) {
        std::fill(row, row + H, 0.0f);
        continue;
      }
      rms_norm(x + std::int64_t{last} * H, 1, final_norm_.data(), row);
    }
  }

  /// Greedy sampling: the vocabulary entry with the largest logit (the first on a tie).
  token_id sample(std::span<const float> row) const {
    if (static_cast<std::int64_t>(row.size()) < hidden) throw std::invalid_argument("model: a sampled row is too short");
    std::vector<float> logits(static_cast<std::size_t>(c_.vocab));
    matmul(row.data(), 1, hidden, lm_head_.data(), c_.vocab, logits.data(), false);
    return static_cast<token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }

 private:
  struct layer {
    std::vector<float> attn_norm, mlp_norm, wqkv, wo, w_gate_up, w_down;
  };

  // y[r] (+)= x[r] . w for r < rows; x is [rows][k], w is [k][n]. Each output element is
  // summed over k in order into a scratch row, then stored or added once: the same operations
  // for a row whatever the other rows are (batch-invariant by construction).
  static void matmul(const float* x, std::int64_t rows, std::int64_t k, const float* w, std::int64_t n, float* y,
                     bool accumulate) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<std::size_t>(n));
    float* acc = scratch.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      std::fill(acc, acc + n, 0.0f);
      const float* xr = x + r * k;
      for (std::int64_t i = 0; i < k; ++i) {
        const float a = xr[i];
        const float* wi = w + i * n;
        for (std::int64_t j = 0; j < n; ++j) acc[j] += a * wi[j];
      }
      float* yr = y + r * n;
      if (accumulate)
        for (std::int64_t j = 0; j < n; ++j) yr[j] += acc[j];
      else
        std::copy_n(acc, n, yr);
    }
  }
  // y[r] += x[r][0..k) . w, rows of x `stride` apart (the SwiGLU product's first half).
  static void matmul_strided(const float* x, std::int64_t rows, std::int64_t k, std::int64_t stride, const float* w,
                             std::int64_t n, float* y) {
    for (std::int64_t r = 0; r < rows; ++r) matmul(x + r * stride, 1, k, w, n, y + r * n, true);
  }

  void rms_norm(const float* x, std::int64_t rows, const float* g, float* y) const {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * hidden;
      double ss = 0;
      for (std::int64_t i = 0; i < hidden; ++i) ss += double{xr[i]} * xr[i];
      const auto scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(hidden) + c_.norm_eps));
      for (std::int64_t i = 0; i < hidden; ++i) y[r * hidden + i] = xr[i] * scale * g[i];
    }
  }

  // Group g's slots and [seqs][width] table for the staged batch: a real row's table from
  // `groups` (entries that left the window read as block 0, as the staging writes them), each
  // real token's slot from its position; padding keeps slot -1 and block 0.
  static void group_view(const rungs::engine::batch_view& b, const rungs::engine::group_tables& groups, int g,
                         std::vector<std::int64_t>& slots, std::vector<std::int32_t>& table) {
    const std::int64_t bs = Shape.block_size;
    slots.assign(b.slot_mapping, b.slot_mapping + b.tokens);
    table.assign(static_cast<std::size_t>(b.seqs * b.width), 0);
    for (std::int64_t s = 0; s < std::min(b.seqs, groups.rows); ++s) {
      if (b.seq_lens[s] <= 0) continue;
      const std::span<const std::int32_t> t = groups.table(g, s);
      for (std::int64_t k = 0; k < std::min<std::int64_t>(b.width, static_cast<std::int64_t>(t.size())); ++k)
        table[static_cast<std::size_t>(s * b.width + k)] = std::max(t[static_cast<std::size_t>(k)], 0);
      for (std::int32_t i = b.query_start[s]; i < b.query_start[s + 1]; ++i)
        if (slots[static_cast<std::size_t>(i)] >= 0) {
          const std::int64_t p = b.positions[i];
          slots[static_cast<std::size_t>(i)] = std::int64_t{t[static_cast<std::size_t>(p / bs)]} * bs + p % bs;
        }
    }
  }

  // x as the KV cache stores it.
  float in_cache_type(float x) const {
    switch (c_.kv_cache) {
      case rungs::dtype::fp16: return static_cast<float>(rungs::f16(x));
      case rungs::dtype::bf16: return static_cast<float>(rungs::bf16(x));
      case rungs::dtype::fp8_e4m3: return static_cast<float>(rungs::e4m3(x));
      case rungs::dtype::fp8_e5m2: return static_cast<float>(rungs::e5m2(x));
      default: return x;
    }
  }

  // Rotates pairs (i, i + D/2) of each of `heads` heads by position * inv_freq[i].
  void rope(float* row, int heads, std::int32_t position) const {
    const int half = Shape.head_dim / 2;
    for (int i = 0; i < half; ++i) {
      const double angle = position * inv_freq_[static_cast<std::size_t>(i)];
      const auto c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
      for (int hd = 0; hd < heads; ++hd) {
        float* p = row + std::int64_t{hd} * Shape.head_dim;
        const float a = p[i], bb = p[i + half];
        p[i] = a * c - bb * s;
        p[i + half] = a * s + bb * c;
      }
    }
  }

  model_config c_;
  std::vector<float> embed_, final_norm_, lm_head_;
  std::vector<layer> layers_;
  std::vector<double> inv_freq_;
};

}  // namespace demo
