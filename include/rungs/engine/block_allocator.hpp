// The Allocator policy: the KV block pool an engine sizes and hands to the caller's
// scheduler. The engine itself needs only its size, to check that block tables name blocks
// of the pool; allocation, freeing and prefix caching are the pool's own (rungs/kv/).
#pragma once

#include <concepts>
#include <cstdint>

namespace rungs::engine {

template <class A>
concept block_allocator = std::constructible_from<A, std::int64_t> && requires(const A& a) {
  { a.num_blocks() } -> std::convertible_to<std::int64_t>;
};

}  // namespace rungs::engine
