// The warp-level fragment steps of the tensor-core attention kernels (FlashInfer's
// compute_qk / update_mdo_states / compute_sfm_v): Q as A fragments, S = Q K^T from a
// swizzled K tile, one online-softmax step that leaves P as A fragments in registers, O += P V
// from a swizzled V tile, and a warp's state written out for the cross-warp merge (the
// prefill's); the decode's transposed counterparts over 8-key slices (slice_scores,
// softmax_slices, O^T += V^T P^T in slice_values, stash_slices); the masking and online max
// both share. The tensor-core decode and prefill agents (tensor_core.cuh) call these, so a
// change to a step is made once; scripts/sass-check compares their SASS instance by instance.
//
// A warp holds 16 rows of the mma tile; lane l owns rows g = l/4 and g + 8 ("halves" 0 and 1)
// and, of each 8-wide tile, columns 2 t4 and 2 t4 + 1 (t4 = l % 4).
#pragma once

#include <rungs/attention/detail/agent.cuh>
#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/detail/mma.cuh>

#include <cuda/std/limits>

#include <cstdint>

namespace rungs::attention::detail {

/// Where a thread sits in the mma fragments of its warp: accumulator rows g and g + 8, and
/// columns 2 t4, 2 t4 + 1 of each 8-wide tile.
struct fragment_lane {
  int tid = static_cast<int>(threadIdx.x);
  int warp = tid / 32;
  int lane = tid % 32;
  int g = lane / 4;
  int t4 = lane % 4;
};

/// Q as A fragments over the whole head dim: qa[ks][h] row g + 8 h, dims 16 ks + 2 t4 (+1);
/// qa[ks][h + 2] the same row, dims + 8. row[h]: the row's first element, or null for a row of
/// zeros (padding, or a CTA with no keys whose queries need not be read).
template <class T, int KSteps>
__device__ __forceinline__ void load_q_fragments(std::uint32_t (&qa)[KSteps][4], const T* const (&row)[2], int t4) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int ks = 0; ks < KSteps; ++ks) {
      qa[ks][h] = row[h] != nullptr ? *reinterpret_cast<const std::uint32_t*>(row[h] + 16 * ks + 2 * t4) : 0u;
      qa[ks][h + 2] = row[h] != nullptr ? *reinterpret_cast<const std::uint32_t*>(row[h] + 16 * ks + 8 + 2 * t4) : 0u;
    }
  }
}

/// S = Q K^T for the keys first_key + 0 .. 8 KeyTiles - 1 of a swizzled stage (Pipeline::place):
/// s[j] holds keys 8 j + 2 t4 (+1) of rows g (0, 1) and g + 8 (2, 3), unscaled.
template <class T, class Pipeline, int KSteps, int KeyTiles>
__device__ __forceinline__ void score_fragments(float (&s)[KeyTiles][4], const std::uint32_t (&qa)[KSteps][4],
                                                const T* k_stage, int first_key, int lane) {
  static_assert(KSteps % 2 == 0, "one ldmatrix.x4 covers two k16 steps");
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KSteps; ks += 2) {
#pragma unroll
    for (int j = 0; j < KeyTiles; ++j) {
      // Matrix lane/8 of the x4: chunk 2 ks + lane/8 of the 8 keys 8 j .. 8 j + 7 (rows = keys: B, "col").
      const int key = first_key + 8 * j + (lane & 7);
      std::uint32_t b[4];
      ldmatrix_x4(b, shared_address(k_stage + Pipeline::place(0, key, 2 * ks + (lane >> 3))));
      mma_m16n8k16<T>(s[j], qa[ks], b[0], b[1]);
      mma_m16n8k16<T>(s[j], qa[ks + 1], b[2], b[3]);
    }
  }
}

/// Row half h's scores of s scaled to log2 units (and soft-capped, SoftCap) and masked:
/// mask(j, e, v, x[j]) stores the scaled score v of element 2 h + e of s[j] into x[j][e], or -inf.
template <bool SoftCap, int KeyTiles, class Mask>
__device__ __forceinline__ void masked_scores(const float (&s)[KeyTiles][4], int h, float scale_log2,
                                              const score_transform& transform, Mask& mask, float (&x)[KeyTiles][2]) {
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = s[j][2 * h + e] * scale_log2;
      if constexpr (SoftCap) v = transform.soft_cap(v);
      mask(j, e, v, x[j]);
    }
  }
}

/// The online max of a row whose lane quad holds its new scores (this lane's max mx): the
/// quad's max joins m; returns the factor 2^(m_old - m) that rescales the row's sum and
/// accumulators, and sets base, the max the new scores' exponents subtract (0 while the row has
/// seen only -inf: avoids (-inf) - (-inf)).
__device__ __forceinline__ float quad_max_step(float mx, float& m, float& base) {
  constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(m, mx);
  base = m_new == kNegInf ? 0.0f : m_new;
  const float rescale = exp2_approx(m - base);
  m = m_new;
  return rescale;
}

/// One online-softmax step of row half h (row g + 8 h) over the keys of s: scales the scores to
/// log2 units (and soft-caps them, SoftCap); mask(j, e, v, x[j]) stores the scaled score v of key
/// 8 j + 2 t4 + e into x[j][e], or -inf where the row does not see that key (the caller's rule:
/// the sequence end, a causal bound, a window). Then takes the row's max over the lane quad,
/// rescales m, l (this lane's partial sum) and the accumulators' half h, and writes 2^(s - m)
/// rounded to T into pa, the A fragments of P for P V (pa[kk]: keys 16 kk .. 16 kk + 15; the
/// score accumulator's layout is the A layout, so P stays in registers). LiveTiles (0: all):
/// the key tiles from LiveTiles on are wholly masked, known at compile time (the fp8 decode's 8
/// keys a warp in a pair of tiles), so their P is 0 without an exponent or a sum.
template <class T, bool SoftCap, int LiveTiles = 0, int KeyTiles, int OTiles, class Mask>
__device__ __forceinline__ void softmax_fragments(const float (&s)[KeyTiles][4], int h, float scale_log2,
                                                  const score_transform& transform, Mask&& mask, float& m, float& l,
                                                  float (&o)[OTiles][4], std::uint32_t (&pa)[KeyTiles / 2][4]) {
  static_assert(KeyTiles % 2 == 0, "P's A fragments take keys in pairs of 8-key tiles");
  constexpr int kLive = LiveTiles == 0 ? KeyTiles : LiveTiles;
  static_assert(kLive >= 1 && kLive <= KeyTiles && (kLive == KeyTiles || KeyTiles == 2));
  constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
  float x[KeyTiles][2];
  masked_scores<SoftCap>(s, h, scale_log2, transform, mask, x);
  // The max and the sum over the keys in the order ptxas schedules cheapest for each caller
  // (scripts/sass-check, sm_80 and sm_90): the decode's 2 key tiles as one pairwise tree, the
  // prefill's 4 from -inf and 0 (the tree costs the prefill 2-4 registers; the other order
  // costs the decode 2 instructions per tile).
  float mx = kNegInf;
  if constexpr (kLive == 1) {
    mx = fmaxf(x[0][0], x[0][1]);
  } else if constexpr (KeyTiles == 2) {
    mx = fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[1][0], x[1][1]));
  } else {
#pragma unroll
    for (int j = 0; j < KeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) mx = fmaxf(mx, x[j][e]);
    }
  }
  float base;
  const float rescale = quad_max_step(mx, m, base);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j) {
    x[j][0] = j < kLive ? exp2_approx(x[j][0] - base) : 0.0f;
    x[j][1] = j < kLive ? exp2_approx(x[j][1] - base) : 0.0f;
    if constexpr (KeyTiles != 2) sum += x[j][0] + x[j][1];
  }
  if constexpr (kLive == 1) {
    sum = x[0][0] + x[0][1];
  } else if constexpr (KeyTiles == 2) {
    sum = (x[0][0] + x[0][1]) + (x[1][0] + x[1][1]);
  }
  l = fmaf(l, rescale, sum);
#pragma unroll
  for (int n = 0; n < OTiles; ++n) {
    o[n][2 * h] *= rescale;
    o[n][2 * h + 1] *= rescale;
  }
#pragma unroll
  for (int kk = 0; kk < KeyTiles / 2; ++kk) {
    pa[kk][h] = pack_pair<T>(x[2 * kk][0], x[2 * kk][1]);
    pa[kk][h + 2] = pack_pair<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]);
  }
}

/// O += P V over keys first_key + 0 .. 16 KeySteps - 1 and the 8 OTiles dims from 16-byte chunk
/// first_chunk on: matrix lane/8 of the x4.trans is keys 8 (lane/8 % 2) + 0..7, chunk
/// first_chunk + 2 n + lane/16.
template <class T, class Pipeline, int KeySteps, int OTiles>
__device__ __forceinline__ void value_fragments(float (&o)[OTiles][4], const std::uint32_t (&pa)[KeySteps][4],
                                                const T* v_stage, int first_key, int first_chunk, int lane) {
#pragma unroll
  for (int kk = 0; kk < KeySteps; ++kk) {
    const int key = first_key + 16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7);
#pragma unroll
    for (int n = 0; n < OTiles / 2; ++n) {
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, shared_address(v_stage + Pipeline::place(0, key, first_chunk + 2 * n + (lane >> 4))));
      mma_m16n8k16<T>(o[2 * n], pa[kk], b[0], b[1]);
      mma_m16n8k16<T>(o[2 * n + 1], pa[kk], b[2], b[3]);
    }
  }
}

// ---- the decode's key slices: S = Q K^T over 8 keys, O^T += V^T P^T ----------------------
// A decode warp owns 8-key slices of a tile and every output dim. Its scores S = Q K^T (A: Q,
// rows = heads; B: K, "col") leave lane l holding head g = l/4, keys 2 t4, 2 t4 + 1 of the slice
// in accumulator elements 0, 1 (head g + 8: 2, 3), which is exactly the B fragment of P^T (k =
// key 2 t4, +1, n = head g). So the value step runs transposed, O^T (dims x heads) += V^T (dims
// x keys) P^T (keys x heads): A = V^T from ldmatrix.x4.trans, whose accumulators (dims g, g + 8
// of a 16-dim tile; heads 2 t4, +1) are all live up to group 8 (Q P V's would leave rows 8-15
// idle), D/16 tiles of 4 floats per 8 heads.

/// Element offsets, in a stage of ldmatrix rows (Pipeline::place), of the row lane `lane` gives
/// ldmatrix.x4 over the 8 keys from first_key (a multiple of 8) and the 4 chunks from 4 i: key
/// first_key + lane % 8, chunk 4 i + lane / 8 (.x2: lanes 0-15, chunks 4 i, 4 i + 1). Swizzled
/// rows (chunk c of key k at c ^ (k % 8)): the swizzle permutes chunks within groups of 8 and
/// leaves bit 3 alone, so chunk 4 i's place is chunk 4 (i % 2)'s plus 8 (i / 2) chunks; padded
/// rows: chunk 0's plus 4 i chunks. Either way two offsets and immediates (no per-tile XOR).
template <class Pipeline>
struct slice_rows {
  int at[2];
  __device__ __forceinline__ slice_rows(int first_key, int lane)
      : at{Pipeline::place(0, first_key + (lane & 7), lane >> 3),
           Pipeline::place(0, first_key + (lane & 7), Pipeline::Swizzle ? 4 + (lane >> 3) : lane >> 3)} {}
  /// Byte offset of the rows of chunks 4 i .. 4 i + 3 (elements of 16 bits).
  __device__ __forceinline__ std::uint32_t bytes(int i) const {
    return static_cast<std::uint32_t>(Pipeline::Swizzle ? at[i & 1] + (i >> 1) * 64 : at[0] + i * 32) * 2u;
  }
};

/// S = Q K^T over one 8-key slice (rows: slice_rows) of a K stage at shared address k_stage:
/// s holds keys 2 t4 (+1) of rows g (0, 1) and g + 8 (2, 3), unscaled.
template <class T, class Pipeline, int KSteps>
__device__ __forceinline__ void slice_scores(float (&s)[4], const std::uint32_t (&qa)[KSteps][4],
                                             std::uint32_t k_stage, const slice_rows<Pipeline>& rows) {
  s[0] = s[1] = s[2] = s[3] = 0.0f;
#pragma unroll
  for (int i = 0; i < KSteps / 2; ++i) {
    std::uint32_t b[4];  // chunks 4 i .. 4 i + 3 of the 8 keys: k steps 2 i and 2 i + 1
    ldmatrix_x4(b, k_stage + rows.bytes(i));
    mma_m16n8k16<T>(s, qa[2 * i], b[0], b[1]);
    mma_m16n8k16<T>(s, qa[2 * i + 1], b[2], b[3]);
  }
  if constexpr (KSteps % 2 != 0) {  // head dims 80 and 112: the last k step alone
    std::uint32_t b[2];
    ldmatrix_x2(b, k_stage + rows.bytes(KSteps / 2));
    mma_m16n8k16<T>(s, qa[KSteps - 1], b[0], b[1]);
  }
}

/// O^T += V^T P^T over one 8-key slice of a V stage: o[h][n] holds dims 16 n + g (0, 1) and
/// 16 n + g + 8 (2, 3), heads 8 h + 2 t4 (+1); p[h] is P^T's B fragment of heads 8 h .. 8 h + 7.
/// One ldmatrix.x4.trans gives V^T over dims 32 i .. 32 i + 31 (matrix j: dims 32 i + 8 j, lane
/// l holding keys 2 t4, +1 of dim g): matrices 0, 1 are the A operand (rows 0-7, 8-15) of the
/// m16n8k8 of dims 32 i .. + 15, matrices 2, 3 that of dims 32 i + 16 .. + 31.
template <class T, class Pipeline, int HeadTiles, int DimTiles>
__device__ __forceinline__ void slice_values(float (&o)[HeadTiles][DimTiles][4], const std::uint32_t (&p)[HeadTiles],
                                             std::uint32_t v_stage, const slice_rows<Pipeline>& rows) {
#pragma unroll
  for (int i = 0; i < DimTiles / 2; ++i) {
    std::uint32_t a[4];
    ldmatrix_x4_trans(a, v_stage + rows.bytes(i));
#pragma unroll
    for (int h = 0; h < HeadTiles; ++h) {
      mma_m16n8k8<T>(o[h][2 * i], a[0], a[1], p[h]);
      mma_m16n8k8<T>(o[h][2 * i + 1], a[2], a[3], p[h]);
    }
  }
  if constexpr (DimTiles % 2 != 0) {  // head dim 80: the last 16 dims alone
    std::uint32_t a[2];
    ldmatrix_x2_trans(a, v_stage + rows.bytes(DimTiles / 2));
#pragma unroll
    for (int h = 0; h < HeadTiles; ++h) mma_m16n8k8<T>(o[h][DimTiles - 1], a[0], a[1], p[h]);
  }
}

/// One online-softmax step of head g + 8 h over the scores of a warp's Slices slices
/// (slice_scores): scales them to log2 units (and soft-caps them, SoftCap); mask(j, e, v, x[j])
/// stores the scaled score v of slice j's key 2 t4 + e into x[j][e], or -inf where the head does
/// not see it. Takes the head's max over the lane quad, rescales m and l (this lane's partial
/// sum), writes 2^(s - m) rounded to T as P^T's B fragments p[j][h], and rescales the
/// accumulators of head tile h: their heads 8 h + 2 t4 + e are lane quads 2 t4 + e's, whose
/// factors come by 2 shuffles (once for all slices).
template <class T, bool SoftCap, int Slices, int HeadTiles, int DimTiles, class Mask>
__device__ __forceinline__ void softmax_slices(const float (&s)[Slices][4], int h, int t4, float scale_log2,
                                               const score_transform& transform, Mask&& mask, float& m, float& l,
                                               float (&o)[HeadTiles][DimTiles][4],
                                               std::uint32_t (&p)[Slices][HeadTiles]) {
  float x[Slices][2];
  masked_scores<SoftCap>(s, h, scale_log2, transform, mask, x);
  // The max and the sum from the first slice's pair (not from -inf and 0: an FMNMX and an FADD a
  // tile that ptxas cannot drop).
  float mx = fmaxf(x[0][0], x[0][1]);
#pragma unroll
  for (int j = 1; j < Slices; ++j) mx = fmaxf(mx, fmaxf(x[j][0], x[j][1]));
  float base;
  const float rescale = quad_max_step(mx, m, base);
  float sum;
#pragma unroll
  for (int j = 0; j < Slices; ++j) {
    x[j][0] = exp2_approx(x[j][0] - base);
    x[j][1] = exp2_approx(x[j][1] - base);
    sum = j == 0 ? x[j][0] + x[j][1] : sum + (x[j][0] + x[j][1]);
    p[j][h] = pack_pair<T>(x[j][0], x[j][1]);
  }
  l = fmaf(l, rescale, sum);
  const float r0 = __shfl_sync(0xffffffffu, rescale, 8 * t4);
  const float r1 = __shfl_sync(0xffffffffu, rescale, 8 * t4 + 4);
#pragma unroll
  for (int n = 0; n < DimTiles; ++n) {
    o[h][n][0] *= r0;
    o[h][n][1] *= r1;
    o[h][n][2] *= r0;
    o[h][n][3] *= r1;
  }
}

/// Writes a decode warp's transposed state (slice_values) to the merge area: head 8 h + 2 t4 + e
/// to row slot first_slot + 8 h + 2 t4 + e of merge_o ([slot][HeadDim]); from the lanes with
/// write_ml, head g + 8 h's max and sum (summed over the lane quad here) to slot first_slot +
/// 8 h + g of merge_m, merge_l.
template <int HeadDim, int HeadTiles, int DimTiles>
__device__ __forceinline__ void stash_slices(float* merge_o, float* merge_m, float* merge_l, int first_slot, int g,
                                             int t4, bool write_ml, const float (&o)[HeadTiles][DimTiles][4],
                                             const float (&m)[HeadTiles], float (&l)[HeadTiles]) {
#pragma unroll
  for (int h = 0; h < HeadTiles; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    float* row = merge_o + (first_slot + 8 * h + 2 * t4) * HeadDim + g;
#pragma unroll
    for (int n = 0; n < DimTiles; ++n) {
      row[16 * n] = o[h][n][0];
      row[HeadDim + 16 * n] = o[h][n][1];
      row[16 * n + 8] = o[h][n][2];
      row[HeadDim + 16 * n + 8] = o[h][n][3];
    }
    if (write_ml) {
      merge_m[first_slot + 8 * h + g] = m[h];
      merge_l[first_slot + 8 * h + g] = l[h];
    }
  }
}

/// Writes a warp's state of its rows to the merge area: half h's accumulators (dims first_dim
/// + 8 n + 2 t4, +1) to row slot first_slot + 8 h of merge_o ([slot][HeadDim]), and, from the
/// lanes with write_ml, its max and sum (summed over the lane quad here) to merge_m, merge_l.
template <int HeadDim, int OTiles, int Halves>
__device__ __forceinline__ void stash_fragments(float* merge_o, float* merge_m, float* merge_l, int first_slot,
                                                int first_dim, bool write_ml, int t4, const float (&o)[OTiles][4],
                                                const float (&m)[Halves], float (&l)[Halves]) {
#pragma unroll
  for (int h = 0; h < Halves; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int slot = first_slot + 8 * h;
#pragma unroll
    for (int n = 0; n < OTiles; ++n) {
      float2* dst = reinterpret_cast<float2*>(merge_o + slot * HeadDim + first_dim + 8 * n + 2 * t4);
      *dst = make_float2(o[n][2 * h], o[n][2 * h + 1]);
    }
    if (write_ml) {
      merge_m[slot] = m[h];
      merge_l[slot] = l[h];
    }
  }
}

}  // namespace rungs::attention::detail
