// rungs-plan plan-fleet, run in-process: the answer of fleet_search_test's hand-checked case,
// the table and --json, and the errors of --slo.
#include <catch2/catch.hpp>

#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/simulate.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "../plan_support.hpp"
#include "command.hpp"

using namespace rungs::plan::test;

TEST_CASE("rungs-plan plan-fleet: the fewest replicas, the table, --json and --slo's errors") {
  // Eight equal requests at once on replicas serving one at a time (fleet_search_test's case).
  const std::string path = "plan_fleet_test.csv";
  {
    std::ofstream f(path);
    f << "arrival,prompt_tokens,output_tokens\n";
    for (int k = 0; k < 8; ++k) f << "1,100,50\n";
  }
  rungs::planning::simulation_config c;
  c.ladder = rungs::ladder{rungs::Explicit{1, 2, 4, 8}};
  c.scheduler.max_num_seqs = 1;
  const rungs::planning::simulation_result lone =
      rungs::planning::simulate(c, {{.arrival = 1, .prompt_tokens = 100, .output_tokens = 50}});
  const double t1 = lone.requests[0].ttft(), s = lone.requests[0].finished - lone.requests[0].submitted;
  const std::string slo = "ttft_max=" + std::to_string((t1 + 1.5 * s) * 1e3) + "ms";

  const result text = plan({"plan-fleet", "--trace", path, "--max-num-seqs", "1", "--ladder", "explicit", "1,2,4,8",
                            "--slo", slo});
  CHECK(text.status == 0);
  CHECK(text.err == "");
  CHECK(text.out.find("; router round-robin; objective ttft_max <= ") != std::string::npos);
  CHECK(text.out.find("\nfleet: 4 replicas, router round-robin; ladder explicit 1,2,4,8 (4 rungs); capture timing startup; "
                      "graph memory ") != std::string::npos);
  CHECK(text.out.find("(4 graphs)") != std::string::npos);
  CHECK(text.out.find("\nneighbours: 3 replicas miss the objective; 5 replicas meet it too\n") != std::string::npos);

  const result j = plan({"plan-fleet", "--trace", path, "--max-num-seqs", "1", "--ladder", "explicit", "1,2,4,8",
                         "--slo", slo, "--router", "least-loaded", "--json"});
  REQUIRE(j.status == 0);
  CHECK(j.out.find("\"replicas\": 4, \"timing\": \"startup\"") != std::string::npos);
  CHECK(j.out.find("\"router\": \"least-loaded\"") != std::string::npos);
  CHECK(j.out.find("\"monotone_above\": true") != std::string::npos);
  CHECK(j.out.find("\"graphs_per_replica\": 4") != std::string::npos);
  for (const char* tried : {"{\"replicas\": 1, \"met\": false,", "{\"replicas\": 2, \"met\": false,",
                            "{\"replicas\": 4, \"met\": true,", "{\"replicas\": 3, \"met\": false,",
                            "{\"replicas\": 5, \"met\": true,"})
    CHECK(j.out.find(tried) != std::string::npos);

  // No fleet within --max-replicas: the table, then exit 1.
  const result none = plan({"plan-fleet", "--trace", path, "--max-num-seqs", "1", "--ladder", "explicit", "1,2,4,8",
                            "--slo", slo, "--max-replicas", "3"});
  CHECK(none.status == 1);
  CHECK(none.out.find("\nno fleet of at most 3 replicas meets the objective\n") != std::string::npos);

  for (const auto& [bad, message] : std::initializer_list<std::pair<const char*, const char*>>{
           {"ttft_p99", "--slo: 'ttft_p99' is not NAME=DURATION (e.g. ttft_p99=2s)"},
           {"ttft_p98=2s", "--slo: 'ttft_p98' is not one of ttft_mean, ttft_p50, ttft_p90, ttft_p99, ttft_max, itl_mean, "
                           "itl_p50, itl_p90, itl_p99, itl_max"},
           {"ttft_p99=2", "--slo: ttft_p99 = '2' needs a unit: s or ms (e.g. 2s, 100ms)"},
           {"ttft_p99=2min", "--slo: ttft_p99 = '2min' needs a unit: s or ms (e.g. 2s, 100ms)"},
           {"ttft_p99=xs", "--slo: ttft_p99 = 'x' is not a number"},
           {"ttft_p99=0s", "--slo: ttft_p99 = '0s' must be a positive duration"},
           {"ttft_p99=-1ms", "--slo: ttft_p99 = '-1ms' must be a positive duration"},
           {"ttft_p99=2s,ttft_p99=1s", "--slo: ttft_p99 is given twice"},
           {"ttft_p99=2s,", "--slo: '' is not NAME=DURATION (e.g. ttft_p99=2s)"}})
    check_usage(plan({"plan-fleet", "--trace", path, "--slo", bad}), message);
  check_usage(plan({"plan-fleet", "--trace", path, "--slo", "ttft_p99=2s", "--max-replicas", "0"}),
              "--max-replicas = 0 must be positive");
  check_usage(plan({"plan-fleet", "--trace", path, "--slo", "ttft_p99=2s", "--router", "prefix-affinity"}),
              "--router prefix-affinity routes by the replicas' prefix caches: add --prefix-caching");
  std::remove(path.c_str());
}
