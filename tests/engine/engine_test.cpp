// The engine through the host backend: outputs, padding, failures, budget, statistics, errors.
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/phased_buckets.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
template <class Order, class Timing, class Buckets = token_ladder>
using test_engine = graph_runner<Buckets, Order, Timing, host_backend>;
using strings = std::vector<std::string>;
constexpr std::int64_t MiB = 1 << 20;
}  // namespace

TEST_CASE("replayed steps return the same real rows as eager steps, on random batches") {
  toy_model graphs_model, eager_model;
  test_engine<largest_first, startup> graphs(token_ladder{{1, 2, 4, 8, 16}}, host_backend(std::ref(graphs_model)),
                                             {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  // An engine whose only bucket is never reached runs every step eagerly, unpadded.
  test_engine<largest_first, lazy> eager(token_ladder{{16}}, host_backend(std::ref(eager_model)),
                                         {.timing = lazy{.eager_uses = 1000}, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  std::mt19937 rng(42);
  batch_builder bb;
  for (int step = 0; step < 40; ++step) {
    std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 16)(rng);
    std::int64_t ctx = std::uniform_int_distribution<std::int64_t>(0, 14)(rng);
    auto seqs = bb.make(n, ctx, 1, step);
    auto a = graphs.step(seqs);
    std::vector<float> replayed(a.rows.begin(), a.rows.end());
    auto b = eager.step(seqs);
    REQUIRE(a.run == run_kind::replay);
    REQUIRE(b.run == run_kind::eager);
    REQUIRE(replayed.size() == static_cast<std::size_t>(n * tiny_model.row_width()));
    CHECK(replayed == std::vector<float>(b.rows.begin(), b.rows.end()));
    CHECK(graphs_model.cache == eager_model.cache);  // padding never wrote the cache
  }
  CHECK(graphs.stats().replays == 40);
  CHECK(graphs.stats().padded_rows > 0);
  CHECK(eager.stats().eager_steps(eager_reason::not_captured) == 40);
}

TEST_CASE("padded rows leave the cache untouched and only real rows come back") {
  toy_model model;
  test_engine<largest_first, startup> e(token_ladder{{8}}, host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.start();
  std::vector<float> before = model.cache;
  batch_builder bb;
  auto r = e.step(bb.make(3, 5));
  CHECK(r.run == run_kind::replay);
  CHECK(r.rows.size() == 3 * 8);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < before.size(); ++i) changed += before[i] != model.cache[i];
  CHECK(changed == 3 * static_cast<std::size_t>(toy_model::kv_width));  // one new token per real sequence
  CHECK(e.stats().padded_rows == 5);
  CHECK(e.stats().real_rows == 3);
  CHECK(e.stats().padded_tokens == 5);
  CHECK(e.stats().padding_ratio() == Approx(5.0 / 8.0));
}

TEST_CASE("a failing capture leaves its bucket eager, is counted and reported, and never stops the engine") {
  toy_model model;
  std::vector<std::string> log;
  host_backend::options opts{.simulate = simulated_capture{
                                 .fail = [](std::size_t, const bucket& b) -> std::optional<std::string> {
                                   if (b.batch() == 4) return "cudaErrorMemoryAllocation (simulated)";
                                   return std::nullopt;
                                 }}};
  test_engine<largest_first, startup> e(token_ladder{{1, 2, 4, 8}}, host_backend(std::ref(model), opts),
                                        {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  std::vector<std::string> errors;
  e.observe([&](const engine_event& ev) {
    capture_log{&log}(ev);
    if (ev.what == engine_event::kind::capture && ev.outcome == capture_outcome::failed) errors.emplace_back(ev.error);
  });
  batch_builder bb;
  auto r = e.step(bb.make(3, 2));
  CHECK(log == strings{"startup:8", "startup:4:failed", "startup:2", "startup:1"});
  CHECK(errors == strings{"cudaErrorMemoryAllocation (simulated)"});
  CHECK(r.run == run_kind::eager);
  CHECK(r.reason == eager_reason::failed);
  CHECK(e.step(bb.make(5, 2)).run == run_kind::replay);
  CHECK(e.stats().capture_failures == 1);
  CHECK(e.stats().captures == 3);
  CHECK(e.queue().state(2) == graph_state::failed);
  CHECK_FALSE(e.backend().prepared(2));
}

TEST_CASE("an exception in the forward during capture is a failed capture; delayed moves on") {
  toy_model model;
  // Throws on a warm-up batch of two rows only: a forward that cannot be captured at that size.
  host_forward fwd = [&](const host_step& s) {
    if (s.batch.seqs == 2 && s.batch.seq_lens[0] == 0 && s.batch.seq_lens[1] == 0)
      throw std::runtime_error("operation not permitted when stream is capturing");
    model(s);
  };
  std::vector<std::string> log;
  test_engine<largest_first, delayed> e(token_ladder{{1, 2, 4}}, host_backend(fwd), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.observe(capture_log{&log});
  batch_builder bb;
  CHECK(e.step(bb.make(2, 1)).reason == eager_reason::failed);
  CHECK(e.step(bb.make(2, 1)).run == run_kind::eager);  // failed for good: next pending captured instead
  CHECK(e.step(bb.make(1, 1)).run == run_kind::replay);
  CHECK(log == strings{"step0:2:failed", "step1:4", "step2:1"});
  CHECK(e.queue().settled());
}

TEST_CASE("a budget that fits only some graphs: skip what would not fit, keep going, never exceed") {
  toy_model model;
  std::vector<std::string> log;
  // Each graph takes 10 MiB + 1 MiB per token: 42 MiB for rung 32, 18 MiB for rung 8.
  host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = 10 * MiB, .per_unit = MiB}}};
  test_engine<largest_first, startup> e(token_ladder{{1, 2, 4, 8, 16, 24, 32}}, host_backend(std::ref(model), sim),
                                        {.budget = {.bytes = 60 * MiB}, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.observe(capture_log{&log});
  e.start();
  // 32 is admitted on trust (nothing measured, no model) and costs 42 MiB; the estimate for
  // 24 is then 42/32 MiB per token x 24 = 31.5 MiB: too much; 16 likewise; 8 fits (10.5
  // estimated, 18 real); what is left (0) fits nothing smaller.
  CHECK(log == strings{"startup:32", "startup:24:refused", "startup:16:refused", "startup:8", "startup:4:refused",
                       "startup:2:refused", "startup:1:refused"});
  CHECK(e.ledger().used() == 60 * MiB);
  CHECK(e.stats().budget_left == 0);
  CHECK(e.stats().capture_bytes == 60 * MiB);
  batch_builder bb(1);
  auto r = e.step(bb.make(20, 1, 1));
  CHECK(r.run == run_kind::eager);
  CHECK(r.reason == eager_reason::refused);
}

TEST_CASE("a capture whose measured cost breaks the budget is released again") {
  toy_model model;
  std::vector<std::string> log;
  host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = 10 * MiB, .per_unit = MiB}}};
  // With a model that underestimates (1 MiB per token, no base), 8 is admitted at an
  // estimate of 8 MiB but really takes 18 MiB: it is released, the budget is never exceeded.
  test_engine<largest_first, startup> e(
      token_ladder{{2, 8}}, host_backend(std::ref(model), sim),
      {.budget = {.bytes = 15 * MiB, .model = graph_cost{.base = 0, .per_unit = MiB}}, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.observe(capture_log{&log});
  e.start();
  CHECK(log == strings{"startup:8:released", "startup:2"});
  CHECK(e.ledger().used() == 12 * MiB);
  CHECK_FALSE(e.backend().prepared(1));
  CHECK(e.backend().prepared(0));
}

TEST_CASE("Gaudi's walk: prompt within its share, all decode, then prompt spill-over (the document's log)") {
  // The first Gaudi document: 24 prompt buckets (bs 1,2,4 x seq 128..1024) captured in
  // min_tokens order, 48 decode buckets (bs 1,2,4 x seq 128..2048) in max_bs order. Its log
  // shows prompt graphs 1-11, all 48 decode graphs, then prompt graphs 12-15 from the
  // leftover: (4, 256), (2, 512), (1, 1024), (2, 640). With 1 MiB per token (prompt) and per
  // sequence (decode), an 11000 MiB budget with prompt_ratio 0.55 reproduces that walk.
  using space = phased_buckets<grid, grid>;
  toy_model model(128);
  std::vector<std::string> log;
  host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = 0, .per_unit = MiB}}};
  std::vector<std::int64_t> seq1024, seq2048;
  for (std::int64_t s = 128; s <= 1024; s += 128) seq1024.push_back(s);
  for (std::int64_t s = 128; s <= 2048; s += 128) seq2048.push_back(s);
  graph_runner<space, by_phase<>, startup, host_backend>
      e(space(grid{phase::prompt, {1, 2, 4}, seq1024}, grid{phase::decode, {1, 2, 4}, seq2048}), host_backend(std::ref(model), sim),
        {.budget = {.bytes = 11000 * MiB, .prompt_ratio = 0.55}, .max_model_len = 2048,
         .shape = {.block_size = 128, .num_blocks = 64, .row_width = tiny_model.row_width()}});
  std::vector<std::string> captured;
  e.observe([&](const engine_event& ev) {
    if (ev.what == engine_event::kind::capture && ev.outcome == capture_outcome::captured) {
      std::ostringstream os;
      os << to_string(ev.where.ph)[0] << ev.where;
      captured.push_back(os.str());
    }
  });
  e.start();
  REQUIRE(captured.size() == 11 + 48 + 4);
  CHECK(strings(captured.begin(), captured.begin() + 11) ==
        strings{"p(1, 128)", "p(2, 128)", "p(1, 256)", "p(1, 384)", "p(4, 128)", "p(2, 256)", "p(1, 512)", "p(1, 640)",
                "p(2, 384)", "p(1, 768)", "p(1, 896)"});
  CHECK(captured[11] == "d(4, 128)");
  CHECK(captured[11 + 47] == "d(1, 2048)");
  CHECK(strings(captured.end() - 4, captured.end()) == strings{"p(4, 256)", "p(2, 512)", "p(1, 1024)", "p(2, 640)"});
  CHECK(e.ledger().used(phase::prompt) == 9984 * MiB);
  CHECK(e.ledger().used(phase::decode) == 112 * MiB);
  CHECK(e.ledger().used() <= 11000 * MiB);
  CHECK(e.queue().count(graph_state::refused) == 9);

  // A prompt of 3 sequences up to 412 tokens pads to (4, 512): refused by the budget, eager.
  batch_builder bb(8);
  auto r = e.step(bb.make(3, 0, 412), phase::prompt);
  CHECK(r.reason == eager_reason::refused);
  CHECK(e.at(*r.bucket) == grid{phase::prompt, {1, 2, 4}, seq1024}.at(2 * 8 + 3));
  // Decoding them at length 413 pads to (4, 512) in the decode grid: replayed.
  CHECK(e.step(bb.make(3, 412, 1), phase::decode).run == run_kind::replay);
}

namespace {
using compile_time_ladder = ladder_buckets<rungs::static_ladder<rungs::Explicit{2, 4, 8}>>;
// An empty custom bucket space (a ladder cannot be empty; a user-defined space can).
struct no_buckets {
  std::size_t size() const { return 0; }
  bucket at(std::size_t) const { return {}; }
  std::optional<std::size_t> find(const batch_key&) const { return std::nullopt; }
};
}  // namespace

TEST_CASE("bad input is rejected with the value and the rule") {
  toy_model model;
  test_engine<largest_first, startup> e(token_ladder{{1, 2, 4}}, host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  batch_builder bb;
  std::vector<std::int32_t> no_tokens;
  std::vector<sequence> empty{sequence{no_tokens, 0, {}}};
  CHECK_THROWS_WITH(e.step(empty), "sequence 0 has no new tokens; every live sequence needs one");
  CHECK_THROWS_WITH(e.step({}), "a step needs at least one sequence");
  CHECK_THROWS_WITH(e.step(bb.make(1, 16)), "a sequence of 17 tokens exceeds max_model_len = 16");
  std::vector<std::int32_t> tok{1, 2, 3, 4, 5}, table{0};
  std::vector<sequence> short_table{sequence{tok, 0, table}};
  CHECK_THROWS_WITH(e.step(short_table), "sequence 0: block table has 1 blocks; 5 tokens in blocks of 4 need 2");
  std::vector<std::int32_t> far{70, 1};
  std::vector<sequence> outside{sequence{tok, 0, far}};
  CHECK_THROWS_WITH(e.step(outside), "sequence 0: block 70 is outside the pool [0, 64)");
  CHECK(e.stats().steps == 0);
  CHECK_THROWS_WITH((test_engine<largest_first, startup>(token_ladder{{1}}, host_backend(std::ref(model)), {.shape = run_shape::of(tiny_model, 64)})),
                    "engine: bucket 0 leaves the sequence length open; set runner_options::max_model_len");
  CHECK_THROWS_WITH((test_engine<largest_first, startup, no_buckets>(no_buckets{}, host_backend(std::ref(model)), {.shape = run_shape::of(tiny_model, 64)})),
                    "engine: the bucket space is empty");
  CHECK_THROWS_WITH((test_engine<largest_first, startup>(token_ladder{{1}}, host_backend(std::ref(model)), {.max_model_len = 16})),
                    "graph_runner: run_shape{block_size = 0, num_blocks = 0, row_width = 0}: block_size and num_blocks "
                    "must be positive, row_width not negative");
}

TEST_CASE("a compile-time ladder fixes the graph slots at compile time") {
  static_assert(static_bucket_space<compile_time_ladder>);
  static_assert(!static_bucket_space<token_ladder>);
  toy_model model;
  test_engine<largest_first, lazy, compile_time_ladder> e(compile_time_ladder({}), host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  batch_builder bb;
  CHECK(e.step(bb.make(3)).run == run_kind::replay);
  CHECK(e.queue().captured(1));
  CHECK(e.stats().captures == 1);
}

TEST_CASE("spill-over the other way: decode graphs use what the complete prompt phase left") {
  // 10 MiB per cost unit: prompt (1, 4) and (1, 8) take 40 + 80 = 120 MiB of a 140 MiB share;
  // decode (4, 8), (2, 8), (1, 8) take 40 + 20 + 10 = 70 MiB, more than the 60 MiB decode
  // share. With every prompt graph captured, the last decode graph fits the pooled leftover.
  using space = phased_buckets<grid, grid>;
  auto walk = [](std::vector<std::int64_t> prompt_seqs) {
    toy_model model;
    std::vector<std::string> log;
    host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = 0, .per_unit = 10 * MiB}}};
    graph_runner<space, by_phase<min_tokens, max_bs>, startup, host_backend> e(
        space(grid{phase::prompt, {1}, prompt_seqs}, grid{phase::decode, {1, 2, 4}, {8}}), host_backend(std::ref(model), sim),
        {.budget = {.bytes = 200 * MiB, .prompt_ratio = 0.7, .model = graph_cost{.base = 0, .per_unit = 10 * MiB}},
         .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
    e.observe(capture_log{&log});
    e.start();
    return log;
  };
  CHECK(walk({4, 8}) == strings{"startup:(1, 4)", "startup:(1, 8)", "startup:(4, 8)", "startup:(2, 8)", "startup:(1, 8)"});
  // A prompt bucket that does not fit (1, 16: 160 MiB) leaves the prompt phase incomplete, so
  // decode keeps to its own share (as upstream: spill-over only from a complete phase).
  CHECK(walk({4, 8, 16}) == strings{"startup:(1, 4)", "startup:(1, 8)", "startup:(1, 16):refused", "startup:(4, 8)",
                                    "startup:(2, 8)", "startup:(1, 8):refused"});
}

TEST_CASE("a capture time that does not fit int64 nanoseconds is an error, and the graph is released") {
  toy_model model;
  for (double seconds : {1e308, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    host_backend::options sim{.simulate = simulated_capture{.seconds = seconds}};
    test_engine<largest_first, startup> e(token_ladder{{4}}, host_backend(std::ref(model), sim),
                                          {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
    CHECK_THROWS_WITH(e.start(), Catch::StartsWith("engine: the capture of bucket index 0 reported ") &&
                                     Catch::EndsWith(" seconds; a capture time must be finite, non-negative and "
                                                     "below 2^63 ns"));
    CHECK(e.stats().captures == 0);
  }
}
