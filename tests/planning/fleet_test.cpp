// Tests of include/rungs/planning/fleet.hpp: routing, and that a fleet is its replicas.
#include <rungs/planning/fleet.hpp>

#include <catch2/catch.hpp>

using namespace rungs;
using serving::trace_request;

TEST_CASE("fleet: round-robin over conversations, each replica simulated on its share") {
  const std::vector<trace_request> trace = {
      {.arrival = 0, .prompt_tokens = 100, .output_tokens = 20},
      {.arrival = 0, .prompt_tokens = 200, .output_tokens = 30},
      {.arrival = 0.5, .prompt_tokens = 50, .output_tokens = 10, .conversation = 5, .turn = 1},
      {.arrival = 1, .prompt_tokens = 300, .output_tokens = 5},
      {.arrival = 1, .prompt_tokens = 50, .output_tokens = 10, .conversation = 5, .turn = 2, .think = 1}};
  planning::simulation_config c;
  const planning::fleet_result f = planning::simulate_fleet(c, trace, 2);
  CHECK(f.replica_of == std::vector<std::int32_t>{0, 1, 0, 1, 0});  // turn 2 follows turn 1
  REQUIRE(f.replicas.size() == 2);
  const planning::simulation_result r0 = planning::simulate(c, {trace[0], trace[2], trace[4]});
  const planning::simulation_result r1 = planning::simulate(c, {trace[1], trace[3]});
  CHECK(f.replicas[0].end_seconds == r0.end_seconds);
  CHECK(f.replicas[1].end_seconds == r1.end_seconds);
  CHECK(f.requests[4].ttft() == r0.requests[2].ttft());
  CHECK(f.requests[4].trace_index == 4);
  CHECK(f.requests[3].ttft() == r1.requests[1].ttft());
  CHECK(f.end_seconds == std::max(r0.end_seconds, r1.end_seconds));
  CHECK(f.ttft.count == 5);
  CHECK(f.ttft.max == std::max(r0.ttft.max, r1.ttft.max));
  CHECK(f.itl.count == r0.itl.count + r1.itl.count);
  CHECK(f.output_tokens == 75);
  // The fleet as one result: sums and peaks.
  CHECK(f.total.engine.steps == r0.engine.steps + r1.engine.steps);
  CHECK(f.total.engine.captures == r0.engine.captures + r1.engine.captures);
  CHECK(f.total.scheduler.finished == 5);
  CHECK(f.total.max_running == std::max(r0.max_running, r1.max_running));
  CHECK(f.total.ttft.p99 == f.ttft.p99);
  CHECK(f.total.ttft_first == r0.requests[0].ttft());  // requests 0 and 1 tie at 0: trace order
  CHECK(f.total.step_tokens.size() == r0.step_tokens.size() + r1.step_tokens.size());
  // One replica is plain simulate.
  const planning::fleet_result one = planning::simulate_fleet(c, trace, 1);
  const planning::simulation_result all = planning::simulate(c, trace);
  CHECK(one.ttft.p99 == all.ttft.p99);
  CHECK(one.itl.mean == all.itl.mean);
  // More replicas than requests: the idle ones report nothing.
  const planning::fleet_result many = planning::simulate_fleet(c, trace, 8);
  CHECK(many.replicas[7].requests.empty());
  CHECK(many.ttft.count == 5);
  CHECK_THROWS_WITH(planning::simulate_fleet(c, trace, 0), "fleet: replicas = 0 must be in [1, 4096]");
}
