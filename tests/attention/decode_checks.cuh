// GPU decode against the host reference, for every head dim, block size and group of the
// tested set, with and without KV splits. Included by one .cu per element type.
#pragma once

#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "decode_harness.hpp"
#include "gpu_cases.hpp"
#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace rungs_test {

/// The check on ra::decode<Set, Mod> (decode_harness.hpp has the check itself).
template <class HostT, class Set, ra::score_mod Mod = ra::score_mod{}, class HostKV = HostT>
void check_decode(std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size, int group, double sm_scale,
                  bool per_head_scales = false, std::optional<ra::decode_kernel> kernel = {}, int warp_groups = 0) {
  check_decode_with<HostT, Set, Mod, HostKV>(
      [](const ra::decode_plan& plan, const ra::decode_args& args) { ra::decode<Set, Mod>(plan, args, nullptr); },
      rng, type, head_dim, block_size, group, sm_scale, per_head_scales, kernel, warp_groups);
}

template <ra::dtype Type>
void check_decode_set() {
  using host_t = ra::host_type<Type>;
  using set = tested_set_of<Type>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 17);
  for_each_value(typename set::head_dims{}, [&](int head_dim) {
    for (int block_size : checked_block_sizes) {
      for_each_value(typename set::decode_groups{}, [&](int group) {
        const double scale = group % 2 == 0 ? 0.3 : 0.0;  // sharper and default softmax
        INFO(rungs::name(Type) << ", head_dim " << head_dim << ", block_size " << block_size << ", group " << group
                            << ", sm_scale " << scale);
        // Shapes with a tensor-core instance: both kernels at the first checked block size,
        // whatever the planner picks here; otherwise (and at the other block sizes) the
        // planner's kernel (cuda-sim time: one run per shape and block size but one).
        const ra::attention_shape shape{.num_qo_heads = group, .num_kv_heads = 1, .head_dim = head_dim,
                                        .block_size = block_size};
        if (ra::has_tensor_core_decode<set>(Type, shape) && block_size == checked_block_sizes.front()) {
          for (ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
            check_decode<host_t, set>(rng, Type, head_dim, block_size, group, scale, false, k, 1);
          }
          // The in-CTA splits the set has for the shape (2, 3 or 4 warp groups a CTA), each forced
          // (the planner picks them only for grids that leave SMs' slots empty).
          for (int w : {2, 3, 4}) {
            if (set::tensor_core_decode::contains_split(Type, head_dim, group, w)) {
              check_decode<host_t, set>(rng, Type, head_dim, block_size, group, scale, false,
                                        ra::decode_kernel::tensor_cores, w);
            }
          }
        } else {
          check_decode<host_t, set>(rng, Type, head_dim, block_size, group, scale);
        }
      });
    }
  });
}

/// The score transforms (window 37, soft-cap, sinks) on one shape: head dim 128, group 4
/// (each transform policy is another set of kernels to compile), every checked block size, on
/// the SIMT and the tensor-core decode.
template <ra::dtype Type>
void check_decode_score_mods() {
  using set = ra::instantiation_set<ra::dtypes<Type>, ra::values<128>, ra::values<ra::dynamic_block_size>, ra::values<4>,
                                    ra::no_fp8_kv, ra::tensor_core_decode_instances<ra::dtypes<Type>, ra::values<128>, ra::values<4>>>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 29);
  for (int block_size : checked_block_sizes) {
    for (ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
      INFO(rungs::name(Type) << ", head_dim 128, block_size " << block_size << ", group 4, " << all_score_mods);
      check_decode<ra::host_type<Type>, set, all_score_mods>(rng, Type, 128, block_size, 4, 0.3, false, k);
    }
  }
}

/// The fp8-cache instances of the tested set (fp8_kv_instances): every (query type, cache
/// type, head dim, group) at every checked block size, with per-head and per-tensor scales, on
/// the SIMT decode and, where the tested set's tensor-core list has the shape, the tensor-core
/// decode. The set compiled here is those instances plus the 16-bit instances of each shape
/// (the dispatched entry point compiles both branches).
template <ra::dtype Type, ra::dtype Kv, int HeadDim, int Group>
void check_decode_fp8_instance() {
  constexpr bool kTensorCores = tested_set::tensor_core_decode::contains(Type, HeadDim, Group);
  using tensor_core = std::conditional_t<kTensorCores,
                                         ra::tensor_core_decode_instances<ra::dtypes<Type>, ra::values<HeadDim>, ra::values<Group>>,
                                         ra::no_tensor_core_decode>;
  using set = ra::instantiation_set<ra::dtypes<Type>, ra::values<HeadDim>, tested_set::block_sizes, ra::values<Group>,
                                    ra::fp8_kv_instances<ra::dtypes<Type>, ra::dtypes<Kv>, ra::values<HeadDim>, ra::values<Group>>,
                                    tensor_core>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Kv) * 1000 + HeadDim + Group);
  for (int block_size : checked_block_sizes) {
    for (bool per_head : {true, false}) {
      for (ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
        if (k == ra::decode_kernel::tensor_cores && !kTensorCores) continue;
        INFO(rungs::name(Type) << " queries, " << rungs::name(Kv) << " cache, head_dim " << HeadDim << ", block_size "
                               << block_size << ", group " << Group << (per_head ? ", per-head" : ", per-tensor")
                               << " scales");
        check_decode<ra::host_type<Type>, set, ra::score_mod{}, ra::host_type<Kv>>(rng, Type, HeadDim, block_size, Group,
                                                                                  0.3, per_head, k);
      }
    }
  }
}

}  // namespace rungs_test
