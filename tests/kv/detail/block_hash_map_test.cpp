#include <rungs/kv/detail/block_hash_map.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>
#include <utility>
#include <vector>

using rungs::kv::block_id;
using rungs::kv::null_block;

namespace {
struct identity_bucket {
  static std::uint64_t bucket(std::uint64_t d) { return d; }
};
struct one_bucket {  // every key collides: one long probe run
  static std::uint64_t bucket(std::uint64_t) { return 0; }
};
}  // namespace

// The reference is a list of (digest, block) in insertion order: find() must return the first
// block of a digest in it, as vLLM's BlockHashToBlockMap.get_one_block returns the first of its
// insertion-ordered dict. Keys repeat (several blocks per digest); a block is in one entry at most.
TEMPLATE_TEST_CASE("block_hash_map agrees with an insertion-ordered multimap under random insert/erase", "",
                   identity_bucket, one_bucket) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    // 8 entries at most: 16 slots, so probe runs wrap around the end of the table.
    rungs::kv::detail::block_hash_map<std::uint64_t, TestType> map(8);
    std::vector<std::pair<std::uint64_t, block_id>> ref;
    const auto where = [&ref](block_id b) {
      return std::find_if(ref.begin(), ref.end(), [b](const auto& e) { return e.second == b; });
    };
    std::mt19937 rng(seed);
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t key = rng() % 6;  // few keys: most have several blocks
      const block_id b = static_cast<block_id>(rng() % 12);
      const auto it = where(b);
      if (it == ref.end() && ref.size() < 8 && rng() % 2) {
        map.insert(key, b);
        ref.emplace_back(key, b);
      } else if (it != ref.end() && rng() % 2) {
        CHECK_FALSE(map.erase(it->first + 1, b));  // b is not under another digest: kept
        CHECK(map.erase(it->first, b));
        ref.erase(it);
      } else if (it == ref.end()) {
        CHECK_FALSE(map.erase(key, b));
      }
      REQUIRE(map.size() == static_cast<std::int32_t>(ref.size()));
      for (std::uint64_t k = 0; k < 8; ++k) {
        const auto first = std::find_if(ref.begin(), ref.end(), [k](const auto& e) { return e.first == k; });
        REQUIRE(map.find(k) == (first == ref.end() ? null_block : first->second));
      }
      for (block_id x = 0; x < 12; ++x) {
        const auto e = where(x);
        for (std::uint64_t k = 0; k < 8; ++k) REQUIRE(map.contains(k, x) == (e != ref.end() && e->first == k));
      }
    }
  }
}

TEST_CASE("block_hash_map: blocks of one digest, found oldest first, each erased alone") {
  rungs::kv::detail::block_hash_map<std::uint64_t, one_bucket> map(8);
  map.insert(5, 10);
  map.insert(7, 11);
  map.insert(5, 12);
  map.insert(5, 13);
  CHECK(map.size() == 4);
  CHECK(map.find(5) == 10);
  CHECK_FALSE(map.erase(7, 10));  // 10 is under 5, not 7
  CHECK(map.erase(5, 12));        // the middle one: 10 stays first
  CHECK(map.find(5) == 10);
  CHECK(map.erase(5, 10));
  CHECK(map.find(5) == 13);
  CHECK(map.find(7) == 11);
  CHECK(map.contains(5, 13));
  CHECK_FALSE(map.contains(5, 12));
  CHECK(map.erase(5, 13));
  CHECK(map.find(5) == null_block);
  CHECK(map.size() == 1);
}
