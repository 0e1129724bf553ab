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
#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/geometry.hpp>
#include <rungs/attention/plan.hpp>
#include <rungs/cuda/error.cuh>

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace rungs::attention {

/// The planner's view of a GPU (the current one when device < 0).
inline device_info query_device(int device = -1) {
  if (device < 0) RUNGS_CUDA_CHECK(cudaGetDevice(&device));
  device_info info;
  RUNGS_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
  return info;
}

namespace detail {

inline int log2_block(int block_size) { return ilog2(block_size); }

template <class HostT, int HeadDim, int BlockSize>
void check_instance(const attention_config& c, const char* op) {
  const attention_shape& s = c.shape;
  if (c.type != (std::is_same_v<HostT, rungs::f16> ? dtype::f16 : dtype::bf16) || s.head_dim != HeadDim ||
      (BlockSize != dynamic_block_size && s.block_size != BlockSize)) {
    rungs::attention::detail::fail(op, ": the instance <", std::is_same_v<HostT, rungs::f16> ? "f16" : "bf16", ", ",
                                   HeadDim, ", ", BlockSize, "> cannot run dtype ", name(c.type), ", head_dim ",
                                   s.head_dim, ", block_size ", s.block_size);
  }
}

inline void launch_merge_for(const split_workspace& w, void* workspace, void* out, const std::int32_t* q_indptr,
                             int num_seqs, int max_tokens, int num_qo_heads, int num_splits, auto kernel,
                             cudaStream_t stream) {
  merge_params m;
  m.partial_out = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + w.partial_out_offset);
  m.partial_lse = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + w.partial_lse_offset);
  m.out = out;
  m.q_indptr = q_indptr;
  m.num_seqs = num_seqs;
  m.max_tokens = max_tokens;
  m.num_qo_heads = num_qo_heads;
  m.num_splits = num_splits;
  const std::int64_t rows = static_cast<std::int64_t>(max_tokens) * num_qo_heads;
  const auto blocks = static_cast<unsigned>((rows + geometry::merge_warps - 1) / geometry::merge_warps);
  kernel<<<blocks, 32 * geometry::merge_warps, 0, stream>>>(m);
  RUNGS_CUDA_CHECK(cudaGetLastError());
}

inline attention_params make_params(const attention_config& c, const split_workspace& w, void* workspace,
                                    int num_splits, int split_tokens, int max_context) {
  const attention_shape& s = c.shape;
  attention_params p{};
  p.num_qo_heads = s.num_qo_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.group_size = s.group_size();
  p.log2_block_size = log2_block(s.block_size);
  p.num_splits = num_splits;
  p.split_tokens = split_tokens;
  p.max_context = max_context;
  p.scale_log2 = c.scale() * 1.4426950408889634f;  // log2(e)
  if (num_splits > 1) {
    p.partial_out = reinterpret_cast<float*>(static_cast<char*>(workspace) + w.partial_out_offset);
    p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + w.partial_lse_offset);
  }
  return p;
}

}  // namespace detail

/// Typed decode launcher of one instance: HostT rungs::f16 or rungs::bf16; BlockSize a static
/// block size or dynamic_block_size; Group the GQA group size.
template <class HostT, int HeadDim, int BlockSize, int Group>
void launch_decode(const decode_plan& plan, const decode_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  static_assert(geometry::decode_group_fits(HeadDim, Group), "this GQA group size does not fit the decode kernel");
  constexpr int kRows = geometry::decode_rows_per_thread(Group);
  constexpr int kRowGroups = geometry::decode_row_groups(Group);
  const attention_shape& s = plan.config.shape;
  detail::check_instance<HostT, HeadDim, BlockSize>(plan.config, "decode");
  if (s.group_size() != Group) {
    detail::fail("decode: the instance for group size ", Group, " cannot run group size ", s.group_size());
  }
  validate(plan, a);

  detail::attention_params p =
      detail::make_params(plan.config, plan.workspace, a.workspace, plan.num_splits, plan.split_tokens,
                          plan.bucket.max_context);
  p.q = a.q;
  p.q_stride = a.q_stride != 0 ? a.q_stride : s.q_row_elements();
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.block_tables = a.block_tables;
  p.block_table_stride = a.block_table_stride != 0 ? a.block_table_stride : plan.max_blocks_per_seq;
  p.kv_lens = a.seq_lens;
  p.q_indptr = nullptr;
  p.out = a.out;
  p.max_q_len = 1;
  p.max_total_q = plan.bucket.max_batch;

  const dim3 grid(static_cast<unsigned>(plan.num_splits), static_cast<unsigned>(s.num_kv_heads),
                  static_cast<unsigned>(plan.bucket.max_batch));
  detail::paged_attention_kernel<T, HeadDim, BlockSize, kRows, kRowGroups, true>
      <<<grid, geometry::threads, 0, stream>>>(p);
  RUNGS_CUDA_CHECK(cudaGetLastError());
  if (plan.split()) {
    detail::launch_merge_for(plan.workspace, a.workspace, a.out, nullptr, plan.bucket.max_batch,
                             plan.bucket.max_batch, s.num_qo_heads, plan.num_splits,
                             detail::merge_splits_kernel<T, HeadDim>, stream);
  }
}

/// Typed prefill/extend launcher of one instance (the group size is a run-time value).
template <class HostT, int HeadDim, int BlockSize>
void launch_prefill(const prefill_plan& plan, const prefill_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  using agent = detail::attention_agent<T, HeadDim, geometry::max_rows_per_thread, geometry::thread_rows(HeadDim)>;
  static_assert(agent::kCtaRows == geometry::prefill_rows_per_cta(HeadDim));
  const attention_shape& s = plan.config.shape;
  detail::check_instance<HostT, HeadDim, BlockSize>(plan.config, "prefill");
  validate(plan, a);

  detail::attention_params p = detail::make_params(plan.config, plan.workspace, a.workspace, plan.num_splits,
                                                   plan.split_tokens, plan.bucket.max_context);
  p.q = a.q;
  p.q_stride = a.q_stride != 0 ? a.q_stride : s.q_row_elements();
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.block_tables = a.block_tables;
  p.block_table_stride = a.block_table_stride != 0 ? a.block_table_stride : plan.max_blocks_per_seq;
  p.kv_lens = a.kv_lens;
  p.q_indptr = a.q_indptr;
  p.out = a.out;
  p.max_q_len = plan.bucket.max_q_len;
  p.max_total_q = plan.bucket.max_total_q;

  const dim3 grid(static_cast<unsigned>(plan.q_tiles * plan.num_splits), static_cast<unsigned>(s.num_kv_heads),
                  static_cast<unsigned>(plan.bucket.max_batch));
  detail::paged_attention_kernel<T, HeadDim, BlockSize, geometry::max_rows_per_thread,
                                 geometry::thread_rows(HeadDim), false><<<grid, geometry::threads, 0, stream>>>(p);
  RUNGS_CUDA_CHECK(cudaGetLastError());
  if (plan.split()) {
    detail::launch_merge_for(plan.workspace, a.workspace, a.out, a.q_indptr, plan.bucket.max_batch,
                             plan.bucket.max_total_q, s.num_qo_heads, plan.num_splits,
                             detail::merge_splits_kernel<T, HeadDim>, stream);
  }
}

/// Typed cache-write launcher of one instance.
template <class HostT, int HeadDim>
void launch_cache_write(const attention_config& config, const cache_write_args& a, cudaStream_t stream) {
  using T = detail::device_type_t<HostT>;
  const attention_shape& s = config.shape;
  detail::check_instance<HostT, HeadDim, dynamic_block_size>(config, "cache_write");
  validate(config, a);
  if (a.num_tokens == 0) return;
  detail::cache_write_params p;
  p.k = a.k;
  p.v = a.v;
  p.k_stride = a.k_stride != 0 ? a.k_stride : s.kv_row_elements();
  p.v_stride = a.v_stride != 0 ? a.v_stride : s.kv_row_elements();
  p.slot_mapping = a.slot_mapping;
  p.num_tokens = a.num_tokens;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.num_kv_heads = s.num_kv_heads;
  p.log2_block_size = detail::log2_block(s.block_size);
  p.num_slots = s.num_slots();
  const std::int64_t vectors = a.num_tokens * s.num_kv_heads * (HeadDim / geometry::vector_elements);
  const std::int64_t wanted = (vectors + geometry::cache_write_threads - 1) / geometry::cache_write_threads;
  const auto blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);  // grid-stride beyond
  detail::cache_write_kernel<T, HeadDim><<<blocks, geometry::cache_write_threads, 0, stream>>>(p);
  RUNGS_CUDA_CHECK(cudaGetLastError());
}

/// Decode: one query token per sequence of the plan's bucket (max_batch rows; padded rows
/// have seq_len 0 and get zero outputs). Instances come from `Set`.
template <class Set = default_instantiations>
void decode(const decode_plan& plan, const decode_args& args, cudaStream_t stream = nullptr) {
  dispatch_decode<Set>(plan.config.type, plan.config.shape, [&]<class HostT, int D, int B, int G>() {
    launch_decode<HostT, D, B, G>(plan, args, stream);
  });
}

/// Prefill/extend: q_indptr-packed new tokens of each sequence, causal against the end of the
/// context (the new tokens' K and V must already be in the cache).
template <class Set = default_instantiations>
void prefill(const prefill_plan& plan, const prefill_args& args, cudaStream_t stream = nullptr) {
  dispatch_prefill<Set>(plan.config.type, plan.config.shape,
                        [&]<class HostT, int D, int B>() { launch_prefill<HostT, D, B>(plan, args, stream); });
}

/// Cache write: this step's K and V rows into the slots of slot_mapping (-1: padding).
template <class Set = default_instantiations>
void cache_write(const attention_config& config, const cache_write_args& args, cudaStream_t stream = nullptr) {
  dispatch_cache_write<Set>(config.type, config.shape,
                            [&]<class HostT, int D>() { launch_cache_write<HostT, D>(config, args, stream); });
}

}  // namespace rungs::attention
