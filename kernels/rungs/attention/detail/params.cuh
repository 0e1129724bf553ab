// Kernel parameters and launch shapes of rungs' paged attention, built from a plan and its
// arguments: the launch layer's arithmetic, kept in plain C++ (no CUDA types) so that it is
// shared by the launchers (paged_attention.cuh) and the host emulation test of the kernels
// (tests/attention/emulation), which runs the kernels' source on the CPU.
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/geometry.hpp>
#include <rungs/attention/plan.hpp>
#include <rungs/config.hpp>

#include <cstddef>
#include <cstdint>

namespace rungs::attention::detail {

RUNGS_HOST_DEVICE constexpr int ilog2(int v) {
  int r = 0;
  while ((1 << r) < v) ++r;
  return r;
}

inline constexpr float log2e = 1.4426950408889634f;

struct attention_params {
  const void* q;
  std::int64_t q_stride;                ///< elements between query token rows
  const void* k_cache;
  const void* v_cache;
  const std::int32_t* block_tables;
  std::int64_t block_table_stride;
  const std::int32_t* kv_lens;          ///< decode: seq_lens
  const std::int32_t* q_indptr;         ///< prefill only
  void* out;
  float* partial_out;                   ///< split plans only
  float* partial_lse;
  int num_qo_heads;
  int num_kv_heads;
  int group_size;
  int log2_block_size;
  int num_splits;
  int split_tokens;
  int max_context;                      ///< lengths are clamped to the bucket: no read past a table row
  int max_q_len;                        ///< prefill: q lengths are clamped to the bucket
  int max_total_q;                      ///< prefill: packed query rows in q and out
  float scale_log2;                     ///< sm_scale * log2(e)
  // Score transforms (score_mod.hpp); read only by the instances that compile them in.
  int window;                           ///< sliding window in keys
  float cap_log2;                       ///< soft cap c in log2 units: c * log2(e)
  float two_over_cap;                   ///< 2 / c (see agent.cuh's soft-cap)
  const float* sinks;                   ///< [num_qo_heads] sink logits, natural-log units
  // fp8 caches (read only by the fp8 instances): element x of KV head h stands for x * scale.
  const float* k_scale;                 ///< [1 or num_kv_heads]; null: 1
  const float* v_scale;
  int scale_stride;                     ///< 0: one scale per tensor; 1: one per KV head
};

struct merge_params {
  const float* partial_out;
  const float* partial_lse;
  void* out;
  const std::int32_t* q_indptr;  ///< prefill: rows are q_indptr[num_seqs] tokens; null for decode
  int num_seqs;
  int max_tokens;                ///< decode: max_batch; prefill: max_total_q
  int num_qo_heads;
  int num_splits;
  int head_dim;                  ///< sets the grid (merge_grid)
  int row_lanes;                 ///< geometry::merge_row_lanes(head_dim, num_splits)
  const float* sinks;            ///< [num_qo_heads]; read only by the sink instances
};

struct cache_write_params {
  const void* k;
  const void* v;
  std::int64_t k_stride;
  std::int64_t v_stride;
  const std::int64_t* slot_mapping;
  std::int64_t num_tokens;
  void* k_cache;
  void* v_cache;
  int num_kv_heads;
  int log2_block_size;
  std::int64_t num_slots;
  const float* k_scale;                 ///< fp8 caches, as attention_params'
  const float* v_scale;
  int scale_stride;
};

/// A grid (x, y, z) in CTAs.
struct launch_grid {
  unsigned x = 1, y = 1, z = 1;
};

inline attention_params common_params(const attention_config& c, const split_workspace& w, void* workspace,
                                      int num_splits, int split_tokens, int max_context) {
  const attention_shape& s = c.shape;
  attention_params p{};
  p.num_qo_heads = s.num_qo_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.group_size = s.group_size();
  p.log2_block_size = ilog2(s.block_size);
  p.num_splits = num_splits;
  p.split_tokens = split_tokens;
  p.max_context = max_context;
  p.scale_log2 = c.scale() * log2e;
  p.window = c.scores.window;
  if (c.scores.logit_soft_cap > 0.0f) {
    p.cap_log2 = c.scores.logit_soft_cap * log2e;
    p.two_over_cap = 2.0f / c.scores.logit_soft_cap;
  }
  if (num_splits > 1) {
    p.partial_out = reinterpret_cast<float*>(static_cast<char*>(workspace) + w.partial_out_offset);
    p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + w.partial_lse_offset);
  }
  return p;
}

// The fields decode and prefill share: the plan's split layout and the caller's buffers.
template <class Plan, class Args>
attention_params paged_params(const Plan& plan, const Args& a) {
  attention_params p = common_params(plan.config, plan.workspace, a.workspace, plan.num_splits, plan.split_tokens,
                                     plan.bucket.max_context);
  p.q = a.q;
  p.q_stride = a.q_stride != 0 ? a.q_stride : plan.config.shape.q_row_elements();
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.block_tables = a.block_tables;
  p.block_table_stride = a.block_table_stride != 0 ? a.block_table_stride : plan.max_blocks_per_seq;
  p.out = a.out;
  p.sinks = a.sinks;
  p.k_scale = a.k_scale;
  p.v_scale = a.v_scale;
  p.scale_stride = plan.config.kv.per_head_scales ? 1 : 0;
  return p;
}

inline attention_params decode_params(const decode_plan& plan, const decode_args& a) {
  attention_params p = paged_params(plan, a);
  p.kv_lens = a.seq_lens;
  p.q_indptr = nullptr;
  p.max_q_len = 1;
  p.max_total_q = plan.bucket.max_batch;
  return p;
}

/// grid: x = split, y = KV head, z = sequence.
inline launch_grid decode_grid(const decode_plan& plan) {
  return {static_cast<unsigned>(plan.num_splits), static_cast<unsigned>(plan.config.shape.num_kv_heads),
          static_cast<unsigned>(plan.bucket.max_batch)};
}

inline attention_params prefill_params(const prefill_plan& plan, const prefill_args& a) {
  attention_params p = paged_params(plan, a);
  p.kv_lens = a.kv_lens;
  p.q_indptr = a.q_indptr;
  p.max_q_len = plan.bucket.max_q_len;
  p.max_total_q = plan.bucket.max_total_q;
  return p;
}

/// grid: x = q_tile * num_splits + split, y = KV head, z = sequence.
inline launch_grid prefill_grid(const prefill_plan& plan) {
  return {static_cast<unsigned>(plan.q_tiles * plan.num_splits), static_cast<unsigned>(plan.config.shape.num_kv_heads),
          static_cast<unsigned>(plan.bucket.max_batch)};
}

inline merge_params make_merge_params(const split_workspace& w, void* workspace, void* out,
                                      const std::int32_t* q_indptr, int num_seqs, int max_tokens, int num_qo_heads,
                                      int num_splits, int head_dim, const float* sinks) {
  merge_params m;
  m.sinks = sinks;
  m.partial_out = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + w.partial_out_offset);
  m.partial_lse = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + w.partial_lse_offset);
  m.out = out;
  m.q_indptr = q_indptr;
  m.num_seqs = num_seqs;
  m.max_tokens = max_tokens;
  m.num_qo_heads = num_qo_heads;
  m.num_splits = num_splits;
  m.head_dim = head_dim;
  m.row_lanes = geometry::merge_row_lanes(head_dim, num_splits);
  return m;
}

inline merge_params decode_merge_params(const decode_plan& plan, const decode_args& a) {
  return make_merge_params(plan.workspace, a.workspace, a.out, nullptr, plan.bucket.max_batch, plan.bucket.max_batch,
                           plan.config.shape.num_qo_heads, plan.num_splits, plan.config.shape.head_dim, a.sinks);
}

inline merge_params prefill_merge_params(const prefill_plan& plan, const prefill_args& a) {
  return make_merge_params(plan.workspace, a.workspace, a.out, a.q_indptr, plan.bucket.max_batch,
                           plan.bucket.max_total_q, plan.config.shape.num_qo_heads, plan.num_splits,
                           plan.config.shape.head_dim, a.sinks);
}

/// geometry::merge_rows_per_cta rows per CTA, geometry::merge_ctas_per_row CTAs across their
/// head dim (adjacent in x).
inline launch_grid merge_grid(const merge_params& m) {
  const std::int64_t rows = static_cast<std::int64_t>(m.max_tokens) * m.num_qo_heads;
  const std::int64_t groups = ceil_div(rows, geometry::merge_rows_per_cta(m.head_dim, m.num_splits));
  return {static_cast<unsigned>(groups * geometry::merge_ctas_per_row(m.head_dim)), 1, 1};
}

inline cache_write_params make_cache_write_params(const attention_config& config, const cache_write_args& a) {
  const attention_shape& s = config.shape;
  cache_write_params p;
  p.k = a.k;
  p.v = a.v;
  p.k_stride = a.k_stride != 0 ? a.k_stride : s.kv_row_elements();
  p.v_stride = a.v_stride != 0 ? a.v_stride : s.kv_row_elements();
  p.slot_mapping = a.slot_mapping;
  p.num_tokens = a.num_tokens;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.num_kv_heads = s.num_kv_heads;
  p.log2_block_size = ilog2(s.block_size);
  p.num_slots = s.num_slots();
  p.k_scale = a.k_scale;
  p.v_scale = a.v_scale;
  p.scale_stride = config.kv.per_head_scales ? 1 : 0;
  return p;
}

/// One 16-byte vector per thread and step; beyond 8192 CTAs the kernel strides.
inline launch_grid cache_write_grid(const cache_write_params& p, int head_dim) {
  const std::int64_t vectors = p.num_tokens * p.num_kv_heads * (head_dim / geometry::vector_elements);
  const std::int64_t wanted = (vectors + geometry::cache_write_threads - 1) / geometry::cache_write_threads;
  return {static_cast<unsigned>(wanted < 8192 ? wanted : 8192), 1, 1};
}

}  // namespace rungs::attention::detail
