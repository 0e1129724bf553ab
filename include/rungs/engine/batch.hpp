// Live batches and their padding to a bucket.
//
// The engine takes the live sequences of one step and stages them in a flattened, ragged
// layout (vLLM v1's): all new tokens of all sequences in one array, `query_start` marking
// where each sequence's tokens begin, one block-table row per sequence. For a replay the
// arrays are padded to the bucket's graph shape:
//   - padded sequences have no new tokens and length 0 (attention over nothing),
//   - padded tokens have token id 0, position 0 and slot -1, so they never write the KV
//     cache: kernels that write K/V skip negative slots,
//   - block-table entries past what a sequence needs hold block 0, and so do the leading
//     entries that left a sliding window (kv::null_block in the allocator's table): no query
//     sees their keys, and block 0 is an address every kernel may read.
// Padded rows are junk whose outputs are never read; the engine hands back real rows only.
//
// Persistent staging (vLLM v1's persistent input batch and block table). The arrays live
// across steps: padded_batch::update rewrites only what changed since the last staging (a
// decode's new token, position, slot and length; a block-table entry when a block is
// appended, copied on write or leaves the window), and records the changed ranges so a
// device backend uploads only those (padded_batch::changes). It needs to know which row holds
// which sequence: sequence::id, and batch_rows, which keeps every sequence in the row it had
// (new ones take the rows of those that left, the rest are condensed by moving the last rows
// down). padded_batch::stage, the full restage, is the oracle update is checked against.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <rungs/blocks.hpp>
#include <rungs/config.hpp>
#include <rungs/engine/bucket_space.hpp>
#include <rungs/kv/detail/block_divider.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::engine {

/// One live sequence in a step.
struct sequence {
  std::span<const std::int32_t> tokens;       // this step's new tokens (one when decoding)
  std::int64_t context = 0;                   // tokens already in the KV cache
  std::span<const std::int32_t> block_table;  // KV blocks holding context + tokens, in order
  bool lora = false;                          // runs with a LoRA adapter (a key dimension, see dispatch_buckets)
  bool prefill = false;                       // computes prompt tokens: the batch is no uniform decode
  /// Who the sequence is, for persistent staging (padded_batch::update); 0: nobody known, its
  /// row is rewritten whole. The same id in two consecutive stagings of one padded_batch
  /// promises the same sequence, whose context then continues where the last staging ended,
  /// whose block table only grows at its end, and whose entries before the block of its first
  /// new token never change, except that a leading run of them may turn kv::null_block (they
  /// left a sliding window). rungs' allocators keep this for a kv::sequence_id (row_id):
  /// preemption and fork give a new generation, copy-on-write replaces only entries from the
  /// write position on.
  std::uint64_t id = 0;
};

/// The persistent-staging id of an allocator's sequence: slot and generation (a row reused by
/// another sequence has a new generation).
constexpr std::uint64_t row_id(kv::sequence_id s) { return std::uint64_t{s.generation} << 32 | s.slot; }

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

/// Element range [from, to) of one staged array.
struct index_range {
  std::int64_t from = 0, to = 0;
  bool empty() const { return to <= from; }
  friend constexpr bool operator==(const index_range&, const index_range&) = default;
};

/// What the last staging wrote, in elements of each array: a backend that holds the staging
/// before it (padded_batch::version one less) uploads these ranges only. Ranges may reach past
/// the staged shape (rows that were real in a larger bucket, reset to padding).
struct staged_changes {
  index_range tokens;                          ///< token_ids, positions and slot_mapping alike
  index_range query_start;
  index_range seq_lens;
  std::span<const index_range> block_tables;   ///< sorted, disjoint, not adjacent
};

/// Host staging of one step: sized once for the largest graph shape, grown only for a batch
/// above every bucket (which runs eagerly). stage() rewrites everything; update() rewrites
/// what changed since the last staging (see the file comment). Both keep every element past
/// the real rows at its padding value, in the whole buffer, so a larger bucket next step finds
/// its padded rows already written.
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

  /// Tells this batch from every other one ever made (a copy included), for a device copy
  /// that follows one batch's versions (upload_tracker).
  std::uint64_t identity() const { return identity_.value; }
  /// Counts successful stagings (and resets after a refused one): changes() describes the
  /// step from version() - 1 to version().
  std::uint64_t version() const { return version_; }
  /// The ranges the last staging wrote (see staged_changes).
  staged_changes changes() const { return {tok_changed_, qs_changed_, lens_changed_, table_changed_}; }

  /// Makes room for `seqs` x `tokens` x `width` without staging anything.
  void reserve(std::int64_t seqs, std::int64_t tokens, std::int64_t width) {
    grow(token_ids_, tokens, 0);
    grow(positions_, tokens, 0);
    grow(slot_mapping_, tokens, kv::padded_slot);
    grow(query_start_, seqs + 1, 0);
    grow(seq_lens_, seqs, 0);
    grow(block_tables_, seqs * width, 0);
    grow(row_id_, seqs, 0);
    grow(row_len_, seqs, 0);
    grow(row_blocks_, seqs, 0);
    grow(row_first_, seqs, 0);
    grow(row_last_, seqs, 0);
  }

  /// Stages `live` padded to `seqs` sequences, `tokens` tokens and `width` block-table
  /// entries per sequence, rewriting every element (the full restage); `query` > 0 states that
  /// every live sequence has exactly `query` new tokens (a uniform-query graph's batch). Throws
  /// std::invalid_argument, with nothing written, when a sequence's block table is too short
  /// or names a block outside [0, num_blocks) (num_blocks 0: unchecked) other than a leading
  /// kv::null_block run before the block of its first new token, when the batch does not fit
  /// the shape, or when a sequence breaks `query`.
  void stage(std::span<const sequence> live, std::int64_t seqs, std::int64_t tokens, std::int64_t width,
             std::int64_t block_size, std::int64_t num_blocks = 0, std::int64_t query = 0) {
    const auto n = static_cast<std::int64_t>(live.size());
    check_batch(live, seqs, query);
    // Everything is checked before anything is written.
    std::int64_t t = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const sequence& s = live[static_cast<std::size_t>(i)];
      const auto q = static_cast<std::int64_t>(s.tokens.size());
      const std::int64_t needed = check_row(i, s, width, block_size);
      if (t + q > tokens)
        throw std::invalid_argument(std::to_string(t + q) + " tokens do not fit " + std::to_string(tokens) + " rows");
      const std::int64_t written = s.context / block_size;  // leading null entries: only before it
      bool leading = true;
      for (std::int64_t b = 0; b < needed; ++b) {
        const std::int32_t block = s.block_table[static_cast<std::size_t>(b)];
        leading = leading && block == kv::null_block && b < written;
        if (!leading) check_block(i, b, block, written, num_blocks);
      }
      t += q;
    }
    reserve(seqs, tokens, width);
    // Block tables: every entry outside the rows' blocks is 0 (the invariant of the class), so
    // clearing the ranges the last staging wrote and writing the new rows' blocks leaves every
    // other entry at block 0 without filling seqs x width entries: a replay's table is as wide
    // as max_model_len in blocks, mostly padding.
    const std::int64_t old_seqs = real_seqs_, old_tokens = real_tokens_, old_cover = table_cover();
    for (std::int64_t r = 0; r < old_seqs; ++r) {
      std::fill_n(block_tables_.begin() + r * width_, row_blocks_[size(r)], 0);
      row_blocks_[size(r)] = 0;
    }
    t = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const sequence& s = live[static_cast<std::size_t>(i)];
      const auto q = static_cast<std::int64_t>(s.tokens.size());
      const std::int64_t length = s.context + q;
      const std::int64_t needed = blocks_for(length, block_size);
      std::int32_t* row = block_tables_.data() + i * width;
      std::int64_t first = 0;
      for (std::int64_t b = 0; b < needed; ++b) {
        const std::int32_t block = s.block_table[static_cast<std::size_t>(b)];
        if (block == kv::null_block && b == first) ++first;  // left the window: block 0, as padding
        row[b] = block == kv::null_block ? 0 : block;
      }
      remember_row(i, s.id, length, needed, first);
      row_last_[size(i)] = needed > 0 ? row[needed - 1] : 0;
      query_start_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(t);
      seq_lens_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(length);
      for (std::int64_t j = 0; j < q; ++j, ++t) {
        std::int64_t pos = s.context + j;
        token_ids_[static_cast<std::size_t>(t)] = s.tokens[static_cast<std::size_t>(j)];
        positions_[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(pos);
        slot_mapping_[static_cast<std::size_t>(t)] = std::int64_t{row[pos / block_size]} * block_size + pos % block_size;
      }
    }
    for (std::int64_t i = n; i < std::max(seqs, old_seqs); ++i) {  // padded sequences: no tokens, length 0
      query_start_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(t);
      seq_lens_[static_cast<std::size_t>(i)] = 0;
      row_id_[static_cast<std::size_t>(i)] = 0;
    }
    query_start_[static_cast<std::size_t>(seqs)] = static_cast<std::int32_t>(t);
    const std::int64_t pad_to = std::max(tokens, old_tokens);
    pad_tokens(t, pad_to);
    set_shape(seqs, tokens, width, query, n, t);
    query_valid_ = seqs;
    divider_ = kv::detail::block_divider(static_cast<std::int32_t>(block_size));
    block_size_ = block_size;
    // Everything in the shape changed, and whatever the last staging left past it.
    tok_changed_ = {0, pad_to};
    qs_changed_ = {0, std::max(seqs, old_seqs) + 1};
    lens_changed_ = {0, std::max(seqs, old_seqs)};
    table_changed_.assign(1, {0, std::max(seqs * width, old_cover)});
    ++version_;
  }

  /// Stages `live` as stage() does, writing only what changed since the last staging: rows
  /// whose sequence::id is the one they held take their new tokens and the block-table entries
  /// from their first new token's block on (and a leading run that left a sliding window);
  /// other rows are rewritten whole; a change of width rewrites every row (the rows' stride
  /// changed). Throws what stage() throws; a refused batch leaves the batch reset to padding,
  /// so the next staging rewrites everything.
  void update(std::span<const sequence> live, std::int64_t seqs, std::int64_t tokens, std::int64_t width,
              std::int64_t block_size, std::int64_t num_blocks = 0, std::int64_t query = 0) {
    check_batch(live, seqs, query);
    try {
      update_rows(live, seqs, tokens, width, block_size, num_blocks, query);
    } catch (...) {
      reset();
      throw;
    }
  }

 private:
  static std::size_t size(std::int64_t n) { return static_cast<std::size_t>(n); }
  template <class T>
  static void grow(std::vector<T>& v, std::int64_t n, std::type_identity_t<T> fill) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n), fill);
  }

  static void check_batch(std::span<const sequence> live, std::int64_t seqs, std::int64_t query) {
    const auto n = static_cast<std::int64_t>(live.size());
    if (n > seqs) throw std::invalid_argument(std::to_string(n) + " sequences do not fit " + std::to_string(seqs) + " rows");
    if (query < 0) throw std::invalid_argument("query = " + std::to_string(query) + " must not be negative");
    for (std::int64_t i = 0; query > 0 && i < n; ++i) {
      const auto q = static_cast<std::int64_t>(live[static_cast<std::size_t>(i)].tokens.size());
      if (q != query)
        throw std::invalid_argument("sequence " + std::to_string(i) + " has " + std::to_string(q) +
                                    " new tokens; a graph of uniform query length " + std::to_string(query) +
                                    " takes exactly that many per sequence");
    }
  }

  // The blocks sequence i needs, after checking its table and its width.
  static std::int64_t check_row(std::int64_t i, const sequence& s, std::int64_t width, std::int64_t block_size) {
    if (s.context < 0)
      throw std::invalid_argument("sequence " + std::to_string(i) + ": context = " + std::to_string(s.context) +
                                  " must be non-negative");
    const std::int64_t length = s.context + static_cast<std::int64_t>(s.tokens.size());
    if (length > std::numeric_limits<std::int32_t>::max())
      throw std::invalid_argument("sequence " + std::to_string(i) + ": " + std::to_string(length) +
                                  " tokens exceed the int32 positions of a staged batch");
    const std::int64_t needed = blocks_for(length, block_size);
    if (static_cast<std::int64_t>(s.block_table.size()) < needed)
      throw std::invalid_argument("sequence " + std::to_string(i) + ": block table has " +
                                  std::to_string(s.block_table.size()) + " blocks; " + std::to_string(length) +
                                  " tokens in blocks of " + std::to_string(block_size) + " need " + std::to_string(needed));
    if (needed > width)
      throw std::invalid_argument("sequence " + std::to_string(i) + ": " + std::to_string(length) + " tokens need " +
                                  std::to_string(needed) + " blocks, more than the " + std::to_string(width) +
                                  " of this shape");
    return needed;
  }

  // A block a row holds (not a leading entry that left the window).
  static void check_block(std::int64_t i, std::int64_t b, std::int32_t block, std::int64_t written, std::int64_t num_blocks) {
    if (block == kv::null_block)
      throw std::invalid_argument("sequence " + std::to_string(i) + ": block-table entry " + std::to_string(b) +
                                  " is null; only a leading run of entries before the block of the first new token (" +
                                  std::to_string(written) + ") may be, the blocks that left a sliding window");
    if (block < 0 || (num_blocks > 0 && block >= num_blocks))
      throw std::invalid_argument("sequence " + std::to_string(i) + ": block " + std::to_string(block) +
                                  " is outside the pool [0, " + std::to_string(num_blocks) + ")");
  }

  void pad_tokens(std::int64_t from, std::int64_t to) {
    std::fill(token_ids_.begin() + from, token_ids_.begin() + to, 0);
    std::fill(positions_.begin() + from, positions_.begin() + to, 0);
    std::fill(slot_mapping_.begin() + from, slot_mapping_.begin() + to, kv::padded_slot);
  }

  void set_shape(std::int64_t seqs, std::int64_t tokens, std::int64_t width, std::int64_t query, std::int64_t n,
                 std::int64_t t) {
    seqs_ = seqs;
    tokens_ = tokens;
    width_ = width;
    query_ = query;
    real_seqs_ = n;
    real_tokens_ = t;
  }

  void remember_row(std::int64_t i, std::uint64_t id, std::int64_t length, std::int64_t blocks, std::int64_t first) {
    row_id_[size(i)] = id;
    row_len_[size(i)] = length;
    row_blocks_[size(i)] = blocks;
    row_first_[size(i)] = first;
  }

  // Block-table entries the real rows of the last staging cover, in its layout.
  std::int64_t table_cover() const {
    std::int64_t cover = 0;
    for (std::int64_t r = 0; r < real_seqs_; ++r)
      if (row_blocks_[size(r)] > 0) cover = r * width_ + row_blocks_[size(r)];
    return cover;
  }

  void mark_table(std::int64_t from, std::int64_t to) {
    if (!table_changed_.empty() && table_changed_.back().to >= from) table_changed_.back().to = std::max(table_changed_.back().to, to);
    else table_changed_.push_back({from, to});
  }

  void update_rows(std::span<const sequence> live, std::int64_t seqs, std::int64_t tokens, std::int64_t width,
                   std::int64_t block_size, std::int64_t num_blocks, std::int64_t query) {
    const auto n = static_cast<std::int64_t>(live.size());
    const std::int64_t old_n = real_seqs_, old_t = real_tokens_;
    reserve(seqs, tokens, width);
    if (block_size != block_size_) {
      divider_ = kv::detail::block_divider(static_cast<std::int32_t>(block_size));
      block_size_ = block_size;
      forget_rows();  // positions map to other blocks
    }
    table_changed_.clear();
    const bool relaid = width != width_;
    std::int64_t relaid_cover = 0;
    if (relaid) {  // every row moves: clear the old layout, then write every row whole
      relaid_cover = table_cover();
      for (std::int64_t r = 0; r < old_n; ++r) {
        std::fill_n(block_tables_.begin() + r * width_, row_blocks_[size(r)], 0);
        row_blocks_[size(r)] = 0;
      }
      forget_rows();
    }
    const kv::detail::block_divider div = divider_;
    const auto bs = static_cast<std::int32_t>(block_size);
    std::int64_t t = 0;
    std::int64_t qs_from = std::numeric_limits<std::int64_t>::max(), qs_to = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const sequence& s = live[size(i)];
      const auto q = static_cast<std::int64_t>(s.tokens.size());
      if (t + q > tokens)
        throw std::invalid_argument(std::to_string(t + q) + " tokens do not fit " + std::to_string(tokens) + " rows");
      const bool same = s.id != 0 && i < old_n && row_id_[size(i)] == s.id && row_len_[size(i)] == s.context;
      std::int32_t* row = block_tables_.data() + i * width;
      std::int64_t needed = 0;
      if (same && s.context >= 0 && s.context + q <= std::numeric_limits<std::int32_t>::max()) {
        needed = div.ceil(static_cast<std::int32_t>(s.context + q));
        if (needed > width || static_cast<std::int64_t>(s.block_table.size()) < needed) needed = check_row(i, s, width, block_size);
      } else {
        needed = check_row(i, s, width, block_size);
      }
      const auto context = static_cast<std::int32_t>(s.context);
      const std::int64_t written = div.quot(context);
      write_row(i, s, same, row, needed, written, num_blocks, width);
      if (query_start_[size(i)] != t) {
        query_start_[size(i)] = static_cast<std::int32_t>(t);
        qs_from = std::min(qs_from, i);
        qs_to = i + 1;
      }
      seq_lens_[size(i)] = static_cast<std::int32_t>(s.context + q);
      // The new tokens: slots through the staged row (a run within one block at a time).
      std::int32_t block = static_cast<std::int32_t>(written), offset = div.rem(context);
      for (std::int64_t j = 0; j < q; ++j, ++t) {
        token_ids_[size(t)] = s.tokens[size(j)];
        positions_[size(t)] = context + static_cast<std::int32_t>(j);
        slot_mapping_[size(t)] = std::int64_t{s.block_table[size(block)]} * bs + offset;  // never null (checked)
        if (++offset == bs) offset = 0, ++block;
      }
    }
    for (std::int64_t r = n; r < old_n; ++r) {  // real rows of the last staging, padding now
      std::int32_t* row = block_tables_.data() + r * width;
      if (row_blocks_[size(r)] > 0) {
        std::fill_n(row, row_blocks_[size(r)], 0);
        mark_table(r * width, r * width + row_blocks_[size(r)]);
      }
      remember_row(r, 0, 0, 0, 0);
      seq_lens_[size(r)] = 0;
    }
    if (t < old_t) pad_tokens(t, old_t);  // tokens that were real, padding now
    // Padded sequences start where the real tokens end: rewritten when that moved, else only
    // the rows a larger bucket adds.
    std::int64_t pad_from = n;
    if (n == old_n && t == old_t) pad_from = std::max(n, query_valid_ + 1);
    for (std::int64_t r = pad_from; r <= seqs; ++r) {
      if (query_start_[size(r)] != t) {
        query_start_[size(r)] = static_cast<std::int32_t>(t);
        qs_from = std::min(qs_from, r);
        qs_to = r + 1;
      }
    }
    query_valid_ = pad_from <= seqs ? seqs : std::max(query_valid_, seqs);
    if (relaid) table_changed_.assign(1, {0, std::max({seqs * width, relaid_cover, table_changed_.empty() ? 0 : table_changed_.back().to})});
    tok_changed_ = {0, std::max(t, old_t)};
    qs_changed_ = qs_to > 0 ? index_range{qs_from, qs_to} : index_range{};
    lens_changed_ = {0, std::max(n, old_n)};
    set_shape(seqs, tokens, width, query, n, t);
    ++version_;
  }

  // Row i's block-table entries: from the block of the first new token on for a row that
  // holds the same sequence as before (and the leading entries that left the window since),
  // every entry otherwise. Writes only entries that differ, and records their range.
  void write_row(std::int64_t i, const sequence& s, bool same, std::int32_t* row, std::int64_t needed,
                 std::int64_t written, std::int64_t num_blocks, std::int64_t width) {
    // What the row holds at entry b, without reading the row where the row's state says it
    // (a decode reads one entry per row: its last, kept in row_last_).
    const std::int64_t held = row_blocks_[size(i)];
    auto staged = [&](std::int64_t b) { return b >= held ? 0 : b == held - 1 ? row_last_[size(i)] : row[b]; };
    std::int64_t lo = needed, hi = 0;
    auto put = [&](std::int64_t b, std::int32_t v) {
      if (staged(b) == v) return;
      row[b] = v;
      lo = std::min(lo, b);
      hi = std::max(hi, b + 1);
    };
    std::int64_t first = same ? row_first_[size(i)] : 0, from = same ? written : 0;
    std::int32_t last = needed > 0 && needed - 1 < std::max(from, first) ? staged(needed - 1) : 0;
    for (; first < written && s.block_table[size(first)] == kv::null_block; ++first) {
      put(first, 0);
      if (first == needed - 1) last = 0;
    }
    for (std::int64_t b = std::max(from, first); b < needed; ++b) {
      const std::int32_t block = s.block_table[size(b)];
      if (RUNGS_UNLIKELY(block < 0 || (num_blocks > 0 && block >= num_blocks))) check_block(i, b, block, written, num_blocks);
      put(b, block);
      last = block;
    }
    if (!same)
      for (std::int64_t b = needed; b < held; ++b) put(b, 0);
    remember_row(i, s.id, s.context + static_cast<std::int64_t>(s.tokens.size()), needed, first);
    row_last_[size(i)] = last;
    if (hi > lo) mark_table(i * width + lo, i * width + hi);
  }

  // No row is known to hold its sequence any more: the next update rewrites each whole.
  void forget_rows() { std::fill_n(row_id_.begin(), real_seqs_, 0); }

  // After a refused update: every element back to padding, nothing known.
  void reset() {
    pad_tokens(0, static_cast<std::int64_t>(token_ids_.size()));
    std::fill(query_start_.begin(), query_start_.end(), 0);
    std::fill(seq_lens_.begin(), seq_lens_.end(), 0);
    std::fill(block_tables_.begin(), block_tables_.end(), 0);
    std::fill(row_id_.begin(), row_id_.end(), 0);
    std::fill(row_blocks_.begin(), row_blocks_.end(), 0);
    seqs_ = tokens_ = width_ = query_ = real_seqs_ = real_tokens_ = 0;
    query_valid_ = 0;
    table_changed_.clear();
    version_ += 2;  // whoever mirrors the batch must copy it whole
  }

  std::int64_t seqs_ = 0, tokens_ = 0, width_ = 0, query_ = 0, real_seqs_ = 0, real_tokens_ = 0;
  std::int64_t query_valid_ = 0;  // query_start_ holds this staging's values up to this row
  std::int64_t block_size_ = 0;
  kv::detail::block_divider divider_{1};
  std::vector<std::int32_t> token_ids_, positions_, query_start_, seq_lens_, block_tables_;
  std::vector<std::int64_t> slot_mapping_;
  // Per row: the sequence it holds (0: none known), its length, the entries it wrote and how
  // many of them lead as block 0 (left the window).
  std::vector<std::uint64_t> row_id_;
  std::vector<std::int64_t> row_len_, row_blocks_, row_first_;
  std::vector<std::int32_t> row_last_;  // the row's entry row_blocks_ - 1, as staged
  std::uint64_t version_ = 0;
  // A new value for every batch made, copied or assigned to.
  struct identity {
    std::uint64_t value = next();
    identity() = default;
    identity(const identity&) : value(next()) {}
    identity& operator=(const identity&) {
      value = next();
      return *this;
    }
    static std::uint64_t next() {
      static std::atomic<std::uint64_t> counter{0};
      return ++counter;
    }
  } identity_;
  index_range tok_changed_, qs_changed_, lens_changed_;
  std::vector<index_range> table_changed_;
};

/// The backend's side of persistent staging: which element ranges of a padded_batch a device
/// copy of it lacks. A copy that followed the batch's previous version takes the ranges the
/// staging changed (staged_changes) and the part of the view it never held; any other copy
/// (a first upload, another batch in between, a version skipped) takes the whole view. Ranges
/// changed past the view are not copied: the copy forgets that part, and takes it when a
/// larger view needs it.
class upload_tracker {
 public:
  enum class array : std::uint8_t { token_ids, positions, slot_mapping, query_start, seq_lens, block_tables };
  static constexpr std::size_t arrays = 6;
  struct copy {
    array what;
    index_range elements;
  };

  /// The ranges to copy so that the device copy equals `b`'s view; sorted by array, then by
  /// element. The span lives until the next call.
  std::span<const copy> plan(const padded_batch& b) {
    const bool follows = b.identity() == identity_ && b.version() == version_ + 1;
    if (!follows) valid_.fill(0);
    identity_ = b.identity();
    version_ = b.version();
    copies_.clear();
    const staged_changes c = b.changes();
    const std::int64_t tokens = b.tokens(), seqs = b.seqs();
    if (follows) {
      add(array::token_ids, tokens, std::span<const index_range>(&c.tokens, 1));
      add(array::positions, tokens, std::span<const index_range>(&c.tokens, 1));
      add(array::slot_mapping, tokens, std::span<const index_range>(&c.tokens, 1));
      add(array::query_start, seqs + 1, std::span<const index_range>(&c.query_start, 1));
      add(array::seq_lens, seqs, std::span<const index_range>(&c.seq_lens, 1));
      add(array::block_tables, seqs * b.width(), c.block_tables);
    } else {
      add(array::token_ids, tokens, {});
      add(array::positions, tokens, {});
      add(array::slot_mapping, tokens, {});
      add(array::query_start, seqs + 1, {});
      add(array::seq_lens, seqs, {});
      add(array::block_tables, seqs * b.width(), {});
    }
    return copies_;
  }

  /// The device copy was overwritten by something else: the next plan copies everything.
  void forget() { identity_ = 0; }

  /// Bytes of one element of an array (slot_mapping is int64, the others int32).
  static constexpr std::int64_t element_bytes(array a) { return a == array::slot_mapping ? 8 : 4; }
  /// Bytes of a plan's copies.
  static std::int64_t bytes(std::span<const copy> copies) {
    std::int64_t n = 0;
    for (const copy& c : copies) n += (c.elements.to - c.elements.from) * element_bytes(c.what);
    return n;
  }

 private:
  void add(array a, std::int64_t view, std::span<const index_range> changed) {
    std::int64_t& valid = valid_[static_cast<std::size_t>(a)];
    const std::int64_t held = std::min(valid, view);
    for (const index_range& r : changed) {
      const std::int64_t to = std::min(r.to, held);
      if (r.from < to) push(a, {r.from, to});
      if (r.to > view) valid = std::min(valid, std::max(r.from, view));
    }
    if (view > valid) {
      push(a, {valid, view});
      valid = view;
    }
  }
  void push(array a, index_range r) {
    if (!copies_.empty() && copies_.back().what == a && copies_.back().elements.to >= r.from)
      copies_.back().elements.to = std::max(copies_.back().elements.to, r.to);
    else
      copies_.push_back({a, r});
  }

  std::uint64_t identity_ = 0, version_ = 0;
  std::array<std::int64_t, arrays> valid_{};  // per array: the device copy equals the batch on [0, valid)
  std::vector<copy> copies_;
};

/// The row each live sequence takes in a persistent batch (vLLM v1's InputBatch order): a
/// sequence keeps the row it had; new sequences take the rows of those that left, lowest
/// first, then rows past the end; holes still open are filled by moving the last rows down
/// (condense), so rows [0, n) are dense and a departure moves at most one row. Keyed by
/// kv::sequence_id, whose slot is dense: every step costs O(rows), no hashing.
class batch_rows {
 public:
  /// Arranges this step's sequences (keys[k] is sequence k's id): returns, per row r, the k
  /// that takes it. The span lives until the next call.
  std::span<const std::uint32_t> arrange(std::span<const kv::sequence_id> keys) {
    const std::size_t n = keys.size(), old_n = rows_.size();
    order_.assign(std::max(n, old_n), npos);
    fresh_.clear();
    for (std::size_t k = 0; k < n; ++k) {
      const kv::sequence_id key = keys[k];
      const std::uint32_t r = key.slot < where_.size() ? where_[key.slot] : npos;
      if (r < old_n && rows_[r] == key && order_[r] == npos) order_[r] = static_cast<std::uint32_t>(k);
      else fresh_.push_back(static_cast<std::uint32_t>(k));
    }
    // New sequences into the holes, lowest first, then past the end.
    std::size_t next = 0, end = old_n;
    for (std::uint32_t k : fresh_) {
      while (next < old_n && order_[next] != npos) ++next;
      order_[next < old_n ? next++ : end++] = k;
    }
    // Holes left: the last rows move down into them.
    std::size_t hole = next, last = end;
    for (;;) {
      while (hole < last && order_[hole] != npos) ++hole;
      while (last > hole && order_[last - 1] == npos) --last;
      if (hole >= last) break;
      order_[hole] = order_[last - 1];
      order_[--last] = npos;
    }
    order_.resize(n);
    rows_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      const kv::sequence_id key = keys[order_[r]];
      rows_[r] = key;
      if (key.slot >= where_.size()) where_.resize(std::size_t{key.slot} + 1, npos);
      where_[key.slot] = static_cast<std::uint32_t>(r);
    }
    return order_;
  }

  /// The sequence in each row after the last arrange().
  std::span<const kv::sequence_id> rows() const { return rows_; }

 private:
  static constexpr std::uint32_t npos = ~std::uint32_t{0};
  std::vector<kv::sequence_id> rows_;
  std::vector<std::uint32_t> where_;  // slot -> row it held last
  std::vector<std::uint32_t> order_, fresh_;
};

}  // namespace rungs::engine
