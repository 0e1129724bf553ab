// Tests of include/rungs/planning/prefix_study.hpp: the prefix-cache replay, hand-checked.
#include <rungs/planning/prefix_study.hpp>

#include <catch2/catch.hpp>

#include <vector>

using namespace rungs;
using serving::trace_request;

namespace {
trace_request ids(std::vector<std::uint64_t> h) {
  return {.prompt_tokens = static_cast<std::int32_t>(h.size()) * 512, .output_tokens = 1, .hash_ids = std::move(h)};
}
}  // namespace

TEST_CASE("prefix cache study: stops at the first miss, holds, evicts LRU with the last block first") {
  const std::vector<trace_request> trace = {ids({1, 2}), ids({1, 3}), ids({1, 2}), ids({4, 5, 6}), ids({4}), ids({1, 3})};
  CHECK(planning::default_study_block_size(trace) == 512);
  const std::int64_t capacities[] = {3 * 512, 100 * 512};
  const auto p = planning::prefix_cache_study(trace, capacities, 512);
  REQUIRE(p.size() == 2);
  // 3 blocks. LRU list after each request (front is reused first; an uncached block goes
  // in front, a request's blocks are released last block first):
  //   [1,2]   0 of 2 hit                               free, 2, 1
  //   [1,3]   1 hits, 3 takes the free block           2, 3, 1
  //   [1,2]   2 hits                                   3, 2, 1
  //   [4,5,6] needs 3 blocks + 1 for the extra token: too large, not replayed
  //   [4]     0 hits, evicts 3                         2, 1, 4
  //   [1,3]   1 hits, 3 evicts 2                       4, 3, 1
  CHECK(p[0].capacity_tokens == 1536);
  CHECK(p[0].looked_up_blocks == 9);
  CHECK(p[0].hit_blocks == 4);
  CHECK(p[0].hit_tokens == 4 * 512);
  CHECK(p[0].prompt_tokens == 9 * 512);
  CHECK(p[0].too_large == 1);
  CHECK(p[0].requests == 5);
  CHECK(p[0].evictions == 2);
  CHECK(p[0].hit_rate() == Approx(4.0 / 9));
  // Large enough for everything: every id seen before hits.
  CHECK(p[1].looked_up_blocks == 12);
  CHECK(p[1].hit_blocks == 6);
  CHECK(p[1].too_large == 0);
  CHECK(p[1].evictions == 0);
  // At 16-token blocks the same sharing: each id is 32 blocks.
  const auto q = planning::prefix_cache_study(trace, std::span(capacities).subspan(1), 16);
  CHECK(q[0].looked_up_blocks == 12 * 32);
  CHECK(q[0].hit_blocks == 6 * 32);
  CHECK(q[0].hit_tokens == 6 * 512);
}

TEST_CASE("prefix cache study: a partial last id block counts as one; conversations carry their history") {
  // 600 tokens under ids [1, 2]: padded to 1024, looked up as 2 blocks; hit tokens stop at 600.
  const std::vector<trace_request> partial = {{.prompt_tokens = 600, .output_tokens = 1, .hash_ids = {1, 2}},
                                              {.prompt_tokens = 600, .output_tokens = 1, .hash_ids = {1, 2}}};
  const std::int64_t big[] = {std::int64_t{1} << 40};  // more than the trace writes: bounded memory
  const auto p = planning::prefix_cache_study(partial, big, 512);
  CHECK(p[0].looked_up_blocks == 4);
  CHECK(p[0].hit_blocks == 2);
  CHECK(p[0].hit_tokens == 600);
  CHECK(p[0].prompt_tokens == 1200);
  // Turn 2's prompt is turn 1's 8 prompt tokens, its 4 outputs and 4 new tokens (16 tokens,
  // 4 blocks of 4): turn 1's prompt blocks hit, its outputs were never cached (a study of
  // prompts), so 2 of 4.
  const std::vector<trace_request> chat = {{.prompt_tokens = 8, .output_tokens = 4, .conversation = 7, .turn = 1},
                                           {.prompt_tokens = 4, .output_tokens = 4, .conversation = 7, .turn = 2}};
  CHECK(planning::default_study_block_size(chat) == 16);
  const auto c = planning::prefix_cache_study(chat, big, 4);
  CHECK(c[0].looked_up_blocks == 2 + 4);
  CHECK(c[0].hit_blocks == 2);
  CHECK(c[0].prompt_tokens == 8 + 16);
  const std::int64_t tiny[] = {3};
  CHECK_THROWS_WITH(planning::prefix_cache_study(chat, tiny, 4),
                    "prefix cache study: capacity = 3 tokens holds no block of 4");
  CHECK_THROWS_WITH(planning::prefix_cache_study(chat, big, 0), "prefix cache study: block size = 0 must be positive");
}
