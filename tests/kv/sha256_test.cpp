#include <rungs/kv/sha256.hpp>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

using namespace rungs::kv;

namespace {
std::string hex(const sha256::digest& d) {
  std::string s;
  char buf[3];
  for (const std::uint8_t b : d) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    s += buf;
  }
  return s;
}
std::string sha(std::string_view text) { return hex(sha256::of(text.data(), text.size())); }
}  // namespace

TEST_CASE("sha256 reproduces the FIPS 180-4 examples") {
  CHECK(sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrl"
            "mnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST_CASE("sha256 streams: any split of the input gives the same digest") {
  const std::string million(1000000, 'a');
  CHECK(sha(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  sha256 h;
  for (std::size_t i = 0; i < million.size();) {
    const std::size_t n = std::min<std::size_t>(1 + i % 97, million.size() - i);  // ragged pieces
    h.update(million.data() + i, n);
    i += n;
  }
  CHECK(hex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  for (std::size_t len : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {  // padding boundaries
    const std::string s(len, 'x');
    sha256 parts;
    parts.update(s.data(), len / 2).update(s.data() + len / 2, len - len / 2);
    CHECK(hex(parts.finish()) == sha(s));
  }
}

TEST_CASE("sha256_hasher digests the documented encoding (checked against Python's hashlib)") {
  // root = SHA-256("rungs.kv.root.v1" || u64le(adapter) || u64le(|salt|) || salt),
  // chain = SHA-256(parent || u32le tokens): computed independently with hashlib.
  const sha256_hasher h;
  const auto root = h.root(0, "");
  CHECK(hex(root) == "39b08b9a384869390a433dd2ce3613e0530e924a008546eae34941ae436f51f5");
  const std::vector<token_id> block{1, 2, 3, 4};
  CHECK(hex(h.chain(root, block)) ==
        "1492a47899f852c0ca3551f781a37062705e1ba43e8561a04fa6f0f0bc5868b9");
  const auto salted = h.root(7, "tenant-a");
  CHECK(hex(salted) == "76e0904a614119a5a2a6dd17854aac0dcc2108cc3ffd0dcaec27d0fa346835a8");
  std::vector<token_id> negatives;
  for (token_id t = -3; t < 13; ++t) negatives.push_back(t);
  CHECK(hex(h.chain(salted, negatives)) ==
        "fb5737663e7bb739e2d824d647c4dbe4990b7cd40e5ffba7644eb62d14ce52ea");
  CHECK(sha256_hasher::bucket(root) == 0x396948389a8bb039ull);  // first 8 bytes, little-endian
}
