// The engine on the GPU with rungs' PagedAttention kernels as its forward
// (attention_forward.cuh): replays match eager runs and the CPU reference on random decode
// batches for every bucket, with the decode kernel the planner picks (tensor cores at this
// group of 4) and with the SIMT decode forced, over a bf16 cache and over fp8 caches, and on
// random prefill/extend batches in prompt buckets with the planner's prefill kernel (tensor
// cores at this head dim of 64 over a 16-bit cache) and the SIMT one forced; padding never
// writes the cache. Exits 77 (skipped) when no GPU is visible.
#include <rungs/cuda/error.hpp>
#include <rungs/engine/attention_forward.cuh>
#include <rungs/engine/cuda_backend.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/reference_forward.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_support.cuh"
#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {

namespace ra = rungs::attention;

constexpr model_shape gqa{.dtype = rungs::dtype::bf16, .num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
                          .num_layers = 1};
constexpr model_shape with_cache(rungs::dtype cache) {
  model_shape m = gqa;
  m.dtype = cache;
  return m;
}
constexpr std::int64_t max_len = 256;
constexpr std::int64_t per_seq = max_len / gqa.block_size;
constexpr std::int64_t pool = 16 * per_seq * 4;

template <class Space, class Timing>
using gpu_engine = graph_runner<Space, largest_first, Timing, cuda_backend>;
// Prompt-phase buckets of (sequences, context): shapes of sequences x context tokens, which
// the forward runs with its prefill kernel.
using prompt_grid = grid_buckets<rungs::bucket_grid<2>>;

template <model_shape M>
std::vector<unsigned char> cache_bytes(const attention_forward<M>& f, bool values = false) {
  std::vector<unsigned char> h(static_cast<std::size_t>(f.config().shape.pool_elements()) *
                               sizeof(typename attention_forward<M>::cache_element));
  RUNGS_CUDA_CHECK(cudaMemcpy(h.data(), values ? f.v_cache() : f.k_cache(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

// The share of an fp8 pool's bytes the CUDA forward's cache write and reference_forward's agree
// on. They are not all equal: the forward's projection rounds __cosf/__sinf to bf16, the
// reference's std::cos/std::sin, and a value near a bf16 midpoint can land on the other side.
template <model_shape M>
double same_cache_share(const attention_forward<M>& f, const reference_forward<M>& r, bool values) {
  const std::vector<unsigned char> gpu = cache_bytes(f, values);
  const auto host = values ? r.v_cache() : r.k_cache();
  REQUIRE(gpu.size() == host.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) same += gpu[i] == host[i].bits;
  return static_cast<double>(same) / static_cast<double>(gpu.size());
}

// |a - b| <= tol (1 + |b|) element-wise; returns the largest |a - b|.
float check_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  REQUIRE(a.size() == b.size());
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::abs(a[i] - b[i]) <= tol + tol * std::abs(b[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

// The same batches through captured graphs, eager CUDA steps and the CPU reference (float64
// attention over the same cache type: reference_forward.hpp).
template <model_shape M, class Space = token_ladder>
struct three_ways {
  attention_forward<M> graphs_fwd, eager_fwd;
  reference_forward<M> host_fwd;
  gpu_engine<Space, startup> graphs;
  gpu_engine<Space, lazy> eager;
  graph_runner<Space, largest_first, lazy, host_backend> host;
  float tol;
  float worst = 0;  // largest difference from the reference so far

  three_ways(const Space& ladder, std::int64_t blocks, std::int64_t len, float tolerance,
             const ra::plan_options& options = {}, const ra::plan_options& prefill_options = {},
             const ra::reference::kv_scales& scales = {})
      : graphs_fwd(blocks, len, options, prefill_options, scales),
        eager_fwd(blocks, len, options, prefill_options, scales),
        host_fwd(blocks, scales),
        graphs(ladder, cuda_backend(std::ref(graphs_fwd), graphs_fwd.backend_options()),
               {.max_model_len = len, .shape = run_shape::of(M, blocks)}),
        eager(ladder, cuda_backend(std::ref(eager_fwd), eager_fwd.backend_options()),
              {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = len, .shape = run_shape::of(M, blocks)}),
        host(ladder, host_backend(std::ref(host_fwd), {.workspace_bytes = reference_forward<M>::workspace_bytes}),
             {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = len, .shape = run_shape::of(M, blocks)}),
        tol(tolerance) {
    graphs.start();
  }

  // One step on all three: the replay must match the eager run and the reference.
  void step(std::span<const sequence> seqs, phase ph = phase::decode) {
    auto a = graphs.step(seqs, ph);
    auto b = eager.step(seqs, ph);
    auto c = host.step(seqs, ph);
    REQUIRE(a.run == run_kind::replay);
    REQUIRE(b.run == run_kind::eager);
    std::vector<float> replayed = host_rows(a.rows, graphs.backend().stream());
    check_close(replayed, host_rows(b.rows, eager.backend().stream()), tol);
    worst = std::max(worst, check_close(replayed, std::vector<float>(c.rows.begin(), c.rows.end()), tol));
  }
};

// Random decode batches filling every bucket of 1-16 sequences, twice each.
template <model_shape M>
void check_every_bucket(const ra::plan_options& options, ra::decode_kernel kernel, float tol,
                        const ra::reference::kv_scales& scales = {}) {
  const token_ladder ladder{{1, 2, 4, 8, 16}};
  three_ways<M> run(ladder, pool, max_len, tol, options, {}, scales);
  REQUIRE(run.graphs_fwd.decode_kernel() == kernel);
  REQUIRE(run.graphs.stats().captures == 5);
  std::mt19937 rng(11);
  batch_builder bb(per_seq);
  std::int64_t previous = 0;
  for (std::int64_t rung : ladder.ladder().rungs()) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      std::int64_t n = std::uniform_int_distribution<std::int64_t>(previous + 1, rung)(rng);
      std::int64_t context = std::uniform_int_distribution<std::int64_t>(0, max_len - 1)(rng);
      run.step(bb.make(n, context, 1, static_cast<std::int32_t>(rung * 10 + repeat)));
      CHECK(cache_bytes(run.graphs_fwd) == cache_bytes(run.eager_fwd));  // padding wrote nothing
    }
    previous = rung;
  }
  if (!scales.k.empty()) {
    // The cache write divides by the scales: the same fp8 codes as the reference's (a write
    // that ignored them would agree on few bytes; the reads' use of them is checked above).
    const double k_share = same_cache_share(run.graphs_fwd, run.host_fwd, false);
    const double v_share = same_cache_share(run.graphs_fwd, run.host_fwd, true);
    std::printf("fp8 cache bytes equal to the reference's: K %.5f, V %.5f\n", k_share, v_share);
    CHECK(k_share > 0.99);
    CHECK(v_share > 0.99);
  }
  std::printf("attention_forward %s cache%s, %s decode: largest difference from the float64 reference %.3g\n",
              std::string(rungs::name(M.dtype)).c_str(), scales.k.empty() ? "" : " (scaled)", ra::name(kernel),
              static_cast<double>(run.worst));
}
}  // namespace

// The tensor-core decode, forced: the planner's kernel for group 4 (these shapes) depends on
// the GPU (plan.hpp, decode_wants_tensor_cores).
const ra::plan_options on_tensor_cores{.kernel = ra::decode_kernel::tensor_cores};

TEST_CASE("paged-attention forward: replay equals eager and the CPU reference, every bucket, both decode kernels") {
  check_every_bucket<gqa>(on_tensor_cores, ra::decode_kernel::tensor_cores, 2e-2f);
  check_every_bucket<gqa>({.kernel = ra::decode_kernel::simt}, ra::decode_kernel::simt, 2e-2f);
}

TEST_CASE("paged-attention forward over fp8 caches: the cache write quantises, decode dequantises") {
  check_every_bucket<with_cache(rungs::dtype::fp8_e4m3)>(on_tensor_cores, ra::decode_kernel::tensor_cores, 2e-2f);
  check_every_bucket<with_cache(rungs::dtype::fp8_e4m3)>({.kernel = ra::decode_kernel::simt}, ra::decode_kernel::simt,
                                                         2e-2f);
  check_every_bucket<with_cache(rungs::dtype::fp8_e5m2)>(on_tensor_cores, ra::decode_kernel::tensor_cores, 2e-2f);
}

// Random prefill/extend batches (2-9 new tokens per sequence after 0-40 cached ones) in every
// prompt bucket of 1, 2 and 4 sequences of up to 64 tokens, twice each: replays of the
// prefill kernel's graphs, eager steps (their live shapes' plans) and the reference agree.
template <model_shape M>
void check_prefill_buckets(const ra::plan_options& prefill_options, ra::attention_kernel kernel, float tol,
                           const ra::reference::kv_scales& scales = {}) {
  const prompt_grid grid(rungs::bucket_grid<2>({{1, 64}, {2, 64}, {4, 64}}), phase::prompt);
  three_ways<M, prompt_grid> run(grid, pool, max_len, tol, {}, prefill_options, scales);
  REQUIRE(run.graphs_fwd.prefill_kernel() == kernel);
  REQUIRE(run.graphs.stats().captures == 3);
  std::mt19937 rng(17);
  batch_builder bb(per_seq);
  for (std::int64_t n : {1, 2, 4}) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      const std::int64_t query = std::uniform_int_distribution<std::int64_t>(2, 9)(rng);
      const std::int64_t context = std::uniform_int_distribution<std::int64_t>(0, 40)(rng);
      run.step(bb.make(n, context, query, static_cast<std::int32_t>(n * 10 + repeat)), phase::prompt);
      CHECK(cache_bytes(run.graphs_fwd) == cache_bytes(run.eager_fwd));  // padding wrote nothing
    }
  }
  std::printf("attention_forward %s cache%s, %s prefill: largest difference from the float64 reference %.3g\n",
              std::string(rungs::name(M.dtype)).c_str(), scales.k.empty() ? "" : " (scaled)", ra::name(kernel),
              static_cast<double>(run.worst));
}

TEST_CASE("paged-attention forward: prefill steps run the planner's prefill kernel, replay equals eager and the "
          "CPU reference") {
  check_prefill_buckets<gqa>({}, ra::attention_kernel::tensor_cores, 2e-2f);
  check_prefill_buckets<gqa>({.kernel = ra::attention_kernel::simt}, ra::attention_kernel::simt, 2e-2f);
  // Over an E4M3 cache the planner's prefill is the tensor-core one too.
  check_prefill_buckets<with_cache(rungs::dtype::fp8_e4m3)>({}, ra::attention_kernel::tensor_cores, 2e-2f);
}

TEST_CASE("paged-attention forward over fp8 caches with k/v scales, per KV head and per tensor") {
  // Keys are in [-1, 1] and values in [-1, 3.8]: scales that move them across E4M3's and
  // E5M2's range (x / 0.05 up to 76) without saturating; per-head k with a per-tensor v (the
  // forward repeats it per head: the kernels take one layout).
  const std::vector<float> k_heads{0.05f, 3.0f}, v_tensor{0.3f}, k_tensor{1.7f}, v_heads{0.6f, 0.09f};
  check_every_bucket<with_cache(rungs::dtype::fp8_e4m3)>(on_tensor_cores, ra::decode_kernel::tensor_cores, 2e-2f,
                                                         {.k = k_heads, .v = v_tensor});
  check_every_bucket<with_cache(rungs::dtype::fp8_e5m2)>({.kernel = ra::decode_kernel::simt}, ra::decode_kernel::simt,
                                                         2e-2f, {.k = k_tensor, .v = v_heads});
  check_prefill_buckets<with_cache(rungs::dtype::fp8_e4m3)>({}, ra::attention_kernel::tensor_cores, 2e-2f,
                                                            {.k = k_heads, .v = v_heads});
}

TEST_CASE("paged-attention forward: bad fp8 scales are refused when it is built, naming the value") {
  const std::vector<float> nan{std::nanf("")}, three{1, 1, 1}, one{1.0f};
  CHECK_THROWS_WITH((attention_forward<with_cache(rungs::dtype::fp8_e4m3)>(pool, max_len, {}, {}, {.v = nan})),
                    "rungs::attention::reference: v_scale[0] = nan must be finite and positive");
  CHECK_THROWS_WITH((attention_forward<with_cache(rungs::dtype::fp8_e5m2)>(pool, max_len, {}, {}, {.k = three})),
                    "rungs::attention::reference: k_scale has 3 values; it needs 1 (per tensor) or num_kv_heads = 2 "
                    "(per head)");
  CHECK_THROWS_WITH((attention_forward<gqa>(pool, max_len, {}, {}, {.k = one})),
                    "rungs::attention::reference: k_scale is given for a cache of 16 bits or more (scales apply to "
                    "fp8 caches only)");
}

TEST_CASE("paged-attention forward: bad plan options are refused when it is built") {
  CHECK_THROWS_WITH((attention_forward<gqa>(pool, max_len, {.split_tokens = -1})),
                    "plan_options.split_tokens = -1 must be 0 (choose) or positive");
  CHECK_THROWS_WITH((attention_forward<gqa>(pool, max_len, {}, {.split_tokens = -2})),
                    "plan_options.split_tokens = -2 must be 0 (choose) or positive");
}

TEST_CASE("paged-attention forward: long contexts take the split-KV path within the sized workspace") {
  // max_model_len 4096 on a GPU of dozens of SMs: batches of up to 16 sequences split the KV
  // (2 KV heads' worth of CTAs per sequence cannot fill the GPU) and go through the merge
  // kernel. Eager steps plan at their own context, and 16 sequences of 2049-3456 tokens split
  // into more pieces than 16 of 4096 would (on 132 SMs, 9 against 8): the workspace the
  // forward asked the backend for must still hold them (decode_workspace_bound).
  constexpr std::int64_t long_len = 4096, long_per_seq = long_len / gqa.block_size;
  three_ways<gqa> run(token_ladder{{1, 4, 16}}, 16 * long_per_seq, long_len, 2e-2f);
  REQUIRE(run.graphs.stats().captures == 3);
  std::mt19937 rng(29);
  batch_builder bb(long_per_seq);
  struct batch_case {
    std::int64_t n, lo, hi;  // sequences, context range
  };
  const batch_case cases[] = {{16, 2049, 3456}, {16, 3457, long_len - 1}, {4, 600, 2000}, {1, 300, long_len - 1}, {13, 1000, 4000}};
  for (const auto& [n, lo, hi] : cases) {
    const std::int64_t context = std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    run.step(bb.make(n, context, 1, static_cast<std::int32_t>(n * 100 + lo)));
  }
}

// ---- Device faults (docs/engine.md, "Device faults"): the CPU device fails calls on purpose --
#if __has_include(<rungs_sim/faults.hpp>)
#include <rungs_sim/faults.hpp>

#include <tuple>

TEST_CASE("paged-attention forward: a fault while it is built is a cuda_error naming the call; nothing made is kept") {
  namespace faults = rungs::sim::faults;
  using fp8_forward = attention_forward<with_cache(rungs::dtype::fp8_e4m3)>;
  const std::vector<float> one{1.0f};
  // The constructor's calls in order: the device query (the planner's view of the GPU), the K
  // and V pools and their zeroing, the scales (fp8 with a k_scale) and their copy, the wait.
  for (auto [call, nth, error] : {std::tuple{"cudaGetDevice", 1, cudaErrorInitializationError},
                                  std::tuple{"cudaDeviceGetAttribute", 3, cudaErrorInitializationError},
                                  std::tuple{"cudaMalloc", 1, cudaErrorMemoryAllocation},
                                  std::tuple{"cudaMalloc", 2, cudaErrorMemoryAllocation},
                                  std::tuple{"cudaMemset", 2, cudaErrorInvalidValue},
                                  std::tuple{"cudaMalloc", 3, cudaErrorMemoryAllocation},
                                  std::tuple{"cudaMemcpy", 1, cudaErrorInvalidValue},
                                  std::tuple{"cudaDeviceSynchronize", 1, cudaErrorInvalidValue}}) {
    INFO(call << " call " << nth);
    const faults::live_objects before = faults::live();
    faults::fail_nth(call, static_cast<std::uint64_t>(nth), error);
    try {
      fp8_forward f(pool, max_len, {}, {}, {.k = one});
      FAIL("built");
    } catch (const rungs::cuda_error& e) {
      CHECK(e.call() == call);
      CHECK(e.code() == error);
    }
    faults::clear();
    CHECK(faults::live() == before);  // the pools made before the failed call are freed
  }
  // A failed cudaFree in the destructor: reported once (not thrown, not repeated); only that
  // allocation is kept.
  const faults::live_objects before = faults::live();
  const std::int64_t reported = rungs::release_failures();
  std::vector<std::string> calls;
  rungs::release_failure_handler previous =
      rungs::set_release_failure_handler([&](const rungs::cuda_error& e) { calls.push_back(e.call()); });
  {
    fp8_forward f(pool, max_len, {}, {}, {.k = one});
    faults::fail_nth("cudaFree", 2, cudaErrorInvalidValue);
  }
  faults::clear();
  rungs::set_release_failure_handler(std::move(previous));
  CHECK(calls == std::vector<std::string>{"cudaFree"});
  CHECK(rungs::release_failures() == reported + 1);
  CHECK(faults::live().device_allocations == before.device_allocations + 1);
  CHECK(cudaGetLastError() == cudaSuccess);  // the report consumed the failed call's error
}
#endif
