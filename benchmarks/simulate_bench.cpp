// The simulator's speed on real traffic (issue 16's targets: one hour of the Azure
// conversation trace on one replica in at most 1 s of CPU, on 16 replicas in at most 5 s).
// Reads azure-llm-2023-conv.csv from RUNGS_TRACE_DATA_DIR (the CMake option of
// tests/planning, default ../shared/data beside the source tree); skips with a message when
// it is absent. Defaults otherwise: rungs-plan simulate's (the blog's Mistral-7B cost model,
// 7 GiB of KV, vLLM's capture sizes to 512, startup capture), steps not recorded. The second
// argument is the router: 0 round-robin, 1 least-loaded, 2 prefix-affinity (with prefix
// caching, which it needs: each routed request asks every replica's cache).
// BM_azure_hour_dp: the same hour on N data-parallel ranks in lockstep (simulate --dp N: one
// thread per rank, agreeing through engine::simulated_ranks several times per step, plus the
// independent round-robin comparison), in wall time, since the ranks run on threads.
#include <rungs/planning/data_parallel.hpp>
#include <rungs/planning/fleet.hpp>
#include <rungs/serving/workload.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <filesystem>
#include <string>

#ifndef RUNGS_TRACE_DATA_DIR
#define RUNGS_TRACE_DATA_DIR ""
#endif

namespace {

// The trace, or nullptr after marking `state` skipped when it is absent.
const std::vector<rungs::serving::trace_request>* azure_hour(benchmark::State& state) {
  static const std::string path = std::string(RUNGS_TRACE_DATA_DIR) + "/azure-llm-2023-conv.csv";
  static const std::vector<rungs::serving::trace_request> rows =
      std::filesystem::exists(path) ? rungs::serving::read_trace(path) : std::vector<rungs::serving::trace_request>{};
  if (rows.empty()) state.SkipWithError("azure-llm-2023-conv.csv not found under RUNGS_TRACE_DATA_DIR");
  return rows.empty() ? nullptr : &rows;
}

// rungs-plan simulate's defaults, steps not recorded.
rungs::planning::simulation_config bench_config() {
  rungs::planning::simulation_config c;
  c.record_steps = false;
  return c;
}

void BM_azure_hour(benchmark::State& state) {
  const auto* trace = azure_hour(state);
  if (!trace) return;
  rungs::planning::simulation_config c = bench_config();
  const auto replicas = static_cast<std::int32_t>(state.range(0));
  const rungs::planning::router router = std::array{rungs::planning::router::round_robin, rungs::planning::router::least_loaded,
                                                    rungs::planning::router::prefix_affinity}[static_cast<std::size_t>(state.range(1))];
  c.prefix_caching = router == rungs::planning::router::prefix_affinity;
  state.SetLabel(std::string(rungs::planning::to_string(router)));
  std::int64_t steps = 0;
  for (auto _ : state) {
    const rungs::planning::fleet_result f = rungs::planning::simulate_fleet(c, *trace, replicas, {.kind = router});
    steps = 0;
    for (const auto& r : f.replicas) steps += r.scheduler.steps;
    benchmark::DoNotOptimize(f.ttft.p99);
  }
  state.counters["requests"] = static_cast<double>(trace->size());
  state.counters["steps"] = static_cast<double>(steps);
}
BENCHMARK(BM_azure_hour)
    ->ArgNames({"replicas", "router"})
    ->Args({1, 0})
    ->Args({16, 0})
    ->Args({16, 1})
    ->Args({16, 2})
    ->Unit(benchmark::kMillisecond);

void BM_azure_hour_dp(benchmark::State& state) {
  const auto* trace = azure_hour(state);
  if (!trace) return;
  rungs::planning::simulation_config c = bench_config();
  const auto ranks = static_cast<std::int32_t>(state.range(0));
  std::int64_t steps = 0;
  for (auto _ : state) {
    const rungs::planning::data_parallel_result d = rungs::planning::simulate_data_parallel(c, *trace, ranks);
    steps = d.steps;
    benchmark::DoNotOptimize(d.lockstep.ttft.p99);
  }
  state.counters["lockstep_steps"] = static_cast<double>(steps);
}
BENCHMARK(BM_azure_hour_dp)->ArgName("ranks")->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
