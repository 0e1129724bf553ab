// A host forward built on rungs' CPU reference attention (rungs/attention/reference.hpp), for
// the host backend: the attention of a real paged KV cache around a weightless "model".
//
// Each token's query, key and value are a fixed function of its token id and position (no
// weights: this is a harness for the engine, not a language model). A step writes the new
// tokens' K/V into the paged pools at their slots (slot -1, a padded token, writes nothing;
// an fp8 cache, Model.dtype fp8_e4m3 or fp8_e5m2, stores their bf16 values divided by the
// head's scale (kv_scales; 1 when none), rounded and saturated, rungs/numeric/float8.hpp, as
// attention_forward's does)
// and runs the reference prefill over the ragged batch (a decode step is the case of one new
// token per sequence), in float64. Each sequence's output row is its last token's attention
// output, num_qo_heads x head_dim wide. Intermediate rows live in the engine's workspace, sized
// once for the largest bucket (workspace_bytes).
//
// Replays (padded batches) and eager runs (unpadded) of the same live batch give bitwise
// equal rows: padding adds rows that attend to nothing and never touch the cache.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <rungs/attention/reference.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/model.hpp>
#include <rungs/numeric/float16.hpp>

namespace rungs::engine {

template <model_shape Model>
class reference_forward {
  static_assert(rule_holds<broken_rule(Model)>,
                "rungs::engine: the Model shape is invalid; the note below names the rule it breaks");

 public:
  using element = host_type<Model.dtype>;

  /// A KV pool of `num_blocks` blocks (one layer: the reference attends one layer at a time,
  /// and the engine's behaviour does not depend on how many a model has). `scales`: an fp8
  /// cache's K and V dequantisation scales, per tensor or per KV head (empty: 1), copied;
  /// refused, naming the value, when not finite and positive or given for a 16-bit cache.
  explicit reference_forward(std::int64_t num_blocks, const rungs::attention::reference::kv_scales& scales = {})
      : shape_{rungs::attention::attention_shape::of(Model, num_blocks)},
        k_(static_cast<std::size_t>(shape_.pool_elements())),
        v_(static_cast<std::size_t>(shape_.pool_elements())),
        k_scale_(scales.k.begin(), scales.k.end()),
        v_scale_(scales.v.begin(), scales.v.end()) {
    rungs::attention::reference::detail::check_scales<element>(shape_, scales);
  }

  /// Workspace a step of `seqs` sequences and `tokens` tokens needs: query, key, value and
  /// output rows per token, in float.
  static std::int64_t workspace_bytes(std::int64_t, std::int64_t tokens) {
    return tokens * (2 * q_row + 2 * kv_row) * static_cast<std::int64_t>(sizeof(float));
  }

  void operator()(const host_step& s) {
    const batch_view& b = s.batch;
    if (static_cast<std::int64_t>(s.workspace.size()) < workspace_bytes(b.seqs, b.tokens))
      throw std::invalid_argument("reference_forward: the workspace holds " + std::to_string(s.workspace.size()) +
                                  " bytes; this step needs " + std::to_string(workspace_bytes(b.seqs, b.tokens)) +
                                  " bytes");
    auto* base = reinterpret_cast<float*>(s.workspace.data());
    const auto t = static_cast<std::size_t>(b.tokens);
    std::span<float> q(base, t * q_row), out(q.data() + q.size(), t * q_row);
    std::span<float> kf(out.data() + out.size(), t * kv_row), vf(kf.data() + kf.size(), t * kv_row);
    for (std::int64_t i = 0; i < b.tokens; ++i) project(b.token_ids[i], b.positions[i], q, kf, vf, i);
    keys_.resize(t * kv_row);
    values_.resize(t * kv_row);
    for (std::size_t i = 0; i < t * kv_row; ++i) {
      keys_[i] = to_cache(kf[i]);
      values_[i] = to_cache(vf[i]);
    }
    namespace ref = rungs::attention::reference;
    const rungs::attention::reference::kv_scales scales{k_scale_, v_scale_};
    ref::cache_write<element, row_element>(shape_, k_, v_, keys_, values_, std::span<const std::int64_t>(b.slot_mapping, t),
                                           0, 0, scales);
    const auto n = static_cast<std::size_t>(b.seqs);
    std::span<const std::int32_t> query_start(b.query_start, n + 1), seq_lens(b.seq_lens, n);
    ref::prefill<element, float, float>(shape_, k_, v_, q, query_start, seq_lens,
                                        {std::span<const std::int32_t>(b.block_tables, n * static_cast<std::size_t>(b.width)), b.width},
                                        0.0, out, {}, scales);
    for (std::size_t i = 0; i < n; ++i) {
      float* row = s.out.data() + i * q_row;
      const std::int32_t last = query_start[i + 1] - 1;
      for (std::size_t c = 0; c < q_row; ++c)
        row[c] = query_start[i + 1] > query_start[i] ? out[static_cast<std::size_t>(last) * q_row + c] : 0.0f;
    }
  }

  std::span<const element> k_cache() const { return k_; }
  std::span<const element> v_cache() const { return v_; }

 private:
  static constexpr std::size_t q_row = static_cast<std::size_t>(Model.num_qo_heads) * Model.head_dim;
  static constexpr std::size_t kv_row = static_cast<std::size_t>(Model.num_kv_heads) * Model.head_dim;

  // The rows the cache write takes. An fp8 cache quantises the 16-bit (bf16) value a model's
  // K/V projection produces, as the kernels' cache write does (it takes 16-bit rows): rounding
  // the float straight to fp8 differs from that, by a whole fp8 step, for 3.1% of E4M3 and 1.6%
  // of E5M2 codes (floats uniform in [-3, 3]: those whose bf16 rounding lands on an fp8
  // midpoint), and attention_forward's outputs then differed from this reference's by up to
  // 0.038 (E4M3) and 0.061 (E5M2) instead of the 0.0015 of the same cache.
  using row_element = std::conditional_t<fp8_element<element>, rungs::bf16, element>;
  static row_element to_cache(float x) { return rungs::narrow<row_element>(x); }

  // The weightless projections: smooth, bounded functions of (token, position, channel).
  static void project(std::int32_t token, std::int32_t position, std::span<float> q, std::span<float> k,
                      std::span<float> v, std::int64_t i) {
    const double tk = 0.37 * token, ps = 0.011 * position;
    for (std::size_t c = 0; c < q_row; ++c)
      q[static_cast<std::size_t>(i) * q_row + c] = static_cast<float>(std::sin(tk + 0.13 * static_cast<double>(c) + ps));
    for (std::size_t c = 0; c < kv_row; ++c) {
      k[static_cast<std::size_t>(i) * kv_row + c] = static_cast<float>(std::cos(tk - 0.07 * static_cast<double>(c) + ps));
      v[static_cast<std::size_t>(i) * kv_row + c] = static_cast<float>(std::sin(0.5 * tk + 0.29 * static_cast<double>(c)) + ps);
    }
  }

  rungs::attention::attention_shape shape_;
  std::vector<element> k_, v_;
  std::vector<row_element> keys_, values_;  // this step's new K/V rows as the cache write takes them
  std::vector<float> k_scale_, v_scale_;
};

}  // namespace rungs::engine
