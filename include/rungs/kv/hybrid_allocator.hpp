// hybrid_allocator<Cache, Eviction>: KV blocks for a model whose layers fall into attention
// groups (full attention, sliding window of W keys, chunked local attention of C keys), all
// drawing on one block pool, as vLLM's KVCacheCoordinator over its single-type managers.
//
// Every group has its own block table per sequence (a block holds block_size tokens of that
// group's layers) and its own prefix index; a sequence's blocks of all groups come from one
// pool, so admission, growth and preemption are one decision: create() and append() either
// give every group what it needs or change nothing.
//
//   prefix hit   the longest prefix every group can serve: the full-attention groups look it
//                up first, then every other group shortens it (a sliding group needs only the
//                ceil((W - 1) / block_size) blocks its first query reads, a chunked group the
//                blocks from the start of that query's chunk), until no group shortens it
//                (vLLM's HybridKVCacheCoordinator.find_longest_cache_hit). Each group then
//                holds only the hit blocks its first query can see; the others are null
//                entries, neither taken nor refreshed.
//   admission    the new blocks of every group (the prompt, or admit_tokens of it, past the
//                hit) plus the evictable hit blocks they take, against one unused count
//                (keeping watermark_blocks free).
//   append       each windowed group first releases, tail first, the blocks its step's first
//                query cannot see (sliding: keys below p - W + 1; chunked: keys before the
//                chunk of p), and those count toward the step's new blocks.
//   free         every group's blocks, each group tail first; cached blocks stay hits.
//   fork         a child sharing every group's blocks; an append that writes into a shared
//                block (the partial tail, lookahead slots) copies it first, in its group
//                (copy-on-write, listed by copies()), as paged_allocator does.
//
// It is a rungs::kv::block_allocator, so an engine (and its scheduler) runs on it: the
// engine's staged batch carries one block table per sequence, group 0's (block_table(seq),
// block_tables(), slot_mapping(ranges, out)); every group's tables are read with a group
// argument (block_table(seq, g), block_tables(g), slot_mapping(g, ranges, out)).
//
// The order per step is paged_allocator's: append (plan) -> run -> commit -> free. Blocks are
// registered in each group's prefix index as they fill and stay hits after a free only once
// their step is committed. Not here: groups with different block sizes, Mamba groups.
// Per-step calls allocate nothing and never throw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <rungs/blocks.hpp>
#include <rungs/kv/assert.hpp>
#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/block_table.hpp>
#include <rungs/kv/detail/sequence_record.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/kv/prefix_cache.hpp>
#include <rungs/kv/result.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

/// The most blocks a sequence of `num_tokens` tokens holds at once over attention groups
/// `groups` (hybrid_allocator::blocks_held), each append bringing at most `step_tokens`.
inline std::int64_t blocks_held(std::span<const attention_group> groups, std::int32_t block_size,
                                std::int64_t num_tokens, std::int64_t step_tokens) {
  const std::int64_t all = (std::max<std::int64_t>(num_tokens, 0) + block_size - 1) / block_size;
  std::int64_t sum = 0;
  for (const attention_group& a : groups) {
    const std::int64_t span = std::max<std::int64_t>(step_tokens, 0) + a.span - 1;
    sum += a.kind == attention_kind::full ? all : std::min(all, (span + block_size - 1) / block_size + 1);
  }
  return sum;
}

struct hybrid_config {
  std::int32_t num_blocks = 0;
  std::int32_t block_size = 16;
  std::int32_t max_sequences = 256;
  std::int32_t max_model_len = 8192;
  std::int32_t watermark_blocks = 0;
  std::vector<attention_group> groups;  ///< distinct specs; layers of one spec share a group
};

template <prefix_cache_policy Cache = prefix_cache<>, eviction_policy Eviction = lru>
class hybrid_allocator {
 public:
  using cache_type = Cache;
  using pool_type = block_pool<Eviction>;

  /// Throws std::invalid_argument naming the first bad field.
  explicit hybrid_allocator(hybrid_config config)
      : config_(validated(std::move(config))),
        groups_(static_cast<std::int32_t>(config_.groups.size())),
        stride_(static_cast<std::int32_t>(rungs::blocks_for(config_.max_model_len, config_.block_size))),
        pool_(config_.num_blocks),
        owner_(static_cast<std::size_t>(config_.num_blocks), -1),
        seqs_(static_cast<std::size_t>(config_.max_sequences)),
        first_(static_cast<std::size_t>(config_.max_sequences) * config_.groups.size(), 0),
        live_(config_.groups.size(), 0) {
    order_.reserve(config_.groups.size());
    copies_.reserve(static_cast<std::size_t>(config_.num_blocks));
    for (std::int32_t pass : {0, 1})  // full-attention groups first: their lookup bounds the rest
      for (std::int32_t g = 0; g < groups_; ++g)
        if ((config_.groups[g].kind == attention_kind::full) == (pass == 0)) order_.push_back(g);
    for (std::int32_t g = 0; g < groups_; ++g) {
      caches_.emplace_back(config_.num_blocks, config_.block_size, config_.max_sequences);
      tables_.emplace_back(config_.max_sequences, stride_);
    }
    for (std::int32_t r = config_.max_sequences - 1; r >= 0; --r) free_rows_.push_back(static_cast<std::uint32_t>(r));
  }

  std::int32_t block_size() const { return config_.block_size; }
  std::int32_t num_blocks() const { return config_.num_blocks; }
  std::int32_t num_groups() const { return groups_; }
  std::int32_t max_model_len() const { return config_.max_model_len; }
  std::int32_t max_sequences() const { return config_.max_sequences; }
  const hybrid_config& config() const { return config_; }
  const pool_type& pool() const { return pool_; }

  /// Whether a sequence of `num_tokens` tokens fits now in one append, every group taking
  /// all its blocks (no prefix hits, no window releases counted: conservative), keeping the
  /// watermark free. create() makes the exact check.
  bool can_admit(std::int32_t num_tokens) const {
    if (num_tokens < 0 || num_tokens > config_.max_model_len || free_rows_.empty()) return false;
    return std::int64_t{blocks(num_tokens)} * groups_ + config_.watermark_blocks <= pool_.num_unused();
  }

  /// The most blocks a sequence of `num_tokens` tokens holds at once, over all groups, when
  /// every append brings at most `step_tokens` tokens (prompt chunks, lookahead included): a
  /// full group all of its blocks, a windowed group of span S at most
  /// ceil((step_tokens + S - 1) / block_size) + 1 (the blocks an append's first query can
  /// still see, released only at the next append, and the step's new ones). The scheduler
  /// refuses a request above the pool with it.
  std::int64_t blocks_held(std::int32_t num_tokens, std::int32_t step_tokens) const {
    return kv::blocks_held(config_.groups, config_.block_size, std::clamp(num_tokens, 0, config_.max_model_len), step_tokens);
  }

  /// Blocks of group g in some sequence's table now (each shared block once).
  std::int32_t live_blocks(std::int32_t g) const { return live_[static_cast<std::size_t>(g)]; }

  /// The prefix create(prompt, params) would reuse now, in tokens; changes nothing.
  std::int32_t cached_prefix_tokens(std::span<const token_id> prompt, const sequence_params& params = {}) const {
    if constexpr (!Cache::enabled) return 0;
    else return longest_hit(prompt, params, [](std::int32_t) { return std::span<block_id>{}; }) * config_.block_size;
  }

  result<sequence_start> create(std::span<const token_id> prompt, const sequence_params& params = {}) {
    if (RUNGS_UNLIKELY(free_rows_.empty())) return errc::too_many_sequences;
    if (RUNGS_UNLIKELY(prompt.size() > static_cast<std::size_t>(config_.max_model_len))) return errc::sequence_too_long;
    if (RUNGS_UNLIKELY(params.admit_tokens < 0)) return errc::invalid_range;
    const std::uint32_t r = free_rows_.back();
    std::int32_t hits = 0;
    // The unused rows double as scratch for the hit ids until the admission check.
    if constexpr (Cache::enabled) hits = longest_hit(prompt, params, [&](std::int32_t g) { return tables_[g].row(r); });
    std::int64_t admitted = static_cast<std::int64_t>(prompt.size());
    if (params.admit_tokens > 0)
      admitted = std::min(admitted, std::int64_t{hits} * config_.block_size + params.admit_tokens);
    const std::int32_t fresh = blocks(static_cast<std::int32_t>(admitted)) - hits;
    std::int64_t needed = std::int64_t{fresh} * groups_;
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<const block_id> row = tables_[g].row(r);
      for (std::int32_t k = window_start(g, hits * config_.block_size); k < hits; ++k) needed += pool_.ref_count(row[k]) == 0;
    }
    if (needed + config_.watermark_blocks > pool_.num_unused()) {
      for (std::int32_t g = 0; g < groups_; ++g) std::fill_n(tables_[g].row(r).begin(), hits, null_block);
      return errc::out_of_blocks;
    }
    free_rows_.pop_back();
    sequence_state& s = seqs_[r];
    ++s.generation;
    s.active = true;
    s.finished = false;
    s.priority = params.priority;
    s.num_tokens = hits * config_.block_size;
    s.num_blocks = s.committed_blocks = hits;
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<block_id> row = tables_[g].row(r);
      const std::int32_t first = window_start(g, s.num_tokens);
      std::fill_n(row.begin(), first, null_block);
      for (std::int32_t k = first; k < hits; ++k) {
        live_[g] += pool_.ref_count(row[k]) == 0;
        [[maybe_unused]] const errc e = pool_.share(row[k], params.priority);
        RUNGS_KV_ASSERT(e == errc::ok, "a prefix hit is a live or evictable cached block");
      }
      first_block(r, g) = first;
    }
    if constexpr (Cache::enabled) {
      const auto chain = caches_[0].chain_of(caches_[0].root(params.adapter_id, params.cache_salt),
                                             prompt.first(static_cast<std::size_t>(s.num_tokens)));
      for (Cache& c : caches_) c.start(r, chain);
    }
    prefix_query_tokens_ += prompt.size();
    prefix_hit_tokens_ += static_cast<std::uint64_t>(s.num_tokens);
    return sequence_start{sequence_id{r, s.generation}, s.num_tokens};
  }

  /// The step's tokens plus `lookahead` slots, in every group: one decision for all of them.
  errc append(sequence_id id, std::span<const token_id> tokens, std::int32_t lookahead = 0) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(s->finished)) return errc::sequence_finished;
    if (RUNGS_UNLIKELY(lookahead < 0)) return errc::invalid_range;
    const std::int64_t end = s->num_tokens + static_cast<std::int64_t>(tokens.size()) + lookahead;
    if (RUNGS_UNLIKELY(end > config_.max_model_len)) return errc::sequence_too_long;
    const std::int32_t grow =
        std::max(0, blocks(static_cast<std::int32_t>(end)) - s->num_blocks);
    // Blocks that leave a window come back (when this sequence is their only user) before the
    // new ones are taken, so they pay for them; they go only once the append cannot fail.
    std::int64_t returned = 0, shared = 0;
    // Copy-on-write: only fork shares a block at or past a sequence's write position (prefix
    // hits are full blocks before it), so only a forked sequence looks for shared blocks in
    // [the block of its first new token, the end of its table) when the append writes.
    const std::int32_t first_written = s->num_tokens / config_.block_size;
    const std::int32_t last_written =
        s->tail_may_be_shared && end > s->num_tokens ? std::min(blocks(static_cast<std::int32_t>(end)), s->num_blocks) : 0;
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<const block_id> row = tables_[g].row(id.slot);
      const std::int32_t leaving = std::max(first_block(id.slot, g), window_start(g, s->num_tokens));
      for (std::int32_t k = first_block(id.slot, g); k < leaving; ++k) returned += pool_.ref_count(row[k]) == 1;
      for (std::int32_t k = first_written; k < last_written; ++k) shared += pool_.ref_count(row[k]) > 1;
    }
    if (RUNGS_UNLIKELY(std::int64_t{grow} * groups_ + shared > pool_.num_unused() + returned)) return errc::out_of_blocks;
    if (RUNGS_UNLIKELY(copies_.size() + static_cast<std::size_t>(shared) > copies_.capacity()))
      return errc::buffer_too_small;  // the engine never called clear_copies()
    // Every group releases before any takes: one group's new blocks may be another's returns.
    // The released blocks lie before the block of p, so they are never among the copied ones.
    for (std::int32_t g = 0; g < groups_; ++g)
      release_out_of_window(*s, id.slot, g, std::max(first_block(id.slot, g), window_start(g, s->num_tokens)));
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<block_id> row = tables_[g].row(id.slot);
      for (std::int32_t k = first_written; shared > 0 && k < last_written; ++k) {
        if (pool_.ref_count(row[k]) <= 1) continue;
        const block_id dst = take_block(g, s->priority);
        copies_.push_back(block_copy{row[k], dst});
        release(row[k]);
        row[k] = dst;
        ++cow_copies_;
        --shared;
      }
      for (std::int32_t k = s->num_blocks; k < s->num_blocks + grow; ++k) row[k] = take_block(g, s->priority);
      if constexpr (Cache::enabled) caches_[g].append(id.slot, s->num_tokens, tokens, row.data(), pool_);
    }
    // Every block from the write position to the end of the table is private now.
    if (last_written == s->num_blocks) s->tail_may_be_shared = false;
    s->num_blocks += grow;
    s->num_tokens += static_cast<std::int32_t>(tokens.size());
    return errc::ok;
  }

  /// A child sharing every block of every group (parallel sampling, beam search): fails with
  /// unknown_sequence, sequence_finished or too_many_sequences, changing nothing.
  result<sequence_id> fork(sequence_id parent) {
    sequence_state* p = find(parent);
    if (RUNGS_UNLIKELY(p == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(p->finished)) return errc::sequence_finished;
    if (RUNGS_UNLIKELY(free_rows_.empty())) return errc::too_many_sequences;
    const std::uint32_t r = free_rows_.back();
    free_rows_.pop_back();
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<const block_id> from = tables_[g].row(parent.slot);
      const std::span<block_id> to = tables_[g].row(r);
      for (std::int32_t k = first_block(parent.slot, g); k < p->num_blocks; ++k) {
        to[k] = from[k];
        [[maybe_unused]] const errc e = pool_.share(from[k], p->priority);
        RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
      }
      first_block(r, g) = first_block(parent.slot, g);
    }
    sequence_state& c = seqs_[r];
    c.fork_from(*p);
    if constexpr (Cache::enabled)
      for (Cache& cache : caches_) cache.fork(parent.slot, r, p->num_tokens);
    return sequence_id{r, c.generation};
  }

  /// The step computing positions [0, num_tokens) ran (see paged_allocator::commit).
  errc commit(sequence_id id, std::int32_t num_tokens) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(num_tokens < 0 || num_tokens > s->num_tokens)) return errc::invalid_range;
    const std::int32_t full = num_tokens / config_.block_size;
    if constexpr (Cache::enabled)
      for (std::int32_t g = 0; g < groups_; ++g) {
        const std::span<const block_id> row = tables_[g].row(id.slot);
        for (std::int32_t k = std::max(s->committed_blocks, first_block(id.slot, g)); k < full; ++k)
          caches_[g].settle(row[k]);
      }
    s->committed_blocks = std::max(s->committed_blocks, full);
    return errc::ok;
  }

  errc finish(sequence_id id) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(s->finished)) return errc::sequence_finished;
    s->finished = true;
    return errc::ok;
  }

  /// Releases every group's blocks, each group tail first, and retires the id (preemption
  /// is a free: the cached blocks stay hits for the readmission).
  errc free(sequence_id id) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    for (std::int32_t g = 0; g < groups_; ++g) {
      const std::span<block_id> row = tables_[g].row(id.slot);
      if constexpr (Cache::enabled)
        for (std::int32_t k = std::max(s->committed_blocks, first_block(id.slot, g)); k < s->num_blocks; ++k)
          forget_if_pending(g, row[k]);
      for (std::int32_t k = s->num_blocks - 1; k >= first_block(id.slot, g); --k) release(row[k]);
      std::fill_n(row.begin(), s->num_blocks, null_block);
      first_block(id.slot, g) = 0;
    }
    s->active = false;
    s->tail_may_be_shared = false;
    s->num_blocks = s->num_tokens = s->committed_blocks = 0;
    free_rows_.push_back(id.slot);
    return errc::ok;
  }

  // ---- what the device reads -------------------------------------------------------------

  /// Group g's block ids of the sequence (null_block where blocks left the group's window).
  result<std::span<const block_id>> block_table(sequence_id id, std::int32_t g) const {
    const sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(g < 0 || g >= groups_)) return errc::invalid_range;
    return tables_[g].row(id.slot).first(static_cast<std::size_t>(s->num_blocks));
  }
  block_table_view block_tables(std::int32_t g) const { return tables_[g].view(); }

  /// Group 0's table of the sequence: the one an engine stages (see the file comment).
  result<std::span<const block_id>> block_table(sequence_id id) const { return block_table(id, 0); }
  /// Group 0's whole table (block_tables(0)).
  block_table_view block_tables() const { return block_tables(0); }
  /// Group 0's slot mapping (slot_mapping(0, ranges, out)).
  result<std::int32_t> slot_mapping(std::span<const slot_range> ranges, std::span<slot_id> out) const {
    return slot_mapping(0, ranges, out);
  }

  /// Copy-on-write pairs since the last clear_copies(), in the order they were made (a pair's
  /// blocks belong to one group: copy that group's layers).
  std::span<const block_copy> copies() const { return copies_; }
  void clear_copies() { copies_.clear(); }

  /// Group g's slot mapping for `ranges` (paged_allocator::slot_mapping), -1 padded.
  result<std::int32_t> slot_mapping(std::int32_t g, std::span<const slot_range> ranges, std::span<slot_id> out) const {
    if (RUNGS_UNLIKELY(g < 0 || g >= groups_)) return errc::invalid_range;
    return write_slot_mapping(ranges, out, config_.block_size, [this, g](sequence_id id) -> std::optional<held_row> {
      const sequence_state* s = find(id);
      if (RUNGS_UNLIKELY(s == nullptr)) return std::nullopt;
      return held_row{tables_[g].row(id.slot), first_block(id.slot, g), s->num_blocks};
    });
  }

  result<std::int32_t> num_tokens(sequence_id id) const {
    const sequence_state* s = find(id);
    if (s == nullptr) return errc::unknown_sequence;
    return s->num_tokens;
  }
  bool contains(sequence_id id) const { return find(id) != nullptr; }

  kv_metrics metrics() const {
    kv_metrics m = pool_metrics(pool_, config_.max_sequences - static_cast<std::int32_t>(free_rows_.size()),
                                prefix_query_tokens_, prefix_hit_tokens_);
    m.cow_copies = cow_copies_;
    return m;
  }

  /// Empty when consistent; otherwise the first broken invariant: the pool's own, ref counts
  /// equal the entries of all groups' tables, a block sits in one group's tables only (its
  /// owner), windowed-out and trailing entries are null, each group's index holds exactly its
  /// cached blocks. O(N + tables), allocates: for tests.
  std::string check_consistency() const {
    if (std::string e = pool_.check_consistency(); !e.empty()) return "pool: " + e;
    std::vector<std::int32_t> users(static_cast<std::size_t>(config_.num_blocks), 0);
    for (std::int32_t g = 0; g < groups_; ++g)
      for (std::uint32_t r = 0; r < seqs_.size(); ++r) {
        const sequence_state& s = seqs_[r];
        const std::int32_t n = s.active ? s.num_blocks : 0, first = s.active ? first_block(r, g) : 0;
        const std::string where = "group " + std::to_string(g) + " row " + std::to_string(r);
        if (first < 0 || first > n) return where + ": first block " + std::to_string(first) + " outside [0, n]";
        const std::span<const block_id> row = tables_[g].row(r);
        for (std::int32_t k = 0; k < stride_; ++k) {
          const block_id b = row[k];
          if (k < first || k >= n) {
            if (b != null_block) return where + ": entry " + std::to_string(k) + " should be null";
            continue;
          }
          if (!pool_.in_range(b)) return where + ": block " + std::to_string(b) + " out of range";
          if (owner_[b] != g) return where + ": block " + std::to_string(b) + " belongs to group " + std::to_string(owner_[b]);
          ++users[b];
        }
      }
    std::vector<std::int32_t> live(live_.size(), 0);
    for (block_id b = 0; b < config_.num_blocks; ++b)
      if (users[b] > 0) ++live[static_cast<std::size_t>(owner_[b])];
    for (std::int32_t g = 0; g < groups_; ++g)
      if (live[g] != live_[g])
        return "group " + std::to_string(g) + ": live_blocks " + std::to_string(live_[g]) + " but " +
               std::to_string(live[g]) + " blocks in its tables";
    std::int32_t cached = 0, indexed = 0;
    for (block_id b = 0; b < config_.num_blocks; ++b) {
      if (users[b] != pool_.ref_count(b))
        return "block " + std::to_string(b) + ": ref_count " + std::to_string(pool_.ref_count(b)) + " but " +
               std::to_string(users[b]) + " entries";
      if constexpr (Cache::enabled) {
        const bool in_index = owner_[b] >= 0 && caches_[owner_[b]].indexed(b);
        if (pool_.cached(b) != in_index)
          return "block " + std::to_string(b) + (pool_.cached(b) ? ": cached but not indexed" : ": indexed, not cached");
        cached += pool_.cached(b);
      }
    }
    if constexpr (Cache::enabled) {
      for (const Cache& c : caches_) indexed += c.size();
      if (indexed != cached)
        return "the groups' indexes hold " + std::to_string(indexed) + " entries (blocks) for " + std::to_string(cached) +
               " cached blocks";
    }
    return {};
  }

 private:
  using sequence_state = detail::sequence_record;

  static hybrid_config validated(hybrid_config c) {
    auto fail = [](const std::string& what) { throw std::invalid_argument("hybrid_config: " + what); };
    if (c.num_blocks <= 0 || c.num_blocks > INT32_MAX - 64)
      fail("num_blocks = " + std::to_string(c.num_blocks) + " must be in [1, 2147483583]");
    if (c.block_size <= 0) fail("block_size = " + std::to_string(c.block_size) + " must be positive");
    if (c.max_sequences <= 0) fail("max_sequences = " + std::to_string(c.max_sequences) + " must be positive");
    if (c.max_model_len <= 0) fail("max_model_len = " + std::to_string(c.max_model_len) + " must be positive");
    if (c.watermark_blocks < 0 || c.watermark_blocks >= c.num_blocks)
      fail("watermark_blocks = " + std::to_string(c.watermark_blocks) + " must be in [0, num_blocks)");
    if (c.groups.empty()) fail("groups is empty; a model has at least one attention group");
    for (std::size_t g = 0; g < c.groups.size(); ++g) {
      const attention_group& a = c.groups[g];
      const std::string at = "groups[" + std::to_string(g) + "]";
      if (a.kind == attention_kind::full && a.span != 0)
        fail(at + ".span = " + std::to_string(a.span) + " must be 0 for full attention");
      if (a.kind != attention_kind::full && a.span <= 0)
        fail(at + ".span = " + std::to_string(a.span) + " must be a positive number of keys");
      for (std::size_t h = 0; h < g; ++h)
        if (c.groups[h] == a) fail(at + " repeats groups[" + std::to_string(h) + "]; layers of one spec share a group");
    }
    const std::int64_t entries = std::int64_t{rungs::blocks_for(c.max_model_len, c.block_size)} * c.max_sequences *
                                 static_cast<std::int64_t>(c.groups.size());
    if (entries > (std::int64_t{1} << 30))
      fail("groups x max_sequences x ceil(max_model_len / block_size) = " + std::to_string(entries) +
           " block-table entries exceeds 2^30");
    return c;
  }

  sequence_state* find(sequence_id id) {
    if (id.slot >= seqs_.size()) return nullptr;
    sequence_state& s = seqs_[id.slot];
    return s.active && s.generation == id.generation ? &s : nullptr;
  }
  const sequence_state* find(sequence_id id) const { return const_cast<hybrid_allocator*>(this)->find(id); }

  /// ceil(tokens / block_size), for tokens in [0, max_model_len].
  std::int32_t blocks(std::int32_t tokens) const { return static_cast<std::int32_t>(rungs::blocks_for(tokens, config_.block_size)); }

  std::int32_t& first_block(std::uint32_t r, std::int32_t g) { return first_[r * groups_ + g]; }
  std::int32_t first_block(std::uint32_t r, std::int32_t g) const { return first_[r * groups_ + g]; }

  /// The first block of group g a query at position p can see: blocks before it hold only
  /// keys below p - W + 1 (sliding) or before p's chunk (chunked local); 0 for full attention.
  std::int32_t window_start(std::int32_t g, std::int32_t p) const {
    const attention_group& a = config_.groups[g];
    if (a.kind == attention_kind::sliding_window) return std::max(0, p - a.span + 1) / config_.block_size;
    if (a.kind == attention_kind::chunked_local) return p / a.span * a.span / config_.block_size;
    return 0;
  }

  // Group g's longest hit of at most `limit` whole blocks of `prompt` from `root`: full
  // attention the leading run, sliding the last blocks its first query reads (prefix_cache's
  // run), chunked the blocks from the chunk start of the limit on (that start is a hit with
  // no block: its first query reads only its own chunk). A non-empty `out` gets the hit ids,
  // null before the window.
  template <class Digest>
  std::int32_t group_hit(std::int32_t g, const Digest& root, std::span<const token_id> prompt, std::int32_t limit,
                         std::span<block_id> out) const {
    const Cache& c = caches_[g];
    const attention_group& a = config_.groups[g];
    const std::span<const token_id> upto = prompt.first(static_cast<std::size_t>(limit) * config_.block_size);
    Digest chain = root;
    if (a.kind == attention_kind::chunked_local) {
      const std::int32_t s = window_start(g, limit * config_.block_size);
      const auto at = static_cast<std::size_t>(s) * config_.block_size;
      chain = c.chain_of(root, upto.first(at));
      if (out.empty()) return s + c.matched(chain, upto.subspan(at));
      std::fill_n(out.begin(), s, null_block);
      return s + c.match(chain, upto.subspan(at), out.subspan(static_cast<std::size_t>(s)));
    }
    const std::int32_t run =
        a.kind == attention_kind::full ? whole_chain : std::max(1, blocks(a.span - 1));
    if (out.empty()) return c.matched(chain, upto, run);
    return c.match(chain, upto, out, run);
  }

  // The cross-group hit in blocks (at most the prompt minus its last token): full-attention
  // groups first, then each other group shortens the candidate until a whole pass shortens
  // nothing; it converges since the candidate only shrinks. row_of(g) is group g's row to
  // write the hit ids to (empty: write nothing); it ends with the hit of the final length.
  template <class RowOf>
  std::int32_t longest_hit(std::span<const token_id> prompt, const sequence_params& params, RowOf row_of) const {
    if (prompt.empty()) return 0;
    const auto root = caches_[0].root(params.adapter_id, params.cache_salt);
    const std::int32_t most = static_cast<std::int32_t>((prompt.size() - 1) / config_.block_size);
    std::int32_t hit = most;
    for (bool shortened = true; shortened;) {
      shortened = false;
      for (const std::int32_t g : order_) {
        const std::span<block_id> row = row_of(g);
        const std::int32_t e = group_hit(g, root, prompt, hit, row.empty() ? row : row.first(static_cast<std::size_t>(hit)));
        shortened = shortened || e < hit;
        hit = e;
      }
    }
    for (std::int32_t g = 0; g < groups_; ++g)  // entries an earlier, longer candidate wrote
      if (const std::span<block_id> row = row_of(g); !row.empty()) std::fill(row.begin() + hit, row.begin() + most, null_block);
    return hit;
  }

  void release(block_id b) {
    [[maybe_unused]] const errc e = pool_.release(b);
    RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
    live_[owner_[b]] -= pool_.ref_count(b) == 0;
  }

  /// Group g's blocks [first, leaving), tail first; pending ones leave the index first.
  void release_out_of_window(const sequence_state& s, std::uint32_t r, std::int32_t g, std::int32_t leaving) {
    const std::span<block_id> row = tables_[g].row(r);
    for (std::int32_t k = leaving - 1; k >= first_block(r, g); --k) {
      if constexpr (Cache::enabled)
        if (k >= s.committed_blocks) forget_if_pending(g, row[k]);
      release(row[k]);
      row[k] = null_block;
    }
    first_block(r, g) = std::max(first_block(r, g), leaving);
  }

  void forget_if_pending(std::int32_t g, block_id b) {
    if (!caches_[g].pending(b)) return;
    caches_[g].forget(b);
    [[maybe_unused]] const errc e = pool_.unmark_cached(b);
    RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
  }

  /// Only after checking that enough blocks are unused. An evicted block leaves the index of
  /// the group that last held it.
  block_id take_block(std::int32_t g, std::uint8_t priority) {
    const result<block_id> b = pool_.allocate(priority, [this](block_id evicted) {
      if constexpr (Cache::enabled) caches_[owner_[evicted]].forget(evicted);
    });
    RUNGS_KV_ASSERT(b.has_value(), "an allocation checked against num_unused() succeeds");
    owner_[*b] = g;
    ++live_[g];
    return *b;
  }

  hybrid_config config_;
  std::int32_t groups_;
  std::int32_t stride_;
  std::vector<std::int32_t> order_;  // group lookup order: full attention first
  pool_type pool_;
  std::vector<std::int32_t> owner_;  // per block: the group that last took it (-1: never)
  std::vector<Cache> caches_;
  std::vector<kv::block_tables> tables_;
  std::vector<sequence_state> seqs_;
  std::vector<std::int32_t> first_;  // [row][group]: blocks before it left the group's window
  std::vector<std::uint32_t> free_rows_;
  std::vector<std::int32_t> live_;  // per group: blocks in some table (live_blocks)
  std::vector<block_copy> copies_;
  std::uint64_t cow_copies_ = 0;
  std::uint64_t prefix_query_tokens_ = 0;
  std::uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace rungs::kv
