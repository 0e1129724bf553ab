// Engine host-side overhead and capture timing (issues 6 and 29). Results: benchmarks/RESULTS.md.
//
//   BM_engine_step/<seqs>/<churn>/<full>
//                        the whole host step between two GPU steps: rungs::engine::engine::step
//                        (scheduler: plan, KV appends, commit; the persistent row order; the
//                        runner: key, lookup, staging, the host backend's launch call with a
//                        no-op forward and its upload plan; statistics; the sampling hook).
//                        `seqs` sequences decoding (rung seqs + 3); churn 1: besides, one
//                        request finishes and one of 4 prompt tokens is admitted every step.
//                        full 0: persistent staging (padded_batch::update), 1: a full restage
//                        every step (staging_policy::full, the engine before issue 29).
//   BM_stage_update/<rung>/<full>
//                        the staging alone in steady decode: every sequence one token further
//                        each step (advancing the contexts is inside the timing, ~0.5 ns per
//                        sequence), persistent update vs full restage.
//   BM_step/<rung>       one engine step on the host backend with a no-op forward: batch-key
//                        agreement, ladder lookup, padding into the staging buffers,
//                        bookkeeping, statistics and the forward call (where the CUDA
//                        backend would upload and launch the graph). Batches pad to `rung`.
//   BM_lookup            the ladder lookup through the bucket space alone.
//   BM_stage/<rung>      the padding (staging) alone.
//   BM_startup_vs_lazy   SIMULATED capture cost (the host backend spins 2 ms per graph; vLLM
//                        measured ~55 ms per piecewise graph of an 8B model): startup capture of
//                        the 67-rung vLLM ladder (capture-sizes 512) before the first step, vs
//                        lazy capture over a 400-step decode trace wandering between 20 and 64
//                        sequences. Reports the time to the first step and for the whole trace.
#include <benchmark/benchmark.h>

#include <rungs/engine/engine.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/ladder.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

namespace {
namespace eng = rungs::engine;

constexpr eng::model_shape model{.dtype = rungs::dtype::bf16, .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128,
                                 .block_size = 16, .num_layers = 32};
constexpr std::int64_t max_model_len = 1024;

constexpr std::int64_t num_blocks = 512 * 64;  // sequences own fixed blocks: 64 each

using buckets = eng::ladder_buckets<rungs::ladder>;
template <class Timing>
using bench_engine = eng::graph_runner<buckets, eng::largest_first, Timing, eng::host_backend>;

buckets vllm_512() { return buckets(rungs::ladder{rungs::CaptureSizes::vllm(512)}); }

// n decode sequences of ~500 tokens, each with its own 64-entry block table.
struct decode_batch {
  std::vector<std::int32_t> token;
  std::vector<std::vector<std::int32_t>> tables;
  std::vector<eng::sequence> seqs;
  explicit decode_batch(std::int64_t n) : token{42} {
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<std::int32_t> t(max_model_len / model.block_size);
      for (std::size_t b = 0; b < t.size(); ++b) t[b] = static_cast<std::int32_t>(i * 64 + static_cast<std::int64_t>(b));
      tables.push_back(std::move(t));
    }
    for (std::int64_t i = 0; i < n; ++i) seqs.push_back({token, 500 + i % 7, tables[static_cast<std::size_t>(i)]});
  }
};

void BM_step(benchmark::State& state) {
  const std::int64_t rung = state.range(0);
  bench_engine<eng::startup> e(vllm_512(), eng::host_backend([](const eng::host_step&) {}),
                               {.max_model_len = max_model_len, .shape = eng::run_shape::of(model, num_blocks)});
  e.start();
  decode_batch batch(rung - 3 > 0 ? rung - 3 : rung);
  for (auto _ : state) {
    auto r = e.step(batch.seqs);
    benchmark::DoNotOptimize(r.rows.data());
  }
  state.counters["padded_rows"] = static_cast<double>(rung - static_cast<std::int64_t>(batch.seqs.size()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_step)->Arg(8)->Arg(64)->Arg(256)->Arg(512);

void BM_lookup(benchmark::State& state) {
  buckets b = vllm_512();
  std::mt19937 rng(1);
  std::vector<eng::batch_key> keys;
  for (int i = 0; i < 1024; ++i) {
    std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 600)(rng);
    keys.push_back({.ph = eng::phase::decode, .seqs = n, .tokens = n});
  }
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(b.find(keys[i++ & 1023]));
}
BENCHMARK(BM_lookup);

void BM_stage(benchmark::State& state) {
  const std::int64_t rung = state.range(0);
  decode_batch batch(rung - 3 > 0 ? rung - 3 : rung);
  eng::padded_batch staged;
  for (auto _ : state) {
    staged.stage(batch.seqs, rung, rung, max_model_len / model.block_size, model.block_size);
    benchmark::DoNotOptimize(staged.view().slot_mapping);
  }
}
BENCHMARK(BM_stage)->Arg(8)->Arg(64)->Arg(256)->Arg(512);

// ---- The whole engine step (issue 29) ----------------------------------------------------

// Samples a constant token: the rows carry nothing (no-op forward).
struct constant_sampler {
  void sample(const rungs::serving::scheduled_step&, std::span<const std::size_t> entries, std::span<const float>,
              std::span<rungs::serving::token_id> out) const {
    for (std::size_t k = 0; k < entries.size(); ++k) out[k] = 7;
  }
};

using step_engine =
    eng::engine<buckets, eng::largest_first, eng::startup, rungs::kv::free_list_allocator, eng::host_backend>;

// `running` sequences decoding; with churn, one request admitted (4 prompt tokens) and one
// finished per step: each request then lives `running` steps, so after `running` steps of
// admissions the batch holds `running` sequences, one finishing as one arrives.
void BM_engine_step(benchmark::State& state) {
  const std::int64_t running = state.range(0);
  const bool churn = state.range(1) != 0;
  const auto staging = state.range(2) != 0 ? eng::staging_policy::full : eng::staging_policy::persistent;
  step_engine e(vllm_512(),
                rungs::kv::free_list_allocator({.num_blocks = 512 * 64, .block_size = 16, .max_sequences = 1024,
                                                .max_model_len = static_cast<std::int32_t>(max_model_len)}),
                eng::host_backend([](const eng::host_step&) {}),
                {.scheduler = {.max_num_seqs = 1024, .max_num_batched_tokens = 4096},
                 .routing = eng::step_routing::single, .staging = staging});
  e.start();
  constant_sampler hook;
  std::uint64_t next = 1;
  const std::vector<rungs::kv::token_id> prompt(4, 3);
  auto admit = [&](std::int32_t outputs) {
    rungs::serving::request r;
    r.id = next++;
    r.prompt = prompt;
    r.max_output_tokens = outputs;
    e.submit(std::move(r));
  };
  if (churn) {
    for (std::int64_t s = 0; s < running; ++s) {  // one arrival a step until the batch is full
      admit(static_cast<std::int32_t>(running));
      e.step(hook);
    }
  } else {
    for (std::int64_t s = 0; s < running; ++s) admit(1000);
    e.step(hook);  // the prefills
  }
  for (int s = 0; s < 32; ++s) {  // past the first block appends and into a steady state
    if (churn) admit(static_cast<std::int32_t>(running));
    e.step(hook);
  }
  std::int64_t admitted = 0, finished = 0;
  for (auto _ : state) {
    if (churn) admit(static_cast<std::int32_t>(running));
    const eng::engine_step& r = e.step(hook);
    admitted += static_cast<std::int64_t>(r.plan->admitted.size());
    finished += r.ran() ? static_cast<std::int64_t>(r.events->finished.size()) : 0;
    benchmark::DoNotOptimize(r.runs.data());
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["running"] = static_cast<double>(e.scheduler().running());
  state.counters["admitted_per_step"] = static_cast<double>(admitted) / n;
  state.counters["finished_per_step"] = static_cast<double>(finished) / n;
  state.counters["upload_bytes"] = static_cast<double>(e.runner().backend().uploaded_bytes());
  state.SetLabel(staging == eng::staging_policy::full ? "full restage" : "persistent");
}
// 400 steps a repetition: no request of the steady runs finishes (1000 outputs).
BENCHMARK(BM_engine_step)
    ->ArgNames({"seqs", "churn", "full"})
    ->ArgsProduct({{61, 253, 509}, {0, 1}, {0, 1}})
    ->Iterations(400);

void BM_stage_update(benchmark::State& state) {
  const std::int64_t rung = state.range(0);
  const bool full = state.range(1) != 0;
  decode_batch batch(rung - 3);
  std::vector<std::int64_t> context(batch.seqs.size());
  std::uint64_t next_id = 1;
  for (std::size_t i = 0; i < batch.seqs.size(); ++i) {
    context[i] = batch.seqs[i].context;
    batch.seqs[i].id = next_id++;
  }
  eng::padded_batch staged;
  const std::int64_t width = max_model_len / model.block_size;
  for (auto _ : state) {
    for (std::size_t i = 0; i < batch.seqs.size(); ++i) {  // one token further; a new sequence at the end
      if (++context[i] >= max_model_len - 1) context[i] = 500, batch.seqs[i].id = next_id++;
      batch.seqs[i].context = context[i];
    }
    if (full) staged.stage(batch.seqs, rung, rung, width, model.block_size);
    else staged.update(batch.seqs, rung, rung, width, model.block_size);
    benchmark::DoNotOptimize(staged.view().slot_mapping);
  }
  state.SetLabel(full ? "full restage" : "persistent");
}
BENCHMARK(BM_stage_update)->ArgNames({"rung", "full"})->ArgsProduct({{64, 256, 512}, {0, 1}});

// A decode trace concentrated on a few batch sizes, as a loaded server produces.
std::vector<std::int64_t> decode_trace() {
  std::mt19937 rng(7);
  std::vector<std::int64_t> sizes;
  std::int64_t n = 30;
  for (int s = 0; s < 400; ++s) {
    n = std::clamp<std::int64_t>(n + std::uniform_int_distribution<std::int64_t>(-2, 2)(rng), 20, 64);
    sizes.push_back(n);
  }
  return sizes;
}

template <class Timing>
void run_capture(benchmark::State& state, Timing timing) {
  const auto trace = decode_trace();
  std::vector<decode_batch> batches;
  for (std::int64_t n = 0; n <= 64; ++n) batches.emplace_back(n == 0 ? 1 : n);
  eng::host_backend::options sim{.simulate = eng::simulated_capture{.seconds = 0.002, .spend = true}};
  double first = 0, total = 0, captured = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    bench_engine<Timing> e(vllm_512(), eng::host_backend([](const eng::host_step&) {}, sim),
                           {.timing = timing, .max_model_len = max_model_len, .shape = eng::run_shape::of(model, num_blocks)});
    e.step(batches[static_cast<std::size_t>(trace[0])].seqs);
    auto t1 = std::chrono::steady_clock::now();
    for (std::size_t s = 1; s < trace.size(); ++s) e.step(batches[static_cast<std::size_t>(trace[s])].seqs);
    auto t2 = std::chrono::steady_clock::now();
    first += std::chrono::duration<double>(t1 - t0).count();
    total += std::chrono::duration<double>(t2 - t0).count();
    captured = static_cast<double>(e.stats().captures);
  }
  auto n = static_cast<double>(state.iterations());
  state.counters["first_step_ms"] = 1e3 * first / n;
  state.counters["trace_ms"] = 1e3 * total / n;
  state.counters["graphs"] = captured;
}

void BM_startup_vs_lazy(benchmark::State& state) {
  if (state.range(0) == 0) {
    state.SetLabel("startup, simulated 2 ms/graph");
    run_capture(state, eng::startup{});
  } else {
    state.SetLabel("lazy, simulated 2 ms/graph");
    run_capture(state, eng::lazy{});
  }
}
BENCHMARK(BM_startup_vs_lazy)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
