// priority_lru<Levels>: retention priorities with LRU inside each level (after TensorRT-LLM's
// priority-based KV-cache retention and SGLang's priority policy).
//
// A sequence created with sequence_params::priority = p marks its blocks p (the highest among
// a block's users wins, so a system prompt shared by an important tenant stays important).
// Unused blocks wait on the list of their level; eviction takes the least recently used block
// of the lowest non-empty level, found with one count-trailing-zeros over a bit mask of the
// non-empty levels. Free blocks (no hash) go to the front of level 0: they are worth nothing.
// Priorities at or above Levels are clamped to Levels - 1.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include <rungs/kv/detail/intrusive_lists.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

template <int Levels = 4>
  requires(Levels >= 1 && Levels <= 64)
class priority_lru {
 public:
  explicit priority_lru(std::int32_t num_blocks)
      : lists_(num_blocks, Levels), level_(static_cast<std::size_t>(num_blocks), 0) {}

  void release(block_id b, block_info info) {
    if (!info.cached) {
      lists_.push_front(0, b);
      level_[b] = 0;
      nonempty_ |= 1;
    } else {
      const int level = info.priority < Levels ? info.priority : Levels - 1;
      lists_.push_back(level, b);
      level_[b] = static_cast<std::uint8_t>(level);
      nonempty_ |= std::uint64_t{1} << level;
    }
    ++size_;
  }
  block_id evict() {
    if (nonempty_ == 0) return null_block;
    const int level = std::countr_zero(nonempty_);
    const block_id b = lists_.pop_front(level);
    forget_if_empty(level);
    --size_;
    return b;
  }
  void claim(block_id b) {
    lists_.remove(b);
    forget_if_empty(level_[b]);
    --size_;
  }
  std::int32_t size() const { return size_; }
  bool contains(block_id b) const { return lists_.contains(b); }

 private:
  void forget_if_empty(int level) {
    if (lists_.empty(level)) nonempty_ &= ~(std::uint64_t{1} << level);
  }

  detail::intrusive_lists lists_;
  std::vector<std::uint8_t> level_;
  std::uint64_t nonempty_ = 0;
  std::int32_t size_ = 0;
};

static_assert(check_eviction_policy<priority_lru<>>());

}  // namespace rungs::kv
