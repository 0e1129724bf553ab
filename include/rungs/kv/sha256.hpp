// sha256_hasher: the collision-resistant block hasher, for deployments where prompts come from
// users who must not be able to alias each other's cached blocks (see hash.hpp for the
// trade-off against wyhash64).
//
// `sha256` is a plain FIPS 180-4 implementation (no SHA-NI: the header stays portable). The
// byte encodings the hasher digests are fixed, so digests agree across processes and machines:
//   root(adapter, salt) = SHA-256("rungs.kv.root.v1" || u64le(adapter) || u64le(|salt|) || salt)
//   chain(parent, t)    = SHA-256(parent || u32le(t[0]) || ... || u32le(t[n-1]))
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include <rungs/kv/hash.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

/// Incremental SHA-256.
class sha256 {
 public:
  using digest = std::array<std::uint8_t, 32>;

  sha256& update(const void* data, std::size_t len) {
    if (len == 0) return *this;  // data may be null (an empty salt)
    const auto* p = static_cast<const std::uint8_t*>(data);
    total_ += len;
    if (fill_ > 0) {
      const std::size_t take = len < 64 - fill_ ? len : 64 - fill_;
      std::memcpy(buffer_ + fill_, p, take);
      fill_ += take;
      p += take;
      len -= take;
      if (fill_ < 64) return *this;
      compress(buffer_);
      fill_ = 0;
    }
    for (; len >= 64; p += 64, len -= 64) compress(p);
    std::memcpy(buffer_, p, len);
    fill_ = len;
    return *this;
  }

  digest finish() {
    const std::uint64_t bits = total_ * 8;
    const std::uint8_t pad = 0x80;
    update(&pad, 1);
    const std::uint8_t zero[64] = {};
    update(zero, fill_ <= 56 ? 56 - fill_ : 120 - fill_);
    std::uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
    update(length, 8);
    digest out;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<std::uint8_t>(h_[i] >> (24 - 8 * j));
    return out;
  }

  static digest of(const void* data, std::size_t len) { return sha256().update(data, len).finish(); }

 private:
  static constexpr std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};

  void compress(const std::uint8_t* block) {
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t{block[4 * i]} << 24) | (std::uint32_t{block[4 * i + 1]} << 16) |
             (std::uint32_t{block[4 * i + 2]} << 8) | std::uint32_t{block[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 =
          std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
                  h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 = h + (std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25)) +
                               ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 =
          (std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  std::uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::uint8_t buffer_[64] = {};
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
};

struct sha256_hasher {
  using digest_type = sha256::digest;

  digest_type root(std::uint64_t adapter_id, std::string_view cache_salt) const {
    sha256 h;
    h.update("rungs.kv.root.v1", 16);
    put_u64(h, adapter_id);
    put_u64(h, cache_salt.size());
    h.update(cache_salt.data(), cache_salt.size());
    return h.finish();
  }

  digest_type chain(const digest_type& parent, std::span<const token_id> tokens) const {
    sha256 h;
    h.update(parent.data(), parent.size());
    if constexpr (std::endian::native == std::endian::little) {
      h.update(tokens.data(), tokens.size_bytes());
    } else {
      for (const token_id t : tokens) {
        const auto u = static_cast<std::uint32_t>(t);
        const std::uint8_t le[4] = {static_cast<std::uint8_t>(u), static_cast<std::uint8_t>(u >> 8),
                                    static_cast<std::uint8_t>(u >> 16),
                                    static_cast<std::uint8_t>(u >> 24)};
        h.update(le, 4);
      }
    }
    return h.finish();
  }

  static std::uint64_t bucket(const digest_type& d) {
    std::uint64_t v;
    std::memcpy(&v, d.data(), 8);
    return v;
  }

 private:
  static void put_u64(sha256& h, std::uint64_t v) {
    std::uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<std::uint8_t>(v >> (8 * i));
    h.update(le, 8);
  }
};

static_assert(check_block_hasher<sha256_hasher>());

}  // namespace rungs::kv
