// The decode check's harness, without the kernels: the host reference, the device buffers, the
// plans and every comparison, with the launch passed in. decode_checks.cuh runs it on
// ra::decode<Set, Mod>; the mutation tests (tests/sim/runtime/mutation) compile it once and link it
// to each mutated copy of the kernels, which only the launch reaches.
#pragma once

#include <rungs/attention/device.hpp>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpu_cases.hpp"
#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace rungs_test {

/// launch(plan, args): runs the decode of `plan` (its kernels and merge) on the null stream.
/// HostKV: the cache's element type (HostT, or an fp8 type with fresh scales, per head when
/// `per_head_scales`). kernel: the decode kernel every run's plan is forced to (empty: the
/// planner's choice); warp_groups: the tensor-core decode's in-CTA split every run's plan is
/// forced to (0: the planner's choice).
template <class HostT, class Set, ra::score_mod Mod = ra::score_mod{}, class HostKV = HostT, class Launch>
void check_decode_with(const Launch& launch, std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size,
                       int group, double sm_scale, bool per_head_scales = false,
                       std::optional<ra::decode_kernel> kernel = {}, int warp_groups = 0) {
  constexpr int kMaxBatch = decode_case::max_batch;
  const decode_case c = make_decode_case(rng, head_dim, block_size, group);  // gpu_cases.hpp
  const paged_problem& p = c.problem;
  const ra::attention_shape& s = p.shape;
  const int batch = c.batch();
  const auto pools = make_pools<HostKV>(rng, p);
  const kv_scale_values scales = draw_kv_scales<HostKV>(rng, s.num_kv_heads, per_head_scales);
  const std::int64_t row = s.q_row_elements();

  // Queries: kMaxBatch rows `q_stride` apart; the gaps are NaN.
  const std::int64_t q_stride = row + 8;
  std::vector<HostT> q_dense = random_vector<HostT>(rng, static_cast<std::size_t>(kMaxBatch * row));
  std::vector<HostT> q_strided(static_cast<std::size_t>(kMaxBatch * q_stride), poison<HostT>());
  for (int b = 0; b < kMaxBatch; ++b) {
    std::copy_n(q_dense.begin() + b * row, row, q_strided.begin() + b * q_stride);
  }

  const mod_values mod = draw_mod_values<Mod>(rng, s.num_qo_heads, 37);  // nothing drawn for the default
  std::vector<double> want(static_cast<std::size_t>(batch * row));
  ra::reference::decode<HostKV, HostT, double>(s, pools.k, pools.v, q_dense, c.lens, {p.tables, p.table_stride}, sm_scale,
                                               want, {mod.values, mod.sinks}, {scales.k, scales.v});
  // Null where absent: sinks without Mod.sinks (none drawn), scales over a 16-bit cache.
  const device_buffer<float> sinks = device_copy_or_none(mod.sinks);
  const device_buffer<float> k_scale = device_copy_or_none(scales.k), v_scale = device_copy_or_none(scales.v);

  device_buffer<HostKV> k(pools.k), v(pools.v);
  device_buffer<HostT> q_dev(q_strided);
  device_buffer<HostT> q_dense_dev(q_dense);
  device_buffer<std::int32_t> tables_dev(static_cast<std::size_t>(kMaxBatch * c.table_stride));
  device_buffer<std::int32_t> lens_dev(kMaxBatch);
  device_buffer<HostT> out(static_cast<std::size_t>(kMaxBatch * row));

  const ra::attention_config config{type, s, static_cast<float>(sm_scale), mod.values, scales.format};
  for (gpu_run r : c.runs) {
    if (kernel) r.options.kernel = kernel;
    if (warp_groups != 0) r.options.warp_groups = warp_groups;
    // The plan, and the per-step metadata through the host writer (gpu_cases.hpp); table
    // entries it does not write stay poison.
    const decode_staged staged = stage_decode<Set>(c, config, r, ra::query_device());
    const ra::decode_plan& plan = staged.plan;
    lens_dev.upload(staged.lens);
    tables_dev.upload(staged.tables);
    out.poison();
    device_buffer<std::byte> workspace(plan.workspace.bytes);
    if (plan.split()) workspace.poison();

    ra::decode_args args{.q = r.strided_q ? q_dev.data() : q_dense_dev.data(),
                         .q_stride = r.strided_q ? q_stride : 0,
                         .k_cache = k.data(),
                         .v_cache = v.data(),
                         .block_tables = tables_dev.data(),
                         .block_table_stride = c.table_stride,
                         .seq_lens = lens_dev.data(),
                         .out = out.data(),
                         .workspace = workspace.data(),
                         .workspace_bytes = workspace.size(),
                         .sinks = sinks.data(),
                         .k_scale = k_scale.data(),
                         .v_scale = v_scale.data()};
    launch(plan, args);  // ra::decode<Set, Mod>, or a mutant's
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());

    const auto got = out.download();
    const std::string what =
        std::string(r.name) + ", " + std::to_string(plan.num_splits) + " splits, " + ra::name(plan.kernel) + " decode" +
        (plan.warp_groups > 1 ? ", " + std::to_string(plan.warp_groups) + " warp groups" : "");
    require_close(got, want, row, 0, batch, what);
    require_zero_rows(got, row, 2, 3, what + ": the length-0 sequence");
    require_zero_rows(got, row, batch, kMaxBatch, what + ": padded batch rows");
  }
}

}  // namespace rungs_test
