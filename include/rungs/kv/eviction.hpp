// The eviction-policy concept: which unused block the pool hands out next.
//
// Free blocks (no hash) and cached blocks nobody uses (evictable) live in the policy's one
// structure; the pool asks it for a block on every allocation. A cached block is only
// forgotten when the policy hands it out (lazy eviction, as vLLM v1), so a block freed by a
// finished request stays reusable by a later prefix hit until its memory is actually needed.
//
// A policy E is constructed with the pool size N (block ids are 0..N-1) and starts empty;
// the pool then releases every block once. Operations, each O(1) and allocation-free:
//   e.release(b, info)  b's last user left: b becomes free (info.cached false) or evictable
//   e.evict()           the next block to reuse, removed from the policy; null_block if none
//   e.claim(b)          b (which the policy holds) is in use again: a prefix-cache hit
//   e.size()            how many blocks the policy holds
//   e.contains(b)       whether it holds b (consistency checks only)
#pragma once

#include <concepts>
#include <cstdint>

#include <rungs/kv/types.hpp>

namespace rungs::kv {

/// What the pool tells a policy about a block it releases.
struct block_info {
  bool cached = false;        // carries a prefix-cache hash: reusing it loses a cache entry
  std::uint8_t priority = 0;  // highest retention priority among the sequences that held it
};

namespace detail {
template <class E>
concept eviction_constructible = std::constructible_from<E, std::int32_t>;
template <class E>
concept eviction_has_release = requires(E e, block_id b, block_info i) {
  { e.release(b, i) } -> std::same_as<void>;
};
template <class E>
concept eviction_has_evict = requires(E e) {
  { e.evict() } -> std::same_as<block_id>;
};
template <class E>
concept eviction_has_claim = requires(E e, block_id b) {
  { e.claim(b) } -> std::same_as<void>;
};
template <class E>
concept eviction_has_size = requires(const E e, block_id b) {
  { e.size() } -> std::same_as<std::int32_t>;
  { e.contains(b) } -> std::same_as<bool>;
};
}  // namespace detail

template <class E>
concept eviction_policy = detail::eviction_constructible<E> && detail::eviction_has_release<E> &&
                          detail::eviction_has_evict<E> && detail::eviction_has_claim<E> &&
                          detail::eviction_has_size<E>;

/// static_assert(check_eviction_policy<MyPolicy>()) names the first missing operation.
template <class E>
consteval bool check_eviction_policy() {
  static_assert(detail::eviction_constructible<E>,
                "eviction policy: needs a constructor E(std::int32_t num_blocks)");
  static_assert(detail::eviction_has_release<E>,
                "eviction policy: needs `void release(block_id, block_info)`");
  static_assert(detail::eviction_has_evict<E>, "eviction policy: needs `block_id evict()`");
  static_assert(detail::eviction_has_claim<E>, "eviction policy: needs `void claim(block_id)`");
  static_assert(detail::eviction_has_size<E>,
                "eviction policy: needs `std::int32_t size() const` and "
                "`bool contains(block_id) const`");
  return eviction_policy<E>;
}

}  // namespace rungs::kv
