// Tests of include/rungs/planning/fleet.hpp: routing, and that a fleet is its replicas.
#include <rungs/ladder/explicit.hpp>
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

TEST_CASE("router: least-loaded and prefix-affinity picks, by hand") {
  using planning::replica_view;
  const planning::router_options least{.kind = planning::router::least_loaded};
  const std::vector<replica_view> v = {{.outstanding = 3, .cached_tokens = 512},
                                       {.outstanding = 1, .cached_tokens = 0},
                                       {.outstanding = 1, .cached_tokens = 16}};
  CHECK(planning::pick_replica(least, v) == 1);  // fewest outstanding; ties: lowest index
  // prefix-affinity: replica 0 holds the longest prefix and is 2 requests above the least loaded.
  CHECK(planning::pick_replica({.kind = planning::router::prefix_affinity, .max_imbalance = 2}, v) == 0);
  CHECK(planning::pick_replica({.kind = planning::router::prefix_affinity, .max_imbalance = 1}, v) == 2);  // 0 overloaded
  const std::vector<replica_view> cold = {{.outstanding = 2}, {.outstanding = 0}, {.outstanding = 1}};
  CHECK(planning::pick_replica({.kind = planning::router::prefix_affinity, .max_imbalance = 4}, cold) == 1);  // no prefix: least loaded
  const std::vector<replica_view> tie = {{.outstanding = 2, .cached_tokens = 32}, {.outstanding = 1, .cached_tokens = 32}};
  CHECK(planning::pick_replica({.kind = planning::router::prefix_affinity}, tie) == 1);  // equal prefixes: less loaded
  CHECK_THROWS_AS(planning::pick_replica({}, v), std::invalid_argument);  // round-robin reads no state
}

// A small ladder: startup captures take 0.05 s + 0.02 s x rung / 512 each.
planning::simulation_config small_fleet_config() {
  planning::simulation_config c;
  c.ladder = rungs::ladder{Explicit{1, 2, 4, 8}};
  return c;
}

TEST_CASE("fleet: prefix-affinity sends each request where its prefix is cached; round-robin misses") {
  // Two documents of 2 x 512 tokens (ids 1,2 and 3,4), each read twice, in the order A B B' A':
  // A and B arrive together (B finds A's replica busy: least loaded), B' and A' after both ended.
  const std::vector<trace_request> trace = {
      {.arrival = 0, .prompt_tokens = 1024, .output_tokens = 10, .hash_ids = {1, 2}},
      {.arrival = 0, .prompt_tokens = 1024, .output_tokens = 10, .hash_ids = {3, 4}},
      {.arrival = 20, .prompt_tokens = 1536, .output_tokens = 10, .hash_ids = {3, 4, 6}},
      {.arrival = 40, .prompt_tokens = 1536, .output_tokens = 10, .hash_ids = {1, 2, 5}}};
  planning::simulation_config c = small_fleet_config();
  c.prefix_caching = true;
  const planning::fleet_result rr = planning::simulate_fleet(c, trace, 2);
  CHECK(rr.replica_of == std::vector<std::int32_t>{0, 1, 0, 1});
  CHECK(rr.total.scheduler.prefix_hit_tokens == 0);  // each second reading lands on the other replica
  const planning::fleet_result pa = planning::simulate_fleet(c, trace, 2, {.kind = planning::router::prefix_affinity});
  CHECK(pa.replica_of == std::vector<std::int32_t>{0, 1, 1, 0});
  CHECK(pa.total.scheduler.prefix_hit_tokens == 2 * 1024);  // B' and A' reuse their document's 1024 tokens
  CHECK(pa.replicas[1].scheduler.prefix_hit_tokens == 1024);
  // Without prefix caching there is nothing to route by.
  c.prefix_caching = false;
  CHECK_THROWS_WITH(planning::simulate_fleet(c, trace, 2, {.kind = planning::router::prefix_affinity}),
                    "fleet: the prefix-affinity router needs prefix caching (the replicas' caches are what it routes by)");
}

TEST_CASE("fleet: prefix-affinity skips a replica above the imbalance bound") {
  // A long request holds replica 0; a second reading of its document arrives while it runs.
  const std::vector<trace_request> trace = {
      {.arrival = 0, .prompt_tokens = 1024, .output_tokens = 400, .hash_ids = {1, 2}},
      {.arrival = 2, .prompt_tokens = 1024, .output_tokens = 10, .hash_ids = {1, 2}}};
  planning::simulation_config c = small_fleet_config();
  c.prefix_caching = true;
  const planning::fleet_result bound1 =
      planning::simulate_fleet(c, trace, 2, {.kind = planning::router::prefix_affinity, .max_imbalance = 1});
  CHECK(bound1.replica_of == std::vector<std::int32_t>{0, 0});  // 1 outstanding against 0: within the bound
  CHECK(bound1.total.scheduler.prefix_hit_tokens == 1008);     // 1023 tokens looked up: 63 whole blocks
  const planning::fleet_result bound0 =
      planning::simulate_fleet(c, trace, 2, {.kind = planning::router::prefix_affinity, .max_imbalance = 0});
  CHECK(bound0.replica_of == std::vector<std::int32_t>{0, 1});  // overloaded: the idle replica, cold
  CHECK(bound0.total.scheduler.prefix_hit_tokens == 0);
  CHECK_THROWS_WITH(planning::simulate_fleet(c, trace, 2, {.kind = planning::router::prefix_affinity, .max_imbalance = -1}),
                    "fleet: max_imbalance = -1 must not be negative");
}

TEST_CASE("fleet: least-loaded balances a skewed arrival pattern that round-robin piles up") {
  // One request at a time per replica (max_num_seqs 1): a long request (400 output tokens,
  // about 6 s of steps) then four short ones a second apart. Round-robin alternates and queues
  // every second short request behind the long one; least-loaded sends them all to the
  // replica that is free.
  std::vector<trace_request> trace = {{.arrival = 1, .prompt_tokens = 100, .output_tokens = 400}};
  for (int k = 0; k < 4; ++k) trace.push_back({.arrival = 1.5 + k, .prompt_tokens = 100, .output_tokens = 10});
  planning::simulation_config c = small_fleet_config();
  c.scheduler.max_num_seqs = 1;
  const planning::fleet_result rr = planning::simulate_fleet(c, trace, 2);
  const planning::fleet_result ll = planning::simulate_fleet(c, trace, 2, {.kind = planning::router::least_loaded});
  CHECK(rr.replica_of == std::vector<std::int32_t>{0, 1, 0, 1, 0});
  CHECK(ll.replica_of == std::vector<std::int32_t>{0, 1, 1, 1, 1});
  // The long request's own latencies are the same either way; the short ones behind it wait.
  CHECK(ll.requests[0].ttft() == rr.requests[0].ttft());
  CHECK(rr.requests[2].first_token > rr.requests[0].finished);  // queued behind the long request
  CHECK(rr.requests[4].first_token > rr.requests[2].finished);
  for (std::size_t i = 1; i < 5; ++i) CHECK(ll.requests[i].ttft() < 0.5);
  CHECK(ll.ttft.max < 0.5);
  CHECK(rr.ttft.max > 3.0);
  // Each replica of the least-loaded fleet is simulate on its share.
  const planning::simulation_result r1 = planning::simulate(c, {trace[1], trace[2], trace[3], trace[4]});
  CHECK(ll.replicas[1].end_seconds == r1.end_seconds);
  CHECK(ll.requests[4].ttft() == r1.requests[3].ttft());
}

TEST_CASE("fleet: one replica is simulate under every router") {
  const std::vector<trace_request> trace = {
      {.arrival = 0, .prompt_tokens = 600, .output_tokens = 20, .hash_ids = {1, 2}},
      {.arrival = 0.1, .prompt_tokens = 50, .output_tokens = 10, .conversation = 5, .turn = 1},
      {.arrival = 0.2, .prompt_tokens = 600, .output_tokens = 30, .hash_ids = {1, 3}},
      {.arrival = 0.3, .prompt_tokens = 50, .output_tokens = 10, .conversation = 5, .turn = 2, .think = 0.5}};
  planning::simulation_config c = small_fleet_config();
  c.prefix_caching = true;
  const planning::simulation_result alone = planning::simulate(c, trace);
  for (const planning::router r :
       {planning::router::round_robin, planning::router::least_loaded, planning::router::prefix_affinity}) {
    const planning::fleet_result f = planning::simulate_fleet(c, trace, 1, {.kind = r});
    CHECK(f.replicas[0].end_seconds == alone.end_seconds);
    CHECK(f.ttft.p99 == alone.ttft.p99);
    CHECK(f.itl.mean == alone.itl.mean);
    CHECK(f.total.scheduler.prefix_hit_tokens == alone.scheduler.prefix_hit_tokens);
    CHECK(f.total.engine.steps == alone.engine.steps);
  }
}
