// Ladder lookup: the precomputed table (compile-time and run-time ladders) against
// std::lower_bound over the same rungs, on the same stream of sizes, in one run.
//
// Each iteration looks up the whole stream (4096 independent sizes, uniformly spread up to
// the top rung, fixed seed), so the figures are throughput per lookup; "per_lookup" is the
// CPU time divided by the lookups (shown in seconds with an SI prefix: 430p = 0.43 ns). Results: benchmarks/RESULTS.md.
#include <rungs/ladder.hpp>

#include <algorithm>
#include <benchmark/benchmark.h>
#include <cstdint>
#include <random>
#include <vector>

namespace {

constexpr std::size_t stream_size = 4096;

std::vector<rungs::rung_t> size_stream(rungs::rung_t top) {
  std::mt19937_64 rng(20261121);
  std::uniform_int_distribution<rungs::rung_t> d(1, top);
  std::vector<rungs::rung_t> v(stream_size);
  for (auto& n : v) n = d(rng);
  return v;
}

void per_lookup(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * stream_size));
  state.counters["per_lookup"] = benchmark::Counter(
      static_cast<double>(stream_size), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The same result a table lookup gives, found by binary search.
rungs::rung_lookup lower_bound_lookup(const std::vector<rungs::rung_t>& rungs, rungs::rung_t n) {
  const auto it = std::lower_bound(rungs.begin(), rungs.end(), n);
  if (it == rungs.end()) return {n, n, rungs::rung_lookup::eager_index};
  return {n, *it, static_cast<std::int32_t>(it - rungs.begin())};
}

template <auto Policy>
void BM_static_table(benchmark::State& state) {
  using L = rungs::static_ladder<Policy>;
  const auto sizes = size_stream(L::top());
  for (auto _ : state) {
    rungs::rung_t sum = 0;
    for (rungs::rung_t n : sizes) sum += L::lookup(n).rung;
    benchmark::DoNotOptimize(sum);
  }
  per_lookup(state);
}

template <auto Policy>
void BM_runtime_table(benchmark::State& state) {
  const rungs::ladder l{Policy};
  const auto sizes = size_stream(l.top());
  for (auto _ : state) {
    rungs::rung_t sum = 0;
    for (rungs::rung_t n : sizes) sum += l.lookup(n).rung;
    benchmark::DoNotOptimize(sum);
  }
  per_lookup(state);
}

template <auto Policy>
void BM_lower_bound(benchmark::State& state) {
  const rungs::ladder l{Policy};
  const std::vector<rungs::rung_t> rungs(l.rungs().begin(), l.rungs().end());
  const auto sizes = size_stream(l.top());
  for (auto _ : state) {
    rungs::rung_t sum = 0;
    for (rungs::rung_t n : sizes) sum += lower_bound_lookup(rungs, n).rung;
    benchmark::DoNotOptimize(sum);
  }
  per_lookup(state);
}

// vLLM's capture sizes up to 512: 67 rungs, 513-entry table.
constexpr auto capture = rungs::CaptureSizes::vllm(512);
// Gaudi decode KV blocks for 5777 blocks: 14 rungs, 47-entry table (multiples of 128).
constexpr auto blocks = rungs::Exponential{128, 128, 5777, 14};

BENCHMARK(BM_static_table<capture>)->Name("capture_sizes_512/static_table");
BENCHMARK(BM_runtime_table<capture>)->Name("capture_sizes_512/runtime_table");
BENCHMARK(BM_lower_bound<capture>)->Name("capture_sizes_512/lower_bound");
BENCHMARK(BM_static_table<blocks>)->Name("decode_blocks_5777/static_table");
BENCHMARK(BM_runtime_table<blocks>)->Name("decode_blocks_5777/runtime_table");
BENCHMARK(BM_lower_bound<blocks>)->Name("decode_blocks_5777/lower_bound");

// For scale: the 3-D decode grid of the exponential document (42 buckets).
void BM_grid_lookup(benchmark::State& state) {
  rungs::gaudi::serving_config s;
  s.max_num_seqs = 4;
  s.max_model_len = 1024;
  s.num_blocks = 5777;
  const auto plan = rungs::gaudi::exponential_buckets(
      rungs::gaudi::read_bucket_config(s, rungs::gaudi::strategy::exponential, [](const char*) -> const char* {
        return nullptr;
      }),
      s);
  std::mt19937_64 rng(20261121);
  std::uniform_int_distribution<rungs::rung_t> bs(1, 4), nb(1, 5888);
  std::vector<rungs::bucket<3>> requests(stream_size);
  for (auto& r : requests) r = {bs(rng), 1, nb(rng)};
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (const auto& r : requests) sum += plan.decode.lookup(r).padded_tokens;
    benchmark::DoNotOptimize(sum);
  }
  per_lookup(state);
}
BENCHMARK(BM_grid_lookup)->Name("decode_grid_42/bucket_grid");

}  // namespace

BENCHMARK_MAIN();
