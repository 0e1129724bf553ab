// rungs-plan simulate --disaggregate P:D and plan-fleet --disaggregated, run in-process: the
// report against planning::simulate_disaggregated's figures, --json, and the errors.
#include <catch2/catch.hpp>

#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/disaggregated.hpp>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>

#include "../plan_support.hpp"
#include "command.hpp"

using namespace rungs::plan::test;

namespace {
std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}
// The table's line that starts with `label`, or "".
std::string line(const std::string& out, const std::string& label) {
  const std::size_t at = out.find("\n" + label);
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}
}  // namespace

TEST_CASE("rungs-plan simulate --disaggregate: the pools, the transfers, --json, and the errors") {
  // disaggregated_test's two requests, after the startup captures: A (6 + 3 tokens) at 1, B (3 +
  // 2) at 1.1, on the default cost model.
  const std::string path = "plan_disaggregate_test.csv";
  {
    std::ofstream f(path);
    f << "arrival,prompt_tokens,output_tokens\n1,6,3\n1.1,3,2\n";
  }
  rungs::planning::simulation_config c;
  c.ladder = rungs::ladder{rungs::Explicit{4, 8, 16}};
  c.record_steps = false;
  const std::vector<rungs::serving::trace_request> trace = {{.arrival = 1, .prompt_tokens = 6, .output_tokens = 3},
                                                            {.arrival = 1.1, .prompt_tokens = 3, .output_tokens = 2}};
  const rungs::planning::disaggregated_result d = rungs::planning::simulate_disaggregated(
      c, trace, {.prefill = 1, .decode = 1, .link = {.bytes_per_second = 131072000, .latency_seconds = 0.001}});

  const result text = plan({"simulate", "--trace", path, "--ladder", "explicit", "4,8,16", "--disaggregate", "1:1",
                            "--kv-link", "131072000", "--kv-link-latency", "0.001"});
  CHECK(text.err == "");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("; disaggregated 1:1 (prefill round-robin, decode round-robin), KV link 0.131072 GB/s + 1000 us\n") !=
        std::string::npos);
  CHECK(line(text.out, "TTFT p99 (s) ").ends_with(" " + fixed(d.ttft.p99, 3)));
  CHECK(line(text.out, "ITL mean (ms) ").ends_with(" " + fixed(d.itl.mean * 1e3, 2)));
  CHECK(line(text.out, "steps ").ends_with(" 5"));
  CHECK(line(text.out, "prefill ").starts_with("prefill         1         2         0"));
  CHECK(line(text.out, "decode ").starts_with("decode          1         2         0"));
  // Transfers of 6 and 3 tokens: 7 and 4 ms.
  CHECK(text.out.find("\nKV transfers: 2, 1.1 MiB (one rank's), mean 5.50 ms, p99 7.00 ms; first to second token: mean " +
                      fixed(d.handoff.mean * 1e3, 2) + " ms, p99 " + fixed(d.handoff.p99 * 1e3, 2) + " ms\n") !=
        std::string::npos);

  const result j = plan({"simulate", "--trace", path, "--ladder", "explicit", "4,8,16", "--disaggregate", "1:1",
                         "--kv-link", "nvlink", "--decode-router", "least-loaded", "--json"});
  CHECK(j.err == "");
  REQUIRE(j.status == 0);
  CHECK(j.out.find("\"disaggregate\": {\"prefill\": 1, \"decode\": 1, \"prefill_router\": \"round-robin\", "
                   "\"decode_router\": \"least-loaded\", \"link_bytes_per_second\": 450000000000.0, "
                   "\"link_latency_seconds\": 1e-05}") != std::string::npos);
  CHECK(j.out.find("\"pools\": {\"prefill\": {\"replicas\": 1, \"requests\": 2,") != std::string::npos);
  CHECK(j.out.find("\"kv_transfer\": {\"count\": 2, \"bytes\": 1179648,") != std::string::npos);
  CHECK(j.out.find("\"handoff\": {\"count\": 2,") != std::string::npos);

  check_usage(plan({"simulate", "--trace", path, "--kv-link", "nvlink"}),
              "--kv-link, --kv-link-latency and --decode-router apply to --disaggregate P:D");
  check_usage(plan({"simulate", "--trace", path, "--disaggregate", "2"}),
              "--disaggregate = '2' is not P:D (prefill replicas, a colon, decode replicas; e.g. 1:3)");
  check_usage(plan({"simulate", "--trace", path, "--disaggregate", "0:1"}), "--disaggregate P = 0 must be positive");
  check_usage(plan({"simulate", "--trace", path, "--disaggregate", "1:1", "--replicas", "2"}),
              "--disaggregate P:D sizes both pools itself: leave out --replicas and --dp");
  check_usage(plan({"simulate", "--trace", path, "--disaggregate", "1:1", "--kv-link", "ethernet"}),
              "--kv-link = 'ethernet' is not one of nvlink, infiniband-400g, pcie5, pcie4 nor a number of bytes per second");
  check_usage(plan({"simulate", "--trace", path, "--disaggregate", "1:1", "--decode-router", "prefix-affinity"}),
              "--decode-router = 'prefix-affinity' is not one of round-robin, least-loaded");
  const result chat = plan({"simulate", "--chat", "2", "--disaggregate", "1:1"});
  CHECK(chat.status != 0);
  CHECK(chat.err.find("disaggregate: trace request 1 is turn 1 of conversation") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("rungs-plan plan-fleet --disaggregated: both searches and the choice") {
  // Four requests of 8 + 4 tokens at 1 s (after the startup captures), on the default cost
  // model: one replica runs their 32 prompt tokens eagerly (above the top rung 16: 16.7 ms of
  // weights + 6 ms of launches), two replay bucket 16 (16.7 ms). A TTFT max of 20 ms needs two
  // colocated replicas, or two prefill replicas and one decode replica.
  const std::string path = "plan_fleet_disaggregated_test.csv";
  {
    std::ofstream f(path);
    f << "arrival,prompt_tokens,output_tokens\n";
    for (int k = 0; k < 4; ++k) f << "1,8,4\n";
  }
  const result text = plan({"plan-fleet", "--trace", path, "--ladder", "explicit", "4,8,16", "--slo", "ttft_max=20ms",
                            "--disaggregated", "--max-replicas", "8"});
  CHECK(text.err == "");
  CHECK(text.status == 0);
  CHECK(text.out.find("\ndisaggregated: prefill router round-robin, decode router round-robin, KV link 50 GB/s + 10 us; "
                      "capture timing startup\n") != std::string::npos);
  CHECK(text.out.find("\n       1       -") != std::string::npos);
  CHECK(text.out.find("no (TTFT bounds)\n") != std::string::npos);
  CHECK(text.out.find("\ndisaggregated fleet: 2:1 (3 replicas, 3 GPUs)\n") != std::string::npos);
  CHECK(text.out.find("\nfleet: 2 replicas,") != std::string::npos);
  CHECK(text.out.find("\nchoice: colocated 2 replicas (2 GPUs) against disaggregated 3 GPUs\n") != std::string::npos);

  const result j = plan({"plan-fleet", "--trace", path, "--ladder", "explicit", "4,8,16", "--slo", "ttft_max=20ms",
                         "--disaggregated", "--max-replicas", "8", "--json"});
  CHECK(j.status == 0);
  CHECK(j.out.find("\"prefill\": 2, \"decode\": 1, \"gpus\": 3,") != std::string::npos);
  CHECK(j.out.find("\"choice\": \"colocated\"") != std::string::npos);
  check_usage(plan({"plan-fleet", "--trace", path, "--slo", "ttft_max=20ms", "--kv-link", "pcie5"}),
              "--kv-link, --kv-link-latency and --decode-router apply to --disaggregated");
  std::remove(path.c_str());
}
