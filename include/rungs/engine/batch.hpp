// Live batches and their padding to a bucket.
//
// The engine takes the live sequences of one step and stages them in a flattened, ragged
// layout (vLLM v1's): all new tokens of all sequences in one array, `query_start` marking
// where each sequence's tokens begin, one block-table row per sequence. For a replay the
// arrays are padded to the bucket's graph shape:
//   - padded sequences have no new tokens and length 0 (attention over nothing),
//   - padded tokens have token id 0, position 0 and slot -1, so they never write the KV
//     cache: kernels that write K/V skip negative slots,
//   - block-table entries past what a sequence needs hold block 0.
// Padded rows are junk whose outputs are never read; the engine hands back real rows only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <rungs/blocks.hpp>
#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

/// One live sequence in a step.
struct sequence {
  std::span<const std::int32_t> tokens;       // this step's new tokens (one when decoding)
  std::int64_t context = 0;                   // tokens already in the KV cache
  std::span<const std::int32_t> block_table;  // KV blocks holding context + tokens, in order
  bool lora = false;                          // runs with a LoRA adapter (a key dimension, see dispatch_buckets)
  bool prefill = false;                       // computes prompt tokens: the batch is no uniform decode
};

using rungs::blocks_for;

/// The lookup key of a batch. Throws std::invalid_argument naming the sequence at fault.
inline batch_key key_of(phase ph, std::span<const sequence> seqs, std::int64_t block_size) {
  batch_key k{.ph = ph, .seqs = static_cast<std::int64_t>(seqs.size())};
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const sequence& s = seqs[i];
    if (s.tokens.empty())
      throw std::invalid_argument("sequence " + std::to_string(i) + " has no new tokens; every live sequence needs one");
    if (s.context < 0)
      throw std::invalid_argument("sequence " + std::to_string(i) + ": context = " + std::to_string(s.context) +
                                  " must be non-negative");
    auto q = static_cast<std::int64_t>(s.tokens.size());
    k.tokens += q;
    k.max_query = std::max(k.max_query, q);
    k.max_context = std::max(k.max_context, s.context + q);
    k.max_prefix = std::max(k.max_prefix, s.context);
    k.blocks += blocks_for(s.context + q, block_size);
    k.has_lora = k.has_lora || s.lora;
    k.has_prefill = k.has_prefill || s.prefill;
  }
  return k;
}

/// Raw view of a staged batch, for a forward function: host pointers for the host backend,
/// device pointers for the CUDA backend. Sizes are the padded (graph) shape; which rows are
/// real is in the data (padded sequences have seq_lens 0), never in the view, because a
/// replayed graph cannot see a per-step count.
struct batch_view {
  std::int64_t seqs = 0;    // sequence rows
  std::int64_t tokens = 0;  // token rows
  std::int64_t width = 0;   // block-table entries per sequence
  const std::int32_t* token_ids = nullptr;     // [tokens]
  const std::int32_t* positions = nullptr;     // [tokens]
  const std::int64_t* slot_mapping = nullptr;  // [tokens], -1 = do not write the cache (int64: vLLM's)
  const std::int32_t* query_start = nullptr;   // [seqs + 1]
  const std::int32_t* seq_lens = nullptr;      // [seqs], context + new tokens
  const std::int32_t* block_tables = nullptr;  // [seqs][width]
  std::int64_t query = 0;  // graph_shape::query: every real sequence has exactly this many new tokens; 0 = any
};

/// The padded shape a batch was staged at: what a backend's graph for a bucket is prepared
/// (captured) for, and what a replay must match.
struct staged_shape {
  std::int64_t seqs = 0;
  std::int64_t tokens = 0;
  std::int64_t width = 0;
  std::int64_t query = 0;  ///< graph_shape::query: new tokens of every real sequence, 0 = any
  friend constexpr bool operator==(const staged_shape&, const staged_shape&) = default;
};

/// Host staging of one step: sized once for the largest graph shape, grown only for a batch
/// above every bucket (which runs eagerly).
class padded_batch {
 public:
  staged_shape shape() const { return {seqs_, tokens_, width_, query_}; }
  std::int64_t seqs() const { return seqs_; }
  /// New tokens of every real sequence when the batch was staged for a uniform-query graph
  /// (graph_shape::query); 0 when sequences may differ.
  std::int64_t query() const { return query_; }
  std::int64_t tokens() const { return tokens_; }
  std::int64_t width() const { return width_; }
  std::int64_t real_seqs() const { return real_seqs_; }
  std::int64_t real_tokens() const { return real_tokens_; }

  std::span<const std::int32_t> token_ids() const { return {token_ids_.data(), size(tokens_)}; }
  std::span<const std::int32_t> positions() const { return {positions_.data(), size(tokens_)}; }
  std::span<const std::int64_t> slot_mapping() const { return {slot_mapping_.data(), size(tokens_)}; }
  std::span<const std::int32_t> query_start() const { return {query_start_.data(), size(seqs_ + 1)}; }
  std::span<const std::int32_t> seq_lens() const { return {seq_lens_.data(), size(seqs_)}; }
  std::span<const std::int32_t> block_tables() const { return {block_tables_.data(), size(seqs_ * width_)}; }

  batch_view view() const {
    return {seqs_, tokens_, width_, token_ids_.data(), positions_.data(), slot_mapping_.data(),
            query_start_.data(), seq_lens_.data(), block_tables_.data(), query_};
  }

  /// Makes room for `seqs` x `tokens` x `width` without staging anything.
  void reserve(std::int64_t seqs, std::int64_t tokens, std::int64_t width) {
    grow(token_ids_, tokens);
    grow(positions_, tokens);
    grow(slot_mapping_, tokens);
    grow(query_start_, seqs + 1);
    grow(seq_lens_, seqs);
    grow(block_tables_, seqs * width);
  }

  /// Stages `live` padded to `seqs` sequences, `tokens` tokens and `width` block-table
  /// entries per sequence; `query` > 0 states that every live sequence has exactly `query` new
  /// tokens (a uniform-query graph's batch). Throws std::invalid_argument when a sequence's
  /// block table is too short or names a block outside [0, num_blocks) (num_blocks 0:
  /// unchecked), when the batch does not fit the shape, or when a sequence breaks `query`.
  void stage(std::span<const sequence> live, std::int64_t seqs, std::int64_t tokens, std::int64_t width,
             std::int64_t block_size, std::int64_t num_blocks = 0, std::int64_t query = 0) {
    auto n = static_cast<std::int64_t>(live.size());
    if (n > seqs) throw std::invalid_argument(std::to_string(n) + " sequences do not fit " + std::to_string(seqs) + " rows");
    if (query < 0) throw std::invalid_argument("query = " + std::to_string(query) + " must not be negative");
    // Everything is checked before anything is written.
    for (std::int64_t i = 0; query > 0 && i < n; ++i) {
      const auto q = static_cast<std::int64_t>(live[static_cast<std::size_t>(i)].tokens.size());
      if (q != query)
        throw std::invalid_argument("sequence " + std::to_string(i) + " has " + std::to_string(q) +
                                    " new tokens; a graph of uniform query length " + std::to_string(query) +
                                    " takes exactly that many per sequence");
    }
    std::int64_t t = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const sequence& s = live[static_cast<std::size_t>(i)];
      auto q = static_cast<std::int64_t>(s.tokens.size());
      std::int64_t length = s.context + q;
      std::int64_t needed = blocks_for(length, block_size);
      if (static_cast<std::int64_t>(s.block_table.size()) < needed)
        throw std::invalid_argument("sequence " + std::to_string(i) + ": block table has " +
                                    std::to_string(s.block_table.size()) + " blocks; " + std::to_string(length) +
                                    " tokens in blocks of " + std::to_string(block_size) + " need " +
                                    std::to_string(needed));
      if (needed > width)
        throw std::invalid_argument("sequence " + std::to_string(i) + ": " + std::to_string(length) +
                                    " tokens need " + std::to_string(needed) + " blocks, more than the " +
                                    std::to_string(width) + " of this shape");
      if (t + q > tokens)
        throw std::invalid_argument(std::to_string(t + q) + " tokens do not fit " + std::to_string(tokens) + " rows");
      for (std::int64_t b = 0; b < needed; ++b) {
        std::int32_t block = s.block_table[static_cast<std::size_t>(b)];
        if (block < 0 || (num_blocks > 0 && block >= num_blocks))
          throw std::invalid_argument("sequence " + std::to_string(i) + ": block " + std::to_string(block) +
                                      " is outside the pool [0, " + std::to_string(num_blocks) + ")");
      }
      t += q;
    }
    reserve(seqs, tokens, width);
    seqs_ = seqs;
    tokens_ = tokens;
    width_ = width;
    query_ = query;
    real_seqs_ = n;
    // Block tables: the buffer is 0 outside the ranges the last staging wrote, so clearing
    // those and writing the new rows' blocks leaves every other entry (past a row's blocks,
    // padded rows) at block 0 without filling seqs x width entries: a replay's table is as
    // wide as max_model_len in blocks, mostly padding.
    for (const auto& [from, to] : written_) std::fill(block_tables_.begin() + from, block_tables_.begin() + to, 0);
    written_.clear();
    t = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const sequence& s = live[static_cast<std::size_t>(i)];
      auto q = static_cast<std::int64_t>(s.tokens.size());
      std::int64_t length = s.context + q;
      std::int64_t needed = blocks_for(length, block_size);
      std::int32_t* row = block_tables_.data() + i * width;
      std::copy_n(s.block_table.begin(), needed, row);
      written_.emplace_back(i * width, i * width + needed);
      query_start_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(t);
      seq_lens_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(length);
      for (std::int64_t j = 0; j < q; ++j, ++t) {
        std::int64_t pos = s.context + j;
        token_ids_[static_cast<std::size_t>(t)] = s.tokens[static_cast<std::size_t>(j)];
        positions_[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(pos);
        slot_mapping_[static_cast<std::size_t>(t)] = std::int64_t{row[pos / block_size]} * block_size + pos % block_size;
      }
    }
    real_tokens_ = t;
    for (std::int64_t i = n; i < seqs; ++i) {  // padded sequences: no tokens, length 0
      query_start_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(t);
      seq_lens_[static_cast<std::size_t>(i)] = 0;
    }
    query_start_[static_cast<std::size_t>(seqs)] = static_cast<std::int32_t>(t);
    std::fill(token_ids_.begin() + t, token_ids_.begin() + tokens, 0);
    std::fill(positions_.begin() + t, positions_.begin() + tokens, 0);
    std::fill(slot_mapping_.begin() + t, slot_mapping_.begin() + tokens, -1);
  }

 private:
  static std::size_t size(std::int64_t n) { return static_cast<std::size_t>(n); }
  template <class T>
  static void grow(std::vector<T>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }

  std::int64_t seqs_ = 0, tokens_ = 0, width_ = 0, query_ = 0, real_seqs_ = 0, real_tokens_ = 0;
  std::vector<std::int32_t> token_ids_, positions_, query_start_, seq_lens_, block_tables_;
  std::vector<std::int64_t> slot_mapping_;
  std::vector<std::pair<std::int64_t, std::int64_t>> written_;  // block-table ranges [from, to) the last staging wrote
};

}  // namespace rungs::engine
