// rungs' attention kernels as nvcc compiles them (attention_instances.cu -> PTX at build
// time), run by the executor under several adversarial schedules, against the host reference:
// decode (with and without splits and the merge), prefill and the cache write, a few instances
// under several seeds and every instance of the default set once, with its memory traffic; and
// decode and prefill with every score transform (sliding window, soft-cap, sinks); and fp8 KV
// caches (E4M3, E5M2) with per-head and per-tensor scales.
// Needs nvcc to build (label cuda-sim), no GPU.
#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/reference.hpp>
#include <rungs/attention/dispatch.hpp>
#include <rungs/blocks.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>

#include "../harness.hpp"
#include "attention_ptx.hpp"
#include "compare.hpp"
#include "paged_problem.hpp"

namespace ra = rungs::attention;
namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;
namespace sim = rungs::sim;
using namespace rungs_test;

namespace {

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, rungs::f16>) return "__half";
  else if constexpr (std::is_same_v<T, rungs::bf16>) return "__nv_bfloat16";
  else if constexpr (std::is_same_v<T, rungs::e4m3>) return "__nv_fp8_e4m3";
  else return "__nv_fp8_e5m2";
}
template <class T>
ra::dtype type_of() {
  if constexpr (std::is_same_v<T, rungs::f16>) return ra::dtype::fp16;
  else if constexpr (std::is_same_v<T, rungs::bf16>) return ra::dtype::bf16;
  else if constexpr (std::is_same_v<T, rungs::e4m3>) return ra::dtype::fp8_e4m3;
  else return ra::dtype::fp8_e5m2;
}

// A kernel's score transforms as the demangler prints its template argument (score_mod_bits).
std::string mod_name(ra::score_mod m) { return std::to_string(ra::score_mod_bits(m)) + "u"; }
std::string merge_name(const std::string& type, int d, bool sinks) {
  return "merge_splits_kernel<" + type + ", " + std::to_string(d) + ", " + (sinks ? "true" : "false") + ">";
}

// The PTX module launch() runs kernels from: attention_instances.cu's (compute_80), or while a
// compute_90 scope lives, fp8_sm90_instances.cu's (the fp8 hardware conversion's path).
const sim::module* ptx_override = nullptr;
struct compute_90_scope {
  compute_90_scope() { ptx_override = &rungs_sim_test::ptx_module(RUNGS_SIM_FP8_SM90_PTX, "fp8_sm90_instances.ptx"); }
  ~compute_90_scope() { ptx_override = nullptr; }
  compute_90_scope(const compute_90_scope&) = delete;
  compute_90_scope& operator=(const compute_90_scope&) = delete;
};

template <class Params>
sim::launch_result launch(const std::string& kernel, rd::launch_grid grid, unsigned threads, Params p,
                          const rungs_sim_test::host_memory& mem, std::uint64_t seed) {
  void* args[] = {&p};
  sim::schedule s;
  s.seed = seed;
  const sim::module& m = ptx_override != nullptr ? *ptx_override : rungs_sim_test::attention_module();
  return sim::launch(m, rungs_sim_test::attention_entry(kernel, m), {grid.x, grid.y, grid.z}, {threads, 1, 1}, 0, args, mem, s);
}

template <class T, class A>
void add(rungs_sim_test::host_memory& mem, const std::vector<T, A>& v) {
  mem.add(v.data(), v.size() * sizeof(T));
}

// 256-byte aligned storage, as cudaMalloc returns: sector counts are then exact.
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{256})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{256}); }
  friend bool operator==(const aligned_allocator&, const aligned_allocator&) { return true; }
};
template <class T>
using device_vector = std::vector<T, aligned_allocator<T>>;
template <class T>
device_vector<T> to_device(const std::vector<T>& v) {
  return device_vector<T>(v.begin(), v.end());
}

// One launch's memory traffic beside the bytes an ideal kernel moves for the same work
// (docs/kernels.md, "Performance": the data each output depends on, read once, and the
// outputs written once).
struct traffic_row {
  std::string kernel, shape;
  std::uint64_t ideal_bytes = 0;
  sim::traffic t;
};

// The split merge alone over many splits (64 and 128: the planner's choice for one long
// sequence on an H100 is 64; and 8, 2 lanes per row), a quarter of them empty (log-sum-exp -inf; their partial outputs
// are NaN, which the merge must not read), and one row with every split empty (zeros), against
// the merge's formula in double: out = sum_s 2^(lse_s - M) o_s / (sum_s 2^(lse_s - M) + the
// sink's 2^(sink - M)), M the largest of them. Returns the launch's traffic.
template <class T, int D, bool Sinks>
traffic_row check_many_split_merge(int splits, unsigned ctas, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kBatch = 2, kHeads = 3;  // 6 rows (token x head); row 4 has no key
  constexpr std::int64_t kRows = kBatch * kHeads, kEmptyRow = 4;
  const rungs::attention::split_workspace w = rd::make_split_workspace(kRows, splits, D);
  std::vector<float> workspace(w.bytes / 4, std::nanf(""));
  float* partial = workspace.data() + w.partial_out_offset / 4;
  float* lse = workspace.data() + w.partial_lse_offset / 4;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), logit(-12.0f, 12.0f);
  std::bernoulli_distribution empty(0.25);
  std::vector<float> sinks(kHeads);
  for (float& x : sinks) x = logit(rng) * 0.5f;
  std::vector<double> want(static_cast<std::size_t>(kRows * D), 0.0);
  std::uint64_t nonempty = 0;
  for (std::int64_t r = 0; r < kRows; ++r) {
    double m = -INFINITY;
    for (int s = 0; s < splits; ++s) {
      const bool none = r == kEmptyRow || (s > 0 && empty(rng));  // split 0 of other rows has keys
      lse[r * splits + s] = none ? -INFINITY : logit(rng);
      if (none) continue;  // its partial output stays NaN
      ++nonempty;
      for (int d = 0; d < D; ++d) partial[(r * splits + s) * D + d] = value(rng);
      m = std::max(m, static_cast<double>(lse[r * splits + s]));
    }
    if (r == kEmptyRow) continue;  // zeros, sink or not
    const double log2e = std::log2(std::exp(1.0));
    const double sink = Sinks ? static_cast<double>(sinks[static_cast<std::size_t>(r % kHeads)]) * log2e : -INFINITY;
    m = std::max(m, sink);
    double den = std::exp2(sink - m);
    for (int s = 0; s < splits; ++s) {
      const double x = lse[r * splits + s];
      if (x == -INFINITY) continue;
      den += std::exp2(x - m);
      for (int d = 0; d < D; ++d) {
        want[static_cast<std::size_t>(r * D + d)] += std::exp2(x - m) * partial[(r * splits + s) * D + d];
      }
    }
    for (int d = 0; d < D; ++d) want[static_cast<std::size_t>(r * D + d)] /= den;
  }
  const auto sinks_dev = to_device(sinks);
  const auto workspace_dev = to_device(workspace);
  std::vector<T> out(static_cast<std::size_t>(kRows * D), poison<T>());
  rungs_sim_test::host_memory mem;
  add(mem, workspace_dev), add(mem, out);
  if (Sinks) add(mem, sinks_dev);
  void* const ws = const_cast<float*>(workspace_dev.data());
  const rd::merge_params m =
      rd::make_merge_params(w, ws, out.data(), nullptr, kBatch, kBatch, kHeads, splits, D, Sinks ? sinks_dev.data() : nullptr);
  const std::string name = merge_name(type_name<T>(), D, Sinks);
  const std::string what = name + ", " + std::to_string(splits) + " splits, seed " + std::to_string(seed);
  CHECK(rd::merge_grid(m).x == ctas);
  const auto r = launch(name, rd::merge_grid(m), 32 * geo::merge_warps, m, mem, seed);
  require_close(out, want, D, 0, kEmptyRow, what);
  require_zero_rows(out, D, kEmptyRow, kEmptyRow + 1, what + ": the row without keys");
  require_close(out, want, D, kEmptyRow + 1, kRows, what);
  // Ideal: every log-sum-exp, the non-empty splits' partial outputs, the output rows.
  return {name, std::to_string(kRows) + " rows x " + std::to_string(splits) + " splits (" +
                    std::to_string(nonempty) + " non-empty)",
          kRows * (static_cast<std::uint64_t>(splits) * 4 + D * sizeof(T)) + nonempty * D * 4, r.global};
}

// The splits check_decode runs: none, 16 tokens, and the planner's choice.
constexpr int kAllSplits = -1;

// Decode over 3 sequences (the second of length 0) and a padded row, without and with splits
// (`only_split`: one of them), over a cache of KV (T, or fp8 with fresh scales, per head when
// `per_head_scales`), with the SIMT decode or the tensor-core one (TensorCores); returns each
// launch's traffic, and the largest error against the reference in *max_error when given.
template <class T, int D, int G, ra::score_mod Mod = ra::score_mod{}, class KV = T, bool TensorCores = false>
std::vector<traffic_row> check_decode(int block_size, std::uint64_t seed, int only_split = kAllSplits,
                                      bool per_head_scales = true, double* max_error = nullptr) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4, kKvHeads = 2;
  // Five tiles and more: the 3-stage pipeline reuses a stage (where an early issue would race).
  const int max_context = 5 * geo::tile_tokens(D) + 30;
  std::vector<std::int32_t> lens = random_lengths(rng, 2, max_context - 5, block_size);
  lens.insert(lens.begin() + 1, 0);
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = G * kKvHeads, .num_kv_heads = kKvHeads, .head_dim = D, .block_size = block_size}, lens);
  const auto pools = make_pools<KV>(rng, p);
  const auto k_dev = to_device(pools.k), v_dev = to_device(pools.v);  // 256-byte aligned, as cudaMalloc's
  const kv_scale_values scales = draw_kv_scales<KV>(rng, kKvHeads, per_head_scales);
  const auto k_scale_dev = to_device(scales.k), v_scale_dev = to_device(scales.v);
  const std::int64_t row = p.shape.q_row_elements();
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(kMaxBatch * row));
  const mod_values mod = draw_mod_values<Mod>(rng, p.shape.num_qo_heads, 37);  // nothing drawn for the default
  std::vector<double> want(static_cast<std::size_t>(3 * row));
  ra::reference::decode<KV, T, double>(p.shape, pools.k, pools.v, q, lens, {p.tables, p.table_stride}, 0.3, want,
                                       {mod.values, mod.sinks}, {scales.k, scales.v});
  // Under a window only the last `window` keys of a sequence are loaded.
  std::uint64_t kv_tokens = 0;
  for (std::int32_t len : lens) {
    kv_tokens += static_cast<std::uint64_t>(Mod.sliding_window ? std::min(len, mod.values.window) : len);
  }
  const std::uint64_t kv_bytes = 2ull * kv_tokens * kKvHeads * D * sizeof(KV);
  const std::string name =
      TensorCores ? "tensor_core_decode_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                        std::to_string(G) + ", " + mod_name(Mod) + ", " + type_name<KV>() + ">"
                  : "paged_attention_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                        std::to_string(geo::decode_rows_per_thread(G)) + ", " +
                        std::to_string(geo::decode_row_groups(G)) + ", true, " + mod_name(Mod) + ", " +
                        type_name<KV>() + ">";
  const auto sinks_dev = to_device(mod.sinks);
  std::vector<traffic_row> rows;
  for (int split : {max_context, geo::chunk_tokens * 4, 0}) {  // none, 16 tokens, the planner's
    if (only_split != kAllSplits && split != only_split) continue;
    const ra::attention_config config{type_of<T>(), p.shape, 0.3f, mod.values, scales.format};
    const ra::decode_plan plan =
        ra::plan_decode(config, {.max_batch = kMaxBatch, .max_context = max_context}, {4, 90}, {.split_tokens = split});
    const std::int64_t stride = plan.max_blocks_per_seq;
    std::vector<std::int32_t> lens_dev(kMaxBatch, -1), tables(static_cast<std::size_t>(kMaxBatch * stride), -1000000);
    ra::write_decode_step(plan, lens, p.block_spans(), lens_dev, tables, stride);
    std::vector<T> out(static_cast<std::size_t>(kMaxBatch * row), poison<T>());
    std::vector<float> workspace((plan.workspace.bytes + 3) / 4, std::nanf(""));
    rungs_sim_test::host_memory mem;
    add(mem, q), add(mem, k_dev), add(mem, v_dev), add(mem, tables), add(mem, lens_dev), add(mem, out);
    add(mem, workspace);
    if (Mod.sinks) add(mem, sinks_dev);
    if (!scales.k.empty()) add(mem, k_scale_dev), add(mem, v_scale_dev);
    const ra::decode_args a{.q = q.data(), .k_cache = k_dev.data(), .v_cache = v_dev.data(),
                            .block_tables = tables.data(), .block_table_stride = stride, .seq_lens = lens_dev.data(),
                            .out = out.data(), .workspace = workspace.data(), .workspace_bytes = workspace.size() * 4,
                            .sinks = Mod.sinks ? sinks_dev.data() : nullptr,
                            .k_scale = scales.k.empty() ? nullptr : k_scale_dev.data(),
                            .v_scale = scales.v.empty() ? nullptr : v_scale_dev.data()};
    ra::validate(plan, a);
    ra::check_score_mod(Mod, config, a.sinks, "decode");
    const std::string what = name + ", " + std::to_string(plan.num_splits) + " splits, seed " + std::to_string(seed);
    INFO(what);
    const auto r = launch(name, rd::decode_grid(plan), geo::threads, rd::decode_params(plan, a), mem, seed);
    // The KV stream (cp.async): each byte of the sequences' K and V read once, in full sectors
    // (a D-element row is a whole number of sectors for D = 64, 96, 128 in 2-byte elements, and
    // for every head dim in fp8).
    CHECK(r.global.async_bytes_read == kv_bytes);
    CHECK(r.global.async_sectors_read * 32 == kv_bytes);
    // Ideal: the KV bytes, the queries of the sequences with context, every output row
    // (zeros included), the used block-table entries, the lengths (and an fp8 cache's scales).
    const std::uint64_t e = sizeof(T), qo_row = static_cast<std::uint64_t>(row) * e;
    const std::uint64_t scale_bytes = 4 * (scales.k.size() + scales.v.size());
    std::uint64_t used_blocks = 0, nonempty = 0, partials = 0;
    for (std::int32_t len : lens) {
      used_blocks += static_cast<std::uint64_t>(rungs::blocks_for(len, block_size));
      nonempty += len > 0;
      if (plan.split()) partials += static_cast<std::uint64_t>((len + plan.split_tokens - 1) / plan.split_tokens);
    }
    const std::string shape = "B=" + std::to_string(kMaxBatch) + " (3 real), " + std::to_string(p.shape.num_qo_heads) +
                              "q/" + std::to_string(kKvHeads) + "kv, lens " + std::to_string(lens[0]) + "," +
                              std::to_string(lens[1]) + "," + std::to_string(lens[2]) + ", block " +
                              std::to_string(block_size);
    if (!plan.split()) {
      rows.push_back({name, shape,
                      kv_bytes + nonempty * qo_row + kMaxBatch * qo_row + used_blocks * 4 + kMaxBatch * 4 + scale_bytes,
                      r.global});
    }
    if (plan.split()) {
      const rd::merge_params m = rd::decode_merge_params(plan, a);
      const std::string merge = merge_name(type_name<T>(), D, Mod.sinks);
      const auto mr = launch(merge, rd::merge_grid(m), 32 * geo::merge_warps, m, mem, seed);
      // Ideal merge: every row's split log-sum-exps, the partial outputs of its non-empty
      // splits (float), and the output row.
      const std::uint64_t heads = static_cast<std::uint64_t>(p.shape.num_qo_heads);
      rows.push_back({merge, shape + ", " + std::to_string(plan.num_splits) + " splits",
                      kMaxBatch * heads * (static_cast<std::uint64_t>(plan.num_splits) * 4 + D * e) +
                          partials * heads * D * 4,
                      mr.global});
    }
    require_close(out, want, row, 0, 3, what);
    if (max_error != nullptr) {
      for (std::size_t i = 0; i < want.size(); ++i) {
        *max_error = std::max(*max_error, std::abs(rungs::to_double(out[i]) - want[i]));
      }
    }
    require_zero_rows(out, row, 1, 2, what + ": the length-0 sequence");
    require_zero_rows(out, row, 3, kMaxBatch, what + ": the padded row");
  }
  return rows;
}

// Prefill over an extend, a pure prefill and a sequence without new tokens, plus a padded row,
// without and with splits (`only_split`: one of them), over a cache of KV (T, or fp8 with
// fresh scales), with the SIMT prefill or the tensor-core one (TensorCores), under a sliding
// window of `window` keys when Mod has one; returns the unsplit launch's traffic, and the
// largest error against the reference in *max_error when given.
template <class T, int D, ra::score_mod Mod = ra::score_mod{}, class KV = T, bool TensorCores = false>
std::vector<traffic_row> check_prefill(int block_size, int group, std::uint64_t seed, int only_split = kAllSplits,
                                       bool per_head_scales = true, double* max_error = nullptr, int window = 5) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4, kMaxQ = 12;
  const int max_context = 5 * geo::tile_tokens(D) + 23;
  const std::vector<std::int32_t> kv_lens = {max_context - 4, 9, 7};
  const std::vector<std::int32_t> q_lens = {kMaxQ, 9, 0};
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = group, .num_kv_heads = 1, .head_dim = D, .block_size = block_size}, kv_lens, q_lens);
  const auto pools = make_pools<KV>(rng, p);
  const kv_scale_values scales = draw_kv_scales<KV>(rng, 1, per_head_scales);
  const auto k_scale_dev = to_device(scales.k), v_scale_dev = to_device(scales.v);
  const std::int64_t row = p.shape.q_row_elements();
  const int max_total_q = kMaxBatch * kMaxQ;
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(max_total_q * row));
  // The default window of 5 keys is shorter than the 12 new tokens, so q tiles start at
  // different keys.
  const mod_values mod = draw_mod_values<Mod>(rng, p.shape.num_qo_heads, window);  // nothing drawn for the default
  const auto sinks_dev = to_device(mod.sinks);
  std::vector<double> want(static_cast<std::size_t>(p.total_q() * row));
  ra::reference::prefill<KV, T, double>(p.shape, pools.k, pools.v, q, p.q_indptr, kv_lens, {p.tables, p.table_stride},
                                        0.0, want, {mod.values, mod.sinks}, {scales.k, scales.v});
  const std::string name =
      TensorCores ? "tensor_core_prefill_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                        mod_name(Mod) + ", " + type_name<KV>() + ">"
                  : "paged_attention_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                        std::to_string(geo::prefill_rows_per_thread) + ", " + std::to_string(geo::thread_rows(D)) +
                        ", false, " + mod_name(Mod) + ", " + type_name<KV>() + ">";
  const ra::attention_config config{type_of<T>(), p.shape, 0.0f, mod.values, scales.format};
  std::vector<traffic_row> rows;
  for (int split : {max_context, geo::chunk_tokens * 2}) {
  if (only_split != kAllSplits && split != only_split) continue;
  const ra::prefill_plan plan = ra::plan_prefill(
      config, {.max_batch = kMaxBatch, .max_q_len = kMaxQ, .max_total_q = max_total_q, .max_context = max_context},
      {4, 90}, {.split_tokens = split});
  std::vector<std::int32_t> indptr(kMaxBatch + 1), lens(kMaxBatch);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(kMaxBatch * plan.max_blocks_per_seq), -1000000);
  ra::write_prefill_step(plan, q_lens, kv_lens, p.block_spans(), indptr, lens, tables);
  std::vector<T> out(static_cast<std::size_t>(max_total_q * row), poison<T>());
  std::vector<float> workspace((plan.workspace.bytes + 3) / 4, std::nanf(""));
  rungs_sim_test::host_memory mem;
  add(mem, q), add(mem, pools.k), add(mem, pools.v), add(mem, tables), add(mem, indptr), add(mem, lens);
  add(mem, out), add(mem, workspace);
  if (Mod.sinks) add(mem, sinks_dev);
  if (!scales.k.empty()) add(mem, k_scale_dev), add(mem, v_scale_dev);
  const ra::prefill_args a{.q = q.data(), .k_cache = pools.k.data(), .v_cache = pools.v.data(),
                           .block_tables = tables.data(), .q_indptr = indptr.data(), .kv_lens = lens.data(),
                           .out = out.data(), .workspace = workspace.data(), .workspace_bytes = workspace.size() * 4,
                           .sinks = Mod.sinks ? sinks_dev.data() : nullptr,
                           .k_scale = scales.k.empty() ? nullptr : k_scale_dev.data(),
                           .v_scale = scales.v.empty() ? nullptr : v_scale_dev.data()};
  ra::validate(plan, a);
  ra::check_score_mod(Mod, config, a.sinks, "prefill");
  const std::string what = name + ", " + std::to_string(plan.num_splits) + " splits, seed " + std::to_string(seed);
  INFO(what);
  const auto r = launch(name, rd::prefill_grid(plan), geo::threads, rd::prefill_params(plan, a), mem, seed);
  // The KV stream: each CTA (q tile x split) loads the keys from its first row's window start
  // (the split's first key without a window) to its last row's end, once each.
  std::uint64_t loaded_tokens = 0;
  const int cta_rows = geo::prefill_rows_per_cta(D);
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    const int q_len = q_lens[b], kv_len = kv_lens[b];
    for (int first_row = 0; first_row < q_len * group; first_row += cta_rows) {
      const int first_token = first_row / group, last_token = (std::min(first_row + cta_rows, q_len * group) - 1) / group;
      const int begin = Mod.sliding_window ? kv_len - q_len + first_token + 1 - mod.values.window : 0;
      const int end = kv_len - q_len + last_token + 1;
      for (int s = 0; s < plan.num_splits; ++s) {
        const int from = std::max(begin, s * plan.split_tokens), to = std::min(end, (s + 1) * plan.split_tokens);
        loaded_tokens += static_cast<std::uint64_t>(std::max(0, to - from));
      }
    }
  }
  CHECK(r.global.async_bytes_read == 2 * loaded_tokens * D * sizeof(KV));
  if (!plan.split()) {
    // Ideal: the KV of each sequence with new tokens once (a CTA of query rows re-reads the
    // keys it sees, so several row tiles of one sequence move more; at this shape each
    // sequence's 4 x 12 rows fit one tile), the packed queries and outputs, those sequences'
    // block-table entries, q_indptr and the lengths.
    const std::uint64_t e = sizeof(T), qo_row = static_cast<std::uint64_t>(row) * e;
    const std::uint64_t scale_bytes = 4 * (scales.k.size() + scales.v.size());
    std::uint64_t kv_tokens = 0, used_blocks = 0;
    for (std::size_t b = 0; b < kv_lens.size(); ++b) {
      if (q_lens[b] == 0) continue;
      kv_tokens += static_cast<std::uint64_t>(kv_lens[b]);
      used_blocks += static_cast<std::uint64_t>(rungs::blocks_for(kv_lens[b], block_size));
    }
    rows.push_back({name,
                    "B=" + std::to_string(kMaxBatch) + " (3 real), " + std::to_string(group) +
                        "q/1kv, kv lens " + std::to_string(kv_lens[0]) + ",9,7, q lens 12,9,0, block " +
                        std::to_string(block_size),
                    2 * kv_tokens * D * sizeof(KV) + 2 * static_cast<std::uint64_t>(p.total_q()) * qo_row +
                        used_blocks * 4 + (2 * kMaxBatch + 1) * 4 + scale_bytes,
                    r.global});
  }
  if (plan.split()) {
    const rd::merge_params m = rd::prefill_merge_params(plan, a);
    launch(merge_name(type_name<T>(), D, Mod.sinks), rd::merge_grid(m), 32 * geo::merge_warps, m, mem, seed);
  }
  require_close(out, want, row, 0, p.total_q(), what);
  if (max_error != nullptr) {
    for (std::size_t i = 0; i < want.size(); ++i) {
      *max_error = std::max(*max_error, std::abs(rungs::to_double(out[i]) - want[i]));
    }
  }
  }
  return rows;
}

}  // namespace

TEST_CASE("decode kernels (nvcc's PTX) match the reference under adversarial schedules", "[cuda-sim]") {
  for (std::uint64_t seed : {1u, 2u}) {
    check_decode<rungs::f16, 128, 4>(16, seed);
    check_decode<rungs::bf16, 64, 16>(8, seed);
    check_decode<rungs::f16, 96, 1>(32, seed);
  }
}

// The tensor-core decode (tensor_core.cuh) beside the SIMT decode on the same problems (every
// split plan), printing both kernels' largest error against the float64 reference.
template <class T, int D, int G, ra::score_mod Mod = ra::score_mod{}, class KV = T>
void check_tensor_core_decode(int block_size, std::uint64_t seed, bool per_head_scales = true) {
  double tc = 0, simt = 0;
  check_decode<T, D, G, Mod, KV, true>(block_size, seed, kAllSplits, per_head_scales, &tc);
  check_decode<T, D, G, Mod, KV>(block_size, seed, kAllSplits, per_head_scales, &simt);
  std::cout << "decode " << type_name<T>() << " D " << D << " group " << G << " " << Mod << " kv " << type_name<KV>()
            << (per_head_scales ? " per-head" : " per-tensor") << " block " << block_size << " seed " << seed
            << ": max |error| tensor cores " << tc << ", SIMT " << simt << "\n";
}

TEST_CASE("tensor-core decode (nvcc's PTX) matches the reference under adversarial schedules", "[cuda-sim]") {
  // The default set's instances (also run once each with the whole set below), and head dim 64
  // at groups 16 (every row of the mma tile) and 1, at block sizes 8 to 32; the padded rows of
  // head dims 80 (an odd number of k steps and dim tiles: ldmatrix.x2) and 96; head dim 256.
  for (std::uint64_t seed : {31u, 32u}) {
    check_tensor_core_decode<rungs::bf16, 128, 4>(16, seed);
    check_tensor_core_decode<rungs::f16, 128, 4>(32, seed);
    check_tensor_core_decode<rungs::bf16, 128, 8>(16, seed);
    check_tensor_core_decode<rungs::f16, 128, 8>(8, seed);
    check_tensor_core_decode<rungs::f16, 64, 16>(32, seed);
    check_tensor_core_decode<rungs::bf16, 64, 1>(16, seed);
    check_tensor_core_decode<rungs::bf16, 80, 16>(16, seed);
    check_tensor_core_decode<rungs::f16, 96, 4>(8, seed);
  }
  // Head dim 256: 2 key warps x 2 dim warps over a 16-key tile (two pipeline places per copy
  // thread), one seed each: group 8 (one head tile) and 16 (both, the 3-CTA build).
  check_tensor_core_decode<rungs::bf16, 256, 8>(16, 33);
  check_tensor_core_decode<rungs::f16, 256, 16>(8, 34);
}

TEST_CASE("decode and prefill with a sliding window, soft-cap and sinks (nvcc's PTX) match the reference",
          "[cuda-sim]") {
  for (std::uint64_t seed : {11u, 12u}) check_decode<rungs::f16, 128, 4, all_score_mods>(16, seed);
  check_prefill<rungs::bf16, 128, all_score_mods>(8, 8, 13);
}

TEST_CASE("tensor-core decode with a sliding window, soft-cap and sinks (nvcc's PTX) matches the reference",
          "[cuda-sim]") {
  // Mistral's shape (f16, D 128, group 4) and gpt-oss's (bf16, D 64, group 8), with every
  // transform: a window of 37 keys (check_decode loads exactly min(len, 37) of each sequence),
  // a soft-cap and sinks, beside the SIMT decode with the same transforms.
  for (std::uint64_t seed : {41u, 42u}) {
    check_tensor_core_decode<rungs::f16, 128, 4, all_score_mods>(16, seed);
    check_tensor_core_decode<rungs::bf16, 64, 8, all_score_mods>(32, seed);
  }
}

namespace {
// fp8_widen_probe<T, KV> (fp8_widen_probe.cuh): every one of the 256 codes widened to T
// equals the code's value over kv_unit<KV> exactly (E4M3: 2^8 on the integer route of
// compute_80, 1 on the hardware route, `hardware`; E5M2: 1); NaN stays NaN.
template <class T, class KV>
void check_widen(bool hardware = false) {
  struct params {
    const void* codes;
    void* out;
  };
  device_vector<rungs::e4m3> codes(256);  // raw bytes (the format is KV's)
  for (int i = 0; i < 256; ++i) codes[static_cast<std::size_t>(i)] = rungs::e4m3::from_bits(static_cast<std::uint8_t>(i));
  device_vector<T> out(256, poison<T>());
  rungs_sim_test::host_memory mem;
  add(mem, codes), add(mem, out);
  const std::string name = "fp8_widen_probe<" + type_name<T>() + ", " + type_name<KV>() + ">";
  INFO(name);
  launch(name, {1, 1, 1}, 32, params{codes.data(), out.data()}, mem, 1);
  const double unit = std::is_same_v<KV, rungs::e4m3> && !hardware ? 256.0 : 1.0;
  for (int i = 0; i < 256; ++i) {
    const double want = rungs::to_double(KV::from_bits(static_cast<std::uint8_t>(i))) / unit;
    const double got = rungs::to_double(out[static_cast<std::size_t>(i)]);
    INFO("code " << i << ": want " << want << ", got " << got);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(got == want);
    }
  }
}
}  // namespace

TEST_CASE("fp8 widening for the tensor-core decode (nvcc's PTX): every code exactly, NaN kept", "[cuda-sim]") {
  check_widen<rungs::f16, rungs::e4m3>();
  check_widen<rungs::f16, rungs::e5m2>();
  check_widen<rungs::bf16, rungs::e4m3>();
  check_widen<rungs::bf16, rungs::e5m2>();
}

TEST_CASE("fp8 on sm_89+ (compute_90 PTX: cvt.rn.f16x2.e4m3x2): widening and both decodes exact", "[cuda-sim]") {
  // The hardware route of device.cuh, which the compute_80 PTX above never takes: every code,
  // then the default set's E4M3 decode on tensor cores and SIMT, every split plan.
  const compute_90_scope scope;
  check_widen<rungs::f16, rungs::e4m3>(true);
  check_widen<rungs::bf16, rungs::e4m3>(true);
  check_widen<rungs::f16, rungs::e5m2>(true);
  check_widen<rungs::bf16, rungs::e5m2>(true);
  check_tensor_core_decode<rungs::bf16, 128, 4, ra::score_mod{}, rungs::e4m3>(16, 61, true);
}

TEST_CASE("tensor-core decode over fp8 KV caches (nvcc's PTX) matches the reference", "[cuda-sim]") {
  // E4M3 under bf16 queries at D 128, group 4 (the default set's instance) and E5M2 under f16
  // at D 64, group 2 (not in it), per-head and per-tensor scales, every split plan, beside the
  // SIMT decode over the same quantised cache (the error printed is against the float64
  // reference over the dequantised cache: the kernels' own error, not the quantisation's).
  for (std::uint64_t seed : {51u, 52u}) {
    check_tensor_core_decode<rungs::bf16, 128, 4, ra::score_mod{}, rungs::e4m3>(16, seed, seed == 51u);
    check_tensor_core_decode<rungs::f16, 64, 2, ra::score_mod{}, rungs::e5m2>(8, seed, seed == 52u);
  }
}

TEST_CASE("prefill kernels (nvcc's PTX) match the reference under adversarial schedules", "[cuda-sim]") {
  check_prefill<rungs::bf16, 128>(16, 4, 3);
  check_prefill<rungs::f16, 80>(8, 2, 4);
}

// The tensor-core prefill (tensor_core.cuh) beside the SIMT prefill on the same problems
// (unsplit and 8-token splits), with the score transforms Mod (a window of `window` keys) and
// over a cache of KV, printing both kernels' largest error against the float64 reference.
template <class T, int D, ra::score_mod Mod = ra::score_mod{}, class KV = T>
void check_tensor_core_prefill(int block_size, int group, std::uint64_t seed, int window = 5,
                               bool per_head_scales = true) {
  double tc = 0, simt = 0;
  check_prefill<T, D, Mod, KV, true>(block_size, group, seed, kAllSplits, per_head_scales, &tc, window);
  check_prefill<T, D, Mod, KV>(block_size, group, seed, kAllSplits, per_head_scales, &simt, window);
  std::cout << "prefill " << type_name<T>() << " D " << D << " group " << group << " " << Mod << " window "
            << (Mod.sliding_window ? window : 0) << " kv " << type_name<KV>()
            << (per_head_scales ? " per-head" : " per-tensor") << " block " << block_size << " seed " << seed
            << ": max |error| tensor cores " << tc << ", SIMT " << simt << "\n";
}

TEST_CASE("tensor-core prefill (nvcc's PTX) matches the reference under adversarial schedules", "[cuda-sim]") {
  // Groups 3 (a row tile part valid: 36 rows of 12 tokens), 8 and 1 (a row warp of the second
  // q tile with no rows), block sizes 8 to 128 (pages shorter and longer than a tile).
  check_tensor_core_prefill<rungs::bf16, 128>(8, 3, 41);
  check_tensor_core_prefill<rungs::f16, 128>(128, 8, 42);
  check_tensor_core_prefill<rungs::f16, 64>(16, 1, 43);
}

TEST_CASE("tensor-core prefill with a sliding window, soft-cap and sinks (nvcc's PTX) matches the reference",
          "[cuda-sim]") {
  // Every transform at once, beside the SIMT prefill on the same inputs, unsplit and split
  // (the sink merge). bf16 D 128, group 8 (3 q tiles, each from its own first row's window),
  // window 5: smaller than a softmax step of 32 keys, rows masking within it, windows across
  // blocks of 8; f16 D 64, group 3, window 37: longer than the 12 new tokens, across blocks of
  // 16 and the 8-token splits. check_prefill asserts each CTA loads exactly its rows' window.
  check_tensor_core_prefill<rungs::bf16, 128, all_score_mods>(8, 8, 45, 5);
  check_tensor_core_prefill<rungs::f16, 64, all_score_mods>(16, 3, 46, 37);
}

TEST_CASE("tensor-core prefill over fp8 KV caches (nvcc's PTX) matches the reference", "[cuda-sim]") {
  // E4M3 under bf16 queries at D 128 (the default set's instance) and E5M2 under f16 at D 64
  // (not in it), per-head and per-tensor scales, unsplit and split, beside the SIMT prefill
  // over the same quantised cache (the error is against the float64 reference over the
  // dequantised cache).
  check_tensor_core_prefill<rungs::bf16, 128, ra::score_mod{}, rungs::e4m3>(8, 4, 53, 5, true);
  check_tensor_core_prefill<rungs::bf16, 128, ra::score_mod{}, rungs::e4m3>(32, 3, 54, 5, false);
  check_tensor_core_prefill<rungs::f16, 64, ra::score_mod{}, rungs::e5m2>(16, 8, 55, 5, false);
  check_tensor_core_prefill<rungs::f16, 64, ra::score_mod{}, rungs::e5m2>(8, 1, 56, 5, true);
}

namespace {

// Cache write of 19 tokens (one with slot -1) into a pool of 6 blocks of 16: every slot as the
// reference, and each KV byte written once in full sectors; returns the launch's traffic. An
// fp8 cache (KV) quantises with per-head scales in [1/500, 1/50], so some values saturate.
template <class T, int D, class KV = T>
traffic_row check_cache_write(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ra::attention_shape s{.num_qo_heads = 4, .num_kv_heads = 2, .head_dim = D, .block_size = 16, .num_blocks = 6};
  const kv_scale_values scales = draw_kv_scales<KV>(rng, s.num_kv_heads, true, 1.0f / 500, 1.0f / 50);
  const auto k_scale_dev = to_device(scales.k), v_scale_dev = to_device(scales.v);
  const ra::attention_config config{type_of<T>(), s, 0.0f, {}, scales.format};
  constexpr int kTokens = 19;
  const std::int64_t row = s.kv_row_elements();
  auto k_cache = random_vector<KV>(rng, static_cast<std::size_t>(s.pool_elements()));
  auto v_cache = random_vector<KV>(rng, static_cast<std::size_t>(s.pool_elements()));
  const auto k = random_vector<T>(rng, static_cast<std::size_t>(kTokens * row));
  const auto v = random_vector<T>(rng, static_cast<std::size_t>(kTokens * row));
  std::vector<std::int64_t> slots(kTokens);
  for (int t = 0; t < kTokens; ++t) slots[static_cast<std::size_t>(t)] = (t * 37) % s.num_slots();
  slots[4] = -1;
  auto want_k = k_cache, want_v = v_cache;
  ra::reference::cache_write<KV, T>(s, want_k, want_v, k, v, slots, 0, 0, {scales.k, scales.v});
  auto kc = to_device(k_cache), vc = to_device(v_cache);
  const auto kd = to_device(k), vd = to_device(v);
  const auto slots_dev = to_device(slots);
  rungs_sim_test::host_memory mem;
  add(mem, kc), add(mem, vc), add(mem, kd), add(mem, vd), add(mem, slots_dev);
  if (!scales.k.empty()) add(mem, k_scale_dev), add(mem, v_scale_dev);
  const ra::cache_write_args a{.k = kd.data(), .v = vd.data(), .slot_mapping = slots_dev.data(),
                               .num_tokens = kTokens, .k_cache = kc.data(), .v_cache = vc.data(),
                               .k_scale = scales.k.empty() ? nullptr : k_scale_dev.data(),
                               .v_scale = scales.v.empty() ? nullptr : v_scale_dev.data()};
  ra::validate(config, a);
  const rd::cache_write_params p = rd::make_cache_write_params(config, a);
  const std::string name =
      "cache_write_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", " + type_name<KV>() + ">";
  INFO(name);
  const auto r = launch(name, rd::cache_write_grid(p, D), geo::cache_write_threads, p, mem, seed);
  for (std::size_t i = 0; i < k_cache.size(); ++i) {
    REQUIRE(kc[i].bits == want_k[i].bits);
    REQUIRE(vc[i].bits == want_v[i].bits);
  }
  // 18 real tokens x 2 heads x D dims, for K and V: each byte read (sizeof(T) per element) and
  // written (sizeof(KV)) once, in full 32-byte sectors (a token's head row is a whole number
  // of sectors, 2 D or D bytes, on 256-byte aligned buffers); the 19 slots (152 bytes, read by
  // every thread of their token) are 5 more sectors, an fp8 cache's two scale arrays 2 more.
  const std::uint64_t read_bytes = 2ull * 18 * static_cast<std::uint64_t>(row) * sizeof(T);
  const std::uint64_t kv_bytes = 2ull * 18 * static_cast<std::uint64_t>(row) * sizeof(KV);
  CHECK(r.global.bytes_written == kv_bytes);
  CHECK(r.global.sectors_written == kv_bytes / 32);
  CHECK(r.global.sectors_read == read_bytes / 32 + 5 + (scales.k.empty() ? 0 : 2));
  // Ideal: the new K/V read and written once, the slots (and the scales).
  return {name, "19 tokens (one slot -1), 2 kv heads, block 16",
          read_bytes + kv_bytes + kTokens * 8 + 4 * (scales.k.size() + scales.v.size()), r.global};
}

// Every instance of the default set, once each (decode unsplit at every GQA group, the merge
// after a 16-token split at group 1, prefill unsplit, the cache write), at block size 16.
template <class T, int D, int... G>
void check_head_dim(std::vector<traffic_row>& table, ra::values<G...>) {
  const std::uint64_t seed = 100 + D;
  (std::ranges::move(check_decode<T, D, G>(16, seed + G, 5 * geo::tile_tokens(D) + 30), std::back_inserter(table)),
   ...);
  std::ranges::move(check_decode<T, D, 1>(16, seed, geo::chunk_tokens * 4), std::back_inserter(table));
  std::ranges::move(check_prefill<T, D>(16, 4, seed, 5 * geo::tile_tokens(D) + 23), std::back_inserter(table));
  table.push_back(check_cache_write<T, D>(seed));
}
template <class T, int... D>
void check_dtype(std::vector<traffic_row>& table, ra::values<D...>) {
  (check_head_dim<T, D>(table, ra::default_instantiations::decode_groups{}), ...);
}
template <ra::dtype... Types>
void check_set(std::vector<traffic_row>& table, ra::dtypes<Types...>) {
  (check_dtype<ra::host_type<Types>>(
       table, ra::default_instantiations::head_dims{}),
   ...);
}

// The tensor-core decode instances of the set: unsplit and after a 16-token split (the merge).
template <class T, int D, int... G>
void check_tensor_core_groups(std::vector<traffic_row>& table, ra::values<G...>) {
  const auto run = [&]<int Group>() {
    const std::uint64_t seed = 400 + D + Group;
    for (int split : {5 * geo::tile_tokens(D) + 30, geo::chunk_tokens * 4}) {
      std::ranges::move(check_decode<T, D, Group, ra::score_mod{}, T, true>(16, seed, split),
                        std::back_inserter(table));
    }
  };
  (run.template operator()<G>(), ...);
}
template <class T, int... D>
void check_tensor_core_dims(std::vector<traffic_row>& table, ra::values<D...>) {
  (check_tensor_core_groups<T, D>(table, ra::default_instantiations::tensor_core_decode::decode_groups{}), ...);
}
template <ra::dtype... Types>
void check_tensor_core_set(std::vector<traffic_row>& table, ra::dtypes<Types...>) {
  (check_tensor_core_dims<ra::host_type<Types>>(table, ra::default_instantiations::tensor_core_decode::head_dims{}),
   ...);
}

// The tensor-core prefill instances of the set: unsplit (its traffic) and after an 8-token
// split (the merge), group 4.
template <class T, int... D>
void check_tensor_core_prefill_dims(std::vector<traffic_row>& table, ra::values<D...>) {
  const auto run = [&]<int Dim>() {
    for (int split : {5 * geo::tile_tokens(Dim) + 23, geo::chunk_tokens * 2}) {
      std::ranges::move(check_prefill<T, Dim, ra::score_mod{}, T, true>(16, 4, 500 + Dim, split),
                        std::back_inserter(table));
    }
  };
  (run.template operator()<D>(), ...);
}
template <ra::dtype... Types>
void check_tensor_core_prefill_set(std::vector<traffic_row>& table, ra::dtypes<Types...>) {
  (check_tensor_core_prefill_dims<ra::host_type<Types>>(table,
                                                        ra::default_instantiations::tensor_core_prefill::head_dims{}),
   ...);
}

// The fp8-cache instances of the set: decode unsplit and after a 16-token split (the merge),
// on the tensor-core decode too where the set has its instance, prefill unsplit (on the
// tensor-core prefill too where the set has it), the cache write.
struct check_fp8_instance {
  std::vector<traffic_row>& table;
  template <ra::dtype Type, ra::dtype Kv, int D, int G>
  void operator()() const {
    using T = ra::host_type<Type>;
    using KV = ra::host_type<Kv>;
    const std::uint64_t seed = 300 + D + G;
    std::ranges::move(check_decode<T, D, G, ra::score_mod{}, KV>(16, seed, 5 * geo::tile_tokens(D) + 30),
                      std::back_inserter(table));
    std::ranges::move(check_decode<T, D, G, ra::score_mod{}, KV>(16, seed, geo::chunk_tokens * 4),
                      std::back_inserter(table));
    if constexpr (ra::default_instantiations::tensor_core_decode::contains(Type, D, G)) {
      for (int split : {5 * geo::tile_tokens(D) + 30, geo::chunk_tokens * 4}) {
        std::ranges::move(check_decode<T, D, G, ra::score_mod{}, KV, true>(16, seed, split), std::back_inserter(table));
      }
    }
    std::ranges::move(check_prefill<T, D, ra::score_mod{}, KV>(16, 4, seed, 5 * geo::tile_tokens(D) + 23),
                      std::back_inserter(table));
    if constexpr (ra::default_instantiations::tensor_core_prefill::contains(Type, D)) {
      std::ranges::move(check_prefill<T, D, ra::score_mod{}, KV, true>(16, 4, seed, 5 * geo::tile_tokens(D) + 23),
                        std::back_inserter(table));
    }
    table.push_back(check_cache_write<T, D, KV>(seed));
  }
};

std::string fixed(double x, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << x;
  return o.str();
}

}  // namespace

TEST_CASE("split merge over 64 and 128 splits, some empty (nvcc's PTX), matches its formula; empty splits unread",
          "[cuda-sim]") {
  std::vector<traffic_row> rows;
  // CTAs: row groups (geometry::merge_rows_per_cta) x chunks across the head dim (32 dims; 16
  // at head dim 80). 6 rows of 64 splits at D 128: 16 lanes of 4 splits per row, a row per CTA
  // (its lanes span the 4 warps), 4 chunks.
  rows.push_back(check_many_split_merge<rungs::bf16, 128, false>(64, 6 * 4, 31));
  rows.push_back(check_many_split_merge<rungs::bf16, 128, false>(128, 6 * 4, 32));  // 16 lanes of 8
  rows.push_back(check_many_split_merge<rungs::f16, 64, true>(128, 6 * 2, 33));     // sinks; 2 chunks
  // 8 splits: 2 lanes per row, 8 rows per CTA (2 past the last row, which must write nothing).
  rows.push_back(check_many_split_merge<rungs::bf16, 128, false>(8, 1 * 4, 35));
  // Head dim 80: 4-column chunks, 32 slots; 16 lanes per row span 2 warps, 2 rows per CTA.
  rows.push_back(check_many_split_merge<rungs::f16, 80, false>(64, 3 * 5, 34));
  for (const traffic_row& r : rows) {
    // Distinct sectors: an empty split's partial output read would add a quarter.
    const std::uint64_t moved = 32 * (r.t.sectors_read + r.t.sectors_written);
    INFO(r.kernel << " at " << r.shape << ": moved " << moved << " bytes, ideal " << r.ideal_bytes);
    CHECK(moved >= r.ideal_bytes * 95 / 100);
    CHECK(moved <= r.ideal_bytes * 105 / 100);
  }
}

TEST_CASE("cache write (nvcc's PTX): every slot as the reference; each KV byte written once, full sectors",
          "[cuda-sim]") {
  check_cache_write<rungs::f16, 128>(7);
}

TEST_CASE("fp8 KV caches (nvcc's PTX): decode, prefill and the quantising cache write match the reference",
          "[cuda-sim]") {
  // E4M3 under bf16 queries (the default set's instance), per-head and per-tensor scales, every
  // split plan; E5M2 under f16 queries at head dim 64 (an instance outside the default set).
  for (std::uint64_t seed : {21u, 22u}) {
    check_decode<rungs::bf16, 128, 4, ra::score_mod{}, rungs::e4m3>(16, seed, kAllSplits, seed == 21u);
    check_decode<rungs::f16, 64, 2, ra::score_mod{}, rungs::e5m2>(8, seed, kAllSplits, seed == 22u);
  }
  check_prefill<rungs::bf16, 128, ra::score_mod{}, rungs::e4m3>(8, 4, 23);
  check_prefill<rungs::f16, 64, ra::score_mod{}, rungs::e5m2>(32, 8, 24, kAllSplits, false);
  check_cache_write<rungs::bf16, 128, rungs::e4m3>(25);
  check_cache_write<rungs::f16, 64, rungs::e5m2>(26);
}

// The traffic table of benchmarks/RESULTS.md ("Memory traffic per kernel instance"): run this
// test's binary with "[traffic]" to print it. Read bytes per sector byte: bytes the threads
// asked for over the bytes of the 32-byte sectors each warp instruction touched, summed over
// instructions (1: fully coalesced; above 1: lanes read the same bytes, a broadcast; below 1:
// sectors fetched in part). Moved: distinct sectors read and written, over the ideal bytes of
// docs/kernels.md.
TEST_CASE("every instance of the default set (nvcc's PTX) matches the reference; memory traffic per instance",
          "[cuda-sim][traffic]") {
  std::vector<traffic_row> table;
  check_set(table, ra::default_instantiations::dtype_list{});
  CHECK(table.size() == 2 * 5 * (9 + 3));
  ra::for_each_fp8_instance<ra::default_instantiations::fp8_kv>(check_fp8_instance{table});
  CHECK(table.size() == 2 * 5 * (9 + 3) + 4 + 2 + 1);  // the default set's one fp8 shape, on both decodes and prefills
  check_tensor_core_set(table, ra::default_instantiations::tensor_core_decode::dtype_list{});
  CHECK(table.size() == 2 * 5 * (9 + 3) + 4 + 2 + 1 + 2 * 5 * 5 * 2);  // 2 types x D 64, 80, 96, 128, 256 x groups 1, 2, 4, 8, 16: decode, merge
  check_tensor_core_prefill_set(table, ra::default_instantiations::tensor_core_prefill::dtype_list{});
  CHECK(table.size() == 2 * 5 * (9 + 3) + 4 + 2 + 1 + 2 * 5 * 5 * 2 + 2 * 1);  // 2 types x D 128: unsplit prefill
  std::ostringstream o;
  o << "| kernel | shape | ideal bytes | requested | moved (sectors x 32) | read bytes per sector byte | moved / ideal |\n"
    << "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const traffic_row& r : table) {
    const std::uint64_t requested = r.t.bytes_read + r.t.bytes_written;
    const std::uint64_t moved = 32 * (r.t.sectors_read + r.t.sectors_written);
    // Each kernel moves its ideal bytes plus partial sectors of the small arrays (lengths,
    // block tables, split log-sum-exps): within 10% at these shapes. A kernel that read its
    // KV twice, or wrote a partial output it does not need, would be far above.
    INFO(r.kernel << " at " << r.shape << ": moved " << moved << " bytes, ideal " << r.ideal_bytes);
    CHECK(moved >= r.ideal_bytes * 95 / 100);
    CHECK(moved <= r.ideal_bytes * 110 / 100);
    o << "| `" << r.kernel << "` | " << r.shape << " | " << r.ideal_bytes << " | " << requested << " | " << moved
      << " | " << fixed(static_cast<double>(r.t.bytes_read) / (32.0 * r.t.sector_reads_total), 3) << " | "
      << fixed(static_cast<double>(moved) / static_cast<double>(r.ideal_bytes), 3) << " |\n";
  }
  std::cout << o.str();
}
