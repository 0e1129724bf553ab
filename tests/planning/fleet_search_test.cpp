// Tests of include/rungs/planning/fleet_search.hpp: the objective, and the doubling and
// bisection over replica counts on a case whose answer is known by hand.
#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/fleet_search.hpp>

#include <catch2/catch.hpp>

using namespace rungs;
using serving::trace_request;

namespace {

// Replicas that serve one request at a time (max_num_seqs 1), and eight equal requests at once.
planning::simulation_config one_at_a_time() {
  planning::simulation_config c;
  c.ladder = rungs::ladder{Explicit{1, 2, 4, 8}};
  c.scheduler.max_num_seqs = 1;
  return c;
}

std::vector<trace_request> eight_at_once() {
  return std::vector<trace_request>(8, trace_request{.arrival = 1, .prompt_tokens = 100, .output_tokens = 50});
}

}  // namespace

TEST_CASE("fleet search: the objective's metrics and bounds") {
  planning::fleet_result f;
  f.ttft = {.mean = 0.5, .p50 = 0.4, .p90 = 0.9, .p99 = 1.5, .max = 2.0, .count = 10};
  f.itl = {.mean = 0.01, .p50 = 0.01, .p90 = 0.02, .p99 = 0.05, .max = 0.2, .count = 100};
  CHECK(planning::slo_value(f, planning::slo_metric::ttft_p99) == 1.5);
  CHECK(planning::slo_value(f, planning::slo_metric::ttft_max) == 2.0);
  CHECK(planning::slo_value(f, planning::slo_metric::itl_p90) == 0.02);
  CHECK(planning::slo_value(f, planning::slo_metric::itl_mean) == 0.01);
  CHECK(planning::meets(f, {{planning::slo_metric::ttft_p99, 1.5}, {planning::slo_metric::itl_p99, 0.1}}));
  CHECK_FALSE(planning::meets(f, {{planning::slo_metric::ttft_p99, 1.49}, {planning::slo_metric::itl_p99, 0.1}}));
  CHECK_FALSE(planning::meets(f, {{planning::slo_metric::ttft_p99, 2}, {planning::slo_metric::itl_max, 0.1}}));
  CHECK(planning::to_string(planning::slo_metric::itl_p50) == "itl_p50");
}

TEST_CASE("fleet search: doubling, bisection and the neighbours on a hand-checked case") {
  const planning::simulation_config c = one_at_a_time();
  const std::vector<trace_request> trace = eight_at_once();
  // One request alone: its TTFT t1 and its whole service time s (prefill and 50 tokens).
  const planning::simulation_result lone = planning::simulate(c, {trace.front()});
  const double t1 = lone.requests[0].ttft(), s = lone.requests[0].finished - lone.requests[0].submitted;
  REQUIRE(s > 2 * t1);
  // With N replicas each serves ceil(8 / N) in a row; the j-th waits about j x s. A TTFT bound
  // of t1 + 1.5 s lets a replica serve two: N >= 4.
  const planning::service_objective o = {{planning::slo_metric::ttft_max, t1 + 1.5 * s}};
  const planning::fleet_search_result r = planning::search_fleet(c, trace, o);
  REQUIRE(r.replicas.has_value());
  CHECK(*r.replicas == 4);
  std::vector<std::int32_t> counts;
  for (const planning::fleet_trial& t : r.tried) counts.push_back(t.replicas);
  CHECK(counts == std::vector<std::int32_t>{1, 2, 4, 3, 5});  // doubling to 4, bisection at 3, then 4 + 1
  CHECK(r.tried[3].met == false);                             // the lower neighbour misses
  CHECK(r.monotone_above == true);
  CHECK(r.chosen().replicas == 4);
  CHECK(r.chosen().fleet.replicas.size() == 4);
  CHECK(r.chosen().fleet.ttft.max <= t1 + 1.5 * s);
  CHECK(r.tried[3].fleet.ttft.max > t1 + 1.5 * s);
  // Capped below the answer: none, the largest fleet reported.
  const planning::fleet_search_result capped = planning::search_fleet(c, trace, o, {}, 3);
  CHECK_FALSE(capped.replicas.has_value());
  CHECK(capped.chosen().replicas == 3);
  CHECK(capped.tried.size() == 3);  // 1, 2, then 3 (the cap) for 4
  CHECK_FALSE(capped.monotone_above.has_value());
  // A generous bound: one replica, checked against two.
  const planning::fleet_search_result one = planning::search_fleet(c, trace, {{planning::slo_metric::ttft_max, 100}});
  CHECK(one.replicas == 1);
  CHECK(one.tried.size() == 2);
  CHECK(one.monotone_above == true);

  CHECK_THROWS_WITH(planning::search_fleet(c, trace, {}), "fleet search: the objective has no bound");
  CHECK_THROWS_WITH(planning::search_fleet(c, trace, {{planning::slo_metric::ttft_p99, 0}}),
                    "fleet search: ttft_p99 <= 0.000000 s must be a positive, finite number of seconds");
  CHECK_THROWS_WITH(planning::search_fleet(c, trace, o, {}, 0), "fleet search: max_replicas = 0 must be in [1, 4096]");
}
