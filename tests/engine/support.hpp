// Test support for the engine tests: rungs' ladders and grids as bucket spaces, a toy forward
// that reads and writes a KV cache, and helpers to build batches and record captures.
#pragma once

#include <rungs/engine/batch.hpp>
#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/ladder.hpp>

#include <algorithm>
#include <sstream>
#include <cstdint>
#include <optional>
#include <vector>

namespace rungs_test {
using namespace rungs::engine;

// A run-time ladder of token counts (decode: one token per sequence) as a bucket space.
struct token_ladder : ladder_buckets<rungs::ladder> {
  token_ladder(std::vector<std::int64_t> rungs) : ladder_buckets(rungs::ladder{rungs::Explicit<>{std::move(rungs)}}) {}
};

// A (bs x seq) grid of one phase (rungs::bucket_grid<2>, listed bs-major): prompt graphs hold
// bs*seq tokens, decode graphs bs.
struct grid : grid_buckets<rungs::bucket_grid<2>> {
  grid(phase ph, const std::vector<std::int64_t>& bs, const std::vector<std::int64_t>& seq)
      : grid_buckets(product(bs, seq), ph) {}
  static rungs::bucket_grid<2> product(const std::vector<std::int64_t>& bs, const std::vector<std::int64_t>& seq) {
    std::vector<rungs::bucket<2>> all;
    for (std::int64_t b : bs)
      for (std::int64_t s : seq) all.push_back({b, s});
    return rungs::bucket_grid<2>(std::move(all));
  }
};

}  // namespace rungs_test

#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/model.hpp>
#include <rungs/engine/observer.hpp>

#include <span>
#include <string>

namespace rungs_test {

inline constexpr model_shape tiny_model{
    .dtype = rungs::dtype::fp32, .num_qo_heads = 2, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .num_layers = 1};

// A toy model over a KV cache of one layer: each new token writes its K/V row at its slot
// (skipped for slot -1), then each sequence's output is a position-weighted sum over its
// cached rows. Every input of the staged batch changes the output, and padding that wrote
// the cache would show.
struct toy_model {
  static constexpr std::int64_t kv_width = std::int64_t{tiny_model.num_kv_heads} * tiny_model.head_dim;
  explicit toy_model(std::int64_t block_size = tiny_model.block_size, std::int64_t num_blocks = 64)
      : bs(block_size), cache(static_cast<std::size_t>(num_blocks * block_size * kv_width)) {}
  std::int64_t bs;
  std::vector<float> cache;
  std::int64_t runs = 0;

  void operator()(const host_step& s) {
    ++runs;
    const batch_view& b = s.batch;
    for (std::int64_t t = 0; t < b.tokens; ++t) {
      std::int64_t slot = b.slot_mapping[t];
      if (slot < 0) continue;
      for (std::int64_t d = 0; d < kv_width; ++d)
        cache[static_cast<std::size_t>(slot * kv_width + d)] =
            0.5f * static_cast<float>(b.token_ids[t]) + 0.25f * static_cast<float>(b.positions[t]) + static_cast<float>(d);
    }
    for (std::int64_t i = 0; i < b.seqs; ++i) {
      float* out = s.out.data() + i * s.row_width;
      for (std::int64_t c = 0; c < s.row_width; ++c) out[c] = 0;
      for (std::int64_t p = 0; p < b.seq_lens[i]; ++p) {
        std::int64_t slot = std::int64_t{b.block_tables[i * b.width + p / bs]} * bs + p % bs;
        for (std::int64_t c = 0; c < s.row_width; ++c)
          out[c] += cache[static_cast<std::size_t>(slot * kv_width + c % kv_width)] * static_cast<float>((p + 1) * (c / kv_width + 1));
      }
    }
  }
};

// Greedy "sampling" for the engine tests: the token is a function of the row, so a wrong row
// (another sequence's, or a padded one) changes the outputs.
struct row_sampler {
  std::int64_t width = tiny_model.row_width();
  template <class Plan>  // rungs::serving::scheduled_step
  void sample(const Plan&, std::span<const std::size_t> entries, std::span<const float> rows,
              std::span<std::int32_t> out) const {
    for (std::size_t k = 0; k < entries.size(); ++k)
      out[k] = static_cast<std::int32_t>(static_cast<std::int64_t>(rows[k * static_cast<std::size_t>(width)]) % 97);
  }
};

// Builds the live sequences of a step: n decode sequences with `context` cached tokens, or
// prompts of `query` tokens each. Sequence i owns blocks [i * per_seq, (i + 1) * per_seq).
class batch_builder {
 public:
  explicit batch_builder(std::int64_t blocks_per_seq = 4) : per_seq_(blocks_per_seq) {}
  std::span<const sequence> make(std::int64_t n, std::int64_t context = 0, std::int64_t query = 1, std::int32_t salt = 0) {
    tokens_.assign(static_cast<std::size_t>(n), {});
    tables_.assign(static_cast<std::size_t>(n), {});
    seqs_.clear();
    for (std::int64_t i = 0; i < n; ++i) {
      auto& tok = tokens_[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < query; ++j) tok.push_back(static_cast<std::int32_t>(7 * i + j + 1 + salt));
      auto& tab = tables_[static_cast<std::size_t>(i)];
      for (std::int64_t b = 0; b < per_seq_; ++b) tab.push_back(static_cast<std::int32_t>(i * per_seq_ + b));
      seqs_.push_back(sequence{tok, context, tab});
    }
    return seqs_;
  }

 private:
  std::int64_t per_seq_;
  std::vector<std::vector<std::int32_t>> tokens_, tables_;
  std::vector<sequence> seqs_;
};

// Records capture events as "when:bucket:outcome" (e.g. "step2:4:captured").
struct capture_log {
  std::vector<std::string>* lines;
  void operator()(const engine_event& e) const {
    if (e.what != engine_event::kind::capture) return;
    std::string when = e.when == capture_moment::startup ? "startup"
                       : e.when == capture_moment::idle  ? "idle" + std::to_string(e.step)
                                                         : "step" + std::to_string(e.step);
    std::ostringstream b;
    b << e.where;
    lines->push_back(when + ":" + b.str() + (e.outcome == capture_outcome::captured ? "" : ":" + std::string(to_string(e.outcome))));
  }
};

}  // namespace rungs_test
