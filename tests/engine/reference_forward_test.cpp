// The engine with rungs' CPU reference attention as its forward: replayed (padded) steps give
// the same rows as eager (unpadded) steps, for decode and for ragged prefill batches, with a
// bf16 cache and with fp8 (E4M3, E5M2) caches.
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/reference_forward.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
constexpr model_shape gqa{.dtype = rungs::dtype::bf16, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 8, .block_size = 4,
                          .num_layers = 1};
template <model_shape M>
constexpr model_shape with_cache(rungs::dtype t) {
  model_shape m = M;
  m.dtype = t;
  return m;
}
template <class Timing>
using ref_engine = graph_runner<token_ladder, largest_first, Timing, host_backend>;
template <model_shape M = gqa>
host_backend::options with_workspace() { return {.workspace_bytes = reference_forward<M>::workspace_bytes}; }

template <model_shape Model>
void check_replay_equals_eager() {
  constexpr std::int64_t blocks = 256;
  reference_forward<Model> graphs_model(blocks), eager_model(blocks);
  ref_engine<startup> graphs(token_ladder{{1, 2, 4, 8, 16, 32, 64}}, host_backend(std::ref(graphs_model), with_workspace<Model>()), {.max_model_len = 64, .shape = run_shape::of(Model, blocks)});
  ref_engine<lazy> eager(token_ladder{{64}}, host_backend(std::ref(eager_model), with_workspace<Model>()), {.timing = lazy{.eager_uses = 1 << 20}, .max_model_len = 64, .shape = run_shape::of(Model, blocks)});
  std::mt19937 rng(5);
  batch_builder bb(16);
  for (int step = 0; step < 30; ++step) {
    bool prefill = step % 3 == 0;
    std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, prefill ? 4 : 16)(rng);
    std::int64_t query = prefill ? std::uniform_int_distribution<std::int64_t>(2, 12)(rng) : 1;
    std::int64_t context = std::uniform_int_distribution<std::int64_t>(0, 40)(rng);
    auto seqs = bb.make(n, context, query, step);
    auto a = graphs.step(seqs);
    std::vector<float> replayed(a.rows.begin(), a.rows.end());
    auto b = eager.step(seqs);
    REQUIRE(a.run == run_kind::replay);
    CHECK(replayed == std::vector<float>(b.rows.begin(), b.rows.end()));
    CHECK(std::equal(graphs_model.k_cache().begin(), graphs_model.k_cache().end(), eager_model.k_cache().begin(),
                     [](auto x, auto y) { return x.bits == y.bits; }));
  }
  CHECK(graphs.stats().padded_tokens > 0);
}
}  // namespace

TEST_CASE("reference attention: replayed rows equal eager rows, decode and ragged prefill") {
  check_replay_equals_eager<gqa>();
}

TEST_CASE("reference attention over fp8 caches (E4M3, E5M2): replayed rows equal eager rows") {
  static_assert(std::is_same_v<reference_forward<with_cache<gqa>(rungs::dtype::fp8)>::element, rungs::e4m3>);
  check_replay_equals_eager<with_cache<gqa>(rungs::dtype::fp8_e4m3)>();
  check_replay_equals_eager<with_cache<gqa>(rungs::dtype::fp8_e5m2)>();
}

TEST_CASE("reference_forward checks its workspace") {
  reference_forward<gqa> model(8);
  ref_engine<startup> e(token_ladder{{4}}, host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(gqa, 8)});
  batch_builder bb(1);
  // Its capture's warm-up run already failed (the bucket stays eager); the eager step throws.
  CHECK_THROWS_WITH(e.step(bb.make(1)), "reference_forward: the workspace holds 0 bytes; this step needs 384 bytes");
  CHECK(e.stats().capture_failures == 1);
}
