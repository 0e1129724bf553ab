// The per-sequence bookkeeping both allocators keep (paged_allocator, hybrid_allocator), and
// what fork copies of it: stated once, so the two forks cannot drift apart.
#pragma once

#include <cstdint>

namespace rungs::kv::detail {

struct sequence_record {
  std::uint32_t generation = 0;
  std::int32_t num_tokens = 0;
  std::int32_t num_blocks = 0;        ///< table length (in a hybrid allocator the same in every group)
  std::int32_t committed_blocks = 0;  ///< leading blocks whose KV is known written
  std::uint8_t priority = 0;
  bool active = false;
  bool finished = false;
  bool tail_may_be_shared = false;  ///< set by fork; cleared once append made the tail private

  /// This (a free row) becomes a fork of `parent`: a new generation, live, parent's tokens,
  /// blocks and priority; both tails may now be shared.
  void fork_from(sequence_record& parent) {
    ++generation;
    active = true;
    finished = false;
    priority = parent.priority;
    num_tokens = parent.num_tokens;
    num_blocks = parent.num_blocks;
    committed_blocks = parent.committed_blocks;
    tail_may_be_shared = parent.tail_may_be_shared = true;
  }
};

}  // namespace rungs::kv::detail
