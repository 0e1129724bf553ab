#include <rungs/ladder/grid.hpp>

#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

using rungs::bucket;
using rungs::bucket_grid;

TEST_CASE("bucket tokens: the token budget formula") {
  CHECK(rungs::bucket_tokens<1>({7}) == 7);
  CHECK(rungs::bucket_tokens<2>({4, 512}) == 2048);
  CHECK(rungs::bucket_tokens<3>({2, 128, 3}, 128) == 2 * (128 + 3 * 128));
  std::ostringstream os;
  rungs::print_bucket<3>(os, {1, 128, 0});
  rungs::print_bucket<1>(os << " ", {5});
  CHECK(os.str() == "(1, 128, 0) (5,)");
}

TEST_CASE("2-D lookup: 3 sequences of 412 tokens run as (4, 512), as the Gaudi document says") {
  std::vector<bucket<2>> buckets;
  for (rungs::rung_t bs : {1, 2, 4})
    for (rungs::rung_t seq = 128; seq <= 1024; seq += 128) buckets.push_back({bs, seq});
  const bucket_grid<2> g(buckets);
  const auto l = g.lookup({3, 412});
  CHECK(l.chosen == bucket<2>{4, 512});
  CHECK(l.index == 16 + 3);
  CHECK(l.real_tokens == 3 * 412);
  CHECK(l.padded_tokens == 4 * 512);
  CHECK(l.padding() == 2048 - 1236);
  CHECK(g.lookup({2, 513}).chosen == bucket<2>{2, 640});  // the context grew past 512
  CHECK(g.lookup({5, 100}).eager());                      // above every batch size
  CHECK(g.lookup({1, 1025}).eager());
  CHECK(g.lookup({1, 1}).chosen == bucket<2>{1, 128});
}

TEST_CASE("the smallest covering bucket is the one with the fewest tokens, ties to the first listed") {
  // Both (8, 64) and (2, 512) cover (2, 64); (8, 64) has 512 tokens, (2, 512) has 1024.
  const bucket_grid<2> g({{2, 512}, {8, 64}, {4, 128}});
  CHECK(g.lookup({2, 64}).chosen == bucket<2>{8, 64});
  CHECK(g.lookup({2, 64}).index == 1);
  // (4, 128) and (8, 64) tie at 512 tokens for a request both cover: the first listed wins.
  const bucket_grid<2> tie({{8, 64}, {4, 128}});
  CHECK(tie.lookup({3, 60}).index == 0);
  const bucket_grid<2> tie2({{4, 128}, {8, 64}});
  CHECK(tie2.lookup({3, 60}).index == 0);
}

TEST_CASE("3-D lookup with context blocks") {
  const bucket_grid<3> g({{1, 128, 0}, {1, 128, 1}, {1, 256, 0}, {2, 128, 0}}, 128);
  CHECK(g.tokens({1, 128, 1}) == 256);
  // (1, 100, 1) is covered by (1, 128, 1) only: 256 tokens.
  CHECK(g.lookup({1, 100, 1}).chosen == bucket<3>{1, 128, 1});
  // (1, 100, 0): (1, 128, 0) with 128 tokens beats (1, 128, 1) and (1, 256, 0).
  CHECK(g.lookup({1, 100, 0}).chosen == bucket<3>{1, 128, 0});
  CHECK(g.lookup({1, 129, 1}).eager());
}

TEST_CASE("lookups agree with a brute-force search") {
  std::vector<bucket<3>> buckets;
  for (rungs::rung_t bs : {1, 2, 4, 8})
    for (rungs::rung_t q : {1, 128, 384})
      for (rungs::rung_t c : {0, 2, 5, 9})
        if (bs * (q + c * 16) <= 2000) buckets.push_back({bs, q, c});
  const bucket_grid<3> g(buckets, 16);
  for (rungs::rung_t bs = 1; bs <= 9; ++bs)
    for (rungs::rung_t q = 1; q <= 400; q += 13)
      for (rungs::rung_t c = 0; c <= 10; ++c) {
        const bucket<3> r{bs, q, c};
        std::int32_t best = -1;
        for (std::size_t i = 0; i < buckets.size(); ++i) {
          const auto& b = buckets[i];
          if (b[0] < bs || b[1] < q || b[2] < c) continue;
          if (best < 0 || g.tokens(b) < g.tokens(buckets[static_cast<std::size_t>(best)]))
            best = static_cast<std::int32_t>(i);
        }
        INFO(bs << " " << q << " " << c);
        REQUIRE(g.lookup(r).index == best);
      }
}

TEST_CASE("an empty grid runs everything eagerly; bad buckets are refused") {
  const bucket_grid<2> empty;
  CHECK(empty.lookup({1, 1}).eager());
  CHECK(empty.lookup({1, 1}).padding() == 0);
  CHECK_THROWS_WITH(bucket_grid<2>({{1, 128}, {0, 128}}), "bucket grid: buckets[1][0] = 0 must be positive");
  CHECK_THROWS_WITH(bucket_grid<3>({{1, 128, -1}}, 128), "bucket grid: buckets[0][2] = -1 must not be negative");
  CHECK_NOTHROW(bucket_grid<3>({{1, 128, 0}}, 128));
  CHECK_THROWS_WITH(bucket_grid<3>({{1, 128, 0}}, 0), "bucket grid: block_size = 0 must be positive");
}

TEST_CASE("3-D token products are checked: a bucket past int64 is an error naming it") {
  constexpr rungs::rung_t r = 2147483647;
  CHECK(rungs::bucket_tokens<3>({r, r, r}, 1) == r * (r + r));  // 2^63 - 2^33 + 2: fits
  CHECK(rungs::bucket_tokens<3>({r, r, r}, 2) == std::nullopt);
  CHECK(rungs::bucket_tokens<3>({r, r, r}, 128) == std::nullopt);
  CHECK(rungs::bucket_tokens<2>({r, r}) == r * r);
  CHECK_THROWS_WITH(bucket_grid<3>({{1, 128, 0}, {r, r, r}}, 128),
                    "bucket grid: buckets[1] = (2147483647, 2147483647, 2147483647) with block_size 128 "
                    "processes more than 2^63 - 1 tokens (batch * (query + context_blocks * block_size) must "
                    "fit 64 bits)");
  CHECK_THROWS_AS(bucket_grid<3>({{r, 1, r}}, std::int64_t{1} << 30), rungs::ladder_error);
  // A request that large is no bucket's: an error too, not a wrapped-around lookup.
  const bucket_grid<3> g({{1, 128, 0}, {r, r, r}}, 1);
  CHECK(g.lookup({r, r, r}).index == 1);
  CHECK_THROWS_WITH(g.lookup({r, r, 2 * r}),
                    "bucket grid: request = (2147483647, 2147483647, 4294967294) with block_size 1 processes "
                    "more than 2^63 - 1 tokens (batch * (query + context_blocks * block_size) must fit 64 bits)");
}

TEST_CASE("a grid holds at most max_grid_buckets buckets") {
  CHECK(rungs::max_grid_buckets == 1048576);
  std::vector<bucket<1>> many(rungs::max_grid_buckets, bucket<1>{1});
  CHECK(bucket_grid<1>(many).size() == 1048576);
  many.push_back({2});
  CHECK_THROWS_WITH(bucket_grid<1>(many),
                    "bucket grid: bucket count = 1048577 exceeds the limit of 1048576 buckets per grid "
                    "(rungs::max_grid_buckets)");
}
