#include <rungs/kv/wyhash.hpp>

#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string_view>
#include <vector>

using rungs::kv::token_id;
using rungs::kv::wyhash64;

TEST_CASE("wyhash64 reproduces wyhash final 4.3's test vectors") {
  struct kat {
    std::string_view text;
    std::uint64_t seed, hash;
  };
  const kat vectors[] = {
      {"", 0, 0x93228a4de0eec5a2},
      {"a", 1, 0xc5bac3db178713c4},
      {"abc", 2, 0xa97f2f7b1d9b3314},
      {"message digest", 3, 0x786d1f1df3801df4},
      {"abcdefghijklmnopqrstuvwxyz", 4, 0xdca5a8138ad37c87},
      {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 5, 0xb9e734f117cfaf70},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890", 6,
       0x6cc5eab49a92d617},
  };
  for (const kat& v : vectors) {
    CAPTURE(v.text);
    CHECK(wyhash64::hash_bytes(v.text.data(), v.text.size(), v.seed) == v.hash);
  }
}

TEST_CASE("wyhash64 at every length boundary of its loops (bytes 0, 1, 2, ..., seed 123)") {
  std::vector<unsigned char> data(257);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i);
  const std::pair<std::size_t, std::uint64_t> vectors[] = {
      {0, 0xcb611538dfe036ff},   {1, 0xbc91649baa9ee1a6},   {3, 0x6c49661ea52c54df},
      {4, 0x4145b911d54cae51},   {8, 0x781d479043135bbf},   {9, 0x83f7d1897b88df1c},
      {16, 0x8c56a29621f298f2},  {17, 0xf5a18556c80d7934},  {47, 0xf24158ab43363af0},
      {48, 0x74b92e7372a2f752},  {49, 0xe807cf993ef9c988},  {95, 0x0f7f3f4b1095ffe0},
      {96, 0xd8d45a1e69b6c359},  {97, 0x1ca5f5a18791c638},  {255, 0x0f28aaf7a8dee042},
      {256, 0x39bef4d84f59cf8d}, {257, 0x9f7f1c66b9465fcd},
  };
  for (const auto& [len, hash] : vectors) {
    CAPTURE(len);
    CHECK(wyhash64::hash_bytes(data.data(), len, 123) == hash);
  }
}

TEST_CASE("wyhash64 chains: digests depend on the parent, every token, and the keys") {
  const wyhash64 h;
  const std::vector<token_id> block{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26};
  const auto root = h.root(0, "");
  const auto d = h.chain(root, block);
  CHECK(d == h.chain(root, block));  // deterministic
  CHECK(d == wyhash64::hash_bytes(block.data(), block.size() * sizeof(token_id), root));
  CHECK(d != h.chain(root + 1, block));
  std::set<std::uint64_t> seen{d};
  for (std::size_t i = 0; i < block.size(); ++i) {
    std::vector<token_id> changed = block;
    changed[i] ^= 1;
    seen.insert(h.chain(root, changed));
  }
  CHECK(seen.size() == block.size() + 1);
  CHECK(h.root(1, "") != root);
  CHECK(h.root(0, "tenant-a") != root);
  CHECK(h.root(0, "tenant-a") != h.root(0, "tenant-b"));
  CHECK(h.root(0, "tenant-a") == h.root(0, "tenant-a"));
  CHECK(wyhash64::bucket(d) == d);
}
