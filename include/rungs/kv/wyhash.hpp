// wyhash64: the default block hasher, Wang Yi's wyhash (final 4.3, default secret; bit-exact
// against its published test vectors, see tests/kv/wyhash_test.cpp):
// 64x64->128-bit multiply-and-fold mixing over 48-byte stripes, three independent lanes, so
// a 16-token block (64 bytes) costs a handful of multiplies.
//
// Digests are defined over the bytes of the token ids as they lie in memory, so they are
// process-local (they differ between little- and big-endian hosts); for digests that must
// agree across machines, or resist crafted collisions, use sha256_hasher (see hash.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include <rungs/config.hpp>
#include <rungs/kv/hash.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

namespace detail {
// The 128-bit product of a and b, folded: a^lo and b^hi would keep more entropy on adversarial
// input, but the fast hasher makes no promise there, and the plain product is wyhash's default.
RUNGS_ALWAYS_INLINE void wy_mum(std::uint64_t& a, std::uint64_t& b) {
#if defined(__SIZEOF_INT128__)
  __extension__ using u128 = unsigned __int128;  // __extension__: no -Wpedantic warning
  const u128 r = static_cast<u128>(a) * b;
  a = static_cast<std::uint64_t>(r);
  b = static_cast<std::uint64_t>(r >> 64);
#else
  const std::uint64_t ha = a >> 32, hb = b >> 32, la = static_cast<std::uint32_t>(a),
                      lb = static_cast<std::uint32_t>(b);
  const std::uint64_t rh = ha * hb, rm0 = ha * lb, rm1 = hb * la, rl = la * lb;
  const std::uint64_t t = rl + (rm0 << 32);
  std::uint64_t c = t < rl;
  const std::uint64_t lo = t + (rm1 << 32);
  c += lo < t;
  a = lo;
  b = rh + (rm0 >> 32) + (rm1 >> 32) + c;
#endif
}
RUNGS_ALWAYS_INLINE std::uint64_t wy_mix(std::uint64_t a, std::uint64_t b) {
  wy_mum(a, b);
  return a ^ b;
}
RUNGS_ALWAYS_INLINE std::uint64_t wy_r8(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
RUNGS_ALWAYS_INLINE std::uint64_t wy_r4(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
RUNGS_ALWAYS_INLINE std::uint64_t wy_r3(const unsigned char* p, std::size_t k) {
  return (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[k >> 1]} << 8) | p[k - 1];
}
inline constexpr std::uint64_t wy_secret[4] = {0x2d358dccaa6c78a5ull, 0x8bb84b93962eacc9ull,
                                               0x4b33a62ed433d4a3ull, 0x4d5a2da51de1aa47ull};
}  // namespace detail

struct wyhash64 {
  using digest_type = std::uint64_t;

  /// wyhash of `len` bytes at `data` with `seed`.
  static std::uint64_t hash_bytes(const void* data, std::size_t len, std::uint64_t seed) {
    using detail::wy_mix;
    using detail::wy_r4;
    using detail::wy_r8;
    constexpr const std::uint64_t* s = detail::wy_secret;
    const auto* p = static_cast<const unsigned char*>(data);
    seed ^= wy_mix(seed ^ s[0], s[1]);
    std::uint64_t a = 0, b = 0;
    if (RUNGS_LIKELY(len <= 16)) {
      if (RUNGS_LIKELY(len >= 4)) {
        const std::size_t mid = (len >> 3) << 2;
        a = (wy_r4(p) << 32) | wy_r4(p + mid);
        b = (wy_r4(p + len - 4) << 32) | wy_r4(p + len - 4 - mid);
      } else if (len > 0) {
        a = detail::wy_r3(p, len);
      }
    } else {
      std::size_t i = len;
      if (i >= 48) {
        std::uint64_t see1 = seed, see2 = seed;
        do {
          seed = wy_mix(wy_r8(p) ^ s[1], wy_r8(p + 8) ^ seed);
          see1 = wy_mix(wy_r8(p + 16) ^ s[2], wy_r8(p + 24) ^ see1);
          see2 = wy_mix(wy_r8(p + 32) ^ s[3], wy_r8(p + 40) ^ see2);
          p += 48;
          i -= 48;
        } while (i >= 48);
        seed ^= see1 ^ see2;
      }
      while (i > 16) {
        seed = wy_mix(wy_r8(p) ^ s[1], wy_r8(p + 8) ^ seed);
        i -= 16;
        p += 16;
      }
      a = wy_r8(p + i - 16);
      b = wy_r8(p + i - 8);
    }
    a ^= s[1];
    b ^= seed;
    detail::wy_mum(a, b);
    return wy_mix(a ^ s[0] ^ len, b ^ s[1]);
  }

  /// The chain's seed: the salt's bytes hashed with the adapter folded into the seed.
  digest_type root(std::uint64_t adapter_id, std::string_view cache_salt) const {
    return hash_bytes(cache_salt.data(), cache_salt.size(),
                      detail::wy_mix(adapter_id ^ root_domain, detail::wy_secret[2]));
  }
  /// The block's tokens hashed with the parent digest as the seed.
  digest_type chain(const digest_type& parent, std::span<const token_id> tokens) const {
    return hash_bytes(tokens.data(), tokens.size_bytes(), parent);
  }
  static std::uint64_t bucket(const digest_type& d) { return d; }

 private:
  // Separates root digests from block digests of the same bytes.
  static constexpr std::uint64_t root_domain = 0x72756e67732e6b76ull;  // "rungs.kv"
};

static_assert(check_block_hasher<wyhash64>());

}  // namespace rungs::kv
