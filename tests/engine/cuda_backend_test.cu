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
#include <set>
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
  // Capture fails (an allocation inside the capture: CUDA's out-of-memory-during-capture path)
  // for this many rows.
  std::int64_t allocating_rows = -1;

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
    if (b.seqs == allocating_rows) {  // illegal while capturing too
      void* p = nullptr;
      RUNGS_CUDA_CHECK(cudaMalloc(&p, 256));
      RUNGS_CUDA_CHECK(cudaFree(p));
    }
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

// A hybrid model's second attention group (options::groups = 2): its tables live beside the
// staged one, and a steady step uploads only the entries that differ from the device copy.
namespace {
// Group 1's table of sequence i at a step: i + 1 blocks 1000 + 16 i + k; from step 2 on,
// sequence 12's first entry has left the window (null); at step 3 sequence 3 has a fifth block.
std::vector<std::int32_t> group1_table(std::size_t i, std::int64_t step) {
  std::vector<std::int32_t> t(i + 1 + (step == 3 && i == 3 ? 1 : 0));
  for (std::size_t k = 0; k < t.size(); ++k) t[k] = static_cast<std::int32_t>(1000 + 16 * i + k);
  if (step >= 2 && i == 12) t[0] = rungs::kv::null_block;
  return t;
}
}  // namespace

TEST_CASE("a hybrid model's group tables: uploaded once, then only the entries that changed") {
  gpu_toy model(pool_blocks);
  cuda_backend::options o = toy_options();
  o.upload_gap_bytes = 0;
  o.groups = 2;
  // What the captures' forwards were given (a replay runs the graph, not the forward): every
  // bucket's graph reads group 1's tables at one address.
  std::set<const std::int32_t*> device_groups;
  std::int64_t stride = 0;
  auto forward = [&](const cuda_step& st) {
    model(st);
    REQUIRE(st.groups == 2);
    device_groups.insert(st.block_tables(1));
    stride = st.group_table_stride;
  };
  gpu_engine<startup> graphs(ladder, cuda_backend(forward, o), {.max_model_len = max_len, .shape = run_shape::of(gpu_model, pool_blocks)});
  graphs.start();
  REQUIRE(device_groups.size() == 1);
  CHECK(stride == 32 * blocks_per_seq);  // the largest bucket's rows x width
  random_batches gen;
  const std::span<const sequence> made = gen.make(13, pool_blocks);
  std::vector<sequence> seqs(made.begin(), made.end());
  for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i].id = i + 1;
  const std::int64_t plan = (plan_bytes(16, 16, blocks_per_seq) + 15) / 16 * 16;
  std::vector<std::vector<std::int32_t>> tables(2 * seqs.size());
  std::vector<std::span<const std::int32_t>> spans(2 * seqs.size());
  for (std::int64_t step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].context = 4 * static_cast<std::int64_t>(i) + step;  // no new block in group 0
      spans[i] = seqs[i].block_table;
      tables[seqs.size() + i] = group1_table(i, step);
      spans[seqs.size() + i] = tables[seqs.size() + i];
    }
    graphs.backend().stage_groups(group_tables{.groups = 2, .rows = 13, .tables = spans});
    auto a = graphs.step(seqs);
    REQUIRE(a.run == run_kind::replay);
    const upload_stats u = graphs.backend().last_upload();
    const std::int64_t staged = 13 * (4 + 4 + 8 + 4) + plan;  // group 0's steady step: five copies
    if (step == 0) {  // the captures' dummies left group 1 all padding: 13 runs of i + 1 entries
      CHECK(u.bytes == 16 * (4 + 4 + 8) + 17 * 4 + 16 * 4 + 16 * blocks_per_seq * 4 + 91 * 4 + plan);
    } else if (step == 1) {  // group 1 unchanged: nothing of it
      CHECK(u.bytes == staged);
      CHECK(u.copies == 5);
    } else {  // one entry: sequence 12's first (null: block 0), then sequence 3's fifth
      CHECK(u.bytes == staged + 4);
      CHECK(u.copies == 6);
    }
    // The device copy is group 1's tables in the staged layout, block 0 for null and padding.
    RUNGS_CUDA_CHECK(cudaStreamSynchronize(graphs.backend().stream()));
    std::vector<std::int32_t> got(16 * blocks_per_seq), want(got.size(), 0);
    RUNGS_CUDA_CHECK(cudaMemcpy(got.data(), *device_groups.begin(), got.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < seqs.size(); ++i)
      for (std::size_t k = 0; k < tables[seqs.size() + i].size(); ++k)
        want[i * blocks_per_seq + k] = std::max(tables[seqs.size() + i][k], 0);
    CHECK(got == want);
  }
  // A step whose sequences come without their group tables is refused; so is another count of groups.
  CHECK_THROWS_WITH(graphs.step(seqs), Catch::Contains("a step of 13 sequences was given no group tables"));
  CHECK_THROWS_WITH(graphs.backend().stage_groups(group_tables{.groups = 3, .rows = 0, .tables = {}}),
                    "cuda_backend: the allocator stages 3 attention groups; options::groups = 2 (the forward reads that "
                    "many block tables)");
  CHECK_THROWS_WITH(cuda_backend(std::cref(model), cuda_backend::options{.groups = 0}),
                    "cuda_backend: options::groups = 0 must be at least 1");
}

// ---- Device faults (docs/engine.md, "Device faults"): the CPU device fails calls on purpose --
#if __has_include(<rungs_sim/faults.hpp>)
#include <rungs/engine/engine.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs_sim/faults.hpp>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace {

namespace faults = rungs::sim::faults;
namespace serving = rungs::serving;

// Greedy "sampling" from the device rows: the token is a function of the row, so a wrong or
// stale row changes the outputs.
struct device_sampler {
  cudaStream_t stream;
  void sample(const serving::scheduled_step&, std::span<const std::size_t> entries, const device_rows& rows,
              std::span<serving::token_id> out) const {
    const std::vector<float> h = host_rows(rows, stream);
    for (std::size_t k = 0; k < entries.size(); ++k)
      out[k] = static_cast<serving::token_id>(static_cast<std::int64_t>(std::fabs(h[k * row_width]) * 8) % 97 + 1);
  }
};

using fault_engine = engine<token_ladder, largest_first, startup, rungs::kv::free_list_allocator, cuda_backend>;

// When a served run injects faults: each hook runs at its moment (before the backend is built,
// before the startup captures, before the first step, before the engine is destroyed), and
// what it schedules stays on until the engine and its backend are gone.
struct injection {
  std::function<void()> before_build = [] {}, before_start = [] {}, after_start = [] {}, before_teardown = [] {};
  std::int64_t allocating_rows = -1;  // the forward allocates (illegally) when capturing this many rows
};

// The destroy calls: an injected failure destroys nothing (rungs_sim/faults.hpp), so a backend
// that forgets the handle leaks exactly that object and one that destroys again frees it.
const std::set<std::string> destroy_calls = {"cudaFree",         "cudaFreeHost",     "cudaStreamDestroy",
                                             "cudaEventDestroy", "cudaGraphDestroy", "cudaGraphExecDestroy"};

// What serving six requests did: outputs by request, failed steps, the fatal fault if any, the
// failed build if any, and what the device kept.
struct served {
  std::vector<std::vector<serving::token_id>> outputs = std::vector<std::vector<serving::token_id>>(6);
  std::int64_t failed_steps = 0;
  std::optional<step_fault> fatal{};
  std::optional<std::string> build_error_call{};  // the engine could not be built: the call the cuda_error names
  std::string build_error{};
  engine_stats stats{};
  serving::scheduler_stats scheduler{};
  std::map<std::string, int> faults{};            // faults injected, by call
  int destroy_faults = 0;                         // of them at destroy calls
  std::vector<std::string> reported_releases{};   // failed releases the backend reported (RUNGS_CUDA_RELEASE), by call
  std::int64_t leaked = 0;                        // objects the device holds after teardown that it did not before
};

// Serves six requests (prompts of 3 to 8 tokens, 5 outputs each) on the CUDA backend. After
// every step, failed or not, the scheduler and the allocator are consistent; a run that
// finishes holds no KV block; a fatal stop leaves the failed step's requests waiting.
void serve_on(const gpu_toy& model, const injection& inj, served& r) {
  std::optional<fault_engine> e;
  try {
    e.emplace(token_ladder{{1, 2, 4, 8}},
              rungs::kv::free_list_allocator({.num_blocks = 64, .block_size = gpu_model.block_size, .max_sequences = 8,
                                              .max_model_len = max_len}),
              cuda_backend(std::cref(model), toy_options()),
              fault_engine::options{.scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 64},
                                    .routing = step_routing::single,
                                    .model = gpu_model});
  } catch (const rungs::cuda_error& f) {  // the backend's constructor or setup failed
    r.build_error_call = f.call();
    r.build_error = f.what();
    return;
  }
  for (std::uint64_t id = 1; id <= 6; ++id)
    e->submit({.id = id, .prompt = std::vector<serving::token_id>(2 + id, static_cast<serving::token_id>(10 * id)),
               .max_output_tokens = 5});
  inj.before_start();
  e->start();
  inj.after_start();
  device_sampler hook{e->runner().backend().stream()};
  for (int guard = 0; !e->idle_queues() && guard < 200; ++guard) {
    try {
      const engine_step& s = e->step(hook);
      if (s.fault) {
        ++r.failed_steps;
        CHECK_FALSE(s.ran());
        CHECK_FALSE(s.fault->requests.empty());
      }
      if (s.ran())
        for (const auto& f : s.events->finished) r.outputs[f.id - 1] = f.output;
    } catch (const engine_fault& f) {
      r.fatal = f.fault();
      CHECK_THROWS_AS(e->step(hook), engine_fault);  // stopped: every later step says so
      break;
    }
    REQUIRE(e->scheduler().check_consistency() == "");
  }
  if (!r.fatal) {
    CHECK(e->idle_queues());
    CHECK(e->blocks().metrics().live_blocks == 0);  // no block leaked by a failed step
  } else {  // the failed step's requests wait to be recomputed; nothing runs
    CHECK(e->scheduler().running() == 0);
    for (serving::request_id id : r.fatal->requests)
      CHECK(std::count(e->scheduler().waiting_queue().begin(), e->scheduler().waiting_queue().end(), id) == 1);
  }
  r.stats = e->stats();
  r.scheduler = e->scheduler().stats();
  inj.before_teardown();
}  // the engine and its backend are destroyed here, under the schedule

// Runs serve_on between the injection's hooks; then counts what the schedule failed and what
// the device kept. Whatever happened, every failed release was reported once and only the
// objects of failed destroy calls are left (none destroyed twice: the device would hold fewer).
served serve_with(const injection& inj) {
  served r;
  gpu_toy model(64);
  model.allocating_rows = inj.allocating_rows;
  const std::size_t made = faults::log().size();
  const faults::live_objects before = faults::live();
  rungs::release_failure_handler previous =
      rungs::set_release_failure_handler([&](const rungs::cuda_error& f) { r.reported_releases.push_back(f.call()); });
  inj.before_build();
  serve_on(model, inj, r);
  faults::clear();
  faults::reset_device();
  rungs::set_release_failure_handler(std::move(previous));
  const std::vector<faults::injected> log = faults::log();
  for (std::size_t i = made; i < log.size(); ++i) {
    ++r.faults[log[i].call];
    r.destroy_faults += destroy_calls.count(log[i].call) ? 1 : 0;
  }
  r.leaked = static_cast<std::int64_t>(faults::live().objects()) - static_cast<std::int64_t>(before.objects());
  CHECK(r.leaked == r.destroy_faults);
  CHECK(static_cast<int>(r.reported_releases.size()) == r.destroy_faults);
  return r;
}

const served& clean_run() {
  static const served r = serve_with({});
  return r;
}

}  // namespace

// The call's usual error (the injector's table).
cudaError_t usual_error(const char* call) {
  for (const auto& c : faults::injectable_calls())
    if (std::string(c.call) == call) return c.error;
  throw std::invalid_argument(call);
}

TEST_CASE("device faults: capture, instantiation and upload faults fall back to eager, tokens unchanged") {
  const served& clean = clean_run();
  REQUIRE(clean.stats.capture_failures == 0);
  REQUIRE(clean.stats.replays > 0);
  for (const auto& o : clean.outputs) REQUIRE(o.size() == 5);
  for (const char* call : {"cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate", "cudaGraphUpload",
                           "cudaMemGetInfo"}) {
    INFO(call);
    // The 2nd startup capture fails at `call` (cudaMemGetInfo: called before and after each
    // capture, so its 3rd call); nothing before start() makes these calls.
    const std::uint64_t nth = std::string(call) == "cudaMemGetInfo" ? 3 : 2;
    const served r = serve_with({.before_start = [&] { faults::fail_nth(call, nth, usual_error(call)); }});
    CHECK(faults::log().back().call == call);
    CHECK(r.stats.capture_failures == 1);
    CHECK(r.failed_steps == 0);
    CHECK_FALSE(r.fatal);
    CHECK(r.outputs == clean.outputs);
  }
  // The forward allocates inside the capture of the 4-rung: the capture is invalidated.
  const served r = serve_with({.allocating_rows = 4});
  CHECK(r.stats.capture_failures == 1);
  CHECK(r.failed_steps == 0);
  CHECK(r.outputs == clean.outputs);
}

TEST_CASE("device faults: a failed launch, copy or allocation takes the step back; the retry gives the same tokens") {
  const served& clean = clean_run();
  // Counted from the end of the startup captures: the 3rd graph launch, the 2nd kernel launch
  // (the first step, 33 prompt tokens, runs eagerly), the 4th copy (an upload or the
  // sampler's), the 2nd upload's event record.
  for (auto [call, nth, error] : {std::tuple{"cudaGraphLaunch", 3, cudaErrorLaunchOutOfResources},
                                  std::tuple{"cudaLaunchKernel", 2, cudaErrorLaunchOutOfResources},
                                  std::tuple{"cudaMemcpyAsync", 4, cudaErrorInvalidValue},
                                  std::tuple{"cudaEventRecord", 2, cudaErrorInvalidValue}}) {
    INFO(call);
    const served r = serve_with({.after_start = [&] { faults::fail_nth(call, static_cast<std::uint64_t>(nth), error); }});
    CHECK(r.failed_steps == 1);
    CHECK(r.scheduler.aborted_steps == 1);
    CHECK_FALSE(r.fatal);
    CHECK(r.outputs == clean.outputs);  // recomputed from scratch: the same greedy tokens
    CHECK(r.scheduler.finished == 6);
  }
}

TEST_CASE("device faults: a sticky fault stops the engine, naming the step and its requests") {
  const served& clean = clean_run();
  for (const char* call : {"cudaLaunchKernel", "cudaGraphLaunch", "cudaStreamSynchronize"}) {
    INFO(call);
    const served r = serve_with({.after_start = [&] { faults::fail_nth(call, 2, cudaErrorIllegalAddress); }});
    REQUIRE(r.fatal);
    CHECK(r.fatal->fatal);
    CHECK_FALSE(r.fatal->requests.empty());
    CHECK(r.fatal->error.find("cudaErrorIllegalAddress") != std::string::npos);
    CHECK_THAT(describe(*r.fatal), Catch::StartsWith("engine: step " + std::to_string(r.fatal->step) + " failed on the device (") &&
                                       Catch::Contains("fatal: the device cannot continue; requests in flight, requeued:"));
    CHECK(r.scheduler.steps == r.fatal->step);  // the steps before it committed, it did not
    CHECK(r.scheduler.finished < static_cast<std::int64_t>(clean.outputs.size()));
  }
}

TEST_CASE("device faults: a fault while the engine is built is a cuda_error naming the call; nothing made is kept") {
  // The backend's constructor makes its stream and event; the runner's constructor calls its
  // setup(), which waits for the stream and allocates the workspace. Each fails in turn.
  for (auto [call, error] : {std::pair{"cudaStreamCreateWithFlags", cudaErrorMemoryAllocation},
                             std::pair{"cudaEventCreateWithFlags", cudaErrorMemoryAllocation},
                             std::pair{"cudaStreamSynchronize", cudaErrorInvalidResourceHandle},
                             std::pair{"cudaMalloc", cudaErrorMemoryAllocation}}) {
    INFO(call);
    const served r = serve_with({.before_build = [&] { faults::fail_nth(call, 1, error); }});
    REQUIRE(r.build_error_call);
    CHECK(*r.build_error_call == call);
    CHECK_THAT(r.build_error, Catch::StartsWith(std::string(call) + "(") &&
                                  Catch::EndsWith(std::string(": ") + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")"));
    CHECK(r.leaked == 0);  // the stream, the event: released when what came after them failed
    CHECK(r.reported_releases.empty());
  }
}

TEST_CASE("device faults: a failed destroy is reported once and never repeated; only its object is kept") {
  const served& clean = clean_run();
  // cudaGraphDestroy: the captured graph, destroyed once instantiated (the capture still
  // counts); the others: the backend's destructor (graphs, buffers, workspace, event, stream).
  for (auto [call, at_teardown] : {std::pair{"cudaGraphDestroy", false}, std::pair{"cudaGraphExecDestroy", true},
                                   std::pair{"cudaFree", true}, std::pair{"cudaFreeHost", true},
                                   std::pair{"cudaEventDestroy", true}, std::pair{"cudaStreamDestroy", true}}) {
    INFO(call);
    const auto fail = [&] { faults::fail_nth(call, 1, usual_error(call)); };
    const served r = at_teardown ? serve_with({.before_teardown = fail}) : serve_with({.before_start = fail});
    CHECK(r.destroy_faults == 1);
    CHECK(r.leaked == 1);
    CHECK(r.reported_releases == std::vector<std::string>{call});
    CHECK(r.stats.capture_failures == 0);
    CHECK_FALSE(r.fatal);
    CHECK(r.outputs == clean.outputs);
  }
}

// A seeded fault campaign: schedules `first` .. `first + count - 1`, each failing every
// injectable call with probability rate[seed % 3] over the engine's whole life: its backend's
// constructor and setup, the startup captures, the steps, the sampler's copies and the
// teardown. Every run must end in one of three ways: the engine could not be built (a
// cuda_error naming the failed call), it finished with the clean run's tokens, or it stopped
// with the documented fatal message; and in every run the device keeps only the objects of
// failed destroy calls, each reported once (serve_with).
struct campaign_result {
  int finished = 0, stopped = 0, not_built = 0;
  std::int64_t retried_steps = 0, faults = 0, destroy_faults = 0;
  std::map<std::string, int> by_call{};
};
campaign_result fault_campaign(std::uint64_t first, std::uint64_t count, std::array<double, 3> rate) {
  const served& clean = clean_run();
  campaign_result c;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    INFO("RUNGS_SIM_FAULT_SEED schedule " << seed << ", rate " << rate[seed % 3]);
    const served r = serve_with({.before_build = [&] { faults::fail_randomly(seed, rate[seed % 3]); }});
    c.retried_steps += r.failed_steps;
    c.destroy_faults += r.destroy_faults;
    for (const auto& [call, n] : r.faults) {
      c.by_call[call] += n;
      c.faults += n;
    }
    if (r.build_error_call) {
      ++c.not_built;
      INFO(r.build_error);
      CHECK(r.faults.count(*r.build_error_call) == 1);  // the error names the call the schedule failed
      CHECK_THAT(r.build_error, Catch::StartsWith(*r.build_error_call + "(") && Catch::Contains(" failed at "));
    } else if (r.fatal) {
      ++c.stopped;
      CHECK(r.fatal->fatal);
      CHECK_THAT(describe(*r.fatal), Catch::Matches("engine: step [0-9]+ failed on the device \\(.*\\); fatal: the device "
                                                    "cannot continue; requests in flight, requeued:( [1-6])+"));
    } else {
      ++c.finished;
      CHECK(r.outputs == clean.outputs);
    }
  }
  return c;
}

TEST_CASE("device faults: seeded random faults end with the clean tokens, a fatal stop or a failed build, never lost work") {
  const campaign_result c = fault_campaign(1, 12, {0.02, 0.05, 0.1});
  CHECK(c.faults >= 12);  // the schedules did fail calls
}

// The CI campaign (ctest engine_cuda_test.fault_campaign): RUNGS_FAULT_CAMPAIGN="first count".
// Across its schedules it fails every runtime call the engine, its CUDA backend, the test's
// forward (launches, cudaGetLastError) and its sampler make.
TEST_CASE("device faults: the seeded campaign", "[.campaign]") {
  const char* v = std::getenv("RUNGS_FAULT_CAMPAIGN");
  REQUIRE(v != nullptr);
  std::uint64_t first = 0, count = 0;
  REQUIRE(std::sscanf(v, "%lu %lu", &first, &count) == 2);
  const campaign_result c = fault_campaign(first, count, {0.01, 0.03, 0.1});
  std::printf("fault campaign: %llu schedules, %lld faults injected (%lld at destroy calls), %d finished with the clean "
              "tokens (%lld failed steps retried), %d stopped on a fatal fault, %d could not build the engine\n",
              static_cast<unsigned long long>(count), static_cast<long long>(c.faults),
              static_cast<long long>(c.destroy_faults), c.finished, static_cast<long long>(c.retried_steps), c.stopped,
              c.not_built);
  std::printf("faults by call:");
  for (const auto& [call, n] : c.by_call) std::printf(" %s %d", call.c_str(), n);
  std::printf("\n");
  for (const char* call :
       {"cudaStreamCreateWithFlags", "cudaEventCreateWithFlags", "cudaStreamSynchronize", "cudaMalloc",
        "cudaHostAlloc",  // the backend's cudaMallocHost(T**, n): cuda_runtime.h's template calls cudaHostAlloc
       
        "cudaMemcpyAsync", "cudaEventRecord", "cudaEventSynchronize", "cudaLaunchKernel", "cudaGetLastError",
        "cudaPeekAtLastError", "cudaMemGetInfo", "cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate",
        "cudaGraphUpload", "cudaGraphLaunch", "cudaGraphDestroy", "cudaGraphExecDestroy", "cudaFree", "cudaFreeHost",
        "cudaEventDestroy", "cudaStreamDestroy"}) {
    INFO(call);
    CHECK(c.by_call.count(call) == 1);
  }
  CHECK(c.not_built > 0);
  CHECK(c.stopped > 0);
  CHECK(c.finished > 0);
}
#endif
