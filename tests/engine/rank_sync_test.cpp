// Several simulated ranks in one process: the same capture decisions at the same steps.
#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/ladder/explicit.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rank_scenario.hpp"
#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
constexpr std::int64_t MiB = 1 << 20;
using rank_engine = graph_runner<token_ladder, largest_first, delayed, host_backend>;
}  // namespace

TEST_CASE("simulated ranks with different batches capture the same graphs at the same steps") {
  constexpr int ranks = 3;
  // Each rank's batch sizes are the first three columns of rank_batches; every rank pads to
  // the maximum.
  const std::vector<rank_trace> traces = run_simulated(ranks);

  for (int r = 1; r < ranks; ++r) {
    CHECK(traces[static_cast<std::size_t>(r)].captures == traces[0].captures);
    CHECK(traces[static_cast<std::size_t>(r)].runs == traces[0].runs);
    CHECK(traces[static_cast<std::size_t>(r)].stats.budget_left == traces[0].stats.budget_left);
    CHECK(traces[static_cast<std::size_t>(r)].wrong_rows == 0);
  }
  // Agreed batches 3, 5, 2, 9, 20, 4. Rung 4 failed on rank 1, so it failed everywhere.
  // Costs are charged at the largest rank's (3 MiB + 1 MiB per token): 8 takes 11 MiB, 2
  // takes 5 (estimated 11/8 x 2 = 3); 16 is estimated at 16/10 x 16 = 26 MiB and 16 + 26 >
  // 40, so it is refused and step 3 captures the next pending rung (1) instead.
  CHECK(traces[0].captures ==
        std::vector<std::string>{"step0:4:failed", "step1:8", "step2:2", "step3:16:refused", "step3:1"});
  CHECK(traces[0].runs == std::vector<std::string>{"4:eager", "8:replay", "2:replay", "16:eager", "-:eager", "4:eager"});
  CHECK(traces[0].stats.budget_left == 20 * MiB);
  CHECK(traces[0].stats.capture_failures == 1);
}

TEST_CASE("simulated_ranks reduces elementwise maxima and rejects bad sizes") {
  simulated_ranks g(2);
  std::vector<std::int64_t> a{1, 9}, b{5, 2};
  std::thread t([&] {
    auto h = g.rank(1);
    h.max_each(b);
  });
  auto h0 = g.rank(0);
  h0.max_each(a);
  t.join();
  CHECK(a == std::vector<std::int64_t>{5, 9});
  CHECK(b == std::vector<std::int64_t>{5, 9});
  CHECK_THROWS_WITH(simulated_ranks(0), "simulated_ranks: ranks = 0 must be positive");
  CHECK_THROWS_WITH(g.rank(2), "simulated_ranks: rank 2 is outside [0, 2)");
}

namespace {
// Runs `step(r)` on each of `ranks` threads and returns what each rank's step returned.
template <class F>
auto on_ranks(int ranks, F step) {
  std::vector<decltype(step(0))> out(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { out[static_cast<std::size_t>(r)] = step(r); });
  for (auto& t : threads) t.join();
  return out;
}
}  // namespace

TEST_CASE("ranks on the dispatch key that disagree on uniform decode vs mixed agree on mixed") {
  simulated_ranks group(2);
  auto traces = on_ranks(2, [&](int r) {
    auto h = group.rank(r);
    return run_dispatch_rank(h, r);
  });
  CHECK(traces[0].runs == std::vector<std::string>{"prompt16:replay", "decode(2, 2):replay"});
  CHECK(traces[1].runs == traces[0].runs);
  CHECK(traces[0].wrong_rows + traces[1].wrong_rows == 0);
}

TEST_CASE("ranks that step in different phases of a space whose phases are different graphs all throw") {
  simulated_ranks group(2);
  auto errors = on_ranks(2, [&](int r) {
    toy_model model;
    rank_engine e(token_ladder{{1, 2, 4}}, host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
    auto h = group.rank(r);
    e.sync_with(h);
    batch_builder bb(2);
    try {
      e.step(bb.make(1, 1), r == 0 ? phase::prompt : phase::decode);
    } catch (const std::logic_error& x) {
      return std::string(x.what());
    }
    return std::string("no error");
  });
  // Every rank sees the disagreement (none is left waiting in a later collective).
  const std::string want = "engine: ranks stepped in different phases (prompt and decode) over a bucket space whose "
                           "phases are different graphs; a multi-rank stack must align phases";
  CHECK(errors[0] == want);
  CHECK(errors[1] == want);
}
