// rungs' paged attention on the GPU: the public launch API (CUB's Device* layer).
//
//   #include <rungs/attention/paged_attention.cuh>
//   namespace ra = rungs::attention;
//   ra::attention_config cfg{ra::dtype::bf16, {.num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128,
//                                              .block_size = 16, .num_blocks = pool_blocks}};
//   ra::decode_plan plan = ra::plan_decode(cfg, {.max_batch = 64, .max_context = 4096}, ra::query_device());
//   // workspace: plan.workspace.bytes of device memory (none when !plan.split())
//   ra::cache_write(cfg, {...this step's K, V, slot_mapping...}, stream);
//   ra::decode(plan, {...q, caches, block tables, seq_lens, out, workspace...}, stream);  // capturable
//
// Layers, top to bottom: decode / prefill / cache_write validate the host values (plan.hpp's
// validate) and dispatch the run-time dtype, head dim, block size and group to an instance of
// the instantiation set `Set` (dispatch.hpp), throwing rungs::unsupported_value for a value the
// set lacks; launch_decode / launch_prefill / launch_cache_write are the typed launchers of one
// instance (for callers that know their shape at compile time); detail/kernels.cuh holds the
// __global__ kernels, detail/agent.cuh the per-CTA attention agent, detail/device.cuh the
// vector, cp.async and warp building blocks (CUB's WarpReduce merges splits).
//
// Graph safety: a run launches a grid fixed by the plan (never by the data), allocates
// nothing, does not synchronise, and reads lengths, block tables and query offsets from
// device memory, so a captured run replays correctly after the caller rewrites those buffers.
// Errors are reported as exceptions (std::invalid_argument, rungs::unsupported_value,
// rungs::cuda_error), never by aborting.
#pragma once

#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/detail/kernels.cuh>
#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/detail/tensor_core.cuh>
#include <rungs/attention/device.hpp>
#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/geometry.hpp>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/score_mod.hpp>
#include <rungs/cuda/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rungs::attention {

namespace detail {

template <class HostT>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<HostT, rungs::f16>) return dtype::fp16;
  else if constexpr (std::is_same_v<HostT, rungs::bf16>) return dtype::bf16;
  else if constexpr (std::is_same_v<HostT, rungs::e4m3>) return dtype::fp8_e4m3;
  else return dtype::fp8_e5m2;
}

template <class HostT, int HeadDim, int BlockSize, class HostKV = HostT>
void check_instance(const attention_config& c, const char* op) {
  const attention_shape& s = c.shape;
  if (c.type != dtype_of<HostT>() || c.cache_type() != dtype_of<HostKV>() || s.head_dim != HeadDim ||
      (BlockSize != dynamic_block_size && s.block_size != BlockSize)) {
    rungs::attention::detail::fail(op, ": the instance <", name(dtype_of<HostT>()), ", ", HeadDim, ", ", BlockSize,
                                   ", kv ", name(dtype_of<HostKV>()), "> cannot run dtype ", name(c.type), ", head_dim ",
                                   s.head_dim, ", block_size ", s.block_size, ", kv ", name(c.cache_type()));
  }
}

template <class Kernel, class Params>
void launch(Kernel kernel, launch_grid grid, int threads, const Params& params, cudaStream_t stream,
            std::size_t dynamic_smem = 0) {
  kernel<<<dim3(grid.x, grid.y, grid.z), threads, dynamic_smem, stream>>>(params);
  RUNGS_CUDA_CHECK(cudaGetLastError());
}

// A kernel's dynamic shared memory above the default 48 KiB, raised before each launch (the
// attribute belongs to the kernel on the current device; setting it is no stream operation, so
// it is allowed while the stream is captured).
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, std::size_t bytes) {
  RUNGS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// A split decode plan's merge of the partial outputs (either decode kernel writes them).
template <class T, int HeadDim, bool Sinks>
void launch_decode_merge(const decode_plan& plan, const decode_args& a, cudaStream_t stream) {
  if (!plan.split()) return;
  const merge_params m = decode_merge_params(plan, a);
  launch(merge_splits_kernel<T, HeadDim, Sinks>, merge_grid(m), 32 * geometry::merge_warps, m, stream);
}

// A split prefill plan's merge of the partial outputs (either prefill kernel writes them).
template <class T, int HeadDim, bool Sinks>
void launch_prefill_merge(const prefill_plan& plan, const prefill_args& a, cudaStream_t stream) {
  if (!plan.split()) return;
  const merge_params m = prefill_merge_params(plan, a);
  launch(merge_splits_kernel<T, HeadDim, Sinks>, merge_grid(m), 32 * geometry::merge_warps, m, stream);
}

}  // namespace detail

/// Typed decode launcher of one instance: HostT rungs::f16 or rungs::bf16; BlockSize a static
/// block size or dynamic_block_size; Group the GQA group size; Mod the score transforms
/// (score_mod.hpp), which must be those the plan's config and the arguments ask for; HostKV
/// the cache's element type (HostT, rungs::e4m3 or rungs::e5m2: the config's cache_type()).
template <class HostT, int HeadDim, int BlockSize, int Group, score_mod Mod = score_mod{}, class HostKV = HostT>
void launch_decode(const decode_plan& plan, const decode_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using KV = detail::device_type_t<HostKV>;
  static_assert(geometry::decode_group_fits(HeadDim, Group), "this GQA group size does not fit the decode kernel");
  constexpr int kRows = geometry::decode_rows_per_thread(Group);
  constexpr int kRowGroups = geometry::decode_row_groups(Group);
  const attention_shape& s = plan.config.shape;
  detail::check_instance<HostT, HeadDim, BlockSize, HostKV>(plan.config, "decode");
  if (s.group_size() != Group) {
    detail::fail("decode: the instance for group size ", Group, " cannot run group size ", s.group_size());
  }
  validate(plan, a);
  check_score_mod(Mod, plan.config, a.sinks, "decode");

  detail::launch(detail::paged_attention_kernel<T, HeadDim, BlockSize, kRows, kRowGroups, true, score_mod_bits(Mod), KV>,
                 detail::decode_grid(plan), geometry::threads, detail::decode_params(plan, a), stream);
  detail::launch_decode_merge<T, HeadDim, Mod.sinks>(plan, a, stream);
}

/// Typed launcher of one tensor-core decode instance (tensor_core.cuh): the same plan,
/// arguments, score transforms Mod and cache type HostKV as launch_decode's (whatever
/// plan.kernel and plan.warp_groups say); WarpGroups: the in-CTA split's warp groups a CTA
/// (16-bit caches; the same outputs, a CTA of 128 WarpGroups threads).
template <class HostT, int HeadDim, int BlockSize, int Group, score_mod Mod = score_mod{}, class HostKV = HostT,
          int WarpGroups = 1>
void launch_tensor_core_decode(const decode_plan& plan, const decode_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using KV = detail::device_type_t<HostKV>;
  const attention_shape& s = plan.config.shape;
  detail::check_instance<HostT, HeadDim, BlockSize, HostKV>(plan.config, "decode (tensor cores)");
  if (s.group_size() != Group) {
    detail::fail("decode (tensor cores): the instance for group size ", Group, " cannot run group size ",
                 s.group_size());
  }
  validate(plan, a);
  check_score_mod(Mod, plan.config, a.sinks, "decode (tensor cores)");
  if constexpr (WarpGroups == 1) {
    detail::launch(detail::tensor_core_decode_kernel<T, HeadDim, BlockSize, Group, score_mod_bits(Mod), KV>,
                   detail::decode_grid(plan), geometry::threads, detail::decode_params(plan, a), stream);
  } else {
    static_assert(std::is_same_v<T, KV>, "the in-CTA split takes a cache of the queries' type");
    const auto kernel = detail::tensor_core_split_decode_kernel<T, HeadDim, BlockSize, Group, WarpGroups, score_mod_bits(Mod)>;
    constexpr std::size_t smem =
        sizeof(typename detail::tensor_core_decode_agent<T, HeadDim, Group, score_mod_bits(Mod), KV, WarpGroups>::storage);
    static_assert(smem == std::size_t{WarpGroups} * geometry::tensor_core_decode_group_bytes(HeadDim),
                  "the planner's and scripts/sass-check's shared memory of the in-CTA split is the kernel's");
    detail::allow_dynamic_smem(kernel, smem);
    detail::launch(kernel, detail::decode_grid(plan), geometry::threads * WarpGroups, detail::decode_params(plan, a),
                   stream, smem);
  }
  detail::launch_decode_merge<T, HeadDim, Mod.sinks>(plan, a, stream);
}

/// Typed prefill/extend launcher of one instance (the group size is a run-time value).
template <class HostT, int HeadDim, int BlockSize, score_mod Mod = score_mod{}, class HostKV = HostT>
void launch_prefill(const prefill_plan& plan, const prefill_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using KV = detail::device_type_t<HostKV>;
  using agent = detail::attention_agent<T, HeadDim, geometry::prefill_rows_per_thread, geometry::thread_rows(HeadDim)>;
  static_assert(agent::kCtaRows == geometry::prefill_rows_per_cta(HeadDim));
  detail::check_instance<HostT, HeadDim, BlockSize, HostKV>(plan.config, "prefill");
  validate(plan, a);
  check_score_mod(Mod, plan.config, a.sinks, "prefill");

  detail::launch(detail::paged_attention_kernel<T, HeadDim, BlockSize, geometry::prefill_rows_per_thread,
                                                geometry::thread_rows(HeadDim), false, score_mod_bits(Mod), KV>,
                 detail::prefill_grid(plan), geometry::threads, detail::prefill_params(plan, a), stream);
  detail::launch_prefill_merge<T, HeadDim, Mod.sinks>(plan, a, stream);
}

/// Typed launcher of one tensor-core prefill instance (tensor_core.cuh): the same plan,
/// arguments, score transforms Mod and cache type HostKV as launch_prefill's (whatever
/// plan.kernel says).
template <class HostT, int HeadDim, int BlockSize, score_mod Mod = score_mod{}, class HostKV = HostT>
void launch_tensor_core_prefill(const prefill_plan& plan, const prefill_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using KV = detail::device_type_t<HostKV>;
  static_assert(detail::tensor_core_prefill_agent<T, HeadDim>::kCtaRows == geometry::prefill_rows_per_cta(HeadDim));
  detail::check_instance<HostT, HeadDim, BlockSize, HostKV>(plan.config, "prefill (tensor cores)");
  validate(plan, a);
  check_score_mod(Mod, plan.config, a.sinks, "prefill (tensor cores)");
  detail::launch(detail::tensor_core_prefill_kernel<T, HeadDim, BlockSize, score_mod_bits(Mod), KV>,
                 detail::prefill_grid(plan), geometry::threads, detail::prefill_params(plan, a), stream);
  detail::launch_prefill_merge<T, HeadDim, Mod.sinks>(plan, a, stream);
}

/// Typed cache-write launcher of one instance (HostKV: the cache's element type; an fp8 cache
/// quantises HostT rows).
template <class HostT, int HeadDim, class HostKV = HostT>
void launch_cache_write(const attention_config& config, const cache_write_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using KV = detail::device_type_t<HostKV>;
  detail::check_instance<HostT, HeadDim, dynamic_block_size, HostKV>(config, "cache_write");
  validate(config, a);
  if (a.num_tokens == 0) return;
  const detail::cache_write_params p = detail::make_cache_write_params(config, a);
  detail::launch(detail::cache_write_kernel<T, HeadDim, KV>, detail::cache_write_grid(p, HeadDim),
                 geometry::cache_write_threads, p, stream);
}

/// Decode: one query token per sequence of the plan's bucket (max_batch rows; padded rows
/// have seq_len 0 and get zero outputs). Instances come from `Set`, compiled with the score
/// transforms `Mod` (score_mod.hpp; the default: none). It runs the plan's kernel
/// (plan.kernel), so plan with plan_decode<Set>: a plan for a tensor-core decode Set does not
/// compile is refused (check_decode_kernel), never run on another kernel. Over an fp8 cache Set
/// compiles the tensor-core decode of each shape both Set::tensor_core_decode and Set::fp8_kv
/// list, at head dims 64 and 128 (has_tensor_core_decode).
template <class Set = default_instantiations, score_mod Mod = score_mod{}>
void decode(const decode_plan& plan, const decode_args& args, cudaStream_t stream = nullptr) {
  const attention_config& c = plan.config;
  check_decode_kernel<Set>(plan);
  if constexpr (!Set::tensor_core_decode::empty) {
    if (plan.kernel == decode_kernel::tensor_cores && !c.quantized_cache()) {
      dispatch_tensor_core_decode<Set>(c.type, c.shape, [&]<class HostT, int D, int B, int G>() {
        using tc = typename Set::tensor_core_decode;
        constexpr dtype kType = detail::dtype_of<HostT>();
        if constexpr (tc::contains_split(kType, D, G, 4)) {
          if (plan.warp_groups == 4) return launch_tensor_core_decode<HostT, D, B, G, Mod, HostT, 4>(plan, args, stream);
        }
        if constexpr (tc::contains_split(kType, D, G, 3)) {
          if (plan.warp_groups == 3) return launch_tensor_core_decode<HostT, D, B, G, Mod, HostT, 3>(plan, args, stream);
        }
        if constexpr (tc::contains_split(kType, D, G, 2)) {
          if (plan.warp_groups == 2) return launch_tensor_core_decode<HostT, D, B, G, Mod, HostT, 2>(plan, args, stream);
        }
        launch_tensor_core_decode<HostT, D, B, G, Mod>(plan, args, stream);  // check_decode_kernel: warp_groups 1
      });
      return;
    }
  }
  if (c.quantized_cache()) {
    dispatch_fp8_decode<Set>(c.type, c.cache_type(), c.shape, [&]<class HostT, class HostKV, int D, int B, int G>() {
      if constexpr (Set::tensor_core_decode::contains(detail::dtype_of<HostT>(), D, G) &&
                    geometry::tensor_core_fp8_decode_fits(D)) {
        if (plan.kernel == decode_kernel::tensor_cores) {  // check_decode_kernel let it through
          launch_tensor_core_decode<HostT, D, B, G, Mod, HostKV>(plan, args, stream);
          return;
        }
      }
      launch_decode<HostT, D, B, G, Mod, HostKV>(plan, args, stream);
    });
    return;
  }
  dispatch_decode<Set>(c.type, c.shape, [&]<class HostT, int D, int B, int G>() {
    launch_decode<HostT, D, B, G, Mod>(plan, args, stream);
  });
}

/// Prefill/extend: q_indptr-packed new tokens of each sequence, causal against the end of the
/// context (the new tokens' K and V must already be in the cache). It runs the plan's kernel
/// (plan.kernel), so plan with plan_prefill<Set>: a plan for a tensor-core prefill Set does not
/// compile is refused (check_prefill_kernel), never run on another kernel. Over an fp8 cache
/// Set compiles the tensor-core prefill of each shape both Set::tensor_core_prefill and
/// Set::fp8_kv list (has_tensor_core_prefill).
template <class Set = default_instantiations, score_mod Mod = score_mod{}>
void prefill(const prefill_plan& plan, const prefill_args& args, cudaStream_t stream = nullptr) {
  const attention_config& c = plan.config;
  check_prefill_kernel<Set>(plan);
  if constexpr (!Set::tensor_core_prefill::empty) {
    if (plan.kernel == attention_kernel::tensor_cores && !c.quantized_cache()) {
      dispatch_tensor_core_prefill<Set>(c.type, c.shape, [&]<class HostT, int D, int B>() {
        launch_tensor_core_prefill<HostT, D, B, Mod>(plan, args, stream);
      });
      return;
    }
  }
  if (c.quantized_cache()) {
    dispatch_fp8_prefill<Set>(c.type, c.cache_type(), c.shape, [&]<class HostT, class HostKV, int D, int B>() {
      if constexpr (Set::tensor_core_prefill::contains(detail::dtype_of<HostT>(), D)) {
        if (plan.kernel == attention_kernel::tensor_cores) {  // check_prefill_kernel let it through
          launch_tensor_core_prefill<HostT, D, B, Mod, HostKV>(plan, args, stream);
          return;
        }
      }
      launch_prefill<HostT, D, B, Mod, HostKV>(plan, args, stream);
    });
    return;
  }
  dispatch_prefill<Set>(c.type, c.shape,
                        [&]<class HostT, int D, int B>() { launch_prefill<HostT, D, B, Mod>(plan, args, stream); });
}

/// Cache write: this step's K and V rows into the slots of slot_mapping (-1: padding).
template <class Set = default_instantiations>
void cache_write(const attention_config& config, const cache_write_args& args, cudaStream_t stream = nullptr) {
  if (config.quantized_cache()) {
    dispatch_fp8_cache_write<Set>(config.type, config.cache_type(), config.shape,
                                  [&]<class HostT, class HostKV, int D>() {
                                    launch_cache_write<HostT, D, HostKV>(config, args, stream);
                                  });
    return;
  }
  dispatch_cache_write<Set>(config.type, config.shape,
                            [&]<class HostT, int D>() { launch_cache_write<HostT, D>(config, args, stream); });
}

}  // namespace rungs::attention
