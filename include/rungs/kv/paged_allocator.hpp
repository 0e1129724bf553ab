// paged_allocator<Cache, Eviction>: the block allocator an inference engine calls every step.
//
// It owns a block_pool, an optional prefix cache, and one preallocated block-table row per
// sequence. Every per-step call is O(blocks touched), allocates no memory and never throws;
// when it cannot do what was asked (out of blocks, stale id, finished sequence) it returns an
// errc and leaves every piece of state as it was, so a scheduler can preempt and retry.
//
// A sequence's life:
//   create(prompt, params)   reuses the longest cached prefix (capped one token short of the
//                            prompt), checks the whole prompt fits (or its first
//                            params.admit_tokens new tokens; keeping the watermark free),
//                            returns {id, cached_tokens}; no other block is taken yet.
//   append(seq, tokens, k)   the step's new tokens (a prefill chunk, or the last sampled token)
//                            plus k lookahead slots for draft tokens. A block is allocated only
//                            when the last one is full; a shared block about to be written is
//                            copied first (copy-on-write, reported by copies()).
//   commit(seq, n)           the step that computed the first n tokens ran: their full blocks
//                            hold written KV and stay prefix hits after a free.
//   fork(seq)                a child sharing every block (parallel sampling, beam search).
//   finish(seq)              no more appends; blocks stay until free (an asynchronous engine
//                            frees once the last step that reads them has completed).
//   free(seq)                blocks released tail first; cached ones stay reusable, except
//                            blocks registered since the last commit: nobody wrote their KV.
//
// With allocator_config::sliding_window = W, append() also releases the blocks no query from
// the step's first one on can see (block i once (i + 1) * block_size <= p - W + 1, p the
// step's first query position), tail first, leaving null entries at the front of the block
// table. create() then needs only the cached blocks inside the first query's window (the
// prefix's earlier blocks may be evicted), and neither takes nor refreshes hit blocks outside
// it.
//
// The order per step: append (plan) -> run the step -> commit -> free the finished ones.
//
// With set_lower_tier(&t) (prefix caching, full attention), the cached blocks it evicts move
// down to the tier t and create() continues a lookup there where the pool's hits end, taking
// the blocks it finds back up (prefix_tier.hpp).
//
// Aliases: free_list_allocator (no caching, LIFO free list) and
// prefix_caching_allocator<Hasher, Eviction> (defaults wyhash64 and lru).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <rungs/blocks.hpp>
#include <rungs/config.hpp>
#include <rungs/kv/allocator.hpp>
#include <rungs/kv/assert.hpp>
#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/block_table.hpp>
#include <rungs/kv/detail/block_divider.hpp>
#include <rungs/kv/detail/sequence_record.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/hash.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/kv/prefix_cache.hpp>
#include <rungs/kv/prefix_tier.hpp>
#include <rungs/kv/result.hpp>
#include <rungs/kv/types.hpp>
#include <rungs/kv/wyhash.hpp>

namespace rungs::kv {

struct allocator_config {
  std::int32_t num_blocks = 0;
  std::int32_t block_size = 16;
  std::int32_t max_sequences = 256;    // block-table rows
  std::int32_t max_model_len = 8192;   // tokens of one sequence, lookahead slots included
  std::int32_t watermark_blocks = 0;   // admission keeps this many blocks unused (vLLM v0: 1%)
  /// Sliding-window attention over W keys (a query at position p sees keys [p - W + 1, p]);
  /// 0: full attention. With W > 0, append() first releases the blocks that have left the
  /// window of the step's first query, as vLLM's SlidingWindowManager does; their table entries
  /// become null_block (-1), which the kernels never read.
  std::int32_t sliding_window = 0;
};

template <prefix_cache_policy Cache = prefix_cache<>, eviction_policy Eviction = lru>
class paged_allocator {
 public:
  using cache_type = Cache;
  using eviction_type = Eviction;
  using pool_type = block_pool<Eviction>;

  /// Throws std::invalid_argument naming the first field that is out of range.
  explicit paged_allocator(const allocator_config& config)
      : config_(validated(config)),
        div_(config_.block_size),
        pool_(config_.num_blocks),
        cache_(config_.num_blocks, config_.block_size, config_.max_sequences),
        tables_(config_.max_sequences, blocks_for(config_.max_model_len)),
        seqs_(static_cast<std::size_t>(config_.max_sequences)) {
    free_rows_.reserve(seqs_.size());
    for (std::int32_t r = config_.max_sequences - 1; r >= 0; --r)
      free_rows_.push_back(static_cast<std::uint32_t>(r));
    copies_.reserve(static_cast<std::size_t>(config_.num_blocks));
  }

  std::int32_t block_size() const { return config_.block_size; }
  std::int32_t num_blocks() const { return config_.num_blocks; }
  std::int32_t max_sequences() const { return config_.max_sequences; }
  std::int32_t max_model_len() const { return config_.max_model_len; }
  const allocator_config& config() const { return config_; }
  const pool_type& pool() const { return pool_; }

  /// Attaches a lower tier of the prefix cache (prefix_tier.hpp; null detaches): evicted
  /// cached blocks move down to it, and create() promotes what it holds after the pool's hits.
  /// The tier must outlive the allocator or be detached first. Throws std::invalid_argument
  /// with a sliding window (its hits need only the blocks inside the window; a tier keeps
  /// whole chains).
  template <class C = Cache>
    requires C::enabled
  void set_lower_tier(prefix_tier<typename C::digest_type>* tier) {
    if (config_.sliding_window != 0)
      throw std::invalid_argument("paged_allocator: a lower prefix tier needs full attention; sliding_window = " +
                                  std::to_string(config_.sliding_window));
    lower_ = tier;
  }

  // ---- admission -------------------------------------------------------------------------

  /// Whether a sequence of `num_tokens` tokens fits now without counting prefix hits
  /// (conservative), keeping the watermark free. create() makes the exact check.
  bool can_admit(std::int32_t num_tokens) const {
    if (num_tokens < 0 || num_tokens > config_.max_model_len || free_rows_.empty()) return false;
    return blocks_for(num_tokens) + config_.watermark_blocks <= pool_.num_unused();
  }

  /// The tokens of `prompt`'s longest cached prefix that create(prompt, params) would reuse
  /// now (whole blocks, at most the prompt minus its last token); 0 without a prefix cache.
  /// Changes nothing: a fleet's router asks every replica before it sends a request.
  std::int32_t cached_prefix_tokens(std::span<const token_id> prompt, const sequence_params& params = {}) const {
    if constexpr (Cache::enabled) {
      if (prompt.empty()) return 0;
      return cache_.matched(cache_.root(params.adapter_id, params.cache_salt), prompt.first(prompt.size() - 1),
                            hit_run()) *
             config_.block_size;
    } else {
      (void)prompt;
      (void)params;
      return 0;
    }
  }

  result<sequence_start> create(std::span<const token_id> prompt,
                                const sequence_params& params = {}) {
    if (RUNGS_UNLIKELY(free_rows_.empty())) return errc::too_many_sequences;
    if (RUNGS_UNLIKELY(prompt.size() > static_cast<std::size_t>(config_.max_model_len)))
      return errc::sequence_too_long;
    if (RUNGS_UNLIKELY(params.admit_tokens < 0)) return errc::invalid_range;
    const std::uint32_t r = free_rows_.back();
    const std::span<block_id> row = tables_.row(r);
    // hits: blocks of the cached prefix; the ones before `first` are outside the window of the
    // first query (at hits x block_size), so they are neither taken nor refreshed (null entries).
    // lower: blocks after the pool's hits that the lower tier holds (they need pool blocks).
    std::int32_t hits = 0, first = 0, evictable_hits = 0, lower = 0;
    [[maybe_unused]] chain_type chain{};
    if constexpr (Cache::enabled) {
      chain = cache_.root(params.adapter_id, params.cache_salt);
      // The row is unused: it doubles as scratch for the hit ids until the admission check.
      if (!prompt.empty()) hits = cache_.match(chain, prompt.first(prompt.size() - 1), row, hit_run());
      first = window_start(hits * config_.block_size);
      for (std::int32_t i = first; i < hits; ++i) evictable_hits += pool_.ref_count(row[i]) == 0;
      if (RUNGS_UNLIKELY(lower_ != nullptr) && !prompt.empty()) lower = lower_hits(chain, prompt, hits);
    }
    // Tokens that must fit now: the whole prompt, or the cached prefix plus admit_tokens.
    std::int64_t admitted = static_cast<std::int64_t>(prompt.size());
    if (params.admit_tokens > 0)
      admitted = std::min(admitted, static_cast<std::int64_t>(hits + lower) * config_.block_size + params.admit_tokens);
    const std::int32_t needed = blocks_for(static_cast<std::int32_t>(admitted)) - hits;
    if (needed + evictable_hits + config_.watermark_blocks > pool_.num_unused()) {
      std::fill_n(row.begin(), hits, null_block);
      return errc::out_of_blocks;
    }
    free_rows_.pop_back();
    std::fill_n(row.begin(), first, null_block);
    for (std::int32_t i = first; i < hits; ++i) {
      [[maybe_unused]] const errc e = pool_.share(row[i], params.priority);
      RUNGS_KV_ASSERT(e == errc::ok, "a prefix hit is a live or evictable cached block");
    }
    sequence_state& s = seqs_[r];
    ++s.generation;
    s.active = true;
    s.finished = false;
    s.priority = params.priority;
    s.tail_may_be_shared = false;
    s.num_blocks = hits;
    s.first_block = first;
    s.committed_blocks = hits;
    s.num_tokens = hits * config_.block_size;
    if constexpr (Cache::enabled) {
      cache_.start(r, chain);
      if (RUNGS_UNLIKELY(lower_ != nullptr) && !prompt.empty()) {
        lower_->looked_up(static_cast<std::int32_t>((prompt.size() - 1) / static_cast<std::size_t>(config_.block_size)), hits);
        if (lower > 0) promote(r, s, row, chain, prompt, lower);
      }
    }
    prefix_query_tokens_ += prompt.size();
    prefix_hit_tokens_ += static_cast<std::uint64_t>(s.num_tokens);
    return sequence_start{sequence_id{r, s.generation}, s.num_tokens};
  }

  // ---- per step --------------------------------------------------------------------------

  errc append(sequence_id id, std::span<const token_id> tokens, std::int32_t lookahead = 0) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(s->finished)) return errc::sequence_finished;
    if (RUNGS_UNLIKELY(lookahead < 0)) return errc::invalid_range;
    const std::int64_t written = static_cast<std::int64_t>(tokens.size()) + lookahead;
    const std::int64_t end = s->num_tokens + written;
    if (RUNGS_UNLIKELY(end > config_.max_model_len)) return errc::sequence_too_long;
    const std::span<block_id> row = tables_.row(id.slot);
    const std::int32_t needed = blocks_for(static_cast<std::int32_t>(end));
    const std::int32_t grow = std::max(0, needed - s->num_blocks);
    // Blocks [first_block, leaving) are out of the window of this step's first query. The ones
    // only this sequence holds come back as unused blocks when released, so they count
    // toward this append's blocks; they are released only once the append cannot fail.
    // Full attention (no window) skips this: a decode append is a few dozen instructions.
    std::int32_t leaving = s->first_block, returned = 0;
    if (RUNGS_UNLIKELY(config_.sliding_window > 0)) {
      leaving = std::max(s->first_block, window_start(s->num_tokens));
      for (std::int32_t k = s->first_block; k < leaving; ++k) returned += pool_.ref_count(row[k]) == 1;
    }
    // Only fork shares a block at or past a sequence's write position (prefix hits and cached
    // blocks are full, and written positions never move back), so a sequence not forked since
    // its tail was last made private needs no copy-on-write pass.
    if (RUNGS_UNLIKELY(s->tail_may_be_shared)) {
      const errc e = unshare_tail(*s, row, needed, written > 0, grow, returned, leaving);
      if (e != errc::ok) return e;
    } else if (RUNGS_UNLIKELY(grow > pool_.num_unused() + returned)) {
      return errc::out_of_blocks;
    } else if (RUNGS_UNLIKELY(leaving > s->first_block)) {
      release_out_of_window(*s, row, leaving);
    }
    for (std::int32_t k = s->num_blocks; k < needed; ++k) row[k] = take_block(s->priority);
    s->num_blocks += grow;
    if constexpr (Cache::enabled) cache_.append(id.slot, s->num_tokens, tokens, row.data(), pool_);
    s->num_tokens += static_cast<std::int32_t>(tokens.size());
    return errc::ok;
  }

  /// The step that computes positions [0, num_tokens) ran: their full blocks hold written KV,
  /// so they stay prefix hits when the sequence is freed. Until then a block registered by
  /// append is pending and free() drops it from the prefix index. Committing fewer tokens
  /// than before changes nothing; a finished sequence may still commit its last step.
  /// Fails with unknown_sequence, or invalid_range for num_tokens outside [0, num_tokens(seq)].
  errc commit(sequence_id id, std::int32_t num_tokens) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(num_tokens < 0 || num_tokens > s->num_tokens)) return errc::invalid_range;
    const std::int32_t full = div_.quot(num_tokens);
    if constexpr (Cache::enabled) {
      const std::span<const block_id> row = tables_.row(id.slot);
      for (std::int32_t k = std::max(s->committed_blocks, s->first_block); k < full; ++k) cache_.settle(row[k]);
    }
    s->committed_blocks = std::max(s->committed_blocks, full);
    return errc::ok;
  }

  result<sequence_id> fork(sequence_id parent) {
    sequence_state* p = find(parent);
    if (RUNGS_UNLIKELY(p == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(p->finished)) return errc::sequence_finished;
    if (RUNGS_UNLIKELY(free_rows_.empty())) return errc::too_many_sequences;
    const std::uint32_t r = free_rows_.back();
    free_rows_.pop_back();
    const std::span<const block_id> from = tables_.row(parent.slot);
    const std::span<block_id> to = tables_.row(r);
    for (std::int32_t k = p->first_block; k < p->num_blocks; ++k) {
      to[k] = from[k];
      [[maybe_unused]] const errc e = pool_.share(from[k], p->priority);
      RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
    }
    sequence_state& c = seqs_[r];
    c.fork_from(*p);
    c.first_block = p->first_block;
    if constexpr (Cache::enabled) cache_.fork(parent.slot, r, p->num_tokens);
    return sequence_id{r, c.generation};
  }

  errc finish(sequence_id id) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    if (RUNGS_UNLIKELY(s->finished)) return errc::sequence_finished;
    s->finished = true;
    return errc::ok;
  }

  /// Releases the blocks tail first (so the tail of a cached chain is evicted before its
  /// head) and retires the id; cached blocks keep their hashes (a preempted sequence can hit
  /// its own prefix when it is readmitted). Blocks registered past the last commit() are
  /// dropped from the prefix index first, whoever else holds them: their step never ran, so
  /// no later sequence may take their slots as computed.
  errc free(sequence_id id) {
    sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    const std::span<block_id> row = tables_.row(id.slot);
    if constexpr (Cache::enabled) {
      for (std::int32_t k = std::max(s->committed_blocks, s->first_block); k < s->num_blocks; ++k)
        forget_if_pending(row[k]);
    }
    for (std::int32_t k = s->num_blocks - 1; k >= s->first_block; --k) {
      [[maybe_unused]] const errc e = pool_.release(row[k]);
      RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
      row[k] = null_block;
    }
    s->active = false;
    s->num_blocks = s->num_tokens = s->committed_blocks = s->first_block = 0;
    free_rows_.push_back(id.slot);
    return errc::ok;
  }

  // ---- what the device reads -------------------------------------------------------------

  result<std::span<const block_id>> block_table(sequence_id id) const {
    const sequence_state* s = find(id);
    if (RUNGS_UNLIKELY(s == nullptr)) return errc::unknown_sequence;
    return tables_.row(id.slot).first(static_cast<std::size_t>(s->num_blocks));
  }
  block_table_view block_tables() const { return tables_.view(); }

  /// Writes the slots of every range, in order, to `out` and pads the rest of `out` with
  /// padded_slot (-1): the step's slot mapping for a CUDA-graph bucket of out.size() tokens.
  /// Returns the number of real slots; on error writes nothing.
  result<std::int32_t> slot_mapping(std::span<const slot_range> ranges,
                                    std::span<slot_id> out) const {
    return write_slot_mapping(ranges, out, config_.block_size, [this](sequence_id id) -> std::optional<held_row> {
      const sequence_state* s = find(id);
      if (RUNGS_UNLIKELY(s == nullptr)) return std::nullopt;
      return held_row{tables_.row(id.slot), s->first_block, s->num_blocks};
    });
  }

  /// Copy-on-write pairs since the last clear_copies(), in the order they were made: the
  /// engine copies them on the device before the step's KV writes, then clears.
  std::span<const block_copy> copies() const { return copies_; }
  void clear_copies() { copies_.clear(); }

  // ---- queries ---------------------------------------------------------------------------

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

  /// Empty when consistent; otherwise the first broken invariant: free + cached + live == N,
  /// every ref count equals the block's occurrences in live block tables, a block appears at
  /// most once per table, rows past a sequence's blocks are null, the prefix index holds
  /// exactly the cached blocks, a pending block is cached and live. O(N + table size), allocates: for tests and debug builds.
  std::string check_consistency() const {
    if (std::string e = pool_.check_consistency(); !e.empty()) return "pool: " + e;
    const kv_metrics m = metrics();
    if (m.live_blocks + m.cached_blocks + m.free_blocks != m.num_blocks)
      return "live + cached + free != num_blocks";
    std::vector<std::int32_t> users(static_cast<std::size_t>(config_.num_blocks), 0);
    std::vector<std::int32_t> last_row(users.size(), -1);
    std::int32_t active = 0;
    for (std::uint32_t r = 0; r < seqs_.size(); ++r) {
      const sequence_state& s = seqs_[r];
      const std::span<const block_id> row = tables_.row(r);
      const std::string where = "row " + std::to_string(r);
      const std::int32_t n = s.active ? s.num_blocks : 0;
      active += s.active;
      if (s.active && (s.num_tokens < 0 || s.num_tokens > n * config_.block_size))
        return where + ": " + std::to_string(s.num_tokens) + " tokens in " + std::to_string(n) +
               " blocks";
      const std::int32_t first = s.active ? s.first_block : 0;
      if (first < 0 || first > n)
        return where + ": first live block " + std::to_string(first) + " outside [0, " + std::to_string(n) + "]";
      for (std::int32_t k = 0; k < tables_.stride(); ++k) {
        const block_id b = row[k];
        if (k >= n || k < first) {
          if (b != null_block)
            return where + ": entry " + std::to_string(k) + (k < first ? " left the window" : " past its blocks") +
                   " but is not null";
          continue;
        }
        if (!pool_.in_range(b)) return where + ": block id " + std::to_string(b) + " out of range";
        if (last_row[b] == static_cast<std::int32_t>(r))
          return where + ": block " + std::to_string(b) + " twice in one table";
        last_row[b] = static_cast<std::int32_t>(r);
        ++users[b];
      }
    }
    if (active + static_cast<std::int32_t>(free_rows_.size()) != config_.max_sequences)
      return "active rows + free rows != max_sequences";
    std::int32_t cached = 0;
    for (block_id b = 0; b < config_.num_blocks; ++b) {
      if (users[b] != pool_.ref_count(b))
        return "block " + std::to_string(b) + ": ref_count " + std::to_string(pool_.ref_count(b)) +
               " but " + std::to_string(users[b]) + " block-table entries";
      if constexpr (Cache::enabled) {
        if (pool_.cached(b) != cache_.indexed(b))
          return "block " + std::to_string(b) + (pool_.cached(b) ? ": cached but not indexed"
                                                                 : ": indexed but not cached");
        if (cache_.pending(b) && (!pool_.cached(b) || pool_.ref_count(b) == 0))
          return "block " + std::to_string(b) + ": pending (KV not committed) but " +
                 (pool_.cached(b) ? "without a user" : "not cached");
        cached += pool_.cached(b);
      } else if (pool_.cached(b)) {
        return "block " + std::to_string(b) + ": cached without a prefix cache";
      }
    }
    if constexpr (Cache::enabled) {
      if (cached != cache_.size())
        return "prefix index holds " + std::to_string(cache_.size()) + " entries (blocks) for " +
               std::to_string(cached) + " cached blocks";
    }
    return {};
  }

 private:
  template <class C, bool = C::enabled>
  struct chain_of {
    using type = char;  // no prefix cache: nothing to chain
  };
  template <class C>
  struct chain_of<C, true> {
    using type = typename C::digest_type;
  };
  using chain_type = typename chain_of<Cache>::type;

  struct sequence_state : detail::sequence_record {
    std::int32_t first_block = 0;  ///< blocks before it left the sliding window (null entries)
  };

  static allocator_config validated(const allocator_config& c) {
    auto fail = [](const std::string& what) {
      throw std::invalid_argument("allocator_config: " + what);
    };
    if (c.num_blocks <= 0) fail("num_blocks = " + std::to_string(c.num_blocks) + " must be positive");
    if (c.num_blocks > INT32_MAX - 64)
      fail("num_blocks = " + std::to_string(c.num_blocks) + " must be below 2^31 - 64");
    if (c.block_size <= 0) fail("block_size = " + std::to_string(c.block_size) + " must be positive");
    if (c.max_sequences <= 0)
      fail("max_sequences = " + std::to_string(c.max_sequences) + " must be positive");
    if (c.max_model_len <= 0)
      fail("max_model_len = " + std::to_string(c.max_model_len) + " must be positive");
    if (c.watermark_blocks < 0 || c.watermark_blocks >= c.num_blocks)
      fail("watermark_blocks = " + std::to_string(c.watermark_blocks) +
           " must be in [0, num_blocks)");
    if (c.sliding_window < 0)
      fail("sliding_window = " + std::to_string(c.sliding_window) +
           " must be 0 (full attention) or a positive number of keys");
    const std::int64_t stride = rungs::blocks_for(c.max_model_len, c.block_size);
    if (stride * c.max_sequences > (std::int64_t{1} << 30))
      fail("max_sequences * ceil(max_model_len / block_size) = " +
           std::to_string(stride * c.max_sequences) + " block-table entries exceeds 2^30");
    // The prefix cache keeps each row's partial last block: max_sequences x block_size tokens.
    if (std::int64_t{c.block_size} * c.max_sequences > (std::int64_t{1} << 30))
      fail("max_sequences * block_size = " + std::to_string(std::int64_t{c.block_size} * c.max_sequences) +
           " partial-block tokens exceeds 2^30");
    return c;
  }

  /// ceil(tokens / block_size), for tokens in [0, max_model_len].
  std::int32_t blocks_for(std::int32_t tokens) const { return div_.ceil(tokens); }

  sequence_state* find(sequence_id id) {
    if (id.slot >= seqs_.size()) return nullptr;
    sequence_state& s = seqs_[id.slot];
    return s.active && s.generation == id.generation ? &s : nullptr;
  }
  const sequence_state* find(sequence_id id) const {
    return const_cast<paged_allocator*>(this)->find(id);
  }

  // Copy-on-write before an append: the existing blocks it writes into (the partial last
  // block and reserved lookahead blocks) that are shared get private copies, recorded in
  // copies_. Checks come first, so a rejected call changes nothing. `grow` new blocks must fit
  // beside the copies.
  errc unshare_tail(sequence_state& s, std::span<block_id> row, std::int32_t needed, bool writes,
                    std::int32_t grow, std::int32_t returned, std::int32_t leaving) {
    const std::int32_t first_written = div_.quot(s.num_tokens);
    const std::int32_t last_existing = writes ? std::min(needed, s.num_blocks) : 0;
    std::int32_t shared = 0;
    for (std::int32_t k = first_written; k < last_existing; ++k) shared += pool_.ref_count(row[k]) > 1;
    if (grow + shared > pool_.num_unused() + returned) return errc::out_of_blocks;
    if (copies_.size() + shared > copies_.capacity())
      return errc::buffer_too_small;  // the engine never called clear_copies()
    if (leaving > s.first_block) release_out_of_window(s, row, leaving);  // disjoint from the copies below
    for (std::int32_t k = first_written; shared > 0 && k < last_existing; ++k) {
      if (pool_.ref_count(row[k]) <= 1) continue;
      const block_id dst = take_block(s.priority);
      copies_.push_back(block_copy{row[k], dst});
      [[maybe_unused]] const errc e = pool_.release(row[k]);
      RUNGS_KV_ASSERT(e == errc::ok, "a shared block has users to release");
      row[k] = dst;
      ++cow_copies_;
      --shared;
    }
    // Every block from the write position to the end of the row is private now.
    if (last_existing == s.num_blocks) s.tail_may_be_shared = false;
    return errc::ok;
  }

  /// The first block a query at position p can see with a window (sliding_window > 0):
  /// blocks before it hold only keys below p - W + 1. 0 without a window.
  std::int32_t window_start(std::int32_t p) const {
    const std::int32_t invisible = p - config_.sliding_window + 1;  // keys [0, invisible)
    return config_.sliding_window == 0 || invisible <= 0 ? 0 : div_.quot(invisible);
  }

  /// The blocks a prefix hit needs cached before its end (prefix_cache::match's `run`): every
  /// one for full attention; for a window of W keys the ceil((W - 1) / block_size) blocks
  /// its first query reads, and at least the last one (W = 1 reads no earlier key, but a hit
  /// still ends at a block some sequence computed: vLLM's lookup needs one too).
  std::int32_t hit_run() const {
    if (config_.sliding_window == 0) return whole_chain;
    return std::max(1, div_.ceil(config_.sliding_window - 1));
  }

  /// Releases blocks [first_block, leaving), tail first as free() does (so a cached chain's
  /// tail is evicted before its head, as in vLLM's remove_skipped_blocks), and nulls their
  /// entries. A block registered since the last commit leaves the prefix index first, as in
  /// free(): its step may yet be dropped.
  void release_out_of_window(sequence_state& s, std::span<block_id> row, std::int32_t leaving) {
    for (std::int32_t k = leaving - 1; k >= s.first_block; --k) {
      if constexpr (Cache::enabled)
        if (k >= s.committed_blocks) forget_if_pending(row[k]);
      [[maybe_unused]] const errc e = pool_.release(row[k]);
      RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
      row[k] = null_block;
    }
    s.first_block = leaving;
  }

  // How many blocks after the pool's `hits` (chain: the digest of the last hit) the lower tier
  // holds, in order, up to one token short of the prompt.
  std::int32_t lower_hits(chain_type chain, std::span<const token_id> prompt, std::int32_t hits) const {
    const std::size_t bs = static_cast<std::size_t>(config_.block_size);
    std::int32_t n = 0;
    for (std::size_t i = static_cast<std::size_t>(hits); (i + 1) * bs <= prompt.size() - 1; ++i, ++n) {
      chain = cache_.chain_of(chain, prompt.subspan(i * bs, bs));
      if (!lower_->holds(chain)) break;
    }
    return n;
  }

  // Takes the `n` blocks after s's pool hits out of the lower tier and gives each a pool block
  // registered under its digest, its KV counted as written (committed): they join s's hits.
  // The admission check counted them; their allocation may evict (and demote) other blocks.
  void promote(std::uint32_t r, sequence_state& s, std::span<block_id> row, chain_type chain,
               std::span<const token_id> prompt, std::int32_t n) {
    const std::size_t bs = static_cast<std::size_t>(config_.block_size);
    const std::span<const token_id> blocks = prompt.subspan(static_cast<std::size_t>(s.num_blocks) * bs, n * bs);
    for (std::int32_t k = 0; k < n; ++k) {  // out of the tier first: the hierarchy is exclusive
      chain = cache_.chain_of(chain, blocks.subspan(static_cast<std::size_t>(k) * bs, bs));
      lower_->promote(chain);
    }
    for (std::int32_t k = s.num_blocks; k < s.num_blocks + n; ++k) row[k] = take_block(s.priority);
    cache_.append(r, s.num_tokens, blocks, row.data(), pool_);
    for (std::int32_t k = s.num_blocks; k < s.num_blocks + n; ++k) cache_.settle(row[k]);
    s.num_blocks += n;
    s.committed_blocks = s.num_blocks;
    s.num_tokens = s.num_blocks * config_.block_size;
  }

  void forget_if_pending(block_id b) {
    if (!cache_.pending(b)) return;
    cache_.forget(b);
    [[maybe_unused]] const errc e = pool_.unmark_cached(b);
    RUNGS_KV_ASSERT(e == errc::ok, "blocks in a block table are live");
  }

  /// Only after checking that enough blocks are unused.
  block_id take_block(std::uint8_t priority) {
    const result<block_id> b = pool_.allocate(priority, [this](block_id evicted) {
      if constexpr (Cache::enabled) {
        if (RUNGS_UNLIKELY(lower_ != nullptr)) {
          const chain_type d = cache_.digest(evicted);
          cache_.forget(evicted);
          if (!cache_.holds(d)) lower_->demote(d);  // a copy still in the pool serves its hits
        } else {
          cache_.forget(evicted);
        }
      }
    });
    RUNGS_KV_ASSERT(b.has_value(), "an allocation checked against num_unused() succeeds");
    return *b;
  }

  allocator_config config_;
  detail::block_divider div_;
  pool_type pool_;
  Cache cache_;
  kv::block_tables tables_;  // qualified: the member function block_tables() hides the type
  std::vector<sequence_state> seqs_;
  std::vector<std::uint32_t> free_rows_;
  std::vector<block_copy> copies_;
  std::uint64_t prefix_query_tokens_ = 0;
  std::uint64_t prefix_hit_tokens_ = 0;
  std::uint64_t cow_copies_ = 0;
  prefix_tier<chain_type>* lower_ = nullptr;  // set_lower_tier's; none by default
};

using free_list_allocator = paged_allocator<no_prefix_cache, free_stack>;
template <block_hasher Hasher = wyhash64, eviction_policy Eviction = lru>
using prefix_caching_allocator = paged_allocator<prefix_cache<Hasher>, Eviction>;

static_assert(check_block_allocator<free_list_allocator>());
static_assert(check_block_allocator<prefix_caching_allocator<>>());

}  // namespace rungs::kv
