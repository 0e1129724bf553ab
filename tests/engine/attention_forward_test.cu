// The engine on the GPU with rungs' PagedAttention kernels as its forward
// (attention_forward.cuh): replays match eager runs and the CPU reference within bf16
// tolerance on random decode batches for every bucket, and padding never writes the cache.
// Exits 77 (skipped) when no GPU is visible.
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
#include <vector>

#include "cuda_support.cuh"
#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {

constexpr model_shape gqa{.dtype = rungs::dtype::bf16, .num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
                          .num_layers = 1};
constexpr std::int64_t max_len = 256;
constexpr std::int64_t per_seq = max_len / gqa.block_size;
constexpr std::int64_t pool = 16 * per_seq * 4;

template <class Timing>
using gpu_engine = graph_runner<token_ladder, largest_first, Timing, cuda_backend>;

cuda_backend::options sized_for(const attention_forward<gqa>& f) { return f.backend_options(); }

std::vector<unsigned char> cache_bytes(const attention_forward<gqa>& f) {
  std::vector<unsigned char> h(static_cast<std::size_t>(f.config().shape.pool_elements()) * 2);
  RUNGS_CUDA_CHECK(cudaMemcpy(h.data(), f.k_cache(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(std::abs(a[i] - b[i]) <= 2e-2f + 2e-2f * std::abs(b[i]));
}

// The same batches through captured graphs, eager CUDA steps and the CPU reference.
struct three_ways {
  attention_forward<gqa> graphs_fwd, eager_fwd;
  reference_forward<gqa> host_fwd;
  gpu_engine<startup> graphs;
  gpu_engine<lazy> eager;
  graph_runner<token_ladder, largest_first, lazy, host_backend> host;

  three_ways(const token_ladder& ladder, std::int64_t blocks, std::int64_t len)
      : graphs_fwd(blocks, len),
        eager_fwd(blocks, len),
        host_fwd(blocks),
        graphs(ladder, cuda_backend(std::ref(graphs_fwd), sized_for(graphs_fwd)),
               {.max_model_len = len, .shape = run_shape::of(gqa, blocks)}),
        eager(ladder, cuda_backend(std::ref(eager_fwd), sized_for(eager_fwd)),
              {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = len, .shape = run_shape::of(gqa, blocks)}),
        host(ladder, host_backend(std::ref(host_fwd), {.workspace_bytes = reference_forward<gqa>::workspace_bytes}),
             {.timing = lazy{.eager_uses = 1 << 30}, .max_model_len = len, .shape = run_shape::of(gqa, blocks)}) {
    graphs.start();
  }

  // One step on all three: the replay must match the eager run and the reference.
  void step(std::span<const sequence> seqs) {
    auto a = graphs.step(seqs);
    auto b = eager.step(seqs);
    auto c = host.step(seqs);
    REQUIRE(a.run == run_kind::replay);
    REQUIRE(b.run == run_kind::eager);
    std::vector<float> replayed = host_rows(a.rows, graphs.backend().stream());
    check_close(replayed, host_rows(b.rows, eager.backend().stream()));
    check_close(replayed, std::vector<float>(c.rows.begin(), c.rows.end()));
  }
};
}  // namespace

TEST_CASE("paged-attention forward: replay equals eager and the CPU reference, every bucket") {
  const token_ladder ladder{{1, 2, 4, 8, 16}};
  three_ways run(ladder, pool, max_len);
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
}

TEST_CASE("paged-attention forward: long contexts take the split-KV path within the sized workspace") {
  // max_model_len 4096 on a GPU of dozens of SMs: batches of up to 16 sequences split the KV
  // (2 KV heads' worth of CTAs per sequence cannot fill the GPU) and go through the merge
  // kernel. Eager steps plan at their own context, and 16 sequences of 2049-3456 tokens split
  // into more pieces than 16 of 4096 would (on 132 SMs, 9 against 8): the workspace the
  // forward asked the backend for must still hold them (decode_workspace_bound).
  constexpr std::int64_t long_len = 4096, long_per_seq = long_len / gqa.block_size;
  three_ways run(token_ladder{{1, 4, 16}}, 16 * long_per_seq, long_len);
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
