// Tests of include/rungs/planning/data_parallel.hpp: ranks in lockstep on a trace small
// enough to follow by hand, against the same ranks stepping independently.
#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/data_parallel.hpp>

#include <catch2/catch.hpp>

#include "tiny_config.hpp"

#include <array>
#include <thread>
#include <vector>

using namespace rungs;
using serving::trace_request;

namespace {
using planning::test::tiny;  // tiny_config.hpp: max(10 ms, 2 ms per token row of the bucket)

// Requests 1 and 3 go to rank 0, request 2 to rank 1 (round-robin in trace order).
const std::vector<trace_request> three = {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 2},
                                          {.arrival = 0, .prompt_tokens = 3, .output_tokens = 4},
                                          {.arrival = 0, .prompt_tokens = 2, .output_tokens = 1}};
}  // namespace

TEST_CASE("data parallel: two ranks in lockstep pad to the larger batch and run dummy steps, by hand") {
  const planning::data_parallel_result d = planning::simulate_data_parallel(tiny(), three, 2);
  CHECK(d.lockstep.replica_of == std::vector<std::int32_t>{0, 1, 0});
  REQUIRE(d.lockstep.replicas.size() == 2);
  const planning::simulation_result& r0 = d.lockstep.replicas[0];
  const planning::simulation_result& r1 = d.lockstep.replicas[1];
  // Lockstep, every step on both ranks:
  //   step 1  rank 0 prefills 6 + 2 tokens, rank 1 prefills 3: agreed 8 -> bucket 8, 16 ms
  //           (requests 1 and 3 get their first token, request 3 is done: 1 output token)
  //   step 2  both decode 1 token: bucket 4, 10 ms (request 1 done at 26 ms)
  //   step 3  rank 0 has nothing: a dummy batch of bucket 4 beside rank 1's decode, 10 ms
  //   step 4  the same (request 2 done at 46 ms)
  CHECK(d.steps == 4);
  CHECK(r0.engine.steps == 4);
  CHECK(r1.engine.steps == 4);
  CHECK(r0.dummy_steps == 2);
  CHECK(r1.dummy_steps == 0);
  CHECK(r0.engine.replays == 4);
  CHECK(r0.tokens_run == 8 + 4 + 4 + 4);
  CHECK(r1.tokens_run == 8 + 4 + 4 + 4);
  CHECK(r0.scheduler.computed_tokens == 8 + 1);
  CHECK(r1.scheduler.computed_tokens == 3 + 1 + 1 + 1);
  CHECK(r0.engine.padded_tokens == (8 - 8) + (4 - 1) + 4 + 4);  // the dummy steps' rows are all padding
  CHECK(r1.engine.padded_tokens == (8 - 3) + 3 + 3 + 3);
  CHECK(d.lockstep.requests[0].first_token == Approx(0.016));
  CHECK(d.lockstep.requests[0].finished == Approx(0.026));
  CHECK(d.lockstep.requests[2].finished == Approx(0.016));
  CHECK(d.lockstep.requests[1].first_token == Approx(0.016));  // waited for rank 0's 8-token step
  CHECK(d.lockstep.requests[1].finished == Approx(0.046));
  CHECK(d.lockstep.end_seconds == Approx(0.046));
  CHECK(d.lockstep.total.tokens_run == 40);
  CHECK(d.lockstep.total.dummy_steps == 2);
  CHECK(d.lockstep.total.engine.steps == 8);  // rank-steps
  CHECK(d.lockstep.output_tokens == 7);

  // Independent: rank 0 runs buckets 8 and 4 (16 + 10 ms), rank 1 four steps of bucket 4 (10 ms
  // each): request 2's first token at 10 ms instead of 16, its last at 40 ms instead of 46.
  const planning::fleet_result& f = d.independent;
  CHECK(f.replicas[0].engine.steps == 2);
  CHECK(f.replicas[1].engine.steps == 4);
  CHECK(f.total.tokens_run == (8 + 4) + 4 * 4);
  CHECK(f.total.dummy_steps == 0);
  CHECK(f.requests[1].first_token == Approx(0.010));
  CHECK(f.requests[1].finished == Approx(0.040));
  CHECK(f.end_seconds == Approx(0.040));
  // The independent ranks are simulate on each share.
  const planning::simulation_result alone = planning::simulate(tiny(), {three[1]});
  CHECK(alone.end_seconds == f.replicas[1].end_seconds);
}

TEST_CASE("data parallel: one rank is simulate; idle gaps are taken together") {
  const std::vector<trace_request> trace = {{.arrival = 0, .prompt_tokens = 5, .output_tokens = 2},
                                            {.arrival = 1, .prompt_tokens = 3, .output_tokens = 2},
                                            {.arrival = 2, .prompt_tokens = 9, .output_tokens = 3}};
  const planning::simulation_result plain = planning::simulate(tiny(), trace);
  const planning::data_parallel_result one = planning::simulate_data_parallel(tiny(), trace, 1);
  CHECK(one.lockstep.end_seconds == plain.end_seconds);
  CHECK(one.lockstep.total.ttft.p99 == plain.ttft.p99);
  CHECK(one.lockstep.total.itl.mean == plain.itl.mean);
  CHECK(one.lockstep.total.tokens_run == plain.tokens_run);
  CHECK(one.steps == plain.engine.steps);
  CHECK(one.lockstep.total.dummy_steps == 0);

  // Two ranks: rank 0 gets requests 1 and 3, rank 1 request 2. Nobody steps between the
  // bursts; each burst is one prefill step and decode steps, the idle rank running dummies:
  //   t = 0: 5 tokens (bucket 8, 16 ms), then 1 (bucket 4, 10 ms): done at 0.026
  //   t = 1: rank 1's 3 tokens (bucket 4: 10 ms), 1 token: done at 1.020; rank 0 dummies twice
  //   t = 2: 9 tokens (bucket 16, 32 ms), then 1, 1: done at 2.052; rank 1 dummies three times
  const planning::data_parallel_result two = planning::simulate_data_parallel(tiny(), trace, 2);
  CHECK(two.steps == 2 + 2 + 3);
  CHECK(two.lockstep.replicas[0].dummy_steps == 2);
  CHECK(two.lockstep.replicas[1].dummy_steps == 2 + 3);
  CHECK(two.lockstep.requests[0].finished == Approx(0.026));
  CHECK(two.lockstep.requests[1].finished == Approx(1.020));
  CHECK(two.lockstep.requests[2].finished == Approx(2.052));
  CHECK(two.lockstep.total.tokens_run == 2 * (8 + 4 + 4 + 4 + 16 + 4 + 4));
}

TEST_CASE("data parallel: a rank that fails stops the others; bad configurations are refused") {
  planning::simulation_config c = tiny();
  CHECK_THROWS_WITH(planning::simulate_data_parallel(c, three, 0), "data parallel: ranks = 0 must be in [1, 256]");
  CHECK_THROWS_WITH(planning::simulate_data_parallel(c, three, 257), "data parallel: ranks = 257 must be in [1, 256]");
  CHECK_THROWS_WITH(planning::simulate_data_parallel(c, {}, 2), "simulate: the trace has no requests");
  std::vector<trace_request> late = three;
  late[1].arrival = -1;
  CHECK_THROWS_WITH(planning::simulate_data_parallel(c, late, 2),
                    "data parallel: trace request 2 arrives at -1.000000; an arrival must be a finite time >= 0");
  c.scheduler.chunked_prefill = false;
  c.scheduler.max_num_batched_tokens = c.max_model_len;
  CHECK_THROWS_WITH(planning::simulate_data_parallel(c, three, 2),
                    Catch::Contains("data parallel: ranks step in lockstep on one bucket per step, which needs chunked prefill"));
  // Strict: rank 1's request cannot run (longer than max_model_len); rank 1 throws in the middle
  // of the run and rank 0, waiting in an agreement, stops instead of hanging.
  planning::simulation_config strict = tiny();
  strict.strict = true;
  strict.max_model_len = 16;
  std::vector<trace_request> too_long = three;
  too_long[1].arrival = 0.5;
  too_long[1].prompt_tokens = 20;
  too_long[0].output_tokens = 8;
  CHECK_THROWS_WITH(planning::simulate_data_parallel(strict, too_long, 2),
                    Catch::StartsWith("simulate: trace request 2 (conversation 0, turn 0): needs 24 tokens"));
}

TEST_CASE("simulated_ranks: a rank that aborts releases the ranks waiting for it") {
  engine::simulated_ranks g(3);
  std::vector<std::string> seen(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto h = g.rank(r);
      std::vector<std::int64_t> v{r};
      try {
        h.max_each(v);
      } catch (const std::runtime_error& e) {
        seen[static_cast<std::size_t>(r)] = e.what();
      }
    });
  g.rank(2).abort("out of memory");
  for (auto& t : threads) t.join();
  CHECK(seen[0] == "simulated_ranks: rank 2 stopped (out of memory)");
  CHECK(seen[1] == seen[0]);
  std::vector<std::int64_t> later{1};
  CHECK_THROWS_WITH(g.rank(0).max_each(later), "simulated_ranks: rank 2 stopped (out of memory)");
}

TEST_CASE("engine::rank_sync_ref: any rank_sync by reference, and empty for one rank") {
  engine::rank_sync_ref one;
  CHECK_FALSE(one);
  std::array<std::int64_t, 2> v{3, -1};
  one.max_each(v);  // nothing to agree with
  CHECK(v == std::array<std::int64_t, 2>{3, -1});

  engine::simulated_ranks group(2);
  std::array<std::array<std::int64_t, 2>, 2> values{{{3, -1}, {1, 5}}};
  std::array<bool, 2> held{};
  std::vector<std::thread> threads;  // Catch's checks stay on this thread
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      engine::simulated_ranks::handle h = group.rank(r);
      const engine::rank_sync_ref ref(h);
      held[static_cast<std::size_t>(r)] = static_cast<bool>(ref);
      ref.max_each(values[static_cast<std::size_t>(r)]);
    });
  for (std::thread& t : threads) t.join();
  CHECK(held == std::array<bool, 2>{true, true});
  CHECK(values[0] == std::array<std::int64_t, 2>{3, 5});
  CHECK(values[1] == std::array<std::int64_t, 2>{3, 5});
}
