// The engine with rungs' CPU reference attention as its forward: replayed (padded) steps give
// the same rows as eager (unpadded) steps, for decode and for ragged prefill batches, with a
// bf16 cache and with fp8 (E4M3, E5M2) caches.
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/reference_forward.hpp>

#include <catch2/catch.hpp>
#include <cmath>
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

TEST_CASE("reference_forward over an fp8 cache stores bf16(x) / scale of the head, per head or per tensor") {
  constexpr model_shape m = with_cache<gqa>(rungs::dtype::fp8_e4m3);
  const std::vector<float> per_head{0.25f, 4.0f}, per_tensor{0.5f};
  reference_forward<m> model(8, {.k = per_head, .v = per_tensor});
  ref_engine<lazy> e(token_ladder{{4}}, host_backend(std::ref(model), with_workspace<m>()),
                     {.timing = lazy{.eager_uses = 1 << 20}, .max_model_len = 16, .shape = run_shape::of(m, 8)});
  // One token (id 1, position 0) into block 0, slot 0: its key and value of channel c are
  // cos(0.37 - 0.07 c) and sin(0.185 + 0.29 c) (reference_forward's projection), rounded to bf16.
  batch_builder bb(1);
  e.step(bb.make(1, 0, 1, 0));
  const auto shape = rungs::attention::attention_shape::of(m, 8);
  for (int h = 0; h < m.num_kv_heads; ++h)
    for (int i = 0; i < m.head_dim; ++i) {
      const int c = h * m.head_dim + i;
      const auto k = static_cast<float>(rungs::bf16(static_cast<float>(std::cos(0.37 - 0.07 * c))));
      const auto v = static_cast<float>(rungs::bf16(static_cast<float>(std::sin(0.185 + 0.29 * c))));
      const auto at = static_cast<std::size_t>(shape.slot_offset(0, h) + i);
      CHECK(model.k_cache()[at].bits == rungs::e4m3(k / per_head[static_cast<std::size_t>(h)]).bits);
      CHECK(model.v_cache()[at].bits == rungs::e4m3(v / per_tensor[0]).bits);
    }
}

TEST_CASE("reference_forward refuses bad fp8 scales, naming the value") {
  constexpr model_shape m = with_cache<gqa>(rungs::dtype::fp8_e4m3);
  const std::vector<float> nan{std::nanf("")}, zero{0.0f}, negative{1.0f, -2.0f}, inf{INFINITY}, three{1, 1, 1};
  CHECK_THROWS_WITH(reference_forward<m>(8, {.k = nan}),
                    "rungs::attention::reference: k_scale[0] = nan must be finite and positive");
  CHECK_THROWS_WITH(reference_forward<m>(8, {.v = zero}),
                    "rungs::attention::reference: v_scale[0] = 0 must be finite and positive");
  CHECK_THROWS_WITH(reference_forward<m>(8, {.k = negative}),
                    "rungs::attention::reference: k_scale[1] = -2 must be finite and positive");
  CHECK_THROWS_WITH(reference_forward<m>(8, {.v = inf}),
                    "rungs::attention::reference: v_scale[0] = inf must be finite and positive");
  CHECK_THROWS_WITH(reference_forward<m>(8, {.k = three}),
                    "rungs::attention::reference: k_scale has 3 values; it needs 1 (per tensor) or num_kv_heads = 2 "
                    "(per head)");
  CHECK_THROWS_WITH(reference_forward<gqa>(8, {.k = zero}),
                    "rungs::attention::reference: k_scale is given for a cache of 16 bits or more (scales apply to fp8 "
                    "caches only)");
}

TEST_CASE("reference_forward checks its workspace") {
  reference_forward<gqa> model(8);
  ref_engine<startup> e(token_ladder{{4}}, host_backend(std::ref(model)), {.max_model_len = 16, .shape = run_shape::of(gqa, 8)});
  batch_builder bb(1);
  // Its capture's warm-up run already failed (the bucket stays eager); the eager step throws.
  CHECK_THROWS_WITH(e.step(bb.make(1)), "reference_forward: the workspace holds 0 bytes; this step needs 384 bytes");
  CHECK(e.stats().capture_failures == 1);
}
