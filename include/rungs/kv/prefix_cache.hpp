// Prefix-caching policies for paged_allocator, and the concept they satisfy.
//
//   no_prefix_cache       nothing is hashed; every unused block is simply free.
//   prefix_cache<Hasher>  full blocks are named by chained digests (hash.hpp) and indexed, so
//                         a new sequence reuses the longest run of cached blocks that starts
//                         its prompt, capped one token short of the prompt: the last prompt
//                         token must be computed to produce the first output's logits.
//
// Blocks are registered when they become full, i.e. when the step that computes their last
// token is planned (append), as vLLM's KVCacheManager does: a sequence admitted later in the
// same step may hit them, since within one forward pass each layer's KV write precedes that
// layer's attention. Until the engine commits that step (paged_allocator::commit) a registered
// block is *pending*: if its sequence is freed first, the step never wrote it, so the block is
// dropped from the index instead of staying hittable with slots nobody wrote. A digest
// computed twice (two sequences computed the same block, neither hitting the other's) is
// indexed under both blocks, as vLLM's BlockHashToBlockMap keeps them: a lookup takes the
// oldest one still indexed, and evicting or dropping one block removes only its own entry,
// so the digest stays a hit while any copy is cached. The index is a fixed-capacity table:
// registering and evicting allocate nothing.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <rungs/kv/detail/block_divider.hpp>
#include <rungs/kv/detail/block_hash_map.hpp>
#include <rungs/kv/hash.hpp>
#include <rungs/kv/types.hpp>
#include <rungs/kv/wyhash.hpp>

namespace rungs::kv {

/// prefix_cache::match's `run` for full attention: a hit needs every block before its end.
inline constexpr std::int32_t whole_chain = INT32_MAX;

/// Constructed as C(num_blocks, block_size, max_sequences). C::enabled == false means no
/// caching (nothing else is needed); otherwise C provides what paged_allocator calls:
///   start/match at admission (match(chain, prompt, out, run): see prefix_cache::match),
///   append as tokens arrive, fork, settle once a block's KV is
///   written, pending to tell the blocks that are not yet, forget on eviction (or on a free
///   before the commit), indexed/size for consistency checks.
template <class C>
concept prefix_cache_policy =
    std::constructible_from<C, std::int32_t, std::int32_t, std::int32_t> &&
    requires { { C::enabled } -> std::convertible_to<bool>; } &&
    (!C::enabled || requires(C c, const C cc, std::uint32_t slot, std::span<const token_id> tokens,
                             std::span<block_id> out, std::int32_t n, block_id b) {
      typename C::digest_type;
      { cc.root(std::uint64_t{}, std::string_view{}) } -> std::same_as<typename C::digest_type>;
      { cc.match(std::declval<typename C::digest_type&>(), tokens, out, n) } -> std::same_as<std::int32_t>;
      { cc.matched(std::declval<const typename C::digest_type&>(), tokens, n) } -> std::same_as<std::int32_t>;
      c.start(slot, std::declval<const typename C::digest_type&>());
      c.fork(slot, slot, n);
      c.forget(b);
      c.settle(b);
      { cc.pending(b) } -> std::same_as<bool>;
      { cc.indexed(b) } -> std::same_as<bool>;
      { cc.size() } -> std::same_as<std::int32_t>;
    });

struct no_prefix_cache {
  static constexpr bool enabled = false;
  no_prefix_cache(std::int32_t, std::int32_t, std::int32_t) {}
};

template <block_hasher Hasher = wyhash64>
class prefix_cache {
 public:
  static constexpr bool enabled = true;
  using hasher_type = Hasher;
  using digest_type = typename Hasher::digest_type;

  prefix_cache(std::int32_t num_blocks, std::int32_t block_size, std::int32_t max_sequences)
      : block_size_(block_size),
        div_(block_size),
        index_(num_blocks),
        digest_(static_cast<std::size_t>(num_blocks)),
        pending_(static_cast<std::size_t>(num_blocks), 0),
        chain_(static_cast<std::size_t>(max_sequences)),
        tail_(static_cast<std::size_t>(max_sequences) * static_cast<std::size_t>(block_size)) {}

  /// The digest a new sequence's first block chains from.
  digest_type root(std::uint64_t adapter_id, std::string_view cache_salt) const {
    return hasher_.root(adapter_id, cache_salt);
  }

  /// The longest prefix hit of `prompt` from `chain`, in blocks: the largest e, at most
  /// min(out.size(), whole blocks of prompt), such that blocks [max(0, e - run), e) are all
  /// cached. run = whole_chain (full attention) wants every block before e; a sliding window
  /// of W keys needs only the ceil((W - 1) / block_size) blocks its first query at e x
  /// block_size can see, as vLLM's SlidingWindowManager.find_longest_cache_hit. Writes the
  /// cached block ids of [0, e) to `out` (null_block for a block outside those `run`, whether
  /// cached or not) and ends `chain` at block e - 1's digest. Digests name the whole prefix,
  /// so a cached block's KV is right wherever the blocks before it went.
  std::int32_t match(digest_type& chain, std::span<const token_id> prompt, std::span<block_id> out,
                     std::int32_t run = whole_chain) const {
    const std::int32_t e = walk(chain, prompt, out.size(), run, [out](std::size_t i, block_id b) { out[i] = b; });
    // Entries the walk wrote past e, and cached blocks outside the run, are not part of the hit.
    const std::int32_t limit = static_cast<std::int32_t>(std::min(out.size(), prompt.size() / block_size_));
    if (run != whole_chain) {
      std::fill(out.begin() + e, out.begin() + limit, null_block);
      std::fill(out.begin(), out.begin() + std::max(0, e - run), null_block);
    }
    return e;
  }

  /// How many full blocks of `prompt` from `chain` match() would hit, with nothing written:
  /// what a router asks each replica before it sends a request.
  std::int32_t matched(digest_type chain, std::span<const token_id> prompt, std::int32_t run = whole_chain) const {
    return walk(chain, prompt, prompt.size(), run, [](std::size_t, block_id) {});
  }

  /// `chain` advanced over the whole blocks of `tokens` without looking anything up: where a
  /// lookup that skips blocks starts (hybrid_allocator's chunked-local groups).
  digest_type chain_of(digest_type chain, std::span<const token_id> tokens) const {
    for (std::size_t i = 0; i + block_size_ <= tokens.size(); i += block_size_)
      chain = hasher_.chain(chain, tokens.subspan(i, block_size_));
    return chain;
  }

  /// A sequence in row `slot` starts with its chain at `chain` and no partial block.
  void start(std::uint32_t slot, const digest_type& chain) { chain_[slot] = chain; }

  /// Feeds `tokens`, positions [num_tokens, num_tokens + size) of the sequence in `slot`
  /// whose block ids are `row`. Each block completed gets its digest and is registered
  /// (`pool.mark_cached`), pending until settled, beside any other block of that digest.
  template <class Pool>
  void append(std::uint32_t slot, std::int32_t num_tokens, std::span<const token_id> tokens,
              const block_id* row, Pool& pool) {
    token_id* tail = tail_.data() + static_cast<std::size_t>(slot) * block_size_;
    std::int32_t fill = div_.rem(num_tokens);
    std::int32_t block = div_.quot(num_tokens);
    while (!tokens.empty()) {
      const std::int32_t take = std::min<std::int32_t>(block_size_ - fill,
                                                       static_cast<std::int32_t>(tokens.size()));
      std::span<const token_id> full;
      if (fill == 0 && take == block_size_) {
        full = tokens.first(block_size_);  // a whole block in the input: hash it in place
      } else {
        std::copy_n(tokens.data(), take, tail + fill);
        if (fill + take == block_size_) full = std::span<const token_id>(tail, block_size_);
      }
      tokens = tokens.subspan(take);
      fill += take;
      if (fill < block_size_) break;
      chain_[slot] = hasher_.chain(chain_[slot], full);
      const block_id b = row[block];
      index_.insert(chain_[slot], b);
      digest_[b] = chain_[slot];
      pending_[static_cast<std::size_t>(b)] = 1;
      (void)pool.mark_cached(b);
      fill = 0;
      ++block;
    }
  }

  /// Row `child` continues exactly where row `parent` stands (num_tokens tokens).
  void fork(std::uint32_t parent, std::uint32_t child, std::int32_t num_tokens) {
    chain_[child] = chain_[parent];
    const std::size_t bs = static_cast<std::size_t>(block_size_);
    std::copy_n(tail_.data() + parent * bs, div_.rem(num_tokens), tail_.data() + child * bs);
  }

  /// Block b is being reused, or dropped before its KV was written: its entry leaves the
  /// index (other blocks of its digest stay).
  void forget(block_id b) {
    index_.erase(digest_[b], b);
    pending_[static_cast<std::size_t>(b)] = 0;
  }

  /// Block b's KV is written (the step that computed it ran).
  void settle(block_id b) { pending_[static_cast<std::size_t>(b)] = 0; }
  /// Whether b is registered and its KV not yet known to be written.
  bool pending(block_id b) const { return pending_[static_cast<std::size_t>(b)] != 0; }

  /// Whether b is indexed under its digest (consistency checks).
  bool indexed(block_id b) const { return index_.contains(digest_[b], b); }
  /// Block b's digest while it is registered (what a lower tier keys it by: prefix_tier.hpp).
  const digest_type& digest(block_id b) const { return digest_[static_cast<std::size_t>(b)]; }
  /// Whether some block is indexed under digest d (another copy of an evicted block may be).
  bool holds(const digest_type& d) const { return index_.find(d) != null_block; }
  /// Blocks indexed (a digest computed twice counts twice).
  std::int32_t size() const { return index_.size(); }

 private:
  // The lookup of match() and matched(): the largest e <= limit whose `run` blocks before it
  // (all of them for whole_chain) are cached. Hashes every whole block of the prompt for a
  // window, since a miss does not end the search; full attention stops at the first miss.
  template <class OnBlock>
  std::int32_t walk(digest_type& chain, std::span<const token_id> prompt, std::size_t limit, std::int32_t run,
                    OnBlock on_block) const {
    limit = std::min(limit, prompt.size() / block_size_);
    std::int32_t end = 0, streak = 0;
    digest_type d = chain;
    for (std::size_t i = 0; i < limit; ++i) {
      d = hasher_.chain(d, prompt.subspan(i * block_size_, block_size_));
      const block_id b = index_.find(d);
      if (run == whole_chain && b == null_block) break;
      on_block(i, b);
      streak = b == null_block ? 0 : streak + 1;
      if (b != null_block && streak >= std::min<std::int64_t>(run, static_cast<std::int64_t>(i) + 1)) {
        end = static_cast<std::int32_t>(i) + 1;
        chain = d;
      }
    }
    return end;
  }

  std::int32_t block_size_;
  detail::block_divider div_;
  [[no_unique_address]] Hasher hasher_;
  detail::block_hash_map<digest_type, Hasher> index_;
  std::vector<digest_type> digest_;  // per block: its digest while registered
  std::vector<std::uint8_t> pending_;  // per block: registered, its step not committed yet
  std::vector<digest_type> chain_;   // per row: digest of the sequence's last full block
  std::vector<token_id> tail_;       // per row: tokens of the partial last block
};

static_assert(prefix_cache_policy<no_prefix_cache>);
static_assert(prefix_cache_policy<prefix_cache<>>);

}  // namespace rungs::kv
