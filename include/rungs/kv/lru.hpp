// lru: the default eviction policy. Free and evictable blocks share one intrusive list
// (vLLM v1's free-block queue); the front is reused first.
//
//   - A block released without a hash goes to the front: reusing it loses nothing, so it is
//     taken before any cached block.
//   - A cached block goes to the back: the least recently used cached block is at the front of
//     the cached part and is evicted first. A sequence releases its blocks tail first, so the
//     tail of a prefix chain is evicted before its head (a head is shared by more prompts).
#pragma once

#include <cstdint>

#include <rungs/kv/detail/intrusive_lists.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

class lru {
 public:
  explicit lru(std::int32_t num_blocks) : list_(num_blocks, 1) {}

  void release(block_id b, block_info info) {
    if (info.cached)
      list_.push_back(0, b);
    else
      list_.push_front(0, b);
    ++size_;
  }
  block_id evict() {
    const block_id b = list_.pop_front(0);
    size_ -= (b != null_block);
    return b;
  }
  void claim(block_id b) {
    list_.remove(b);
    --size_;
  }
  std::int32_t size() const { return size_; }
  bool contains(block_id b) const { return list_.contains(b); }

 private:
  detail::intrusive_lists list_;
  std::int32_t size_ = 0;
};

static_assert(check_eviction_policy<lru>());

}  // namespace rungs::kv
