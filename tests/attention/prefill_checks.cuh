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

#include "prefill_harness.hpp"
#include "gpu_cases.hpp"
#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace rungs_test {

/// The check on ra::prefill<Set, Mod> (prefill_harness.hpp has the check itself).
template <class HostT, class Set, ra::score_mod Mod = ra::score_mod{}, class HostKV = HostT>
void check_prefill(std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size, int group, double sm_scale,
                   bool per_head_scales = false, std::optional<ra::attention_kernel> kernel = {}) {
  check_prefill_with<HostT, Set, Mod, HostKV>(
      [](const ra::prefill_plan& plan, const ra::prefill_args& args) { ra::prefill<Set, Mod>(plan, args, nullptr); },
      rng, type, head_dim, block_size, group, sm_scale, per_head_scales, kernel);
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
