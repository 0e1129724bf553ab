// GPU prefill/extend against the host reference, for every head dim and block size of the
// tested set, a few GQA groups (prefill takes the group at run time), with and without KV
// splits: ragged query lengths (pure prefills, extends, a sequence with no new token),
// strided queries, padded batch rows, and output rows past the batch's tokens that must stay
// untouched. Included by one .cu per element type.
#pragma once

#include <rungs/attention/paged_attention.cuh>
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

/// HostKV: the cache's element type (HostT, or an fp8 type with fresh scales, per head when
/// `per_head_scales`). kernel: the plan's kernel (plan_options::kernel); empty: the planner's.
template <class HostT, class Set, ra::score_mod Mod = ra::score_mod{}, class HostKV = HostT>
void check_prefill(std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size, int group, double sm_scale,
                   bool per_head_scales = false, std::optional<ra::attention_kernel> kernel = {}) {
  constexpr int kMaxBatch = prefill_case::max_batch;
  constexpr int max_total_q = prefill_case::max_total_q;
  const prefill_case c = make_prefill_case(rng, head_dim, block_size, group);  // gpu_cases.hpp
  const paged_problem& p = c.problem;
  const ra::attention_shape& s = p.shape;
  const auto pools = make_pools<HostKV>(rng, p);
  const kv_scale_values scales = draw_kv_scales<HostKV>(rng, s.num_kv_heads, per_head_scales);
  const std::int64_t row = s.q_row_elements();
  const int total_q = p.total_q();

  const std::int64_t q_stride = row + 16;
  const auto q_dense = random_vector<HostT>(rng, static_cast<std::size_t>(max_total_q * row));
  std::vector<HostT> q_strided(static_cast<std::size_t>(max_total_q * q_stride), poison<HostT>());
  for (int t = 0; t < max_total_q; ++t) std::copy_n(q_dense.begin() + t * row, row, q_strided.begin() + t * q_stride);

  // A window shorter than the longest q_len: q tiles start at different keys.
  const mod_values mod = draw_mod_values<Mod>(rng, s.num_qo_heads, 29);  // nothing drawn for the default
  std::vector<double> want(static_cast<std::size_t>(total_q * row));
  ra::reference::prefill<HostKV, HostT, double>(s, pools.k, pools.v, q_dense, p.q_indptr, c.kv_lens,
                                                {p.tables, p.table_stride}, sm_scale, want, {mod.values, mod.sinks},
                                                {scales.k, scales.v});
  device_buffer<float> sinks(Mod.sinks ? mod.sinks : std::vector<float>(1));
  device_buffer<float> k_scale(scales.k.empty() ? std::vector<float>(1) : scales.k),
      v_scale(scales.v.empty() ? std::vector<float>(1) : scales.v);

  device_buffer<HostKV> k(pools.k), v(pools.v);
  device_buffer<HostT> q_dev(q_strided), q_dense_dev(q_dense);
  device_buffer<std::int32_t> indptr_dev(kMaxBatch + 1), kv_dev(kMaxBatch),
      tables_dev(static_cast<std::size_t>(kMaxBatch * c.table_stride));
  device_buffer<HostT> out(static_cast<std::size_t>(max_total_q * row));

  const ra::attention_config config{type, s, static_cast<float>(sm_scale), mod.values, scales.format};
  for (gpu_run r : c.runs) {
    if (kernel) r.options.kernel = kernel;
    const prefill_staged staged = stage_prefill(c, config, r, ra::query_device());
    const ra::prefill_plan& plan = staged.plan;
    indptr_dev.upload(staged.indptr);
    kv_dev.upload(staged.kv_lens);
    tables_dev.upload(staged.tables);
    out.poison();
    device_buffer<std::byte> workspace(plan.workspace.bytes);
    if (plan.split()) workspace.poison();

    ra::prefill_args args{.q = r.strided_q ? q_dev.data() : q_dense_dev.data(),
                          .q_stride = r.strided_q ? q_stride : 0,
                          .k_cache = k.data(),
                          .v_cache = v.data(),
                          .block_tables = tables_dev.data(),
                          .block_table_stride = c.table_stride,
                          .q_indptr = indptr_dev.data(),
                          .kv_lens = kv_dev.data(),
                          .out = out.data(),
                          .workspace = workspace.data(),
                          .workspace_bytes = workspace.size(),
                          .sinks = Mod.sinks ? sinks.data() : nullptr,
                          .k_scale = scales.k.empty() ? nullptr : k_scale.data(),
                          .v_scale = scales.v.empty() ? nullptr : v_scale.data()};
    ra::prefill<Set, Mod>(plan, args, nullptr);
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());

    const auto got = out.download();
    const std::string what = std::string(r.name) + ", " + std::to_string(plan.q_tiles) + " q tiles, " +
                             std::to_string(plan.num_splits) + " splits, " + ra::name(plan.kernel) + " prefill";
    require_close(got, want, row, 0, total_q, what);
    std::int64_t touched = 0;  // rows past the batch's tokens belong to nobody
    for (std::int64_t i = total_q * row; i < max_total_q * row; ++i) touched += got[static_cast<std::size_t>(i)].bits != 0xffff;
    INFO(what);
    CHECK(touched == 0);
  }
}

template <ra::dtype Type>
void check_prefill_set() {
  using host_t = ra::host_type<Type>;
  using set = tested_set_of<Type>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 23);
  for_each_value(typename set::head_dims{}, [&](int head_dim) {
    for (int block_size : checked_block_sizes) {
      for (int group : {1, 3, 8}) {
        const double scale = group == 3 ? 0.0 : 0.3;
        INFO(rungs::name(Type) << ", head_dim " << head_dim << ", block_size " << block_size << ", group " << group);
        check_prefill<host_t, set>(rng, Type, head_dim, block_size, group, scale);
        // Shapes with a tensor-core instance: the other kernel too (the planner picks tensor
        // cores on sm_80 and newer), at group 3 (row tiles part valid).
        const ra::attention_shape shape{.num_qo_heads = group, .num_kv_heads = 1, .head_dim = head_dim,
                                        .block_size = block_size};
        if (group == 3 && ra::has_tensor_core_prefill<set>(Type, shape)) {
          for (ra::attention_kernel k : {ra::attention_kernel::simt, ra::attention_kernel::tensor_cores}) {
            check_prefill<host_t, set>(rng, Type, head_dim, block_size, group, scale, false, k);
          }
        }
      }
    }
  });
}

/// The score transforms (window 29, soft-cap, sinks) on one instance, head dim 128, groups 1
/// and 8, every checked block size, on the SIMT prefill and (group 8) the tensor-core prefill.
template <ra::dtype Type>
void check_prefill_score_mods() {
  using set = ra::instantiation_set<ra::dtypes<Type>, ra::values<128>, ra::values<ra::dynamic_block_size>, ra::values<4>,
                                    ra::no_fp8_kv, ra::no_tensor_core_decode,
                                    ra::tensor_core_prefill_instances<ra::dtypes<Type>, ra::values<128>>>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 31);
  for (int block_size : checked_block_sizes) {
    for (int group : {1, 8}) {
      for (ra::attention_kernel k : {ra::attention_kernel::simt, ra::attention_kernel::tensor_cores}) {
        if (k == ra::attention_kernel::tensor_cores && group != 8) continue;
        INFO(rungs::name(Type) << ", head_dim 128, block_size " << block_size << ", group " << group << ", "
                               << all_score_mods);
        check_prefill<ra::host_type<Type>, set, all_score_mods>(rng, Type, 128, block_size, group, 0.3, false, k);
      }
    }
  }
}

/// The fp8-cache prefill of one (query type, cache type, head dim) instance: groups 1 and 8,
/// every checked block size, per-head and per-tensor scales, on the SIMT prefill and, where
/// the tested set's tensor-core prefill list has the shape, (group 8) the tensor-core prefill.
template <ra::dtype Type, ra::dtype Kv, int HeadDim>
void check_prefill_fp8_instance() {
  constexpr bool kTensorCores = tested_set::tensor_core_prefill::contains(Type, HeadDim);
  using tensor_core = std::conditional_t<kTensorCores, ra::tensor_core_prefill_instances<ra::dtypes<Type>, ra::values<HeadDim>>,
                                         ra::no_tensor_core_prefill>;
  using set = ra::instantiation_set<ra::dtypes<Type>, ra::values<HeadDim>, tested_set::block_sizes, ra::values<1>,
                                    ra::fp8_kv_instances<ra::dtypes<Type>, ra::dtypes<Kv>, ra::values<HeadDim>, ra::values<1>>,
                                    ra::no_tensor_core_decode, tensor_core>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Kv) * 1000 + HeadDim + 7);
  for (int block_size : checked_block_sizes) {
    for (int group : {1, 8}) {
      for (ra::attention_kernel k : {ra::attention_kernel::simt, ra::attention_kernel::tensor_cores}) {
        if (k == ra::attention_kernel::tensor_cores && (!kTensorCores || group != 8)) continue;
        INFO(rungs::name(Type) << " queries, " << rungs::name(Kv) << " cache, head_dim " << HeadDim << ", block_size "
                               << block_size << ", group " << group);
        check_prefill<ra::host_type<Type>, set, ra::score_mod{}, ra::host_type<Kv>>(rng, Type, HeadDim, block_size,
                                                                                   group, 0.3, group == 8, k);
      }
    }
  }
}

}  // namespace rungs_test
