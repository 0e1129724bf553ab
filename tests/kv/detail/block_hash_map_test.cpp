#include <rungs/kv/detail/block_hash_map.hpp>

#include <catch2/catch.hpp>
#include <random>
#include <unordered_map>

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

TEMPLATE_TEST_CASE("block_hash_map agrees with std::unordered_map under random insert/erase", "",
                   identity_bucket, one_bucket) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    // 8 entries at most: 16 slots, so probe runs wrap around the end of the table.
    rungs::kv::detail::block_hash_map<std::uint64_t, TestType> map(8);
    std::unordered_map<std::uint64_t, block_id> ref;
    std::mt19937 rng(seed);
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t key = rng() % 24;
      const bool present = ref.count(key) != 0;
      if (!present && ref.size() < 8 && rng() % 2) {
        const block_id b = static_cast<block_id>(rng() % 1000);
        map.insert(key, b);
        ref[key] = b;
      } else if (present && rng() % 3 == 0) {
        CHECK_FALSE(map.erase(key, ref[key] + 1));  // another block's digest: kept
        CHECK(map.erase(key, ref[key]));
        ref.erase(key);
      } else if (!present) {
        CHECK_FALSE(map.erase(key, 0));
      }
      REQUIRE(map.size() == static_cast<std::int32_t>(ref.size()));
      for (std::uint64_t k = 0; k < 24; ++k) {
        const auto it = ref.find(k);
        REQUIRE(map.find(k) == (it == ref.end() ? null_block : it->second));
      }
    }
  }
}
