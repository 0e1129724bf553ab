// The engine with rungs::kv's allocator as its Allocator policy: sequences are admitted and
// grown by the allocator, the engine pads and replays their steps, block tables change under
// it from step to step.
#include <rungs/engine/engine.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/kv.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;
namespace kv = rungs::kv;

TEST_CASE("rungs::kv's allocator is the engine's Allocator policy") {
  static_assert(kv::check_block_allocator<kv::free_list_allocator>());
  using kv_engine = engine<tiny_model, token_ladder, largest_first, delayed, kv::free_list_allocator, host_backend>;
  toy_model graphs_model, eager_model;
  const kv::allocator_config config{.num_blocks = 64, .block_size = tiny_model.block_size, .max_sequences = 16, .max_model_len = 64};
  kv_engine e(token_ladder{{1, 2, 4, 8}}, kv::free_list_allocator(config), host_backend(std::ref(graphs_model)),
              {.max_model_len = 64});
  engine<tiny_model, token_ladder, largest_first, lazy, kv::free_list_allocator, host_backend> eager(
      token_ladder{{8}}, kv::free_list_allocator(config), host_backend(std::ref(eager_model)),
      {.timing = lazy{.eager_uses = 1000}, .max_model_len = 64});

  // Six sequences with prompts of 3..8 tokens, admitted by the engine's own allocator.
  std::vector<kv::sequence_id> ids;
  std::vector<std::int64_t> length;
  std::vector<std::vector<std::int32_t>> next;
  for (int i = 0; i < 6; ++i) {
    std::vector<kv::token_id> prompt(static_cast<std::size_t>(3 + i), 10 + i);
    ids.push_back(e.blocks().create(prompt).value().id);
    REQUIRE(e.blocks().append(ids.back(), prompt) == kv::errc::ok);
    length.push_back(static_cast<std::int64_t>(prompt.size()) - 1);
    next.push_back({prompt.back()});
  }
  for (int step = 0; step < 8; ++step) {
    std::size_t live = step < 4 ? 6 : 3;
    std::vector<sequence> seqs;
    for (std::size_t i = 0; i < live; ++i) seqs.push_back({next[i], length[i], e.blocks().block_table(ids[i]).value()});
    auto a = e.step(seqs);
    auto b = eager.step(seqs);  // the same block ids: both caches see the same writes
    CHECK(a.run == run_kind::replay);
    CHECK(std::vector<float>(a.rows.begin(), a.rows.end()) == std::vector<float>(b.rows.begin(), b.rows.end()));
    for (std::size_t i = 0; i < live; ++i) {  // the next token: tables grow as blocks fill
      next[i] = {static_cast<std::int32_t>(step * 7 + static_cast<int>(i))};
      ++length[i];
      REQUIRE(e.blocks().append(ids[i], next[i]) == kv::errc::ok);
    }
  }
  CHECK(graphs_model.cache == eager_model.cache);
  CHECK(e.stats().padded_rows == 4 * 2 + 4 * 1);
  // A block table naming a block outside the pool is refused before anything runs.
  std::vector<std::int32_t> bad{64}, tok{1};
  std::vector<sequence> outside{{tok, 0, bad}};
  CHECK_THROWS_WITH(e.step(outside), "sequence 0: block 64 is outside the pool [0, 64)");
}

TEST_CASE("an allocator with another block size than the model's is rejected") {
  toy_model model;
  using kv_engine = engine<tiny_model, token_ladder, largest_first, delayed, kv::free_list_allocator, host_backend>;
  CHECK_THROWS_WITH(kv_engine(token_ladder{{1}}, kv::free_list_allocator({.num_blocks = 8, .block_size = 16}),
                              host_backend(std::ref(model)), {.max_model_len = 64}),
                    "engine: the allocator's block_size = 16 must equal the model's block_size = 4");
}
