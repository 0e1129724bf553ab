// block_pool<Eviction>: N KV blocks, each with a reference count, handed out in O(1).
//
// Block ids index the device KV tensors; the pool never touches device memory. A block is
//   live       ref_count > 0 (in some sequence's block table),
//   evictable  ref_count == 0 and cached (its hash is in the prefix cache), or
//   free       ref_count == 0 and not cached,
// and the three counts always sum to N. Evictable and free blocks are held by the eviction
// policy; allocation asks the policy for the next one and, if that block is still cached,
// calls `on_evict(b)` so the prefix cache forgets its hash at that moment (lazy eviction).
//
// Every operation is O(1), allocation-free after construction and never throws; a bad block
// id is an errc result that changes nothing.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <rungs/config.hpp>
#include <rungs/kv/assert.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/result.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

template <eviction_policy Eviction = lru>
class block_pool {
 public:
  using eviction_type = Eviction;

  /// Throws std::invalid_argument unless num_blocks is in [1, 2^31 - 65].
  explicit block_pool(std::int32_t num_blocks)
      : num_blocks_(checked_num_blocks(num_blocks)),
        state_(static_cast<std::size_t>(num_blocks)),
        eviction_(num_blocks) {
    // Released last-to-first so a fresh pool hands out 0, 1, 2, ... under every policy that
    // reuses uncached blocks most-recently-released first.
    for (block_id b = num_blocks - 1; b >= 0; --b) eviction_.release(b, block_info{});
  }

  std::int32_t num_blocks() const { return num_blocks_; }
  /// Blocks an allocation may take: free plus evictable.
  std::int32_t num_unused() const { return eviction_.size(); }
  std::int32_t num_live() const { return num_blocks_ - eviction_.size(); }
  std::int32_t num_evictable() const { return evictable_; }
  std::int32_t num_free() const { return eviction_.size() - evictable_; }
  /// Cached blocks handed out again (their hash dropped) since construction.
  std::uint64_t evictions() const { return evictions_; }

  /// Takes the policy's next block and gives it one user. When the block still carried a
  /// hash, `on_evict(b)` runs first so the caller can drop it from its index.
  template <class OnEvict>
  result<block_id> allocate(std::uint8_t priority, OnEvict&& on_evict) {
    const block_id b = eviction_.evict();
    if (RUNGS_UNLIKELY(b == null_block)) return errc::out_of_blocks;
    RUNGS_KV_ASSERT(state_[b].ref_count == 0, "blocks held by the eviction policy have no user");
    if (state_[b].cached) {
      on_evict(b);
      state_[b].cached = 0;
      --evictable_;
      ++evictions_;
    }
    state_[b].ref_count = 1;
    state_[b].priority = priority;
    return b;
  }
  result<block_id> allocate(std::uint8_t priority = 0) {
    return allocate(priority, [](block_id) {});
  }

  /// One more user of `b`: a fork, or a prefix-cache hit (which takes an evictable block
  /// back from the eviction policy). A free block has no contents to share.
  errc share(block_id b, std::uint8_t priority = 0) {
    if (RUNGS_UNLIKELY(!in_range(b))) return errc::block_out_of_range;
    if (state_[b].ref_count == 0) {
      if (RUNGS_UNLIKELY(!state_[b].cached)) return errc::block_not_in_use;
      eviction_.claim(b);
      --evictable_;
      state_[b].priority = priority;
    } else if (priority > state_[b].priority) {
      state_[b].priority = priority;
    }
    ++state_[b].ref_count;
    return errc::ok;
  }

  /// One user fewer; the last one hands the block to the eviction policy (evictable when
  /// cached, free otherwise).
  errc release(block_id b) {
    if (RUNGS_UNLIKELY(!in_range(b))) return errc::block_out_of_range;
    if (RUNGS_UNLIKELY(state_[b].ref_count == 0)) return errc::block_not_in_use;
    if (--state_[b].ref_count == 0) {
      eviction_.release(b, block_info{state_[b].cached != 0, state_[b].priority});
      evictable_ += state_[b].cached;
    }
    return errc::ok;
  }

  /// The prefix cache registered the hash of live block `b`.
  errc mark_cached(block_id b) {
    if (RUNGS_UNLIKELY(!in_range(b))) return errc::block_out_of_range;
    if (RUNGS_UNLIKELY(state_[b].ref_count == 0)) return errc::block_not_in_use;
    state_[b].cached = 1;
    return errc::ok;
  }

  /// The prefix cache dropped the hash of live block `b` before its KV was written (the
  /// sequence that was to compute it was freed first): the block goes back to being plain.
  errc unmark_cached(block_id b) {
    if (RUNGS_UNLIKELY(!in_range(b))) return errc::block_out_of_range;
    if (RUNGS_UNLIKELY(state_[b].ref_count == 0)) return errc::block_not_in_use;
    state_[b].cached = 0;
    return errc::ok;
  }

  // Against the vector's size, not num_blocks_: GCC then sees the bound (no -Warray-bounds).
  bool in_range(block_id b) const { return static_cast<std::size_t>(b) < state_.size(); }
  std::int32_t ref_count(block_id b) const { return state_[b].ref_count; }
  bool cached(block_id b) const { return state_[b].cached != 0; }
  std::uint8_t priority(block_id b) const { return state_[b].priority; }
  const Eviction& eviction() const { return eviction_; }

  /// Empty when the pool's own bookkeeping agrees with itself; otherwise the first
  /// disagreement. O(N): for tests and debug builds.
  std::string check_consistency() const {
    std::int32_t unused = 0, evictable = 0;
    for (block_id b = 0; b < num_blocks_; ++b) {
      const bool held = eviction_.contains(b);
      if (held != (state_[b].ref_count == 0))
        return "block " + std::to_string(b) + " has ref_count " + std::to_string(state_[b].ref_count) +
               (held ? " but is held by the eviction policy" : " but is not held by the policy");
      unused += held;
      evictable += held && state_[b].cached;
    }
    if (unused != eviction_.size())
      return "eviction policy size " + std::to_string(eviction_.size()) + " != " +
             std::to_string(unused) + " blocks with ref_count 0";
    if (evictable != evictable_)
      return "evictable count " + std::to_string(evictable_) + " != " + std::to_string(evictable);
    return {};
  }

 private:
  static std::int32_t checked_num_blocks(std::int32_t n) {
    if (n <= 0 || n > INT32_MAX - 64)
      throw std::invalid_argument("block_pool: num_blocks = " + std::to_string(n) +
                                  " must be in [1, 2147483583]");
    return n;
  }

  // One 8-byte record per block: an allocation touches one cache line of pool state.
  struct block_state {
    std::int32_t ref_count = 0;
    std::uint8_t cached = 0;
    std::uint8_t priority = 0;
  };

  std::int32_t num_blocks_;
  std::vector<block_state> state_;
  Eviction eviction_;
  std::int32_t evictable_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace rungs::kv
