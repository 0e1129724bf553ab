// The __global__ entry points of rungs' paged attention (CUB's "kernels" layer): cache write,
// attention (the SIMT decode and prefill share one kernel template and agent; the tensor-core
// decode and prefill build their agents from tensor_core.cuh, the fp8 decode its own from
// fp8_decode.cuh), and the split merge.
// Each reads a small parameter struct (params.cuh) by value; everything that changes per step is
// read from device memory, so a captured launch stays valid.
#pragma once

#include <rungs/attention/detail/agent.cuh>
#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/detail/params.cuh>
// The source-level SIMT emulator (tests/attention/emulation) runs the SIMT kernels only: it
// has no tensor cores, so it compiles this header without them.
#if !defined(RUNGS_ATTENTION_SIMT_EMULATION)
#include <rungs/attention/detail/fp8_decode.cuh>
#include <rungs/attention/detail/tensor_core.cuh>
#endif
#include <rungs/attention/geometry.hpp>

#include <cuda/std/limits>

#include <cstdint>
#include <type_traits>

namespace rungs::attention::detail {

/// __launch_bounds__'s minimum CTAs per SM for the architecture being compiled
/// (geometry::ctas_per_sm, geometry::prefill_ctas_per_sm); the host pass, which ignores
/// launch bounds, sees 1.
template <int Rows, bool Decode, unsigned ModBits>
constexpr int min_ctas_per_sm() {
#if defined(__CUDA_ARCH__)
  return Decode ? geometry::ctas_per_sm(__CUDA_ARCH__ / 10, Rows)
                : geometry::prefill_ctas_per_sm(__CUDA_ARCH__ / 10, score_mod_from_bits(ModBits).sliding_window);
#else
  return 1;
#endif
}

/// The KV stream of sequence `seq` and KV head `kv_head` as the agents read it.
template <class KV, int BlockSize>
__device__ __forceinline__ kv_source<KV> make_kv_source(const attention_params& p, int seq, int kv_head) {
  kv_source<KV> src;
  src.k_cache = static_cast<const KV*>(p.k_cache);
  src.v_cache = static_cast<const KV*>(p.v_cache);
  src.table = p.block_tables + static_cast<std::int64_t>(seq) * p.block_table_stride;
  src.num_kv_heads = p.num_kv_heads;
  src.kv_head = kv_head;
  constexpr int kStaticLog2 = BlockSize > 0 ? ilog2(BlockSize) : 0;  // a constant for static block sizes
  src.log2_block = BlockSize > 0 ? kStaticLog2 : p.log2_block_size;
  return src;
}

/// The run-time values of the score transforms (score_mod.hpp) as the agents apply them.
__device__ __forceinline__ score_transform make_score_transform(const attention_params& p) {
  return {p.window, p.cap_log2, p.two_over_cap};
}

/// An fp8 cache's dequantisation for one KV head, folded into multiplies the kernels do anyway:
/// element x stands for x * scale, so the K scale joins the queries' scale (scores are linear
/// in K) and the V scale the epilogue's normalisation, each times the unit load_float8 (and
/// the tensor-core decode's conversion) returns fp8 in. A 16-bit cache compiles none of it.
template <class KV>
struct kv_dequant {
  float scale_log2;  ///< the queries' sm_scale log2(e), times the K scale and unit
  float v_scale;     ///< the epilogue's: the V scale times the unit (1 for a 16-bit cache)
  __device__ __forceinline__ kv_dequant(const attention_params& p, int kv_head)
      : scale_log2(p.scale_log2), v_scale(1.0f) {
    if constexpr (is_fp8_element<KV>) {
      const int at = kv_head * p.scale_stride;
      scale_log2 *= (p.k_scale != nullptr ? p.k_scale[at] : 1.0f) * kv_unit<KV>;
      v_scale = (p.v_scale != nullptr ? p.v_scale[at] : 1.0f) * kv_unit<KV>;
    }
  }
};

/// A decode CTA's first key: its split's first, or under a window (Mod) the first key the
/// query (position kv_len - 1) sees, kv_len - window, if later: a split wholly before it is
/// empty and loads nothing, and no key the CTA loads is outside the window.
template <score_mod Mod>
__device__ __forceinline__ int decode_kv_begin(const attention_params& p, int split_begin, int kv_len) {
  return Mod.sliding_window ? max(split_begin, kv_len - p.window) : split_begin;
}

/// The agents' epilogue: writes a row's 8-dim output vector c, normalised (no splits), or its
/// partial output and log-sum-exp to the split workspace. o is unnormalised, m the row's max
/// score (log2 units), l the sum of 2^(s - m); a row that saw no key writes zeros (no splits)
/// or lse = -inf (the merge then never reads its partial output). v_scale: an fp8 cache's V
/// scale times its unit (1 for a 16-bit cache).
template <class T, int HeadDim, unsigned ModBits, class KV>
struct attention_epilogue {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  const attention_params& p;
  int split;
  float v_scale;

  __device__ __forceinline__ void operator()(const row_info& info, int c, const float (&o)[8], float m,
                                             float l) const {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    const std::int64_t row = static_cast<std::int64_t>(info.token) * p.num_qo_heads + info.head;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key writes zeros
    if (p.num_splits == 1) {
      if constexpr (Mod.sinks) {
        // The sink joins the denominator: o 2^(m-M) / (l 2^(m-M) + 2^(sink-M)), M the larger
        // of m and the sink, so neither term overflows. (With splits the merge adds it once.)
        if (l > 0.0f) {
          const float sink = p.sinks[info.head] * log2e;
          const float top = fmaxf(m, sink);
          const float keep = exp2_approx(m - top);
          inv = keep / fmaf(l, keep, exp2_approx(sink - top));
        }
      }
      if constexpr (is_fp8_element<KV>) inv *= v_scale;
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = o[e] * inv;
      *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + row * HeadDim + c * 8) = from_float8<T>(v);
    } else {
      const std::int64_t slot = row * p.num_splits + split;
      if constexpr (is_fp8_element<KV>) inv *= v_scale;
      if (l > 0.0f) {
        float4* dst = reinterpret_cast<float4*>(p.partial_out + slot * HeadDim + c * 8);
        dst[0] = make_float4(o[0] * inv, o[1] * inv, o[2] * inv, o[3] * inv);
        dst[1] = make_float4(o[4] * inv, o[5] * inv, o[6] * inv, o[7] * inv);
      }
      if (c == 0) p.partial_lse[slot] = l > 0.0f ? m + log2f(l) : kNegInf;
    }
  }
};

/// A CTA's place in the attention grid (x = q_tile * num_splits + split, decode: split; y = KV
/// head; z = sequence), its sequence's KV length (clamped to the bucket) and its split's first key.
struct cta_coords {
  int split, q_tile, kv_head, seq, kv_len, split_begin;
};
__device__ __forceinline__ cta_coords cta_of(const attention_params& p) {
  const int split = static_cast<int>(blockIdx.x) % p.num_splits;
  const int seq = static_cast<int>(blockIdx.z);
  return {split, static_cast<int>(blockIdx.x) / p.num_splits, static_cast<int>(blockIdx.y), seq,
          min(max(p.kv_lens[seq], 0), p.max_context), split * p.split_tokens};
}

/// A prefill CTA's query rows (q tile q_tile of CtaRows flattened (token, head) rows of
/// sequence seq and KV head kv_head) and the end of its KV range in the split from
/// split_begin: the keys its last row sees. false: the tile has no rows (nothing to compute or
/// write). Shared by the SIMT and the tensor-core prefill, which use the same grid.
template <int CtaRows>
__device__ __forceinline__ bool prefill_cta(const attention_params& p, int q_tile, int split_begin, int seq,
                                            int kv_head, int kv_len, prefill_rows& rows, int& kv_end) {
  const int q_begin = p.q_indptr[seq];
  const int q_len = min(max(p.q_indptr[seq + 1] - q_begin, 0), p.max_q_len);
  const int first_row = q_tile * CtaRows;
  const int row_count = q_len * p.group_size;
  if (first_row >= row_count) return false;
  rows = prefill_rows{q_begin, q_len, kv_len, kv_head * p.group_size, p.group_size, first_row, p.max_total_q};
  const int last_token = (min(first_row + CtaRows, row_count) - 1) / p.group_size;
  const int visible = min(kv_len - q_len + last_token + 1, kv_len);  // the CTA's last row sees the most
  kv_end = min(split_begin + p.split_tokens, visible);
  return true;
}

/// A prefill CTA's first key: its split's first, or under a window (Mod) the first key its
/// first row sees (rows are in token order, so the first row's window starts earliest), if
/// later: keys no row of the CTA sees are never loaded. Shared by the SIMT and the tensor-core
/// prefill.
template <score_mod Mod>
__device__ __forceinline__ int prefill_kv_begin(const attention_params& p, const prefill_rows& rows, int split_begin) {
  return Mod.sliding_window ? max(split_begin, rows.kv_len - rows.q_len + rows.first_row / rows.group + 1 - p.window)
                            : split_begin;
}

/// grid: x = q_tile * num_splits + split (decode: split), y = KV head, z = sequence.
/// ModBits: the score transforms compiled in (score_mod_bits of a score_mod, score_mod.hpp).
/// KV: the cache's element type, T or an fp8 format (dequantised with the KV head's scales).
template <class T, int HeadDim, int BlockSize, int Rows, int RowGroups, bool Decode, unsigned ModBits = 0, class KV = T>
__global__ void __launch_bounds__(geometry::threads, min_ctas_per_sm<Rows, Decode, ModBits>())
    paged_attention_kernel(const attention_params p) {
  using agent = attention_agent<T, HeadDim, Rows, RowGroups, ModBits, KV>;  // agent::Mod: the score_mod
  __shared__ typename agent::storage smem;

  const auto [split, q_tile, kv_head, seq, kv_len, split_begin] = cta_of(p);
  const kv_source<KV> src = make_kv_source<KV, BlockSize>(p, seq, kv_head);

  const T* q = static_cast<const T*>(p.q);
  const score_transform transform = make_score_transform(p);
  const kv_dequant<KV> dq(p, kv_head);
  const attention_epilogue<T, HeadDim, ModBits, KV> epilogue{p, split, dq.v_scale};
  const float scale_log2 = dq.scale_log2;

  if constexpr (Decode) {
    constexpr int kGroup = Rows * RowGroups;
    const decode_rows rows{seq, kv_head * kGroup, kv_len};
    const int kv_end = min(split_begin + p.split_tokens, kv_len);
    agent::run(smem, src, rows, decode_kv_begin<agent::Mod>(p, split_begin, kv_len), kv_end, q, p.q_stride, scale_log2,
               transform, epilogue);
  } else {
    prefill_rows rows;
    int kv_end = 0;
    if (!prefill_cta<agent::kCtaRows>(p, q_tile, split_begin, seq, kv_head, kv_len, rows, kv_end)) return;
    agent::run(smem, src, rows, prefill_kv_begin<agent::Mod>(p, rows, split_begin), kv_end, q, p.q_stride,
               scale_log2, transform, epilogue);
  }
}

#if !defined(RUNGS_ATTENTION_SIMT_EMULATION)
/// __launch_bounds__' minimum CTAs per SM of the tensor-core decode (Decode) or prefill for the
/// architecture being compiled (geometry::tensor_core_decode_ctas_per_sm,
/// tensor_core_prefill_ctas_per_sm; 1 in the host pass; the decode's by HeadDim and Group), the
/// occupancy the planner counts. The decode over an fp8 cache takes it with score transforms too
/// (it was 3 there on sm_90, where ptxas spilled at 4's 128 registers until fp8_decode_agent's
/// value step ran transposed: 110-128 registers now, no spills, E4M3 and E5M2, every group).
/// The in-CTA split (WarpGroups W > 1) is built for the 4-warp CTAs' count over W where W
/// divides it (geometry::tensor_core_decode_split_ctas_per_sm: the same registers per thread),
/// else for 1 (an architecture the planner never runs it on: sm_80).
template <bool Decode, int HeadDim = 0, int Group = 0, int WarpGroups = 1>
constexpr int tensor_core_min_ctas_per_sm() {
#if defined(__CUDA_ARCH__)
  if constexpr (Decode && WarpGroups > 1) {
    const int n = geometry::tensor_core_decode_split_ctas_per_sm(__CUDA_ARCH__ / 10, HeadDim, Group, WarpGroups);
    return n > 0 ? n : 1;
  }
  return Decode ? geometry::tensor_core_decode_ctas_per_sm(__CUDA_ARCH__ / 10, HeadDim, Group)
                : geometry::tensor_core_prefill_ctas_per_sm(__CUDA_ARCH__ / 10);
#else
  return 1;
#endif
}

/// One tensor-core decode CTA on `smem` (agent: tensor_core_decode_agent or fp8_decode_agent):
/// the body of both decode kernels below.
template <class Agent, class T, int BlockSize, int Group, unsigned ModBits, class KV, int HeadDim>
__device__ __forceinline__ void tensor_core_decode_cta(const attention_params& p, typename Agent::storage& smem) {
  const auto [split, q_tile, kv_head, seq, kv_len, split_begin] = cta_of(p);
  const int kv_end = min(split_begin + p.split_tokens, kv_len);
  const kv_dequant<KV> dq(p, kv_head);
  const attention_epilogue<T, HeadDim, ModBits, KV> epilogue{p, split, 1.0f};  // the agent applies dq.v_scale
  Agent::run(smem, make_kv_source<KV, BlockSize>(p, seq, kv_head), decode_rows{seq, kv_head * Group, kv_len},
             decode_kv_begin<Agent::Mod>(p, split_begin, kv_len), kv_end, static_cast<const T*>(p.q), p.q_stride,
             dq.scale_log2, dq.v_scale, make_score_transform(p), epilogue);
}

/// The tensor-core decode kernel: grid (split, KV head, sequence), as the SIMT decode's, and
/// the same workspace layout, so merge_splits_kernel<T, HeadDim, Sinks> merges its splits.
/// ModBits: the score transforms compiled in (score_mod_bits); KV: the cache's element type
/// (T or an fp8 format), as paged_attention_kernel's.
template <class T, int HeadDim, int BlockSize, int Group, unsigned ModBits = 0, class KV = T>
__global__ void __launch_bounds__(geometry::threads,
                                  tensor_core_min_ctas_per_sm<true, HeadDim, Group>())
    tensor_core_decode_kernel(const attention_params p) {
  // An fp8 cache: fp8_decode_agent converts its fragments in registers (fp8_decode.cuh).
  using agent = std::conditional_t<is_fp8_element<KV>, fp8_decode_agent<T, HeadDim, Group, ModBits, KV>,
                                   tensor_core_decode_agent<T, HeadDim, Group, ModBits, KV>>;
  __shared__ typename agent::storage smem;
  tensor_core_decode_cta<agent, T, BlockSize, Group, ModBits, KV, HeadDim>(p, smem);
}

/// The tensor-core decode's in-CTA split (tensor_core_decode_agent's WarpGroups, 2 to 4; a
/// 16-bit cache): the same grid, parameters, workspace and outputs as tensor_core_decode_kernel,
/// a CTA of 128 WarpGroups threads whose W storages are dynamic shared memory
/// (launch_tensor_core_decode passes their size and raises the kernel's limit).
template <class T, int HeadDim, int BlockSize, int Group, int WarpGroups, unsigned ModBits = 0>
__global__ void __launch_bounds__(geometry::threads * WarpGroups,
                                  tensor_core_min_ctas_per_sm<true, HeadDim, Group, WarpGroups>())
    tensor_core_split_decode_kernel(const attention_params p) {
  static_assert(WarpGroups > 1, "one warp group is tensor_core_decode_kernel");
  using agent = tensor_core_decode_agent<T, HeadDim, Group, ModBits, T, WarpGroups>;
  extern __shared__ __align__(128) unsigned char decode_dynamic_smem[];
  tensor_core_decode_cta<agent, T, BlockSize, Group, ModBits, T, HeadDim>(
      p, *reinterpret_cast<typename agent::storage*>(decode_dynamic_smem));
}

/// The tensor-core prefill kernel: the SIMT prefill's grid (q tile x split, KV head, sequence),
/// parameters and workspace, so merge_splits_kernel<T, HeadDim, Sinks> merges its splits.
/// ModBits: the score transforms compiled in (score_mod_bits); KV: the cache's element type
/// (T or an fp8 format), as paged_attention_kernel's.
template <class T, int HeadDim, int BlockSize, unsigned ModBits = 0, class KV = T>
__global__ void __launch_bounds__(geometry::threads, tensor_core_min_ctas_per_sm<false>())
    tensor_core_prefill_kernel(const attention_params p) {
  using agent = tensor_core_prefill_agent<T, HeadDim, ModBits, KV>;
  __shared__ typename agent::storage smem;
  const auto [split, q_tile, kv_head, seq, kv_len, split_begin] = cta_of(p);
  prefill_rows rows;
  int kv_end = 0;
  if (!prefill_cta<agent::kCtaRows>(p, q_tile, split_begin, seq, kv_head, kv_len, rows, kv_end)) return;
  const kv_dequant<KV> dq(p, kv_head);
  const attention_epilogue<T, HeadDim, ModBits, KV> epilogue{p, split, dq.v_scale};
  agent::run(smem, make_kv_source<KV, BlockSize>(p, seq, kv_head), rows,
             prefill_kv_begin<agent::Mod>(p, rows, split_begin), kv_end, static_cast<const T*>(p.q), p.q_stride,
             dq.scale_log2, make_score_transform(p), epilogue);
}
#endif  // !RUNGS_ATTENTION_SIMT_EMULATION

/// The merge's geometry constants for the device pass (class scope: evaluated by the host).
template <int HeadDim>
struct merge_layout {
  static constexpr int columns = geometry::merge_chunk_vectors(HeadDim);
  static constexpr int chunks = geometry::merge_ctas_per_row(HeadDim);
  static constexpr int slots = geometry::merge_split_slots(HeadDim);
};

/// v summed (Max: the largest) over the `lanes` split lanes of a row within the warp (lanes
/// Columns threads apart; a row of more than 32 / Columns lanes spans warps, summed after).
template <int Columns, bool Max>
__device__ __forceinline__ float row_lanes_reduce(float v, int lanes) {
  for (int d = Columns; d < 32 && d < Columns * lanes; d *= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, d);
    v = Max ? fmaxf(v, o) : v + o;
  }
  return v;
}

/// Merges the splits of each output row: out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M),
/// skipping empty splits (lse -inf) without reading their partial output; a row whose splits
/// are all empty is zeros. Sinks: the row's sink logit joins the denominator as one more term
/// with no output. A CTA merges one chunk of merge_layout::columns float4 columns of
/// geometry::merge_rows_per_cta rows (merge_grid): its threads are columns x split slots,
/// p.row_lanes slots per row. A row's lanes reduce M over its splits' log-sum-exps (a few
/// loads each, shuffles), then each lane sums the weighted partial outputs of every
/// row_lanes-th split with merge_split_unroll splits' loads in flight before any is used, and
/// the lanes' sums (and their weights: the denominator) meet by shuffles, then across warps in
/// shared memory where a row spans warps (docs/kernels.md, "The split merge").
template <class T, int HeadDim, bool Sinks = false>
__global__ void __launch_bounds__(32 * geometry::merge_warps) merge_splits_kernel(const merge_params p) {
  using layout = merge_layout<HeadDim>;
  constexpr int kColumns = layout::columns;
  constexpr int kUnroll = geometry::merge_split_unroll;
  static_assert(layout::chunks * kColumns * 4 == HeadDim && 32 % kColumns == 0);
  constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
  __shared__ float max_part[geometry::merge_warps];
  __shared__ float4 acc_part[geometry::merge_warps][kColumns];
  __shared__ float weight_part[geometry::merge_warps];
  const int t = static_cast<int>(threadIdx.x);
  const int warp = t / 32;
  const int lanes = p.row_lanes;                      // a power of two, at most layout::slots
  const int row_warps = kColumns * lanes / 32;        // above 1: a row spans warps (CTA-uniform)
  const int first_warp = row_warps > 1 ? warp / row_warps * row_warps : warp;
  const int slot = t / kColumns;
  const int lane = slot % lanes;                      // split lane within the row
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x / layout::chunks) * (layout::slots / lanes) +
                           slot / lanes;
  const int column = static_cast<int>(blockIdx.x % layout::chunks) * kColumns + t % kColumns;  // float4 of the row
  int tokens = p.max_tokens;
  if (p.q_indptr != nullptr) tokens = min(max(p.q_indptr[p.num_seqs], 0), p.max_tokens);
  // No early return: rows spanning warps meet at barriers. A row past the last reads nothing.
  const int splits = row < static_cast<std::int64_t>(tokens) * p.num_qo_heads ? p.num_splits : 0;
  const float* lse = p.partial_lse + row * p.num_splits;

  float row_max = kNegInf;
  for (int s = lane; s < splits; s += lanes) row_max = fmaxf(row_max, lse[s]);
  row_max = row_lanes_reduce<kColumns, true>(row_max, lanes);
  if (row_warps > 1) {
    if (t % 32 == 0) max_part[warp] = row_max;
    __syncthreads();
    for (int w = 0; w < row_warps; ++w) row_max = fmaxf(row_max, max_part[first_warp + w]);
  }
  const bool empty = row_max == kNegInf;  // no split saw a key (or no row): a zero row, as without splits
  const int walk = empty ? 0 : splits;
  float sink = kNegInf;
  if constexpr (Sinks) {
    if (!empty) {
      sink = p.sinks[row % p.num_qo_heads] * log2e;
      row_max = fmaxf(row_max, sink);
    }
  }

  const float* partial = p.partial_out + row * p.num_splits * HeadDim + column * 4;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float weight = 0.0f;
  for (int s0 = lane; s0 < walk; s0 += lanes * kUnroll) {
    float x[kUnroll];
    float4 o[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = s0 + u * lanes;
      x[u] = s < walk ? lse[s] : kNegInf;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      o[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const float* at = partial + static_cast<std::int64_t>(s0 + u * lanes) * HeadDim;
      if (x[u] != kNegInf) o[u] = *reinterpret_cast<const float4*>(at);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const float w = exp2_approx(x[u] - row_max);  // 0 for an empty split
      weight += w;
      acc.x = fmaf(w, o[u].x, acc.x);
      acc.y = fmaf(w, o[u].y, acc.y);
      acc.z = fmaf(w, o[u].z, acc.z);
      acc.w = fmaf(w, o[u].w, acc.w);
    }
  }
  acc.x = row_lanes_reduce<kColumns, false>(acc.x, lanes);
  acc.y = row_lanes_reduce<kColumns, false>(acc.y, lanes);
  acc.z = row_lanes_reduce<kColumns, false>(acc.z, lanes);
  acc.w = row_lanes_reduce<kColumns, false>(acc.w, lanes);
  weight = row_lanes_reduce<kColumns, false>(weight, lanes);
  if (row_warps > 1) {
    if (t % 32 < kColumns) acc_part[warp][t % 32] = acc;
    if (t % 32 == 0) weight_part[warp] = weight;
    __syncthreads();
    if (warp == first_warp && t % 32 < kColumns) {
      acc = acc_part[first_warp][t % 32];
      weight = weight_part[first_warp];
      for (int w = 1; w < row_warps; ++w) {
        const float4 a = acc_part[first_warp + w][t % 32];
        acc.x += a.x;
        acc.y += a.y;
        acc.z += a.z;
        acc.w += a.w;
        weight += weight_part[first_warp + w];
      }
    }
  }
  if (lane != 0 || splits == 0) return;  // lane 0 of each real row writes its float4
  T* out = static_cast<T*>(p.out) + row * HeadDim + column * 4;
  if (empty) {
    *reinterpret_cast<uint2*>(out) = from_float4<T>(make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    return;
  }
  if constexpr (Sinks) weight += exp2_approx(sink - row_max);
  const float inv = 1.0f / weight;
  *reinterpret_cast<uint2*>(out) = from_float4<T>(make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv));
}

/// Copies token t's K and V rows into slot slot_mapping[t], one 16-byte vector per thread and
/// step. Negative slots (padding) write nothing; so do slots past the pool, which
/// cache_write's host checks cannot see (they live in device memory): the kernel never
/// writes out of bounds. An fp8 cache (KV) stores fp8(x / scale of the head), rounded to
/// nearest even and saturated, 8 bytes per 16-byte input vector.
template <class T, int HeadDim, class KV = T>
__global__ void __launch_bounds__(geometry::cache_write_threads) cache_write_kernel(const cache_write_params p) {
  constexpr int kRowVecs = HeadDim / geometry::vector_elements;
  const std::int64_t per_token = static_cast<std::int64_t>(p.num_kv_heads) * kRowVecs;
  const std::int64_t total = p.num_tokens * per_token;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const std::int64_t token = i / per_token;
    const int rest = static_cast<int>(i - token * per_token);
    const int head = rest / kRowVecs;
    const int c = rest - head * kRowVecs;
    const std::int64_t slot = p.slot_mapping[token];
    if (slot < 0 || slot >= p.num_slots) continue;
    const std::int64_t block = slot >> p.log2_block_size;
    const std::int64_t position = slot & ((std::int64_t{1} << p.log2_block_size) - 1);
    const std::int64_t dst = (((block * p.num_kv_heads + head) << p.log2_block_size) + position) * HeadDim + c * 8;
    const std::int64_t col = static_cast<std::int64_t>(head) * HeadDim + c * 8;
    const uint4 k = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.k) + token * p.k_stride + col);
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.v) + token * p.v_stride + col);
    if constexpr (is_fp8_element<KV>) {
      const int at = head * p.scale_stride;
      const float k_scale = p.k_scale != nullptr ? p.k_scale[at] : 1.0f;
      const float v_scale = p.v_scale != nullptr ? p.v_scale[at] : 1.0f;
      float kf[8], vf[8];
      to_float8<T>(k, kf);
      to_float8<T>(v, vf);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        kf[e] = div_rn(kf[e], k_scale);  // IEEE division, as the host reference divides
        vf[e] = div_rn(vf[e], v_scale);
      }
      *reinterpret_cast<uint2*>(static_cast<KV*>(p.k_cache) + dst) = float8_to_fp8x8<KV>(kf);
      *reinterpret_cast<uint2*>(static_cast<KV*>(p.v_cache) + dst) = float8_to_fp8x8<KV>(vf);
    } else {
      *reinterpret_cast<uint4*>(static_cast<T*>(p.k_cache) + dst) = k;
      *reinterpret_cast<uint4*>(static_cast<T*>(p.v_cache) + dst) = v;
    }
  }
}

}  // namespace rungs::attention::detail
