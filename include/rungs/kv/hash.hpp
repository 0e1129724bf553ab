// The block-hasher concept: how the prefix cache names a full block.
//
// A block's digest is chain(parent digest, the block's token ids); the first block's parent is
// root(adapter_id, cache_salt), so the adapter and the tenant's salt reach every block of the
// chain and two sequences share a block only when everything before it matches too (vLLM's
// "extra keys" on the first block). Only full blocks are hashed; their tokens never change.
//
// rungs ships two hashers, with different guarantees:
//   wyhash64       64-bit, ~0.5 ns per token. Not collision resistant: a user who controls
//                  prompts can construct two prefixes with one digest (a 64-bit birthday
//                  search is feasible) and make another tenant read their KV. Accidental
//                  collisions are rare: with C cached blocks a lookup falsely hits with
//                  probability about C / 2^64 (1e5 blocks, 1e6 lookups/s: once in ~6 years).
//   sha256_hasher  SHA-256 over a documented byte encoding, ~27 ns per token. Collision
//                  resistant, so prompts crafted by one tenant cannot alias another's blocks;
//                  deterministic across processes and machines, so digests can name blocks
//                  offloaded to host memory or shared between instances. Use it whenever
//                  prompts come from users you do not trust (vLLM's default since its
//                  cache-poisoning advisory).
// A keyed 128-bit hash (SipHash-style) would also resist crafted collisions, but only while
// its key stays secret and it would make digests differ between processes; SHA-256 needs no
// key management and its cost stays far below a step's GPU time.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include <rungs/kv/types.hpp>

namespace rungs::kv {

namespace detail {
template <class H>
concept hasher_has_digest = requires { typename H::digest_type; } &&
                            std::regular<typename H::digest_type> &&
                            std::is_trivially_copyable_v<typename H::digest_type>;
template <class H>
concept hasher_has_root = requires(const H h, std::uint64_t adapter, std::string_view salt) {
  { h.root(adapter, salt) } -> std::same_as<typename H::digest_type>;
};
template <class H>
concept hasher_has_chain =
    requires(const H h, const typename H::digest_type& d, std::span<const token_id> tokens) {
      { h.chain(d, tokens) } -> std::same_as<typename H::digest_type>;
    };
template <class H>
concept hasher_has_bucket = requires(const typename H::digest_type& d) {
  { H::bucket(d) } -> std::same_as<std::uint64_t>;
};
}  // namespace detail

/// H::digest_type (regular, trivially copyable), h.root(adapter_id, cache_salt),
/// h.chain(parent, tokens) and H::bucket(digest) (64 well-mixed bits for a hash table).
template <class H>
concept block_hasher = std::default_initializable<H> && detail::hasher_has_digest<H> &&
                       detail::hasher_has_root<H> && detail::hasher_has_chain<H> &&
                       detail::hasher_has_bucket<H>;

/// static_assert(check_block_hasher<MyHasher>()) names the first missing piece.
template <class H>
consteval bool check_block_hasher() {
  static_assert(std::default_initializable<H>, "block hasher: must be default-constructible");
  static_assert(detail::hasher_has_digest<H>,
                "block hasher: needs a regular, trivially copyable `digest_type`");
  if constexpr (detail::hasher_has_digest<H>) {
    static_assert(detail::hasher_has_root<H>,
                  "block hasher: needs `digest_type root(std::uint64_t adapter_id, "
                  "std::string_view cache_salt) const`");
    static_assert(detail::hasher_has_chain<H>,
                  "block hasher: needs `digest_type chain(const digest_type& parent, "
                  "std::span<const token_id> tokens) const`");
    static_assert(detail::hasher_has_bucket<H>,
                  "block hasher: needs `static std::uint64_t bucket(const digest_type&)`");
  }
  return block_hasher<H>;
}

}  // namespace rungs::kv
