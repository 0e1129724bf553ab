// The engine on the GPU through cuda_backend: graph replays equal eager runs on random
// batches for every bucket, padded rows never touch the KV cache, replays follow block
// tables and lengths that change between steps, and failed captures fall back to eager.
// Exits 77 (skipped) when no GPU is visible.
#include <rungs/cuda/error.hpp>
#include <rungs/engine/cuda_backend.hpp>
#include <rungs/engine/graph_runner.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_support.cuh"
#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {

constexpr model_shape gpu_model{.dtype = rungs::dtype::fp32, .num_qo_heads = 2, .num_kv_heads = 1, .head_dim = 4,
                                .block_size = 4, .num_layers = 1};
constexpr int kv_width = gpu_model.num_kv_heads * gpu_model.head_dim;
constexpr int row_width = static_cast<int>(gpu_model.row_width());
constexpr int chunk = 8;  // KV tokens per work item (the plan's split size)

// ---- A toy model on the GPU: cache write, split partial sums driven by a plan, merge -----
__global__ void write_kv(const std::int32_t* tokens, const std::int32_t* positions, const std::int64_t* slots,
                         std::int64_t num_tokens, float* cache) {
  std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (t >= num_tokens) return;
  std::int64_t slot = slots[t];
  if (slot < 0) return;  // a padded token: never writes the cache
  for (int d = 0; d < kv_width; ++d)
    cache[slot * kv_width + d] = 0.5f * static_cast<float>(tokens[t]) + 0.25f * static_cast<float>(positions[t]) + d;
}

// The plan, rewritten every step on the host: work items (sequence, first KV token) and
// where each sequence's items start. Device layout: int32 count, then the arrays.
struct plan_view {
  const std::int32_t* count;
  const std::int32_t* work_seq;
  const std::int32_t* work_start;
  const std::int32_t* first;  // [seqs + 1]
};
std::int64_t max_work(std::int64_t seqs, std::int64_t width) {
  return seqs * ((width * gpu_model.block_size + chunk - 1) / chunk);
}
std::int64_t plan_bytes(std::int64_t seqs, std::int64_t, std::int64_t width) {
  return static_cast<std::int64_t>(sizeof(std::int32_t)) * (1 + 2 * max_work(seqs, width) + seqs + 1);
}
plan_view view_plan(const std::byte* p, std::int64_t seqs, std::int64_t width) {  // as write_plan lays it out
  auto* i = reinterpret_cast<const std::int32_t*>(p);
  std::int64_t w = max_work(seqs, width);
  return {i, i + 1, i + 1 + w, i + 1 + 2 * w};
}
void write_plan(const padded_batch& b, std::span<std::byte> out) {
  auto* i = reinterpret_cast<std::int32_t*>(out.data());
  std::int64_t w = max_work(b.seqs(), b.width());
  std::int32_t *work_seq = i + 1, *work_start = i + 1 + w, *first = i + 1 + 2 * w;
  std::int32_t n = 0;
  for (std::int64_t s = 0; s < b.seqs(); ++s) {
    first[s] = n;
    for (std::int32_t start = 0; start < b.seq_lens()[static_cast<std::size_t>(s)]; start += chunk, ++n) {
      work_seq[n] = static_cast<std::int32_t>(s);
      work_start[n] = start;
    }
  }
  first[b.seqs()] = n;
  i[0] = n;
}

// One CTA per possible work item (a grid fixed by the shape); items past the count return.
__global__ void partial_sums(plan_view plan, const std::int32_t* seq_lens, const std::int32_t* tables,
                             std::int64_t width, const float* cache, float* partial) {
  int w = blockIdx.x, c = threadIdx.x;
  if (w >= *plan.count) return;
  int s = plan.work_seq[w], start = plan.work_start[w];
  int end = min(start + chunk, seq_lens[s]);
  float acc = 0;
  for (int p = start; p < end; ++p) {
    std::int64_t slot = std::int64_t{tables[s * width + p / gpu_model.block_size]} * gpu_model.block_size +
                        p % gpu_model.block_size;
    acc += cache[slot * kv_width + c % kv_width] * static_cast<float>((p + 1) * (c / kv_width + 1));
  }
  partial[w * row_width + c] = acc;
}

__global__ void merge(plan_view plan, const float* partial, float* out) {
  int s = blockIdx.x, c = threadIdx.x;
  float acc = 0;
  for (int w = plan.first[s]; w < plan.first[s + 1]; ++w) acc += partial[w * row_width + c];
  out[s * row_width + c] = acc;
}

struct gpu_toy {
  float* cache = nullptr;
  std::int64_t slots = 0;
  // Capture fails (an illegal synchronisation inside the capture) for this many rows.
  std::int64_t unsafe_rows = -1;

  explicit gpu_toy(std::int64_t num_blocks) : slots(num_blocks * gpu_model.block_size) {
    RUNGS_CUDA_CHECK(cudaMalloc(&cache, static_cast<std::size_t>(slots * kv_width) * sizeof(float)));
    RUNGS_CUDA_CHECK(cudaMemset(cache, 0, static_cast<std::size_t>(slots * kv_width) * sizeof(float)));
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream memset before any backend stream work
  }
  ~gpu_toy() { cudaFree(cache); }

  void operator()(const cuda_step& s) const {
    const batch_view& b = s.batch;
    if (b.tokens > 0)
      write_kv<<<static_cast<unsigned>((b.tokens + 127) / 128), 128, 0, s.stream>>>(b.token_ids, b.positions,
                                                                                    b.slot_mapping, b.tokens, cache);
    plan_view plan = view_plan(s.plan, b.seqs, b.width);
    auto* partial = reinterpret_cast<float*>(s.workspace);
    partial_sums<<<static_cast<unsigned>(std::max<std::int64_t>(max_work(b.seqs, b.width), 1)), row_width, 0, s.stream>>>(
        plan, b.seq_lens, b.block_tables, b.width, cache, partial);
    merge<<<static_cast<unsigned>(b.seqs), row_width, 0, s.stream>>>(plan, partial, s.out);
    if (b.seqs == unsafe_rows) RUNGS_CUDA_CHECK(cudaStreamSynchronize(s.stream));  // illegal while capturing
    RUNGS_CUDA_CHECK(cudaGetLastError());
  }

  std::vector<float> read_cache() const {
    std::vector<float> h(static_cast<std::size_t>(slots * kv_width));
    RUNGS_CUDA_CHECK(cudaMemcpy(h.data(), cache, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

constexpr std::int64_t max_len = 64;
constexpr std::int64_t blocks_per_seq = max_len / gpu_model.block_size;

cuda_backend::options toy_options() {
  cuda_backend::options o;
  o.workspace_bytes = [](std::int64_t seqs, std::int64_t) {
    return max_work(seqs, blocks_per_seq) * row_width * static_cast<std::int64_t>(sizeof(float));
  };
  o.plan_bytes = plan_bytes;
  o.plan = write_plan;
  return o;
}

template <class Timing>
using gpu_engine = graph_runner<token_ladder, largest_first, Timing, cuda_backend>;

// Random decode batches: n sequences with random lengths and blocks drawn without reuse
// from a pool several times larger than needed.
struct random_batches {
  std::mt19937 rng{2026};
  std::vector<std::vector<std::int32_t>> tokens, tables;
  std::vector<sequence> seqs;
  std::span<const sequence> make(std::int64_t n, std::int64_t pool_blocks) {
    std::vector<std::int32_t> perm(static_cast<std::size_t>(pool_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    tokens.assign(static_cast<std::size_t>(n), {});
    tables.assign(static_cast<std::size_t>(n), {});
    seqs.clear();
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t context = std::uniform_int_distribution<std::int64_t>(0, max_len - 1)(rng);
      tokens[static_cast<std::size_t>(i)] = {std::uniform_int_distribution<std::int32_t>(1, 1000)(rng)};
      auto& t = tables[static_cast<std::size_t>(i)];
      t.assign(perm.begin() + i * blocks_per_seq, perm.begin() + (i + 1) * blocks_per_seq);
      seqs.push_back(sequence{tokens[static_cast<std::size_t>(i)], context, t});
    }
    return seqs;
  }
};

const token_ladder ladder{{1, 2, 4, 8, 16, 24, 32}};
constexpr std::int64_t pool_blocks = 32 * blocks_per_seq * 4;
}  // namespace

TEST_CASE("replayed output equals eager output on random batches, for every bucket") {
  gpu_toy graphs_model(pool_blocks), eager_model(pool_blocks);
  gpu_engine<startup> graphs(ladder, cuda_backend(std::cref(graphs_model), toy_options()),
                             {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  gpu_engine<lazy> eager(ladder, cuda_backend(std::cref(eager_model), toy_options()),
                         {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  graphs.start();
  REQUIRE(graphs.stats().captures == static_cast<std::int64_t>(ladder.size()));
  random_batches gen;
  std::int64_t previous = 0;
  for (std::int64_t rung : ladder.ladder().rungs()) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::int64_t n = std::uniform_int_distribution<std::int64_t>(previous + 1, rung)(gen.rng);
      auto seqs = gen.make(n, pool_blocks);
      auto a = graphs.step(seqs);
      auto b = eager.step(seqs);
      REQUIRE(a.run == run_kind::replay);
      REQUIRE(b.run == run_kind::eager);
      CHECK(host_rows(a.rows, graphs.backend().stream()) == host_rows(b.rows, eager.backend().stream()));
      CHECK(graphs_model.read_cache() == eager_model.read_cache());
    }
    previous = rung;
  }
}

TEST_CASE("padded rows leave the KV cache unchanged") {
  gpu_toy model(pool_blocks);
  gpu_engine<startup> e(ladder, cuda_backend(std::cref(model), toy_options()), {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  e.start();
  random_batches gen;
  auto seqs = gen.make(5, pool_blocks);  // pads to 8: three padded rows
  std::vector<float> before = model.read_cache();
  auto r = e.step(seqs);
  REQUIRE(r.run == run_kind::replay);
  RUNGS_CUDA_CHECK(cudaStreamSynchronize(e.backend().stream()));  // read_cache copies on the legacy stream
  std::vector<float> after = model.read_cache();
  std::vector<bool> written(static_cast<std::size_t>(model.slots), false);
  for (const sequence& s : seqs) {
    std::int64_t pos = s.context;
    written[static_cast<std::size_t>(std::int64_t{s.block_table[static_cast<std::size_t>(pos / gpu_model.block_size)]} *
                                         gpu_model.block_size + pos % gpu_model.block_size)] = true;
  }
  bool real_rows_wrote = false;  // else the comparison below would hold vacuously
  for (std::int64_t slot = 0; slot < model.slots; ++slot)
    for (int d = 0; d < kv_width; ++d) {
      const auto i = static_cast<std::size_t>(slot * kv_width + d);
      if (written[static_cast<std::size_t>(slot)])
        real_rows_wrote = real_rows_wrote || after[i] != before[i];
      else
        REQUIRE(after[i] == before[i]);
    }
  CHECK(real_rows_wrote);
  CHECK(e.stats().padded_rows == 3);
}

TEST_CASE("a replay follows block tables and lengths that change between steps") {
  gpu_toy graphs_model(pool_blocks), eager_model(pool_blocks);
  gpu_engine<startup> graphs(ladder, cuda_backend(std::cref(graphs_model), toy_options()),
                             {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  gpu_engine<lazy> eager(ladder, cuda_backend(std::cref(eager_model), toy_options()),
                         {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  random_batches gen;
  for (int step = 0; step < 10; ++step) {  // always bucket 16; new tables and lengths each step
    auto seqs = gen.make(13 + step % 4, pool_blocks);
    auto a = graphs.step(seqs);
    auto b = eager.step(seqs);
    REQUIRE(a.bucket == std::optional<std::size_t>(4));
    CHECK(host_rows(a.rows, graphs.backend().stream()) == host_rows(b.rows, eager.backend().stream()));
  }
  CHECK(graphs.stats().captures == static_cast<std::int64_t>(ladder.size()));  // never recaptured
}

TEST_CASE("failed captures (injected, or invalidated by the forward) fall back to eager") {
  gpu_toy model(pool_blocks), reference(pool_blocks);
  model.unsafe_rows = 2;  // the forward synchronises inside the capture of rung 2
  cuda_backend::options o = toy_options();
  o.fail = [](std::size_t, const bucket& b) -> std::optional<std::string> {
    if (b.batch() == 4) return "injected capture failure";
    return std::nullopt;
  };
  gpu_engine<startup> e(ladder, cuda_backend(std::cref(model), o), {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  gpu_engine<lazy> eager(ladder, cuda_backend(std::cref(reference), toy_options()),
                         {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  std::vector<std::string> log;
  e.observe(capture_log{&log});
  e.start();
  CHECK(e.stats().capture_failures == 2);
  CHECK(e.queue().state(1) == graph_state::failed);
  CHECK(e.queue().state(2) == graph_state::failed);
  CHECK_FALSE(e.backend().has_graph(1));
  random_batches gen;
  for (std::int64_t n : {2, 3, 8}) {
    auto seqs = gen.make(n, pool_blocks);
    auto a = e.step(seqs);
    auto b = eager.step(seqs);
    CHECK(a.run == (n == 8 ? run_kind::replay : run_kind::eager));
    CHECK(host_rows(a.rows, e.backend().stream()) == host_rows(b.rows, eager.backend().stream()));
  }
  CHECK(model.read_cache() == reference.read_cache());
}

TEST_CASE("a steady decode step uploads only what the persistent staging changed") {
  gpu_toy model(pool_blocks), reference(pool_blocks);
  cuda_backend::options o = toy_options();
  o.upload_gap_bytes = 0;  // every changed range its own copy, so the bytes are exactly the changes
  gpu_engine<startup> graphs(ladder, cuda_backend(std::cref(model), o),
                             {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  gpu_engine<lazy> eager(ladder, cuda_backend(std::cref(reference), toy_options()),
                         {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  random_batches gen;
  const std::span<const sequence> made = gen.make(13, pool_blocks);
  std::vector<sequence> seqs(made.begin(), made.end());
  for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i].id = i + 1;
  const std::int64_t plan = (plan_bytes(16, 16, blocks_per_seq) + 15) / 16 * 16;
  for (std::int64_t step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < seqs.size(); ++i)  // sequence i at position 4 i + step: no new block
      seqs[i].context = 4 * static_cast<std::int64_t>(i) + step;
    auto a = graphs.step(seqs);
    auto b = eager.step(seqs);
    REQUIRE(a.bucket == std::optional<std::size_t>(4));
    REQUIRE(a.run == run_kind::replay);
    CHECK(host_rows(a.rows, graphs.backend().stream()) == host_rows(b.rows, eager.backend().stream()));
    const upload_stats u = graphs.backend().last_upload();
    if (step == 0) {  // after the captures' dummies: the whole view of bucket 16 (16 rows, width 16)
      CHECK(u.bytes == 16 * (4 + 4 + 8) + 17 * 4 + 16 * 4 + 16 * blocks_per_seq * 4 + plan);
    } else {  // 13 tokens, positions, slots and lengths, and the plan: five copies
      CHECK(u.bytes == 13 * (4 + 4 + 8 + 4) + plan);
      CHECK(u.copies == 5);
    }
  }
}
