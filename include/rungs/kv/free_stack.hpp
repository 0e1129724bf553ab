// free_stack: the plain free list, a LIFO stack of block ids.
//
// Meant for allocators without prefix caching, where every unused block is alike: the most
// recently freed block is reused first, which keeps a small working set of block ids hot.
// With prefix caching it behaves as MRU (most recently released cached block evicted first),
// which only suits workloads whose prompts are never revisited. claim() (a prefix hit) is
// O(1) by swapping the claimed block with the top of the stack.
#pragma once

#include <cstdint>
#include <vector>

#include <rungs/kv/assert.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

class free_stack {
 public:
  explicit free_stack(std::int32_t num_blocks)
      : stack_(static_cast<std::size_t>(num_blocks)),
        position_(static_cast<std::size_t>(num_blocks), absent) {}

  void release(block_id b, block_info) {
    RUNGS_KV_ASSERT(position_[b] == absent, "a block is on the free stack at most once");
    position_[b] = size_;
    stack_[size_++] = b;
  }
  block_id evict() {
    if (size_ == 0) return null_block;
    const block_id b = stack_[--size_];
    position_[b] = absent;
    return b;
  }
  void claim(block_id b) {
    RUNGS_KV_ASSERT(position_[b] != absent, "a claimed block is on the free stack");
    const block_id top = stack_[--size_];
    stack_[position_[b]] = top;
    position_[top] = position_[b];
    position_[b] = absent;
  }
  std::int32_t size() const { return size_; }
  bool contains(block_id b) const { return position_[b] != absent; }

 private:
  static constexpr std::int32_t absent = -1;
  std::vector<block_id> stack_;
  std::vector<std::int32_t> position_;
  std::int32_t size_ = 0;
};

static_assert(check_eviction_policy<free_stack>());

}  // namespace rungs::kv
