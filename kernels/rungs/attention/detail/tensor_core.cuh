// Tensor-core GQA decode (FlashInfer's layout): the query heads of one KV head's GQA group are
// the rows of mma.sync.m16n8k16 tiles (padded to 16), so a score is one element of an HMMA
// accumulator instead of a 16-lane shuffle butterfly, and P V runs on tensor cores too.
//
// Same contract as the SIMT decode (paged_attention_kernel with Decode = true): the same
// attention_params, grid (split, KV head, sequence), KV pipeline (3 stages of
// geometry::tile_tokens(D) tokens, 16-byte cp.async, block ids fetched a tile ahead), and the
// same epilogue (output rows, or the split workspace the merge kernel reads). It differs in:
//
//  * Warps. The 4 warps split a tile as token warps x dim warps: each token warp owns 16 keys
//    (one k16 slice of P V) and computes their scores over the whole head dim (S = Q K^T:
//    D/8 HMMA); each dim warp of it accumulates D/dim-warps = 64 output dims (P V: 8 HMMA).
//    D 64: 4 x 1 warps and 64-key tiles; D 128: 2 x 2 and 32. Dim warps
//    of one token warp compute the same scores (the tensor cores have the time; the scores
//    never cross warps).
//  * Fragments. Q is held as A fragments (unscaled, in T, loaded once); K comes from shared
//    memory through ldmatrix.x4 (rows = keys: B of S, "col"), V through ldmatrix.x4.trans
//    (B of P V). The score accumulator's layout (row = head g = lane/4, keys 2 (lane%4), +1)
//    is the A fragment layout of P, so P goes from S to the second mma in registers, rounded
//    to T (as FlashAttention-2 and FlashInfer do; the softmax sum l stays fp32).
//  * Softmax. Scores are scaled by sm_scale log2(e) in fp32 after the mma; a row's max over
//    a warp's 16 keys is 2 shuffles within the lane quad; each thread keeps a partial l, summed
//    over the quad at the end.
//  * Shared memory. A key's row of D/8 16-byte chunks is stored with chunk c at c ^ (key % 8),
//    so the 8 rows an ldmatrix phase reads hit 8 different bank groups (no conflicts).
//
// Groups up to 8 use rows 0-7 only (the upper 8 rows of A are zero registers, their
// accumulators unused); group 16 fills the tile.
//
// Score transforms (score_mod.hpp) are the SIMT decode's policies, compiled in by ModBits: a
// sliding window starts the CTA's keys at the query's window (decode_kv_begin, as the SIMT
// decode: exactly min(len, W) keys are loaded, and none needs a per-key mask), the soft-cap
// bends each scaled score (score_transform::soft_cap), and sinks join the denominator in the
// shared epilogue or split merge.
//
// An fp8 cache (KV E4M3 or E5M2) streams through the pipeline as fp8 (plain rows, half the
// bytes); once a tile has landed, the CTA widens it into one swizzled tile of T (exactly: an
// fp8 value in units of kv_unit<KV> is a T value), behind one more barrier, and the mma loop
// reads that. The dequantisation scales fold into the scores' scale and the epilogue's
// normalisation (kv_dequant, as in the SIMT decode).
//
// Not compiled in here: head dims 80 and 96 (whose rows are not a multiple of the 8-chunk
// swizzle) and 256 (its query fragments alone take 64 registers: ptxas spills at the 4-CTA
// budget).
#pragma once

#include <rungs/attention/detail/agent.cuh>
#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/detail/kernels.cuh>
#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/geometry.hpp>

#include <cuda/std/limits>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rungs::attention::detail {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j; lane l receives row
/// l/4, columns 2 (l%4), +1 of each matrix (.trans: of each matrix transposed). The memory
/// clobber keeps it after the barrier that publishes the tile.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

/// d += A B, m16n8k16, fp32 accumulation, A and B in T (PTX ISA fragment layouts).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Two floats rounded (to nearest even) to a pair of T, lo in the low half.
template <class T>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

// ---- fragment building blocks of the tensor-core prefill (the decode below does the same  ---
// ---- steps inline, tuned to its register budget; sharing them with it is not done) --------
// A warp holds 16 rows of the mma tile; lane l owns rows g = l/4 and g + 8 ("halves" 0 and 1)
// and, of each 8-wide tile, columns 2 t4 and 2 t4 + 1 (t4 = l % 4).

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

/// One online-softmax step of row half h (row g + 8 h) over the keys of s: scales the scores to
/// log2 units (and soft-caps them, SoftCap), masks those visible(j, e) rejects (key 8 j + 2 t4 + e), takes the row's max over
/// the lane quad, rescales m, l (this lane's partial sum) and the accumulators' half h, and
/// writes 2^(s - m) rounded to T into pa, the A fragments of P for P V (pa[kk]: keys 16 kk ..
/// 16 kk + 15; the score accumulator's layout is the A layout, so P stays in registers).
template <class T, bool SoftCap, int KeyTiles, int OTiles, class Visible>
__device__ __forceinline__ void softmax_fragments(const float (&s)[KeyTiles][4], int h, float scale_log2,
                                                  const score_transform& transform, Visible&& visible, float& m,
                                                  float& l, float (&o)[OTiles][4], std::uint32_t (&pa)[KeyTiles / 2][4]) {
  constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
  float x[KeyTiles][2];
  float mx = kNegInf;
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = s[j][2 * h + e] * scale_log2;
      if constexpr (SoftCap) v = transform.soft_cap(v);
      x[j][e] = visible(j, e) ? v : kNegInf;
      mx = fmaxf(mx, x[j][e]);
    }
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(m, mx);
  const float base = m_new == kNegInf ? 0.0f : m_new;  // avoids (-inf) - (-inf)
  const float rescale = exp2_approx(m - base);
  m = m_new;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j) {
    x[j][0] = exp2_approx(x[j][0] - base);
    x[j][1] = exp2_approx(x[j][1] - base);
    sum += x[j][0] + x[j][1];
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

/// The tiles of T the tensor cores read, from an fp8 cache (KV E4M3 or E5M2): its pipeline
/// moves plain rows of fp8 (half the bytes), and once a tile has landed the CTA widens its K
/// and V into one tile of T each, in tile_layout's swizzled rows, behind one more barrier.
/// Shared by the tensor-core decode and prefill.
template <class T, class KV, int HeadDim, int Tile>
struct fp8_tile_widening {
  static constexpr int kThreads = geometry::threads;
  /// The rows the mma loop reads: T, swizzled (a 16-bit cache's pipeline stages are these).
  using tile_layout = kv_pipeline<T, HeadDim, Tile, kThreads, geometry::stages, true>;
  static constexpr int kVecs = Tile * HeadDim / 8;  // 8-element vectors of a K or V tile
  static_assert(kVecs % kThreads == 0);
  /// Shared memory of the widened K and V tiles.
  static constexpr std::size_t kBytes = std::size_t{2} * Tile * HeadDim * sizeof(T);

  /// Widens an fp8 tile (plain rows) into a tile of T in tile_layout's swizzled rows, 8
  /// elements per step, exactly (fp8x8_to: values in units of kv_unit<KV>, which the scales
  /// absorb); zero-filled tokens become zeros.
  /// Thread tid widens vectors tid + k kThreads: token tid / (D/8) + k kThreads / (D/8), chunk
  /// tid % (D/8). kThreads / (D/8) tokens is a multiple of the swizzle's 8 rows, so every k
  /// has the same swizzled chunk: one place per thread, and k only adds whole rows.
  static_assert((kThreads / (HeadDim / 8)) % 8 == 0);
  __device__ __forceinline__ static void widen(const KV* from, T* to, int tid) {
    const KV* src = from + tid * 8;
    T* dst = to + tile_layout::place(0, tid / (HeadDim / 8), tid % (HeadDim / 8));
#pragma unroll
    for (int k = 0; k < kVecs / kThreads; ++k) {
      *reinterpret_cast<uint4*>(dst + k * kThreads * 8) =
          fp8x8_to<T, KV>(*reinterpret_cast<const uint2*>(src + k * kThreads * 8));
    }
  }

  /// Widens pipeline tile `tile` (K to wide, V to wide + Tile HeadDim) and publishes it to the
  /// CTA. The caller's pipe.advance(tile) barrier has ended every warp's reads of the last one.
  template <class Pipeline>
  __device__ __forceinline__ static void land(const Pipeline& pipe, int tile, T* wide, int tid) {
    widen(pipe.k_tile(tile), wide, tid);
    widen(pipe.v_tile(tile), wide + Tile * HeadDim, tid);
    __syncthreads();
  }
};

/// Shared memory of a tensor-core prefill agent: the K/V pipeline (Stages x Tile tokens of KV;
/// swizzled rows of T, or plain fp8 rows and the widened tiles of fp8_tile_widening), reused
/// after it drains for MergeRows rows' states (HeadDim floats, a max and a sum each).
template <class T, int HeadDim, int Tile, int MergeRows, class KV = T>
struct tensor_core_storage {
  static constexpr bool kFp8 = is_fp8_element<KV>;
  using widening = fp8_tile_widening<T, KV, HeadDim, Tile>;
  static constexpr std::size_t kPipelineBytes = std::size_t{2} * geometry::stages * Tile * HeadDim * sizeof(KV);
  static constexpr std::size_t kWideBytes = kFp8 ? widening::kBytes : 0;
  static constexpr std::size_t kMergeFloats = std::size_t{MergeRows} * (HeadDim + 2);
  static constexpr std::size_t kBytes = kPipelineBytes + kWideBytes > kMergeFloats * sizeof(float)
                                            ? kPipelineBytes + kWideBytes
                                            : kMergeFloats * sizeof(float);
  static_assert(kBytes <= 48 * 1024, "the agent must fit 48 KiB of static shared memory");
  alignas(128) unsigned char bytes[kBytes];

  using pipeline = kv_pipeline<KV, HeadDim, Tile, geometry::threads, geometry::stages, !kFp8>;
  /// The rows the mma loop reads (the pipeline's stages, or the widened tiles).
  using tile_layout = kv_pipeline<T, HeadDim, Tile, geometry::threads, geometry::stages, true>;
  /// The K/V pipeline over keys [kv_begin, kv_end) in this storage, its first tiles issued.
  __device__ __forceinline__ pipeline start(const kv_source<KV>& src, int kv_begin, int kv_end, int num_tiles,
                                            int tid) {
    KV* k = reinterpret_cast<KV*>(bytes);
    pipeline pipe{src, k, k + geometry::stages * Tile * HeadDim, kv_begin, kv_end, num_tiles, tid,
                  (1 << src.log2_block) - 1, {}};
    pipe.start();
    return pipe;
  }
  /// fp8: the widened K tile (V follows it).
  __device__ __forceinline__ T* wide() { return reinterpret_cast<T*>(bytes + kPipelineBytes); }
};

/// Where a thread sits in the mma fragments of its warp: accumulator rows g and g + 8, and
/// columns 2 t4, 2 t4 + 1 of each 8-wide tile.
struct fragment_lane {
  int tid = static_cast<int>(threadIdx.x);
  int warp = tid / 32;
  int lane = tid % 32;
  int g = lane / 4;
  int t4 = lane % 4;
};

template <class T, int HeadDim, int Group, unsigned ModBits = 0, class KV = T>
struct tensor_core_decode_agent {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  static constexpr bool kFp8 = is_fp8_element<KV>;
  static_assert(is_device_element<T>, "the tensor-core decode takes __half or __nv_bfloat16 queries");
  static_assert(std::is_same_v<KV, T> || kFp8, "the tensor-core decode takes a cache of the queries' type or fp8");
  static_assert(HeadDim == 64 || HeadDim == 128,
                "the tensor-core decode supports head dims 64 and 128 (80, 96, 256: the SIMT decode)");
  static_assert(Group >= 1 && (Group <= 8 || Group == 16), "the tensor-core decode takes GQA groups 1-8 and 16");

  static constexpr int kThreads = geometry::threads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = geometry::tile_tokens(HeadDim);
  static constexpr int kTokenWarps = kTile / 16;
  static constexpr int kDimWarps = kWarps / kTokenWarps;
  static constexpr int kWarpDims = HeadDim / kDimWarps;
  static constexpr int kKSteps = HeadDim / 16;
  static constexpr int kRowVecs = HeadDim / geometry::vector_elements;
  static constexpr int kStages = geometry::stages;
  // The tiles the mma reads: rows of T, swizzled (tile_layout::place). A 16-bit cache's
  // pipeline stages are those tiles; an fp8 cache's are plain rows of fp8, widened into one.
  using tile_layout = kv_pipeline<T, HeadDim, kTile, kThreads, kStages, true>;
  using pipeline = kv_pipeline<KV, HeadDim, kTile, kThreads, kStages, !kFp8>;
  using widening = fp8_tile_widening<T, KV, HeadDim, kTile>;
  static constexpr bool kHighRows = Group > 8;         // rows 8-15 of the tiles hold heads
  static constexpr int kHalves = kHighRows ? 2 : 1;    // accumulator row halves in use
  static constexpr int kRowsKept = 8 * kHalves;
  static_assert(kTokenWarps * kDimWarps == kWarps && kWarpDims == 64);

  static constexpr std::size_t kPipelineBytes = std::size_t{2} * kStages * kTile * HeadDim * sizeof(KV);
  static constexpr std::size_t kWideBytes = kFp8 ? widening::kBytes : 0;  // K, V
  static constexpr std::size_t kMergeFloats = std::size_t{kTokenWarps} * kRowsKept * (HeadDim + 2);
  // fp8: the scores' scale and the V scale (values read from global memory, unlike the
  // 16-bit path's kernel parameter) wait in shared memory past the merge's floats, read once
  // per tile and once after the merge: the loop is at the 4-CTA register budget, and a value
  // held across it spills.
  static constexpr std::size_t kScaleBytes = kFp8 ? 16 : 0;
  static_assert(!kFp8 || kPipelineBytes + kWideBytes >= kMergeFloats * sizeof(float));
  static constexpr std::size_t kSmemBytes = kPipelineBytes + kWideBytes + kScaleBytes > kMergeFloats * sizeof(float)
                                                ? kPipelineBytes + kWideBytes + kScaleBytes
                                                : kMergeFloats * sizeof(float);
  static_assert(kSmemBytes <= 48 * 1024, "the agent must fit 48 KiB of static shared memory");

  struct storage {
    alignas(128) unsigned char bytes[kSmemBytes];
  };

  /// Attends the group's rows over keys [kv_begin, kv_end) (every one visible to every row:
  /// a window starts kv_begin) and calls epilogue(row_info, c, float (&o)[8], m, l) per row and
  /// 8-dim vector, as attention_agent::run does, with o times v_scale (kv_dequant: an fp8
  /// cache's; 1 otherwise).
  template <class Epilogue>
  __device__ __forceinline__ static void run(storage& smem, const kv_source<KV>& src, const decode_rows& rows,
                                             int kv_begin, int kv_end, const T* q, std::int64_t q_stride,
                                             float scale_log2, float v_scale, const score_transform& transform,
                                             Epilogue&& epilogue) {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid / 32;
    const int lane = tid % 32;
    int g = lane / 4;   // accumulator row (head) g, and g + 8
    int t4 = lane % 4;  // keys / dims 2 t4, 2 t4 + 1 of each 8-wide tile
    const int token_warp = warp % kTokenWarps;
    const int dim_warp = warp / kTokenWarps;
    const int num_tiles = kv_end > kv_begin ? (kv_end - kv_begin + kTile - 1) / kTile : 0;

    // Q as A fragments: register 0 row g, dims 16 ks + 2 t4 (+1); 1 row g + 8; 2 row g, dims + 8;
    // 3 row g + 8, dims + 8. Rows past the group are zeros; so is everything of a CTA with no
    // keys (its rows only write zeros or an empty split: the queries are not read).
    std::uint32_t qa[kKSteps][4];
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) qa[ks][0] = qa[ks][1] = qa[ks][2] = qa[ks][3] = 0u;
    if (num_tiles > 0) {
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const int head = g + 8 * h;
        if (head < Group) {
          const T* row = q + static_cast<std::int64_t>(rows.seq) * q_stride +
                         static_cast<std::int64_t>(rows.first_head + head) * HeadDim + 2 * t4;
#pragma unroll
          for (int ks = 0; ks < kKSteps; ++ks) {
            qa[ks][h] = *reinterpret_cast<const std::uint32_t*>(row + 16 * ks);
            qa[ks][h + 2] = *reinterpret_cast<const std::uint32_t*>(row + 16 * ks + 8);
          }
        }
      }
    }

    float m[kHalves], l[kHalves];
    float o[kWarpDims / 8][4];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      m[h] = kNegInf;
      l[h] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < kWarpDims / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    // ---- KV pipeline (kv_pipeline, agent.cuh; swizzled rows) -------------------------------
    pipeline pipe{src, reinterpret_cast<KV*>(smem.bytes), reinterpret_cast<KV*>(smem.bytes) + kStages * kTile * HeadDim,
                  kv_begin, kv_end, num_tiles, tid, (1 << src.log2_block) - 1, {}};
    T* const wide_k = reinterpret_cast<T*>(smem.bytes + kPipelineBytes);  // fp8: the widened tile
    T* const wide_v = wide_k + kTile * HeadDim;
    float* const scale_slot = reinterpret_cast<float*>(smem.bytes + kPipelineBytes + kWideBytes);
    if (kFp8 && tid == 0) {  // published by the first tile's barrier (or the merge's)
      scale_slot[0] = scale_log2;
      scale_slot[1] = v_scale;
    }
    pipe.start();
    for (int tile = 0; tile < num_tiles; ++tile) {
      pipe.advance(tile);  // its barrier also ends every warp's reads of the last widened tile
      const T* ks_tile;
      const T* vs_tile;
      if constexpr (kFp8) {
        widening::land(pipe, tile, wide_k, tid);
        ks_tile = wide_k;
        vs_tile = wide_v;
        scale_log2 = scale_slot[0];
      } else {
        ks_tile = pipe.k_tile(tile);
        vs_tile = pipe.v_tile(tile);
      }
      const int first_key = kv_begin + tile * kTile + token_warp * 16;  // the warp's 16 keys
      if (first_key >= kv_end) continue;                                // warp-uniform

      // S = Q K^T over the warp's keys: s[j] holds keys 8 j + 2 t4 (+1) of rows g (0, 1), g + 8 (2, 3).
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int ks = 0; ks < kKSteps; ks += 2) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          // Matrix lane/8 of the x4: chunk 2 ks + lane/8 of the 8 keys 8 j .. 8 j + 7.
          const int key = token_warp * 16 + 8 * j + (lane & 7);
          std::uint32_t b[4];
          ldmatrix_x4(b, shared_address(ks_tile + tile_layout::place(0, key, 2 * ks + (lane >> 3))));
          mma_m16n8k16<T>(s[j], qa[ks], b[0], b[1]);
          mma_m16n8k16<T>(s[j], qa[ks + 1], b[2], b[3]);
        }
      }

      // Online softmax per row half: scale (and soft-cap), mask keys past the range, max over
      // the quad.
      std::uint32_t pa[4] = {0u, 0u, 0u, 0u};  // P as an A fragment (rows g, g + 8; keys 2 t4, + 8)
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        float x[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = first_key + 8 * (e / 2) + 2 * t4 + (e % 2);
          float v = s[e / 2][2 * h + e % 2] * scale_log2;
          if constexpr (Mod.soft_cap) v = transform.soft_cap(v);
          x[e] = key < kv_end ? v : kNegInf;
        }
        float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx);
        const float base = m_new == kNegInf ? 0.0f : m_new;  // avoids (-inf) - (-inf)
        const float rescale = exp2_approx(m[h] - base);
        m[h] = m_new;
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = exp2_approx(x[e] - base);
        l[h] = fmaf(l[h], rescale, (x[0] + x[1]) + (x[2] + x[3]));
#pragma unroll
        for (int n = 0; n < kWarpDims / 8; ++n) {
          o[n][2 * h] *= rescale;
          o[n][2 * h + 1] *= rescale;
        }
        pa[h] = pack_pair<T>(x[0], x[1]);
        pa[h + 2] = pack_pair<T>(x[2], x[3]);
      }

      // O += P V over the warp's dims: matrix lane/8 of the x4.trans is keys 8 (lane/8 % 2) + 0..7,
      // chunk 2 n + lane/16 of the warp's dims.
      const int key = token_warp * 16 + 8 * ((lane >> 3) & 1) + (lane & 7);
#pragma unroll
      for (int n = 0; n < kWarpDims / 16; ++n) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, shared_address(vs_tile + tile_layout::place(0, key, dim_warp * (kWarpDims / 8) + 2 * n + (lane >> 4))));
        mma_m16n8k16<T>(o[2 * n], pa, b[0], b[1]);
        mma_m16n8k16<T>(o[2 * n + 1], pa, b[2], b[3]);
      }
    }
    pipe.finish();  // the pipeline's shared memory is free for the merge

    // ---- merge the token warps' states (log-sum-exp) and hand rows to the epilogue ---------
    if constexpr (kFp8) {
      // The fp8 loop uses every register of the 4-CTA budget: rather than hold the lane's row
      // g across it (ptxas spills it), read the thread index anew (a volatile read the
      // compiler cannot merge with the first).
      const int lane_again = thread_index_again() % 32;
      g = lane_again / 4;
      t4 = lane_again % 4;
    }
    float* merge_o = reinterpret_cast<float*>(smem.bytes);           // [token warp][row][HeadDim]
    float* merge_m = merge_o + kTokenWarps * kRowsKept * HeadDim;    // [token warp][row]
    float* merge_l = merge_m + kTokenWarps * kRowsKept;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
      const int slot = token_warp * kRowsKept + g + 8 * h;
#pragma unroll
      for (int n = 0; n < kWarpDims / 8; ++n) {
        float2* dst = reinterpret_cast<float2*>(merge_o + slot * HeadDim + dim_warp * kWarpDims + 8 * n + 2 * t4);
        *dst = make_float2(o[n][2 * h], o[n][2 * h + 1]);
      }
      if (dim_warp == 0 && t4 == 0) {  // the dim warps of a token warp hold the same m and l
        merge_m[slot] = m[h];
        merge_l[slot] = l[h];
      }
    }
    __syncthreads();

    for (int item = tid; item < Group * kRowVecs; item += kThreads) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      float out[8], row_max, sum;
      merge_row_states<kTokenWarps, HeadDim>(merge_o, merge_m, merge_l, row, kRowsKept, c, out, row_max, sum);
      if constexpr (kFp8) {
#pragma unroll
        for (int e = 0; e < 8; ++e) out[e] *= scale_slot[1];
      }
      epilogue(rows.at(row), c, out, row_max, sum);
    }
  }
};

/// The tensor-core prefill: a CTA's flattened (token, head) rows, prefill_rows_per_cta(D) of
/// them as for the SIMT prefill (same grid, plan and workspace), are the rows of 16-row mma
/// tiles, one tile per row warp; the 4 warps are row warps x dim warps (D 128: 2 x 2, a warp
/// accumulating 64 output dims; D 64: 4 x 1). Every warp walks every key of the tile (no
/// merge across warps) with its 16 rows' scores over the whole head dim (the dim warps of a
/// row tile compute the same scores); the causal mask is per row (the row's last visible key),
/// and a warp skips a tile wholly past its rows' last key.
///
/// Score transforms (ModBits) are the SIMT prefill's policies: the kernel starts the CTA's keys
/// at its first row's window (prefill_kv_begin: no key before every row's window is loaded),
/// and each row masks the keys before its own window start; the soft-cap bends
/// each scaled score (score_transform::soft_cap); sinks join the shared epilogue's or merge's
/// denominator. An fp8 cache (KV) streams as fp8 and is widened tile by tile into T
/// (fp8_tile_widening, as in the tensor-core decode), its scales folded by kv_dequant.
template <class T, int HeadDim, unsigned ModBits = 0, class KV = T>
struct tensor_core_prefill_agent {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  static constexpr bool kFp8 = is_fp8_element<KV>;
  static_assert(is_device_element<T>, "the tensor-core prefill takes __half or __nv_bfloat16 queries");
  static_assert(std::is_same_v<KV, T> || kFp8, "the tensor-core prefill takes a cache of the queries' type or fp8");
  static_assert(HeadDim == 64 || HeadDim == 128,
                "the tensor-core prefill supports head dims 64 and 128 (80, 96, 256: the SIMT prefill)");

  static constexpr int kThreads = geometry::threads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = geometry::tile_tokens(HeadDim);
  static constexpr int kCtaRows = geometry::prefill_rows_per_cta(HeadDim);
  static constexpr int kRowWarps = kCtaRows / 16;
  static constexpr int kDimWarps = kWarps / kRowWarps;
  static constexpr int kWarpDims = HeadDim / kDimWarps;
  static constexpr int kKSteps = HeadDim / 16;
  // Keys per online-softmax step (the scores of 32 keys and their P fragments live at once:
  // 159 registers at D 128 within the 168 of 3 CTAs per SM; a 64-key tile at D 64 takes 2).
  static constexpr int kChunkKeys = 32;
  static constexpr int kKeyTiles = kChunkKeys / 8;
  static constexpr int kRowVecs = HeadDim / geometry::vector_elements;
  static_assert(kRowWarps * kDimWarps == kWarps && kWarpDims == 64);

  using storage = tensor_core_storage<T, HeadDim, kTile, kCtaRows, KV>;
  using pipeline = typename storage::pipeline;
  using tile_layout = typename storage::tile_layout;

  /// Attends the CTA's rows over keys [kv_begin, kv_end) (each row up to its own last visible
  /// key, and from its own window's first under Mod.sliding_window) and calls
  /// epilogue(row_info, c, float (&o)[8], m, l) per valid row and 8-dim vector, as
  /// attention_agent::run does.
  template <class Epilogue>
  __device__ __forceinline__ static void run(storage& smem, const kv_source<KV>& src, const prefill_rows& rows,
                                             int kv_begin, int kv_end, const T* q, std::int64_t q_stride,
                                             float scale_log2, const score_transform& transform,
                                             Epilogue&& epilogue) {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    const auto [tid, warp, lane, g, t4] = fragment_lane{};
    const int row_warp = warp % kRowWarps;
    const int dim_warp = warp / kRowWarps;
    const int num_tiles = kv_end > kv_begin ? (kv_end - kv_begin + kTile - 1) / kTile : 0;

    // This lane's rows g and g + 8 of the warp's tile: queries, the end of their keys and
    // (window) the start.
    int row_end[2];
    int row_begin[2];  // read only under Mod.sliding_window
    const T* q_rows[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const row_info info = rows.at(row_warp * 16 + g + 8 * h);
      row_end[h] = info.valid ? min(info.end, kv_end) : kv_begin;
      row_begin[h] = info.end - transform.window;
      q_rows[h] = info.valid && num_tiles > 0
                      ? q + static_cast<std::int64_t>(info.token) * q_stride + static_cast<std::int64_t>(info.head) * HeadDim
                      : nullptr;
    }
    int warp_end = max(row_end[0], row_end[1]);  // past the last key any row of the warp sees
    warp_end = max(warp_end, __shfl_xor_sync(0xffffffffu, warp_end, 4));
    warp_end = max(warp_end, __shfl_xor_sync(0xffffffffu, warp_end, 8));
    warp_end = max(warp_end, __shfl_xor_sync(0xffffffffu, warp_end, 16));
    std::uint32_t qa[kKSteps][4];
    load_q_fragments<T>(qa, q_rows, t4);

    float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
    float o[kWarpDims / 8][4];
#pragma unroll
    for (int n = 0; n < kWarpDims / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    pipeline pipe = smem.start(src, kv_begin, kv_end, num_tiles, tid);
    for (int tile = 0; tile < num_tiles; ++tile) {
      pipe.advance(tile);  // its barrier also ends every warp's reads of the last widened tile
      const T* k_tile;
      const T* v_tile;
      if constexpr (kFp8) {
        storage::widening::land(pipe, tile, smem.wide(), tid);
        k_tile = smem.wide();
        v_tile = k_tile + kTile * HeadDim;
      } else {
        k_tile = pipe.k_tile(tile);
        v_tile = pipe.v_tile(tile);
      }
      const int tile_start = kv_begin + tile * kTile;
      if (tile_start >= warp_end) continue;  // warp-uniform: every row of the warp is done

#pragma unroll
      for (int chunk = 0; chunk < kTile; chunk += kChunkKeys) {
        const int first_key = tile_start + chunk;
        if (first_key >= warp_end) break;  // warp-uniform
        float s[kKeyTiles][4];
        score_fragments<T, tile_layout>(s, qa, k_tile, chunk, lane);
        std::uint32_t pa[kKeyTiles / 2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          softmax_fragments<T, Mod.soft_cap>(
              s, h, scale_log2, transform,
              [&](int j, int e) {
                const int key = first_key + 8 * j + 2 * t4 + e;
                return key < row_end[h] && (!Mod.sliding_window || key >= row_begin[h]);
              },
              m[h], l[h], o, pa);
        }
        value_fragments<T, tile_layout>(o, pa, v_tile, chunk, dim_warp * (kWarpDims / 8), lane);
      }
    }
    pipe.finish();  // the pipeline's shared memory is free for the rows' states

    // ---- rows to the epilogue through shared memory (fragments hold 2 dims per lane) ------
    float* merge_o = reinterpret_cast<float*>(smem.bytes);  // [row][HeadDim]
    float* merge_m = merge_o + kCtaRows * HeadDim;           // [row]
    float* merge_l = merge_m + kCtaRows;
    stash_fragments<HeadDim>(merge_o, merge_m, merge_l, row_warp * 16 + g, dim_warp * kWarpDims,
                             dim_warp == 0 && t4 == 0, t4, o, m, l);
    __syncthreads();

    for (int item = tid; item < kCtaRows * kRowVecs; item += kThreads) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      const row_info info = rows.at(row);
      if (!info.valid) continue;
      float out[8], row_max, sum;
      merge_row_states<1, HeadDim>(merge_o, merge_m, merge_l, row, 0, c, out, row_max, sum);
      epilogue(info, c, out, row_max, sum);
    }
  }
};

/// __launch_bounds__' minimum CTAs per SM of the tensor-core decode for the architecture being
/// compiled (geometry::tensor_core_decode_ctas_per_sm; 1 in the host pass).
constexpr int tensor_core_min_ctas_per_sm() {
#if defined(__CUDA_ARCH__)
  return geometry::tensor_core_decode_ctas_per_sm(__CUDA_ARCH__ / 10);
#else
  return 1;
#endif
}

/// The tensor-core decode kernel: grid (split, KV head, sequence), as the SIMT decode's, and
/// the same workspace layout, so merge_splits_kernel<T, HeadDim, Sinks> merges its splits.
/// ModBits: the score transforms compiled in (score_mod_bits); KV: the cache's element type
/// (T or an fp8 format), as paged_attention_kernel's.
template <class T, int HeadDim, int BlockSize, int Group, unsigned ModBits = 0, class KV = T>
__global__ void __launch_bounds__(geometry::threads, tensor_core_min_ctas_per_sm())
    tensor_core_decode_kernel(const attention_params p) {
  using agent = tensor_core_decode_agent<T, HeadDim, Group, ModBits, KV>;
  __shared__ typename agent::storage smem;
  const int split = static_cast<int>(blockIdx.x) % p.num_splits;
  const int kv_head = static_cast<int>(blockIdx.y);
  const int seq = static_cast<int>(blockIdx.z);
  const int kv_len = min(max(p.kv_lens[seq], 0), p.max_context);
  const int split_begin = split * p.split_tokens;
  const int kv_end = min(split_begin + p.split_tokens, kv_len);
  const kv_dequant<KV> dq(p, kv_head);
  const attention_epilogue<T, HeadDim, ModBits, KV> epilogue{p, split, 1.0f};  // the agent applies dq.v_scale
  agent::run(smem, make_kv_source<KV, BlockSize>(p, seq, kv_head), decode_rows{seq, kv_head * Group, kv_len},
             decode_kv_begin<agent::Mod>(p, split_begin, kv_len), kv_end, static_cast<const T*>(p.q), p.q_stride,
             dq.scale_log2, dq.v_scale, make_score_transform(p), epilogue);
}

/// __launch_bounds__' minimum CTAs per SM of the tensor-core prefill
/// (geometry::tensor_core_prefill_ctas_per_sm; 1 in the host pass).
constexpr int tensor_core_prefill_min_ctas_per_sm() {
#if defined(__CUDA_ARCH__)
  return geometry::tensor_core_prefill_ctas_per_sm(__CUDA_ARCH__ / 10);
#else
  return 1;
#endif
}

/// The tensor-core prefill kernel: the SIMT prefill's grid (q tile x split, KV head, sequence),
/// parameters and workspace, so merge_splits_kernel<T, HeadDim, Sinks> merges its splits.
/// ModBits: the score transforms compiled in (score_mod_bits); KV: the cache's element type
/// (T or an fp8 format), as paged_attention_kernel's.
template <class T, int HeadDim, int BlockSize, unsigned ModBits = 0, class KV = T>
__global__ void __launch_bounds__(geometry::threads, tensor_core_prefill_min_ctas_per_sm())
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

}  // namespace rungs::attention::detail
