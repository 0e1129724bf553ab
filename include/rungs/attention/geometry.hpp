// Launch geometry of rungs' paged-attention kernels, as constexpr host code: the planner
// (pure C++) sizes grids and workspaces with it, and the kernels static_assert against it, so
// the two can never disagree.
//
// A CTA has 128 threads. Each thread owns one 16-byte vector (8 elements) of a head-dim row,
// so a row of D elements takes D/8 lanes, padded to a power of two so that the dot-product
// reduction is a butterfly of shuffles: 8 lanes for D 64, 16 for 80, 96 and 128, 32 for 256.
// The CTA is then 128 / lanes "thread rows"; each thread row processes 4-token chunks of a
// KV tile staged in shared memory by a 3-stage cp.async pipeline. A tile holds 4 tokens per
// thread row, which keeps a stage at <= 16 KiB (K and V) and the whole pipeline within the
// 48 KiB of static shared memory.
#pragma once

namespace rungs::attention::geometry {

inline constexpr int threads = 128;           ///< threads per CTA
inline constexpr int vector_elements = 8;     ///< elements per 16-byte vector (2-byte types)
inline constexpr int chunk_tokens = 4;        ///< tokens per online-softmax update
inline constexpr int stages = 3;              ///< cp.async pipeline depth
inline constexpr int max_rows_per_thread = 8; ///< query rows one thread accumulates

constexpr int next_pow2(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

/// Lanes that share one head-dim row (a power of two, at most 32).
constexpr int lanes_per_row(int head_dim) { return next_pow2(head_dim / vector_elements); }
/// Thread rows of a CTA: 128 / lanes_per_row.
constexpr int thread_rows(int head_dim) { return threads / lanes_per_row(head_dim); }
/// KV tokens per pipeline stage.
constexpr int tile_tokens(int head_dim) { return chunk_tokens * thread_rows(head_dim); }

/// Decode: a CTA owns all query heads of one GQA group. Groups of up to 8 are held by every
/// thread (rows_per_thread = group); larger groups (multiples of 8) are split over row groups
/// of 8 heads, each still reading the KV tile from shared memory, so a KV byte is fetched
/// from global memory once per group.
constexpr int decode_rows_per_thread(int group) {
  return group <= max_rows_per_thread ? group : max_rows_per_thread;
}
constexpr int decode_row_groups(int group) { return group / decode_rows_per_thread(group); }
constexpr bool decode_group_fits(int head_dim, int group) {
  return group >= 1 && (group <= max_rows_per_thread || group % max_rows_per_thread == 0) &&
         decode_row_groups(group) <= thread_rows(head_dim) &&
         (tile_tokens(head_dim) / (thread_rows(head_dim) / decode_row_groups(group))) % chunk_tokens == 0;
}

/// CTAs per SM the attention kernel is built for on architecture sm (80, 90), by the query
/// rows each thread holds (decode: min(group, 8); prefill: prefill_rows_per_thread). It is the kernel's
/// __launch_bounds__ minimum, so ptxas keeps the registers within 65536 / (ctas x 128) (128 at
/// 4 CTAs, 168 at 3, 255 at 2) or spills, which fails the build (RUNGS_CUDA_RESOURCE_CHECKS).
/// Shared memory caps it first: a CTA's pipeline takes up to 49 KiB, so sm_90's 228 KiB hold
/// 4 CTAs and sm_80's 164 KiB 3. Registers then: up to 4 rows of state fit 128 registers,
/// 5-6 rows 168, 7-8 rows need the 2-CTA budget. Other architectures (other shared-memory
/// sizes): 1, no minimum. scripts/sass-check checks the compiled registers against it.
constexpr int ctas_per_sm(int sm, int rows_per_thread) {
  if (sm == 90) return rows_per_thread <= 4 ? 4 : rows_per_thread <= 6 ? 3 : 2;
  if (sm == 80) return rows_per_thread <= 6 ? 3 : 2;
  return 1;
}

/// The tensor-core decode (kernels/.../tensor_core.cuh) holds per thread what fits the register
/// budget of this many SIMT query rows at head dims up to 128 (query fragments, D/16 x 4
/// accumulators per 8 heads: 32 at head dim 128, 64 at group 16, a few softmax values).
inline constexpr int tensor_core_decode_budget_rows = 4;
/// Head dim 256 at group 16: its warps hold the query fragments of the whole head dim for 16
/// heads (64 registers) beside O^T of 128 dims for 16 heads (64): the 3-CTA budget (168 registers).
inline constexpr int tensor_core_decode_wide_budget_rows = 6;
/// CTAs per SM the tensor-core decode is built for, its __launch_bounds__ minimum (and the
/// planner's CTA slots for it): ctas_per_sm(sm, 4), 4 on sm_90, 3 on sm_80; head dim 256 at
/// group 16 ctas_per_sm(sm, 6), 3 on both (a 48 KiB pipeline: 4 CTAs fill sm_90's 228 KiB).
constexpr int tensor_core_decode_ctas_per_sm(int sm, int head_dim, int group) {
  return ctas_per_sm(sm, head_dim > 128 && group > 8 ? tensor_core_decode_wide_budget_rows
                                                     : tensor_core_decode_budget_rows);
}

/// The in-CTA split of the tensor-core decode (tensor_core_decode_agent's WarpGroups): a CTA of
/// W warp groups, each the 4-warp decode over its own 1/W of the split's tiles with its own K/V
/// pipeline, merged through shared memory at the end. The (head dim, group, W) it is compiled
/// for: W 2 and 4 at head dims 64, 80, 96 and 128, except at group 16 of head dims 128 and 256,
/// whose W 4 code spills on sm_80 at the 128 registers of 512 threads (8 bytes at head dim 128,
/// nvcc 13.0; sm_90's fits) or does not fit sm_90's 3 CTA slots (256): W 2 and 3 there (384
/// threads, 168 registers); W 2 only at head dim 256 below group 16: the reference shapes'
/// grid there (256 CTAs at 1 x 16384) takes W 2 (4 x 256 > 132 x 4 slots), and W 4, for grids
/// of at most 132 CTAs, is left out to spare CI's and the CPU device's time (its code fits 128
/// registers without spills on sm_80 and sm_90, nvcc 13.0: tensor_core_decode_agent's kSpareRows).
constexpr bool tensor_core_decode_split_fits(int head_dim, int group, int warp_groups) {
  const bool wide = head_dim >= 128 && group > 8;
  return warp_groups == 2 || (wide ? warp_groups == 3 : warp_groups == 4 && head_dim != 256);
}
/// CTAs per SM the in-CTA split of W warp groups is built for on architecture sm: the 4-warp
/// CTAs per SM over W, rounded down (2 at W 2; 1 at W 3 and 4: 12 or 16 warps), on sm_90, the
/// architecture whose issue margins set its targets (scripts/sass-check); 0 elsewhere (not
/// planned there: sm_80's 3 CTAs per SM and 163 KiB were not modelled).
constexpr int tensor_core_decode_split_ctas_per_sm(int sm, int head_dim, int group, int warp_groups) {
  const int ctas = tensor_core_decode_ctas_per_sm(sm, head_dim, group);
  return sm == 90 && tensor_core_decode_split_fits(head_dim, group, warp_groups) && ctas >= warp_groups
             ? ctas / warp_groups
             : 0;
}
/// Shared memory a CTA of the in-CTA split may take on architecture sm (the opt-in maximum of
/// dynamic shared memory per block, CUDA C++ Programming Guide, "Compute capabilities"): 227 KiB
/// on sm_90 and sm_100, 163 KiB on sm_80 and sm_87, 99 KiB elsewhere (sm_86, 89, 120: the
/// smallest of the known ones where a figure is not listed here).
constexpr int max_dynamic_shared_bytes(int sm) {
  return sm == 90 || sm == 100 || sm == 103 ? 227 * 1024 : sm == 80 || sm == 87 ? 163 * 1024 : 99 * 1024;
}
/// Bytes of shared memory of one warp group of the tensor-core decode (a 16-bit cache): its
/// stages x 2 (K and V) x tile_tokens rows of the head dim's elements (80 and 96: padded by one
/// 16-byte chunk, kv_pipeline's LdmatrixRows); the end's merge reuses it.
constexpr int tensor_core_decode_group_bytes(int head_dim) {
  const int row = head_dim % 64 == 0 ? head_dim : head_dim + vector_elements;
  return stages * 2 * tile_tokens(head_dim) * row * 2;
}
/// Warp groups the planner gives a tensor-core decode launch of `ctas` CTAs on `sms` SMs of
/// architecture sm: the largest W of 4, 3 and 2 the architecture builds (tensor_core_decode_split_
/// ctas_per_sm) whose CTAs, W times the warps each, still all fit one wave of the 4-warp CTA
/// slots (ctas x W <= sms x tensor_core_decode_ctas_per_sm) and whose shared memory the
/// architecture has; 1 (today's CTA) otherwise, so a grid that fills the SMs keeps its kernel.
// example-begin warp-groups
constexpr int tensor_core_decode_warp_groups(int sm, int head_dim, int group, long long ctas, int sms) {
  for (int w = 4; w >= 2; --w) {
    if (tensor_core_decode_split_ctas_per_sm(sm, head_dim, group, w) > 0 &&
        ctas * w <= static_cast<long long>(sms) * tensor_core_decode_ctas_per_sm(sm, head_dim, group) &&
        w * tensor_core_decode_group_bytes(head_dim) <= max_dynamic_shared_bytes(sm)) {
      return w;
    }
  }
  return 1;
}
// example-end warp-groups

/// Shapes the tensor-core decode takes: head dims 64, 80, 96, 128 and 256 (rows of 16-byte
/// chunks swizzled in groups of 8 at 64, 128 and 256, padded to an odd number of chunks at 80
/// and 96; at 256 the 16-key tile is 2 key warps x 2 dim warps of 128 output dims) and the
/// decode groups 1-8 and 16 (rows of a 16-row mma tile). Over an fp8 cache 64 and 128 only
/// (fp8_decode_agent takes those two: its tiles stay fp8 in swizzled or plain rows): plan.hpp
/// refuses the others.
constexpr bool tensor_core_decode_fits(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128 || head_dim == 256) && group >= 1 &&
         (group <= 8 || group == 16);
}
/// Head dims the tensor-core decode takes over an fp8 cache (fp8_decode_agent: 4 warps of 8 or
/// 16 keys of a 32- or 64-key tile): 64 and 128. A set listing an fp8 cache and the tensor-core
/// decode at another head dim runs the SIMT decode over that cache (has_tensor_core_decode).
constexpr bool tensor_core_fp8_decode_fits(int head_dim) { return head_dim == 64 || head_dim == 128; }

/// CTAs per SM the tensor-core prefill is built for, its __launch_bounds__ minimum (and the
/// planner's CTA slots for it): 3 on sm_90 and sm_80 (168 registers). Its 16 rows per warp
/// hold 32 registers of query fragments and 32 of accumulators, all live (the decode's rows
/// 8-15 are zeros at groups up to 8); at sm_90's 128-register budget of 4 CTAs ptxas spills
/// 16 bytes (head dim 128) and 8 (64), even with 16 keys per softmax step.
constexpr int tensor_core_prefill_ctas_per_sm(int sm) { return ctas_per_sm(sm, 6); }

/// Head dims the tensor-core prefill takes: 64 and 128, as the decode (any GQA group: prefill
/// flattens (token, head) pairs into the mma's rows).
constexpr bool tensor_core_prefill_fits(int head_dim) { return head_dim == 64 || head_dim == 128; }

/// Prefill: query rows are (token, head-in-group) pairs flattened; every thread row owns
/// prefill_rows_per_thread of them, so a CTA covers prefill_rows_per_cta rows of one
/// (sequence, KV head). 4, not 8: with 8 rows (queries, accumulators and the chunk's scores
/// of 8 rows: ~200 live values) ptxas needed all 255 registers of the 2-CTA budget; with 6 it
/// spills at the 3-CTA budget (168) for head dims 64 and 256; with 4 it fits 128 on sm_90 (4
/// CTAs per SM, twice the warps) and 168 on sm_80 (3), without spilling. The price: each K/V
/// vector read from shared memory and widened serves 4 rows instead of 8 (docs/kernels.md).
inline constexpr int prefill_rows_per_thread = 4;
constexpr int prefill_rows_per_cta(int head_dim) { return prefill_rows_per_thread * thread_rows(head_dim); }
/// CTAs per SM of a prefill instance: ctas_per_sm of its rows, but a sliding window's
/// per-row first keys do not fit the 128 registers of 4 CTAs on sm_90 (ptxas spills 8 bytes
/// at head dim 128), so windowed prefill is built for 3 there (168 registers).
constexpr int prefill_ctas_per_sm(int sm, bool sliding_window) {
  const int n = ctas_per_sm(sm, prefill_rows_per_thread);
  return sliding_window && n > 3 ? 3 : n;
}

/// Warps per CTA of the split-merge kernel. A CTA merges one chunk of merge_chunk_vectors(D)
/// float4 columns (4 dims each) of merge_rows_per_cta(D, splits) output rows: its threads are
/// the columns x merge_split_slots(D) slots, merge_row_lanes(D, splits) slots per row, each
/// lane summing every lanes-th split of its row with merge_split_unroll independent loads in
/// flight; a row's head dim is merge_ctas_per_row(D) CTAs. One warp per row walking the
/// splits one dependent load after another took 30.3 us for 32 rows x 64 splits on an H100
/// (8 CTAs, 2% issue active; benchmarks/RESULTS.md).
inline constexpr int merge_warps = 4;
/// float4 columns of a merge CTA: 8 (128 bytes, a whole line of each split's partial output)
/// where the head dim's float4 count is a multiple of 8, else 4 (head dim 80: 20 float4s).
constexpr int merge_chunk_vectors(int head_dim) { return (head_dim / 4) % 8 == 0 ? 8 : 4; }
/// CTAs of the merge across one row's head dim.
constexpr int merge_ctas_per_row(int head_dim) { return head_dim / 4 / merge_chunk_vectors(head_dim); }
/// Splits a merge lane loads at once (independent loads in flight per thread).
inline constexpr int merge_split_unroll = 4;
/// Split lanes of a merge CTA (for all its rows).
constexpr int merge_split_slots(int head_dim) { return 32 * merge_warps / merge_chunk_vectors(head_dim); }
/// Split lanes per row: the fewest powers of two that give each lane at most merge_split_unroll
/// splits (one pass of loads), at most all the slots (64 splits at head dim 128: 16 lanes, a
/// CTA per row chunk; 4 splits: 1 lane, 16 rows per CTA).
constexpr int merge_row_lanes(int head_dim, int splits) {
  int lanes = 1;
  while (lanes < merge_split_slots(head_dim) && lanes * merge_split_unroll < splits) lanes *= 2;
  return lanes;
}
/// Output rows of one merge CTA.
constexpr int merge_rows_per_cta(int head_dim, int splits) {
  return merge_split_slots(head_dim) / merge_row_lanes(head_dim, splits);
}
/// Threads per CTA of the cache-write kernel (one 16-byte vector per thread and step).
inline constexpr int cache_write_threads = 256;

}  // namespace rungs::attention::geometry
