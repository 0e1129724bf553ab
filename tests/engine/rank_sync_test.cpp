// Several simulated ranks in one process: the same capture decisions at the same steps.
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/rank_sync.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
constexpr std::int64_t MiB = 1 << 20;
using rank_engine = graph_runner<token_ladder, largest_first, delayed, host_backend>;

struct rank_trace {
  std::vector<std::string> captures;
  std::vector<std::string> runs;
  engine_stats stats;
};

// Runs rank r's batches (its own sizes: data-parallel ranks see different batches) with
// rank-specific capture costs and failures, agreeing through `group`.
rank_trace run_rank(simulated_ranks& group, int r, const std::vector<std::vector<std::int64_t>>& batches) {
  toy_model model;
  host_backend::options sim{.simulate = simulated_capture{
                                // Costs differ by rank (memory fragmentation, other tenants).
                                .bytes = {.base = (r + 1) * MiB, .per_unit = MiB},
                                // Only rank 1 fails to capture rung 4.
                                .fail = [r](std::size_t, const bucket& b) -> std::optional<std::string> {
                                  if (r == 1 && b.batch() == 4) return "out of memory on rank 1";
                                  return std::nullopt;
                                }}};
  rank_engine e(token_ladder{{1, 2, 4, 8, 16}}, host_backend(std::ref(model), sim),
                {.budget = {.bytes = 40 * MiB}, .max_model_len = 16, .shape = tiny_model.run(64)});
  auto handle = group.rank(r);
  e.sync_with(handle);
  rank_trace t;
  e.observe(capture_log{&t.captures});
  batch_builder bb(2);
  for (const auto& step : batches) {
    auto res = e.step(bb.make(step[static_cast<std::size_t>(r)], 1));
    t.runs.push_back((res.bucket ? std::to_string(e.at(*res.bucket).batch()) : std::string("-")) + ":" +
                     std::string(to_string(res.run)));
    CHECK(res.rows.size() == static_cast<std::size_t>(step[static_cast<std::size_t>(r)] * tiny_model.row_width()));
  }
  t.stats = e.stats();
  return t;
}
}  // namespace

TEST_CASE("simulated ranks with different batches capture the same graphs at the same steps") {
  constexpr int ranks = 3;
  // Per step, each rank's batch size. Agreed: the maximum (every rank pads to it).
  std::vector<std::vector<std::int64_t>> batches = {{1, 3, 2}, {5, 1, 1}, {2, 2, 2}, {1, 1, 9}, {20, 1, 1}, {3, 4, 1}};
  simulated_ranks group(ranks);
  std::vector<rank_trace> traces(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { traces[static_cast<std::size_t>(r)] = run_rank(group, r, batches); });
  for (auto& t : threads) t.join();

  for (int r = 1; r < ranks; ++r) {
    CHECK(traces[static_cast<std::size_t>(r)].captures == traces[0].captures);
    CHECK(traces[static_cast<std::size_t>(r)].runs == traces[0].runs);
    CHECK(traces[static_cast<std::size_t>(r)].stats.budget_left == traces[0].stats.budget_left);
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
