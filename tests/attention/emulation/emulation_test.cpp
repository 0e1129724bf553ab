// The attention kernels' own source (kernels/rungs/attention/detail/kernels.cuh and agent.cuh),
// compiled by the host compiler and run on the CPU by the SIMT emulator (shim/simt.hpp), against
// the host reference. It checks what can be checked without a GPU: index arithmetic, masking,
// split ranges and the merge, the pipeline's stage use (copies land only at their wait), the
// barriers and lane masks (a mismatch deadlocks and is reported), alignment of vector accesses,
// and, under the sanitize preset, every global access against its buffer's bounds. It does not
// replace the GPU tests (label cuda): real shuffles, cp.async, timing and occupancy are not
// emulated. A few cases cover every code path: each head-dim geometry (8, 16 with padding, 32
// lanes per row), decode groups 1, 3, 8 and 16 (two row groups), static and dynamic block sizes,
// blocks smaller and larger than a tile, no split, small and planner-chosen splits with empty
// ones, strided queries, length-0 and padded rows.
#include <simt.hpp>  // first: CUDA keywords for the kernel source

#include <rungs/attention/detail/kernels.cuh>
#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs/blocks.hpp>
#include <rungs/attention/reference.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../compare.hpp"
#include "../paged_problem.hpp"

namespace ra = rungs::attention;
namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;
using namespace rungs_test;

namespace {

template <class Params>
void emulate(void (*kernel)(Params), rd::launch_grid grid, int threads, const Params& p) {
  simt::launch({grid.x, grid.y, grid.z}, threads, [&] { kernel(p); });
}

// The launch sequences of launch_decode / launch_prefill / launch_cache_write
// (paged_attention.cuh), with the emulator in place of <<<>>>.
template <class T, int D, int B, int G, ra::score_mod Mod>
void emulate_decode(const ra::decode_plan& plan, const ra::decode_args& a) {
  ra::validate(plan, a);
  ra::check_score_mod(Mod, plan.config, a.sinks, "decode");
  emulate(&rd::paged_attention_kernel<T, D, B, geo::decode_rows_per_thread(G), geo::decode_row_groups(G), true,
                                      ra::score_mod_bits(Mod)>,
          rd::decode_grid(plan), geo::threads, rd::decode_params(plan, a));
  if (plan.split()) {
    const rd::merge_params m = rd::decode_merge_params(plan, a);
    emulate(&rd::merge_splits_kernel<T, D, Mod.sinks>, rd::merge_grid(m), 32 * geo::merge_warps, m);
  }
}

template <class T, int D, int B, ra::score_mod Mod>
void emulate_prefill(const ra::prefill_plan& plan, const ra::prefill_args& a) {
  ra::validate(plan, a);
  ra::check_score_mod(Mod, plan.config, a.sinks, "prefill");
  emulate(&rd::paged_attention_kernel<T, D, B, geo::prefill_rows_per_thread, geo::thread_rows(D), false,
                                      ra::score_mod_bits(Mod)>,
          rd::prefill_grid(plan), geo::threads, rd::prefill_params(plan, a));
  if (plan.split()) {
    const rd::merge_params m = rd::prefill_merge_params(plan, a);
    emulate(&rd::merge_splits_kernel<T, D, Mod.sinks>, rd::merge_grid(m), 32 * geo::merge_warps, m);
  }
}

template <class T, int D>
void emulate_cache_write(const ra::attention_config& c, const ra::cache_write_args& a) {
  ra::validate(c, a);
  const rd::cache_write_params p = rd::make_cache_write_params(c, a);
  emulate(&rd::cache_write_kernel<T, D>, rd::cache_write_grid(p, D), geo::cache_write_threads, p);
}

template <class T>
ra::dtype type_of() {
  return std::is_same_v<T, rungs::f16> ? ra::dtype::fp16 : ra::dtype::bf16;
}

// Decode over 3 sequences (the second of length 0) and a padded row, under each split size
// (0: the planner's, for a 4-SM device).
template <class T, int D, int B, int G, ra::score_mod Mod = ra::score_mod{}>
void check_decode(int block_size, int kv_heads, std::initializer_list<int> split_sizes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4;
  const int max_len = 2 * geo::tile_tokens(D) + 11;
  const int max_context = max_len + 25;
  std::vector<std::int32_t> lens = random_lengths(rng, 2, max_len, block_size);
  lens.insert(lens.begin() + 1, 0);
  const std::int64_t stride = rungs::blocks_for(max_context, block_size) + 2;
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = G * kv_heads, .num_kv_heads = kv_heads, .head_dim = D, .block_size = block_size}, lens, {},
      stride);
  const ra::attention_shape& s = p.shape;
  const auto pools = make_pools<T>(rng, p);
  const std::int64_t row = s.q_row_elements(), q_stride = row + 8;
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(kMaxBatch * row));
  std::vector<T> q_strided(static_cast<std::size_t>(kMaxBatch * q_stride), poison<T>());
  for (int b = 0; b < kMaxBatch; ++b) std::copy_n(q.begin() + b * row, row, q_strided.begin() + b * q_stride);
  const mod_values mod = draw_mod_values<Mod>(rng, s.num_qo_heads, 21);  // nothing drawn for the default
  std::vector<double> want(static_cast<std::size_t>(3 * row));
  ra::reference::decode<T, T, double>(s, pools.k, pools.v, q, lens, {p.tables, p.table_stride}, 0.3, want,
                                      {mod.values, mod.sinks});

  for (int split : split_sizes) {
    const ra::attention_config config{type_of<T>(), s, 0.3f, mod.values};
    const ra::decode_plan plan = ra::plan_decode(config, {.max_batch = kMaxBatch, .max_context = max_context}, {4, 90},
                                                 {.split_tokens = split});
    std::vector<std::int32_t> lens_dev(kMaxBatch, -1), tables(static_cast<std::size_t>(kMaxBatch * stride), -1000000);
    const auto spans = p.block_spans();
    ra::write_decode_step(plan, lens, spans, lens_dev, tables, stride);
    std::vector<T> out(static_cast<std::size_t>(kMaxBatch * row), poison<T>());
    // Workspace as floats (16-byte aligned), poisoned.
    std::vector<float4> workspace((plan.workspace.bytes + 15) / 16,
                                  make_float4(std::nanf(""), std::nanf(""), std::nanf(""), std::nanf("")));
    const bool strided = plan.split();
    emulate_decode<T, D, B, G, Mod>(plan, {.q = strided ? q_strided.data() : q.data(),
                                      .q_stride = strided ? q_stride : 0,
                                      .k_cache = pools.k.data(),
                                      .v_cache = pools.v.data(),
                                      .block_tables = tables.data(),
                                      .block_table_stride = stride,
                                      .seq_lens = lens_dev.data(),
                                      .out = out.data(),
                                      .workspace = workspace.data(),
                                      .workspace_bytes = workspace.size() * 16,
                                      .sinks = Mod.sinks ? mod.sinks.data() : nullptr});
    const std::string what = "decode, " + std::to_string(plan.num_splits) + " splits of " + std::to_string(plan.split_tokens);
    require_close(out, want, row, 0, 3, what);
    require_zero_rows(out, row, 1, 2, what + ": the length-0 sequence");
    require_zero_rows(out, row, 3, kMaxBatch, what + ": the padded row");
  }
}

// Prefill over 3 sequences (an extend, a pure prefill, one without new tokens) and a padded row.
template <class T, int D, int B, ra::score_mod Mod = ra::score_mod{}>
void check_prefill(int block_size, int group, std::initializer_list<int> split_sizes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4, kMaxQ = 20;
  const int max_context = 2 * geo::tile_tokens(D) + 17;
  const std::vector<std::int32_t> kv_lens = {max_context - 6, 13, 9};
  const std::vector<std::int32_t> q_lens = {kMaxQ, 13, 0};
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = group, .num_kv_heads = 1, .head_dim = D, .block_size = block_size}, kv_lens, q_lens);
  const ra::attention_shape& s = p.shape;
  const auto pools = make_pools<T>(rng, p);
  const std::int64_t row = s.q_row_elements();
  const int max_total_q = kMaxBatch * kMaxQ;
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(max_total_q * row));
  const mod_values mod = draw_mod_values<Mod>(rng, s.num_qo_heads, 7);  // nothing drawn for the default
  std::vector<double> want(static_cast<std::size_t>(p.total_q() * row));
  ra::reference::prefill<T, T, double>(s, pools.k, pools.v, q, p.q_indptr, kv_lens, {p.tables, p.table_stride}, 0.0,
                                       want, {mod.values, mod.sinks});
  for (int split : split_sizes) {
    const ra::attention_config config{type_of<T>(), s, 0.0f, mod.values};
    const ra::prefill_plan plan = ra::plan_prefill(
        config, {.max_batch = kMaxBatch, .max_q_len = kMaxQ, .max_total_q = max_total_q, .max_context = max_context},
        {4, 90}, {.split_tokens = split});
    std::vector<std::int32_t> indptr(kMaxBatch + 1), lens(kMaxBatch);
    std::vector<std::int32_t> tables(static_cast<std::size_t>(kMaxBatch * plan.max_blocks_per_seq), -1000000);
    const auto spans = p.block_spans();
    ra::write_prefill_step(plan, q_lens, kv_lens, spans, indptr, lens, tables);
    std::vector<T> out(static_cast<std::size_t>(max_total_q * row), poison<T>());
    std::vector<float4> workspace((plan.workspace.bytes + 15) / 16,
                                  make_float4(std::nanf(""), std::nanf(""), std::nanf(""), std::nanf("")));
    emulate_prefill<T, D, B, Mod>(plan, {.q = q.data(),
                                    .k_cache = pools.k.data(),
                                    .v_cache = pools.v.data(),
                                    .block_tables = tables.data(),
                                    .q_indptr = indptr.data(),
                                    .kv_lens = lens.data(),
                                    .out = out.data(),
                                    .workspace = workspace.data(),
                                    .workspace_bytes = workspace.size() * 16,
                                    .sinks = Mod.sinks ? mod.sinks.data() : nullptr});
    const std::string what = "prefill, " + std::to_string(plan.q_tiles) + " q tiles, " +
                             std::to_string(plan.num_splits) + " splits of " + std::to_string(plan.split_tokens);
    require_close(out, want, row, 0, p.total_q(), what);
    std::int64_t touched = 0;
    for (std::size_t i = static_cast<std::size_t>(p.total_q() * row); i < out.size(); ++i) touched += !is_nan(out[i]);
    INFO(what);
    CHECK(touched == 0);
  }
}

}  // namespace

TEST_CASE("emulated decode: head dim 128, 16 lanes per row, group 4, dynamic block size 16") {
  check_decode<rungs::bf16, 128, ra::dynamic_block_size, 4>(16, 2, {100000, 48, 33}, 1);
}

TEST_CASE("emulated decode: head dim 80 (10 of 16 lanes), group 3, blocks of 8 (4 per tile)") {
  check_decode<rungs::f16, 80, ra::dynamic_block_size, 3>(8, 2, {100000, 40}, 2);
}

TEST_CASE("emulated decode: head dim 256, 32 lanes per row, group 16 in two row groups, static block size 32") {
  check_decode<rungs::bf16, 256, 32, 16>(32, 1, {100000, 24}, 3);
}

TEST_CASE("emulated decode: head dim 64, 8 lanes per row, group 1, blocks of 128 (larger than a tile)") {
  check_decode<rungs::f16, 64, ra::dynamic_block_size, 1>(128, 2, {100000, 100}, 4);
}

TEST_CASE("emulated decode: head dim 96, group 8, static block size 64") {
  check_decode<rungs::bf16, 96, 64, 8>(64, 1, {100000, 32}, 5);
}

TEST_CASE("emulated decode: the other groups (2, 5, 6, 7) and head dim 256 with a full row group of 8") {
  check_decode<rungs::f16, 128, ra::dynamic_block_size, 2>(32, 2, {100000, 20}, 11);
  check_decode<rungs::bf16, 64, ra::dynamic_block_size, 5>(16, 1, {100000}, 12);
  check_decode<rungs::f16, 96, ra::dynamic_block_size, 6>(8, 1, {40}, 13);
  check_decode<rungs::bf16, 80, ra::dynamic_block_size, 7>(64, 1, {100000}, 14);
  check_decode<rungs::f16, 256, ra::dynamic_block_size, 8>(128, 1, {100000, 16}, 15);
}

TEST_CASE("emulated prefill: head dim 128, group 4, blocks of 16, with and without splits") {
  check_prefill<rungs::bf16, 128, ra::dynamic_block_size>(16, 4, {100000, 24}, 6);
}

TEST_CASE("emulated prefill: head dim 80, group 3, blocks of 8, split") {
  check_prefill<rungs::f16, 80, ra::dynamic_block_size>(8, 3, {40}, 7);
}

TEST_CASE("emulated prefill: head dim 64 (64 rows per CTA), group 8, static block size 32") {
  check_prefill<rungs::f16, 64, 32>(32, 8, {100000}, 8);
}

TEST_CASE("emulated prefill: group 16 (rows span several tokens per thread row), head dim 96") {
  check_prefill<rungs::bf16, 96, ra::dynamic_block_size>(64, 16, {100000, 50}, 16);
}

TEST_CASE("emulated prefill: head dim 256, group 1, blocks of 128") {
  check_prefill<rungs::bf16, 256, ra::dynamic_block_size>(128, 1, {100000}, 9);
}

TEST_CASE("emulated decode and prefill with a sliding window, soft-cap and sinks (with and without splits)") {
  check_decode<rungs::f16, 128, ra::dynamic_block_size, 4, all_score_mods>(16, 2, {100000, 24}, 17);
  check_prefill<rungs::bf16, 64, ra::dynamic_block_size, all_score_mods>(8, 8, {100000, 24}, 18);
}

TEST_CASE("emulated cache write matches the reference bit for bit") {
  std::mt19937_64 rng(10);
  const ra::attention_shape s{.num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 96, .block_size = 16, .num_blocks = 5};
  const std::int64_t k_stride = s.kv_row_elements() + 16, v_stride = 0;
  auto k_cache = random_vector<rungs::bf16>(rng, static_cast<std::size_t>(s.pool_elements()));
  auto v_cache = random_vector<rungs::bf16>(rng, static_cast<std::size_t>(s.pool_elements()));
  auto k_dev = k_cache, v_dev = v_cache;
  const auto k = random_vector<rungs::bf16>(rng, static_cast<std::size_t>(9 * k_stride));
  const auto v = random_vector<rungs::bf16>(rng, static_cast<std::size_t>(9 * s.kv_row_elements()));
  const std::vector<std::int64_t> slots = {79, 3, -1, 16, 17, 40, -1, 0, 55};
  emulate_cache_write<rungs::bf16, 96>({ra::dtype::bf16, s},
                                       {.k = k.data(), .v = v.data(), .k_stride = k_stride, .v_stride = v_stride,
                                        .slot_mapping = slots.data(), .num_tokens = 9, .k_cache = k_dev.data(),
                                        .v_cache = v_dev.data()});
  ra::reference::cache_write<rungs::bf16>(s, k_cache, v_cache, k, v, slots, k_stride, v_stride);
  auto same = [](const auto& a, const auto& b) {
    return std::equal(a.begin(), a.end(), b.begin(), [](auto x, auto y) { return x.bits == y.bits; });
  };
  CHECK(same(k_dev, k_cache));
  CHECK(same(v_dev, v_cache));
}
