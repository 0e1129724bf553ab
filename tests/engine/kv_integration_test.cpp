// rungs::kv's allocator with the engine's two layers: the graph runner alone under a caller's
// own KV management (sequences admitted and grown by the caller's allocator, block tables
// changing under the runner from step to step), and the engine that owns the allocator.
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

TEST_CASE("the graph runner under rungs::kv's allocator, kept by the caller") {
  static_assert(kv::check_block_allocator<kv::free_list_allocator>());
  toy_model graphs_model, eager_model;
  const kv::allocator_config config{.num_blocks = 64, .block_size = tiny_model.block_size, .max_sequences = 16, .max_model_len = 64};
  // example-begin runner-alone
  kv::free_list_allocator blocks(config);  // the caller's own KV manager
  graph_runner<token_ladder, largest_first, delayed, host_backend> e(
      token_ladder{{1, 2, 4, 8}}, host_backend(std::ref(graphs_model)), {.max_model_len = 64, .shape = run_shape::of(tiny_model, 64)});
  graph_runner<token_ladder, largest_first, lazy, host_backend> eager(
      token_ladder{{8}}, host_backend(std::ref(eager_model)),
      {.timing = lazy{.eager_uses = 1000}, .max_model_len = 64, .shape = run_shape::of(tiny_model, 64)});

  // Six sequences with prompts of 3..8 tokens, admitted by the allocator.
  std::vector<kv::sequence_id> ids;
  std::vector<std::int64_t> length;
  std::vector<std::vector<std::int32_t>> next;
  for (int i = 0; i < 6; ++i) {
    std::vector<kv::token_id> prompt(static_cast<std::size_t>(3 + i), 10 + i);
    ids.push_back(blocks.create(prompt).value().id);
    REQUIRE(blocks.append(ids.back(), prompt) == kv::errc::ok);
    length.push_back(static_cast<std::int64_t>(prompt.size()) - 1);
    next.push_back({prompt.back()});
  }
  for (int step = 0; step < 8; ++step) {
    std::size_t live = step < 4 ? 6 : 3;
    std::vector<sequence> seqs;
    for (std::size_t i = 0; i < live; ++i) seqs.push_back({next[i], length[i], blocks.block_table(ids[i]).value()});
    auto a = e.step(seqs);
    auto b = eager.step(seqs);  // the same block ids: both caches see the same writes
    CHECK(a.run == run_kind::replay);
    CHECK(std::vector<float>(a.rows.begin(), a.rows.end()) == std::vector<float>(b.rows.begin(), b.rows.end()));
    for (std::size_t i = 0; i < live; ++i) {  // the next token: tables grow as blocks fill
      next[i] = {static_cast<std::int32_t>(step * 7 + static_cast<int>(i))};
      ++length[i];
      REQUIRE(blocks.append(ids[i], next[i]) == kv::errc::ok);
    }
  }
  // example-end runner-alone
  CHECK(graphs_model.cache == eager_model.cache);
  CHECK(e.stats().padded_rows == 4 * 2 + 4 * 1);
  // A block table naming a block outside the pool is refused before anything runs.
  std::vector<std::int32_t> bad{64}, tok{1};
  std::vector<sequence> outside{{tok, 0, bad}};
  CHECK_THROWS_WITH(e.step(outside), "sequence 0: block 64 is outside the pool [0, 64)");
}

TEST_CASE("an allocator with another block size than the model's is rejected") {
  toy_model model;
  using kv_engine = engine<token_ladder, largest_first, delayed, kv::free_list_allocator, host_backend>;
  CHECK_THROWS_WITH(kv_engine(token_ladder{{1}}, kv::free_list_allocator({.num_blocks = 8, .block_size = 16}),
                              host_backend(std::ref(model)), {.model = tiny_model}),
                    "engine: the allocator's block_size = 16 must equal the model's block_size = 4");
}

TEST_CASE("the engine's step serves requests through the runner: graphs and eager steps give the same tokens") {
  auto serve = [](auto timing) {
    toy_model model(tiny_model.block_size, 64);
    engine<token_ladder, largest_first, decltype(timing), kv::free_list_allocator, host_backend> e(
        token_ladder{{1, 2, 4, 8}},
        kv::free_list_allocator({.num_blocks = 64, .block_size = tiny_model.block_size, .max_sequences = 8, .max_model_len = 32}),
        host_backend(std::ref(model)),
        {.timing = timing, .scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 16},
         .routing = step_routing::single, .model = tiny_model});
    for (std::uint64_t id = 1; id <= 3; ++id)
      e.submit({.id = id, .prompt = std::vector<kv::token_id>(3 + id, static_cast<kv::token_id>(id)), .max_output_tokens = 4});
    row_sampler hook;
    std::vector<std::vector<kv::token_id>> outputs(3);
    std::int64_t steps = 0;
    while (!e.idle_queues()) {
      const engine_step& s = e.step(hook);
      REQUIRE(s.ran());
      ++steps;
      for (const auto& f : s.events->finished) outputs[f.id - 1] = f.output;
    }
    return std::pair{outputs, e.stats()};
  };
  auto [graphs, gs] = serve(startup{});
  auto [eager, es] = serve(lazy{.eager_uses = 1000});
  CHECK(graphs == eager);
  for (const auto& o : graphs) CHECK(o.size() == 4);
  // Step 1 prefills 4 + 5 + 6 = 15 tokens (above the top rung: eager), then 4 decode steps of
  // 3 sequences replay the 4-rung (the last sampled token finishes each request).
  CHECK(gs.steps == 4);
  CHECK(gs.replays == 3);
  CHECK(gs.eager_steps(eager_reason::above_top) == 1);
  CHECK(es.replays == 0);
}

namespace {
// The host backend, also taking every group's block tables (backend.hpp, group_tables):
// records them per runner step, as ids per group and row.
struct grouped_backend {
  host_backend host;
  std::vector<std::vector<std::vector<kv::block_id>>> staged;  // [runner step][group * rows + row]

  void setup(const backend_setup& s) { host.setup(s); }
  capture_report capture(std::size_t slot, const bucket& b, const padded_batch& p) { return host.capture(slot, b, p); }
  void replay(std::size_t slot, const padded_batch& p) { host.replay(slot, p); }
  void eager(const padded_batch& p) { host.eager(p); }
  void release(std::size_t slot) { host.release(slot); }
  std::span<const float> rows(std::int64_t n) const { return host.rows(n); }
  void stage_groups(const group_tables& t) {
    REQUIRE(t.tables.size() == static_cast<std::size_t>(t.groups * t.rows));
    std::vector<std::vector<kv::block_id>> step;
    for (std::int32_t g = 0; g < t.groups; ++g)
      for (std::int64_t k = 0; k < t.rows; ++k) step.emplace_back(t.table(g, k).begin(), t.table(g, k).end());
    staged.push_back(std::move(step));
  }
};
}  // namespace

// A hybrid model (kv::hybrid_allocator, groups {full, sliding window of 4 keys}, block size 4)
// under the engine: one request, a 6-token prompt and 4 output tokens. The engine stages group
// 0's table and hands the backend both groups' tables every step:
//   step 1 (prefill, p = 0..5)  full [0 1]    sliding [2 3]
//   step 2 (decode at p = 6)    full [0 1]    sliding [2 3]      (keys 3..6: blocks 0 and 1)
//   step 3 (decode at p = 7)    full [0 1]    sliding [-1 3]     (keys 4..7: block 0 left)
//   step 4 (decode at p = 8)    full [0 1 4]  sliding [-1 3 5]   (new blocks: the free 4 and 5;
//                                                                 2 is cached, queued behind them)
// Its tokens are those of the same engine on an all-full allocator: the staged (full) table
// reads the same KV.
TEST_CASE("the engine on a hybrid allocator hands the backend every group's block tables") {
  using kv::null_block;
  auto serve = [](auto&& blocks, auto backend) {
    toy_model model(tiny_model.block_size, 16);
    backend.host = host_backend(std::ref(model));
    engine<token_ladder, largest_first, startup, std::remove_cvref_t<decltype(blocks)>, decltype(backend)> e(
        token_ladder{{1, 2, 4, 8}}, std::move(blocks), std::move(backend),
        {.scheduler = {.max_num_seqs = 2, .max_num_batched_tokens = 16}, .routing = step_routing::single,
         .model = tiny_model});
    e.submit({.id = 1, .prompt = {5, 6, 7, 8, 9, 10}, .max_output_tokens = 4});
    row_sampler hook;
    std::vector<kv::token_id> output;
    while (!e.idle_queues()) {
      const engine_step& s = e.step(hook);
      REQUIRE(s.ran());
      for (const auto& f : s.events->finished) output = f.output;
      REQUIRE(e.scheduler().check_consistency().empty());
    }
    return std::pair{output, std::move(e.runner().backend())};
  };
  auto [hybrid_out, hybrid] = serve(
      kv::hybrid_allocator<>({.num_blocks = 16, .block_size = tiny_model.block_size, .max_sequences = 2, .max_model_len = 16,
                              .groups = {{}, {kv::attention_kind::sliding_window, 4}}}),
      grouped_backend{.host = host_backend([](const host_step&) {})});
  using tables = std::vector<std::vector<kv::block_id>>;
  REQUIRE(hybrid.staged.size() == 4);
  CHECK(hybrid.staged[0] == tables{{0, 1}, {2, 3}});
  CHECK(hybrid.staged[1] == tables{{0, 1}, {2, 3}});
  CHECK(hybrid.staged[2] == tables{{0, 1}, {null_block, 3}});
  CHECK(hybrid.staged[3] == tables{{0, 1, 4}, {null_block, 3, 5}});
  auto [full_out, full] = serve(
      kv::prefix_caching_allocator<>({.num_blocks = 16, .block_size = tiny_model.block_size, .max_sequences = 2,
                                      .max_model_len = 16}),
      grouped_backend{.host = host_backend([](const host_step&) {})});
  CHECK(full.staged.empty());  // one group: nothing beyond the staged table
  CHECK(hybrid_out.size() == 4);
  CHECK(hybrid_out == full_out);
}
