// KV-block arithmetic every layer shares: how many blocks of `block_size` tokens hold
// `tokens` tokens. The allocator, the scheduler, the engine's staging, the attention planner
// and Gaudi's bucket configuration all round up this one way; the allocator's hot path keeps
// a shift for power-of-two block sizes (kv/detail/block_divider.hpp), tested against this
// function (tests/core/blocks_test.cpp).
#pragma once

#include <cstdint>

namespace rungs {

/// ceil(tokens / block_size): the blocks `tokens` tokens occupy (0 for 0 tokens). Both
/// arguments are non-negative and block_size positive; callers validate them first.
constexpr std::int64_t blocks_for(std::int64_t tokens, std::int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

}  // namespace rungs
