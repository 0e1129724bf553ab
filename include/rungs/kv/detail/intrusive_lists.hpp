// Doubly linked lists threaded through two int32 arrays indexed by block id: O(1) insertion at
// either end, O(1) removal from the middle, no allocation after construction. Several lists
// share the arrays (a block is on at most one); list l's sentinel is node `num_blocks + l`, so
// every list is circular and insertion and removal have no empty-list branches.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <rungs/kv/assert.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv::detail {

class intrusive_lists {
 public:
  intrusive_lists(std::int32_t num_blocks, std::int32_t num_lists)
      : num_blocks_(num_blocks),
        prev_(checked_size(num_blocks, num_lists), unlinked),
        next_(prev_.size(), unlinked) {
    for (std::int32_t l = 0; l < num_lists; ++l) {
      const std::int32_t s = num_blocks_ + l;
      prev_[s] = next_[s] = s;
    }
  }

  bool empty(std::int32_t list) const {
    const std::int32_t s = num_blocks_ + list;
    return next_[s] == s;
  }
  bool contains(block_id b) const { return prev_[b] != unlinked; }

  void push_front(std::int32_t list, block_id b) { link_after(num_blocks_ + list, b); }
  void push_back(std::int32_t list, block_id b) { link_after(prev_[num_blocks_ + list], b); }

  void remove(block_id b) {
    RUNGS_KV_ASSERT(contains(b), "a block removed from a list is on it");
    const std::int32_t p = prev_[b], n = next_[b];
    next_[p] = n;
    prev_[n] = p;
    prev_[b] = next_[b] = unlinked;
  }

  /// The first block of `list`, unlinked; null_block when the list is empty.
  block_id pop_front(std::int32_t list) {
    const std::int32_t b = next_[num_blocks_ + list];
    if (b >= num_blocks_) return null_block;  // the sentinel: empty
    remove(b);
    return b;
  }

 private:
  static constexpr std::int32_t unlinked = -1;

  static std::size_t checked_size(std::int32_t num_blocks, std::int32_t num_lists) {
    if (num_blocks <= 0 || num_lists <= 0 || num_blocks > INT32_MAX - num_lists)
      throw std::invalid_argument("intrusive_lists: num_blocks = " + std::to_string(num_blocks) +
                                  " must be in [1, 2^31 - 1 - num_lists]");
    return static_cast<std::size_t>(num_blocks) + static_cast<std::size_t>(num_lists);
  }

  void link_after(std::int32_t at, block_id b) {
    RUNGS_KV_ASSERT(!contains(b), "a block is on at most one free/evictable list");
    const std::int32_t n = next_[at];
    prev_[b] = at;
    next_[b] = n;
    prev_[n] = b;
    next_[at] = b;
  }

  std::int32_t num_blocks_;
  std::vector<std::int32_t> prev_, next_;
};

}  // namespace rungs::kv::detail
