// Host reference for rungs' paged attention: the three operations of the CUDA kernels
// (cache write, decode, prefill/extend) on the same paged layout (layout.hpp), written to be
// obviously correct rather than fast: one query row at a time, float64 accumulation, a
// two-pass softmax. Element types: rungs::f16, rungs::bf16, float or double, for the cache,
// the queries and (independently) the outputs. Tests compare the kernels with it; an engine's
// host backend can run it as is.
//
// Conventions shared with the kernels:
//  * queries and outputs are [tokens][num_qo_heads][head_dim]; query head h reads KV head
//    h / group_size;
//  * block tables are int32 rows, `stride` entries apart; token p of sequence b is in block
//    tables[b * stride + p / block_size] at position p % block_size;
//  * prefill's causal mask is aligned to the end of the context: query i of a sequence's q_len
//    new tokens sees keys 0 .. kv_len - q_len + i;
//  * a query row that sees no key (a sequence of length 0) produces zeros;
//  * score transforms (score_mod.hpp) come in a score_options: a query at position p sees keys
//    [p - window + 1, p] under a window, a score s becomes c * tanh(s / c) under a cap c, and
//    a sink logit joins the softmax denominator (the max-subtracted form keeps a large sink
//    finite);
//  * an fp8 cache (rungs::e4m3, rungs::e5m2) has dequantisation scales (kv_scales): a cached
//    element x of KV head h stands for x * scale[h] (one scale per head) or x * scale[0] (one
//    per tensor); the cache write stores fp8(float(x) / scale), rounded to nearest even and
//    saturated (float8.hpp), as the kernels' cache write does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <rungs/attention/layout.hpp>
#include <rungs/attention/score_mod.hpp>
#include <rungs/numeric/float16.hpp>

namespace rungs::attention::reference {

/// Int32 block-table rows `stride` entries apart (stride 0: the rows are as long as the span
/// allows for the given batch, see row()).
struct block_table_view {
  std::span<const std::int32_t> ids;
  std::int64_t stride = 0;
};

/// The score transforms of a reference run: a configuration's window and cap, and the sinks
/// (one logit per query head, natural-log units like the scaled scores; empty: none).
struct score_options {
  score_values values{};
  std::span<const float> sinks{};
};

/// Dequantisation scales of an fp8 KV cache, for K and for V: one value (per tensor) or one per
/// KV head, each finite and positive; empty: 1 (the cache holds the values themselves). A
/// 16-bit or wider cache takes none.
struct kv_scales {
  std::span<const float> k{};
  std::span<const float> v{};
};

namespace detail {

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  os << "rungs::attention::reference: ";
  (os << ... << parts);
  throw std::invalid_argument(os.str());
}

inline void check_shape(const attention_shape& s) {
  if (s.num_kv_heads < 1 || s.num_qo_heads < 1 || s.group_size() == 0) {
    fail("num_qo_heads = ", s.num_qo_heads, " must be a positive multiple of num_kv_heads = ", s.num_kv_heads);
  }
  if (s.head_dim < 1 || s.block_size < 1 || s.num_blocks < 1) {
    fail("head_dim, block_size and num_blocks must be positive (", s.head_dim, ", ", s.block_size, ", ",
         s.num_blocks, ")");
  }
}

template <class T>
void check_pool(const attention_shape& s, std::span<T> k_cache, std::span<T> v_cache) {
  if (static_cast<std::int64_t>(k_cache.size()) != s.pool_elements() ||
      static_cast<std::int64_t>(v_cache.size()) != s.pool_elements()) {
    fail("K/V pools hold ", k_cache.size(), "/", v_cache.size(), " elements; the shape needs ", s.pool_elements());
  }
}

// Offset of sequence b's token p in a pool, with every index checked.
inline std::int64_t token_offset(const attention_shape& s, const block_table_view& t, std::int64_t b, int p,
                                 int kv_head) {
  const std::int64_t entry = b * t.stride + p / s.block_size;
  if (p / s.block_size >= t.stride || entry >= static_cast<std::int64_t>(t.ids.size())) {
    fail("sequence ", b, ": token ", p, " needs block-table entry ", p / s.block_size, " beyond the row (stride ",
         t.stride, ", ", t.ids.size(), " ids)");
  }
  const std::int32_t block = t.ids[static_cast<std::size_t>(entry)];
  if (block < 0 || block >= s.num_blocks) {
    fail("sequence ", b, ": block id ", block, " is outside the pool [0, ", s.num_blocks, ")");
  }
  return s.kv_offset(block, kv_head, p % s.block_size);
}

inline void check_options(const attention_shape& s, const score_options& o) {
  if (o.values.window < 0) fail("window = ", o.values.window, " must be 0 (none) or positive");
  if (!(o.values.logit_soft_cap >= 0.0f) || std::isinf(o.values.logit_soft_cap)) {
    fail("logit_soft_cap = ", o.values.logit_soft_cap, " must be finite and non-negative (0: none)");
  }
  if (!o.sinks.empty() && static_cast<std::int64_t>(o.sinks.size()) != s.num_qo_heads) {
    fail("sinks has ", o.sinks.size(), " logits; it needs one per query head (", s.num_qo_heads, ") or none");
  }
  for (std::size_t h = 0; h < o.sinks.size(); ++h) {
    if (std::isnan(o.sinks[h]) || o.sinks[h] == std::numeric_limits<float>::infinity()) {
      fail("sinks[", h, "] = ", o.sinks[h], " must be finite or -inf (no sink)");
    }
  }
}

template <class T>
void check_scales(const attention_shape& s, const kv_scales& scales) {
  for (auto [x, name] : {std::pair{scales.k, "k"}, std::pair{scales.v, "v"}}) {
    if (x.empty()) continue;
    if (!fp8_element<T>) fail(name, "_scale is given for a cache of 16 bits or more (scales apply to fp8 caches only)");
    if (x.size() != 1 && static_cast<std::int64_t>(x.size()) != s.num_kv_heads) {
      fail(name, "_scale has ", x.size(), " values; it needs 1 (per tensor) or num_kv_heads = ", s.num_kv_heads,
           " (per head)");
    }
    for (std::size_t h = 0; h < x.size(); ++h) {
      if (!(x[h] > 0.0f) || std::isinf(x[h])) fail(name, "_scale[", h, "] = ", x[h], " must be finite and positive");
    }
  }
}

// The scale of KV head h (1 when there are none).
inline double scale_of(std::span<const float> scale, int kv_head) {
  if (scale.empty()) return 1.0;
  return scale[scale.size() == 1 ? 0 : static_cast<std::size_t>(kv_head)];
}

// The first key a query at position `visible - 1` sees under the options' window.
inline int first_visible(const score_options& o, int visible) {
  return o.values.window > 0 ? std::max(0, visible - o.values.window) : 0;
}

// One query row of head h against keys [first, visible) of sequence b: the softmax of the
// (capped) scores, with head h's sink in the denominator, times v, in double.
template <class T, class Q>
void attend_row(const attention_shape& s, std::span<const T> k_cache, std::span<const T> v_cache,
                const block_table_view& tables, std::int64_t b, int h, int visible, const Q* q, double scale,
                const score_options& opt, const kv_scales& kv, std::vector<double>& scores, double* out) {
  const int d = s.head_dim;
  const int kv_head = h / s.group_size();
  const double k_scale = scale_of(kv.k, kv_head), v_scale = scale_of(kv.v, kv_head);
  const int first = first_visible(opt, visible);
  std::fill(out, out + d, 0.0);
  if (visible <= first) return;
  const double cap = opt.values.logit_soft_cap;
  const double sink = opt.sinks.empty() ? -std::numeric_limits<double>::infinity() : opt.sinks[static_cast<std::size_t>(h)];
  scores.assign(static_cast<std::size_t>(visible - first), 0.0);
  double max_score = sink;
  for (int p = first; p < visible; ++p) {
    const T* k = k_cache.data() + token_offset(s, tables, b, p, kv_head);
    double dot = 0.0;
    for (int i = 0; i < d; ++i) dot += to_double(q[i]) * (to_double(k[i]) * k_scale);
    double& x = scores[static_cast<std::size_t>(p - first)];
    x = dot * scale;
    if (cap > 0.0) x = cap * std::tanh(x / cap);
    max_score = std::max(max_score, x);
  }
  double sum = std::exp(sink - max_score);  // 0 without a sink
  for (double& x : scores) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (int p = first; p < visible; ++p) {
    const T* v = v_cache.data() + token_offset(s, tables, b, p, kv_head);
    const double w = scores[static_cast<std::size_t>(p - first)] / sum;
    for (int i = 0; i < d; ++i) out[i] += w * (to_double(v[i]) * v_scale);
  }
}

inline double default_scale(const attention_shape& s, double sm_scale) {
  return sm_scale != 0.0 ? sm_scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
}

}  // namespace detail

/// Writes token t's keys and values (row t of k and v, each num_kv_heads x head_dim elements,
/// rows k_stride / v_stride elements apart; 0: dense) into slot slot_mapping[t] of the pools.
/// A negative slot (-1: a padded row) writes nothing; a slot beyond the pool throws. An fp8
/// cache C quantises rows of another type T: fp8(float(x) / scale of the head) (kv_scales).
template <storage_element C, storage_element T = C>
void cache_write(const attention_shape& s, std::span<C> k_cache, std::span<C> v_cache,
                 std::span<const std::type_identity_t<T>> k, std::span<const std::type_identity_t<T>> v,
                 std::span<const std::int64_t> slot_mapping, std::int64_t k_stride = 0, std::int64_t v_stride = 0,
                 const kv_scales& scales = {}) {
  static_assert(std::is_same_v<C, T> || fp8_element<C>, "only an fp8 cache converts the rows it is given");
  detail::check_shape(s);
  detail::check_pool(s, k_cache, v_cache);
  detail::check_scales<C>(s, scales);
  const std::int64_t row = s.kv_row_elements();
  if (k_stride == 0) k_stride = row;
  if (v_stride == 0) v_stride = row;
  const auto tokens = static_cast<std::int64_t>(slot_mapping.size());
  auto need = [&](std::span<const T> x, std::int64_t stride, const char* name) {
    if (tokens > 0 && static_cast<std::int64_t>(x.size()) < (tokens - 1) * stride + row) {
      detail::fail(name, " holds ", x.size(), " elements; ", tokens, " rows of stride ", stride, " need ",
                   (tokens - 1) * stride + row);
    }
  };
  need(k, k_stride, "k");
  need(v, v_stride, "v");
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t slot = slot_mapping[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    if (slot >= s.num_slots()) detail::fail("token ", t, ": slot ", slot, " is outside the pool [0, ", s.num_slots(), ")");
    for (int h = 0; h < s.num_kv_heads; ++h) {
      const std::int64_t dst = s.slot_offset(slot, h);
      const std::int64_t src_k = t * k_stride + static_cast<std::int64_t>(h) * s.head_dim;
      const std::int64_t src_v = t * v_stride + static_cast<std::int64_t>(h) * s.head_dim;
      if constexpr (fp8_element<C>) {
        // In float, as the kernel divides (div.rn.f32) before its cvt.rn.satfinite.
        const auto k_scale = static_cast<float>(detail::scale_of(scales.k, h));
        const auto v_scale = static_cast<float>(detail::scale_of(scales.v, h));
        for (int i = 0; i < s.head_dim; ++i) {
          k_cache[static_cast<std::size_t>(dst + i)] = C(static_cast<float>(to_double(k[static_cast<std::size_t>(src_k + i)])) / k_scale);
          v_cache[static_cast<std::size_t>(dst + i)] = C(static_cast<float>(to_double(v[static_cast<std::size_t>(src_v + i)])) / v_scale);
        }
      } else {
        std::copy_n(k.begin() + src_k, s.head_dim, k_cache.begin() + dst);
        std::copy_n(v.begin() + src_v, s.head_dim, v_cache.begin() + dst);
      }
    }
  }
}

/// Prefill/extend: sequence b's new tokens are query rows q_indptr[b] .. q_indptr[b+1] of q
/// ([tokens][num_qo_heads][head_dim]); its context (cached + new, already in the pools) has
/// kv_lens[b] tokens. Query i of the sequence's q_len tokens sees keys 0 .. kv_len - q_len + i.
/// Writes the matching rows of out. sm_scale 0 means 1/sqrt(head_dim). `options` adds score
/// transforms (score_mod.hpp): query i's position is kv_len - q_len + i. An fp8 cache's
/// elements are scaled by `scales`.
template <storage_element T, storage_element Q, storage_element O>
void prefill(const attention_shape& s, std::span<const T> k_cache, std::span<const T> v_cache, std::span<const Q> q,
             std::span<const std::int32_t> q_indptr, std::span<const std::int32_t> kv_lens, block_table_view tables,
             double sm_scale, std::span<O> out, const score_options& options = {}, const kv_scales& scales = {}) {
  detail::check_shape(s);
  detail::check_pool(s, k_cache, v_cache);
  detail::check_options(s, options);
  detail::check_scales<T>(s, scales);
  if (q_indptr.size() != kv_lens.size() + 1) {
    detail::fail("q_indptr has ", q_indptr.size(), " entries for ", kv_lens.size(), " sequences (needs batch + 1)");
  }
  const std::int64_t row = s.q_row_elements();
  const std::int64_t tokens = kv_lens.empty() ? 0 : q_indptr.back();
  if (static_cast<std::int64_t>(q.size()) < tokens * row || static_cast<std::int64_t>(out.size()) < tokens * row) {
    detail::fail("q/out hold ", q.size(), "/", out.size(), " elements; ", tokens, " tokens need ", tokens * row);
  }
  if (tables.stride == 0 && !kv_lens.empty()) {
    tables.stride = static_cast<std::int64_t>(tables.ids.size()) / static_cast<std::int64_t>(kv_lens.size());
  }
  const double scale = detail::default_scale(s, sm_scale);
  std::vector<double> scores;
  std::vector<double> acc(static_cast<std::size_t>(s.head_dim));
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    const std::int32_t begin = q_indptr[b];
    const std::int32_t q_len = q_indptr[b + 1] - begin;
    if (q_len < 0 || kv_lens[b] < q_len) {
      detail::fail("sequence ", b, ": q_len = ", q_len, " and kv_len = ", kv_lens[b], " need 0 <= q_len <= kv_len");
    }
    for (std::int32_t i = 0; i < q_len; ++i) {
      const int visible = kv_lens[b] - q_len + i + 1;
      for (int h = 0; h < s.num_qo_heads; ++h) {
        const std::int64_t offset = (static_cast<std::int64_t>(begin) + i) * row + static_cast<std::int64_t>(h) * s.head_dim;
        detail::attend_row(s, k_cache, v_cache, tables, static_cast<std::int64_t>(b), h, visible, q.data() + offset,
                           scale, options, scales, scores, acc.data());
        for (int d = 0; d < s.head_dim; ++d) out[static_cast<std::size_t>(offset + d)] = narrow<O>(acc[static_cast<std::size_t>(d)]);
      }
    }
  }
}

/// Decode: one query token per sequence (row b of q) against its seq_lens[b] cached tokens
/// (the new token's K and V included; the query's position is seq_len - 1). A length of 0
/// produces a zero row. `options` adds score transforms (score_mod.hpp); an fp8 cache's
/// elements are scaled by `scales`.
template <storage_element T, storage_element Q, storage_element O>
void decode(const attention_shape& s, std::span<const T> k_cache, std::span<const T> v_cache, std::span<const Q> q,
            std::span<const std::int32_t> seq_lens, block_table_view tables, double sm_scale, std::span<O> out,
            const score_options& options = {}, const kv_scales& scales = {}) {
  // Decode is extend with one new token per sequence (q_len 1: it sees keys 0 .. seq_len - 1),
  // except that a padded row (length 0) has a query row too.
  detail::check_shape(s);
  detail::check_pool(s, k_cache, v_cache);
  detail::check_options(s, options);
  detail::check_scales<T>(s, scales);
  const auto batch = static_cast<std::int64_t>(seq_lens.size());
  const std::int64_t row = s.q_row_elements();
  if (static_cast<std::int64_t>(q.size()) < batch * row || static_cast<std::int64_t>(out.size()) < batch * row) {
    detail::fail("q/out hold ", q.size(), "/", out.size(), " elements; ", batch, " sequences need ", batch * row);
  }
  if (tables.stride == 0 && batch > 0) tables.stride = static_cast<std::int64_t>(tables.ids.size()) / batch;
  const double scale = detail::default_scale(s, sm_scale);
  std::vector<double> scores;
  std::vector<double> acc(static_cast<std::size_t>(s.head_dim));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int32_t len = seq_lens[static_cast<std::size_t>(b)];
    if (len < 0) detail::fail("sequence ", b, ": seq_len = ", len, " is negative");
    for (int h = 0; h < s.num_qo_heads; ++h) {
      const std::int64_t offset = b * row + static_cast<std::int64_t>(h) * s.head_dim;
      detail::attend_row(s, k_cache, v_cache, tables, b, h, len, q.data() + offset, scale, options, scales, scores,
                         acc.data());
      for (int d = 0; d < s.head_dim; ++d) out[static_cast<std::size_t>(offset + d)] = narrow<O>(acc[static_cast<std::size_t>(d)]);
    }
  }
}

}  // namespace rungs::attention::reference
