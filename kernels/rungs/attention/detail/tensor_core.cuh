// Tensor-core GQA decode (FlashInfer's layout for the scores): the query heads of one KV
// head's GQA group are the rows of mma.sync.m16n8k16 tiles (padded to 16), so a score is one
// element of an HMMA accumulator instead of a 16-lane shuffle butterfly, and P V runs on
// tensor cores too.
//
// Same contract as the SIMT decode (paged_attention_kernel with Decode = true): the same
// attention_params, grid (split, KV head, sequence), KV pipeline (3 stages of
// geometry::tile_tokens(D) tokens, 16-byte cp.async, block ids fetched a tile ahead), and the
// same epilogue (output rows, or the split workspace the merge kernel reads). It differs in:
//
//  * Warps. Each of the 4 warps owns a quarter of a tile's keys (D 128: 8 of 32; D 64: 16 of
//    64, two 8-key slices) and every output dim, so no two warps read the same K or V bytes
//    (shared-memory traffic is the tile loop's bound on sm_90: the ldmatrix reads and the
//    copies' writes, 256 cycles per tile against 223-300 issued instructions; until
//    2026-11-27 2 token warps x 2 dim warps read every K slice twice, 6 KiB per warp and
//    tile instead of 4). The warps' states merge through shared memory at the end.
//  * Fragments. Q is held as A fragments (unscaled, in T, loaded once); K comes from shared
//    memory through ldmatrix.x4 (rows = keys: B of S = Q K^T, "col", m16n8k16), 8 keys per
//    mma. The score accumulator (row = head g = lane/4, keys 2 (lane%4), +1) is the B fragment
//    of P^T, so the value step runs transposed: O^T (dims x heads) += V^T P^T, mma m16n8k8
//    with A = V^T from ldmatrix.x4.trans (one x4: 32 dims of the slice's 8 keys) and B = P^T
//    rounded to T (as FlashAttention-2 and FlashInfer round P; the softmax sum l stays fp32).
//    The accumulators are D/16 tiles of 4 floats per 8 heads, all live (Q P V's rows 8-15
//    would idle below group 16).
//  * Softmax. Scores are scaled by sm_scale log2(e) in fp32 after the mma; a head's max over a
//    warp's keys of a tile is 2 shuffles within the lane quad; an accumulator column's head
//    is another quad's, so its rescale factor comes by 2 shuffles per 8 heads; each thread
//    keeps a partial l, summed over the quad at the end.
//  * Shared memory. A key's row of D/8 16-byte chunks is stored with chunk c at c ^ (key % 8)
//    where a row is whole groups of 8 chunks (D 64, 128), and padded by one chunk to an odd
//    stride otherwise (D 80, 96: kv_pipeline's LdmatrixRows), so the 8 rows an ldmatrix phase
//    reads hit 8 different bank groups (no conflicts); a warp's keys keep their places from
//    tile to tile, so its ldmatrix addresses are two per-thread offsets and immediates
//    (slice_rows).
//
// Groups up to 8 use rows 0-7 only (rows 8-15 of A repeat them: loaded registers, where
// zeros were re-made in the loop; their scores are not used); group 16 fills the tile and
// doubles the value step (two 8-head B fragments).
//
// Score transforms (score_mod.hpp) are the SIMT decode's policies, compiled in by ModBits: a
// sliding window starts the CTA's keys at the query's window (decode_kv_begin, as the SIMT
// decode: exactly min(len, W) keys are loaded, and none needs a per-key mask), the soft-cap
// bends each scaled score (score_transform::soft_cap), and sinks join the denominator in the
// shared epilogue or split merge.
//
// The decode over an fp8 cache is fp8_decode_agent (fp8_decode.cuh: K and V fragments
// converted in registers); the prefill over one widens each landed fp8 tile into a swizzled
// tile of T (fp8_tile_widening, below), behind one more barrier.
//
// Layers (CUB's, FlashInfer's fragment steps): mma.cuh holds the PTX wrappers, fragments.cuh the
// warp fragment steps the agents call, this header the CTA-level parts (the prefill's fp8
// widening, the shared memory, the two agents), kernels.cuh the __global__ entry points.
//
// Head dim 256: its 16-key tile is two 8-key slices, so the 4 warps are 2 key warps x 2 dim
// warps of 128 output dims (tensor_core_decode_agent), both warps of a slice computing its
// scores over the whole head dim.
//
// The in-CTA split (tensor_core_decode_agent's WarpGroups; docs/kernels.md, "The in-CTA split"):
// for grids that leave SMs' CTA slots empty, a CTA of 2-4 groups of these 4 warps, each group
// over its own 1/W of the split's tiles with its own pipeline, merged at the end as the 4 warps
// are.
#pragma once

#include <rungs/attention/detail/agent.cuh>
#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/detail/fragments.cuh>
#include <rungs/attention/geometry.hpp>

#include <cuda/std/limits>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rungs::attention::detail {

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
  static_assert(!is_fp8_element<KV> || kVecs % kThreads == 0);
  /// Shared memory of the widened K and V tiles.
  static constexpr std::size_t kBytes = std::size_t{2} * Tile * HeadDim * sizeof(T);

  /// Widens an fp8 tile (plain rows) into a tile of T in tile_layout's swizzled rows, 8
  /// elements per step, exactly (fp8x8_to: values in units of kv_unit<KV>, which the scales
  /// absorb); zero-filled tokens become zeros.
  /// Thread tid widens vectors tid + k kThreads: token tid / (D/8) + k kThreads / (D/8), chunk
  /// tid % (D/8). kThreads / (D/8) tokens is a multiple of the swizzle's 8 rows, so every k
  /// has the same swizzled chunk: one place per thread, and k only adds whole rows.
  static_assert(!is_fp8_element<KV> || (kThreads / (HeadDim / 8)) % 8 == 0);
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

/// Shared memory of a tensor-core agent: the K/V pipeline (stages x Tile tokens of KV; rows of T
/// swizzled or padded for ldmatrix (kv_pipeline's LdmatrixRows), or plain fp8 rows and the
/// prefill's widened tiles of fp8_tile_widening), reused after the pipeline drains for
/// MergeRows rows' states (HeadDim floats, a max and a sum each). One budget for the 16-bit
/// decode and the prefill.
template <class T, int HeadDim, int Tile, int MergeRows, class KV = T, bool AtBudget = false,
          int CtaThreads = geometry::threads, bool HoldRows = true>
struct tensor_core_storage {
  static constexpr bool kFp8 = is_fp8_element<KV>;
  using widening = fp8_tile_widening<T, KV, HeadDim, Tile>;
  /// The pipeline holds its row pointers (kv_pipeline's HoldRows) unless told not to; where the
  /// loop is at its register budget (AtBudget) it spares registers elsewhere (Spare).
  /// CtaThreads: the CTA's threads, of which the pipeline's geometry::threads are one warp group
  /// (the decode's in-CTA split).
  using pipeline =
      kv_pipeline<KV, HeadDim, Tile, geometry::threads, geometry::stages, !kFp8, HoldRows, AtBudget, CtaThreads>;
  /// The rows the mma loop reads (the pipeline's stages, or the widened tiles).
  using tile_layout = kv_pipeline<T, HeadDim, Tile, geometry::threads, geometry::stages, true>;
  static constexpr std::size_t kPipelineBytes = std::size_t{2} * geometry::stages * pipeline::kStageElems * sizeof(KV);
  static constexpr std::size_t kWideBytes = kFp8 ? widening::kBytes : 0;
  static constexpr std::size_t kMergeBytes = std::size_t{MergeRows} * (HeadDim + 2) * sizeof(float);
  static constexpr std::size_t kTileBytes = kPipelineBytes + kWideBytes;
  static constexpr std::size_t kBytes = kTileBytes > kMergeBytes ? kTileBytes : kMergeBytes;
  static_assert(kBytes <= 48 * 1024, "the agent must fit 48 KiB of static shared memory");
  alignas(128) unsigned char bytes[kBytes];

  /// The K/V pipeline over keys [kv_begin, kv_end) in this storage, its first tiles issued
  /// (warp group `group` of a CTA of several: its stages are group storages on, kv_pipeline's
  /// kGroupElems).
  __device__ __forceinline__ pipeline start(const kv_source<KV>& src, int kv_begin, int kv_end, int num_tiles,
                                            int tid, int group = 0) {
    KV* k = reinterpret_cast<KV*>(bytes);
    pipeline pipe{src, k, kv_begin, kv_end, num_tiles, tid, (1 << src.log2_block) - 1, {}};
    if constexpr (pipeline::kGrouped) pipe.group_elems = group * pipeline::kGroupElems;
    pipe.start();
    return pipe;
  }
  /// fp8: the widened K tile (V follows it).
  __device__ __forceinline__ T* wide() { return reinterpret_cast<T*>(bytes + kPipelineBytes); }
  /// The merge area, after pipeline::finish: MergeRows x HeadDim accumulators, then MergeRows
  /// maxima and MergeRows sums.
  __device__ __forceinline__ float* merge_o() { return reinterpret_cast<float*>(bytes); }
  __device__ __forceinline__ float* merge_m() { return merge_o() + MergeRows * HeadDim; }
  __device__ __forceinline__ float* merge_l() { return merge_m() + MergeRows; }
};

/// The tensor-core decode agent: the group's rows are the rows of the warps' S = Q K^T mma
/// tiles; each warp owns an 8-key slice or more of a tile (kWarpKeys) and the output dims of
/// its dim warp, and the warps' states merge through shared memory at the end. Head dims up to
/// 128: a tile of 32 or 64 keys, 4 key warps over every output dim (no two warps read the same
/// K or V bytes). Head dim 256: a tile of 16 keys (3 stages of it are all 48 KiB of static
/// shared memory) is 2 slices, so the 4 warps are 2 key warps x 2 dim warps of 128 output
/// dims: both warps of a slice compute its scores over the whole head dim (its K is read
/// twice from shared memory; an exchange of partial scores would need shared memory the
/// pipeline leaves none of), and each keeps O^T for its 128 dims (the accumulators of head dim
/// 128).
///
/// WarpGroups (W, the in-CTA split for grids that leave SMs under-filled; plan.hpp,
/// geometry::tensor_core_decode_warp_groups): the CTA is W groups of those 4 warps, group w
/// walking the w-th contiguous 1/W of the split's tiles with its own K/V pipeline (W copies of
/// the storage, which the kernel takes as dynamic shared memory), and the W x 4 warps' states
/// meet in the same log-sum-exp merge at the end. The groups step their pipelines together (a
/// CTA barrier per tile: a group past its last tile waits at the barriers and loads nothing).
/// W = 1 is the 4-warp CTA.
template <class T, int HeadDim, int Group, unsigned ModBits = 0, class KV = T, int WarpGroups = 1>
struct tensor_core_decode_agent {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  static_assert(is_device_element<T>, "the tensor-core decode takes __half or __nv_bfloat16 queries");
  static_assert(std::is_same_v<KV, T>,
                "the tensor-core decode takes a cache of the queries' type (an fp8 cache: fp8_decode_agent, fp8_decode.cuh)");
  static_assert(geometry::tensor_core_decode_fits(HeadDim, Group),
                "the tensor-core decode takes head dims 64, 80, 96, 128, 256 and GQA groups 1-8, 16");

  static constexpr int kThreads = geometry::threads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = geometry::tile_tokens(HeadDim);
  static constexpr int kKeyWarps = kTile / kWarps >= 8 ? kWarps : kTile / 8;  // D 256: 2
  static constexpr int kDimWarps = kWarps / kKeyWarps;                          // D 256: 2
  static constexpr int kWarpKeys = kTile / kKeyWarps;  // D 128: 8, D 64: 16, D 256: 8
  static constexpr int kSlices = kWarpKeys / 8;
  static constexpr int kKSteps = HeadDim / 16;
  static constexpr int kWarpDims = HeadDim / kDimWarps;  // output dims of a warp
  static constexpr int kDimTiles = kWarpDims / 16;
  static constexpr int kRowVecs = HeadDim / geometry::vector_elements;
  static constexpr int kHalves = Group > 8 ? 2 : 1;  // head tiles: heads g (and g + 8: group 16)
  static constexpr int kRowsKept = 8 * kHalves;
  static_assert(kWarpKeys % 8 == 0 && kKeyWarps * kDimWarps == kWarps && kWarpDims % 16 == 0);
  static_assert(kDimWarps == 1 || kWarpDims % 32 == 0, "a dim warp's V^T is whole ldmatrix.x4s of 32 dims");

  /// Head dim 128 at group 16: the loop takes all 128 registers of its 4-CTA budget (the
  /// pipeline's stage counter or its held places spill 4 bytes there; sparing both, it has room
  /// for the held rows: 286 instructions a tile on sm_90, 300 before the pipeline's leads).
  /// Head dim 256's in-CTA split: at group 8 and W 2 (2 CTAs of 256 threads) the loop has the
  /// 4-warp kernel's 128 registers and the split's group offset besides; it spills there (16
  /// bytes on sm_90, nvcc 13.0) unless the pipeline spares its stage counter, held places and
  /// held rows (the caches' bases recombined at each copy) and the warp's V dims are read
  /// again from the thread index (4 bytes without that); group 16 at W 3 spares all but the
  /// dims (8 bytes at 168 registers holding the rows). See RESULTS.md, "The small grids", for
  /// registers and instructions a tile.
  static constexpr bool kSpareRows = HeadDim == 256 && WarpGroups > 1;
  static constexpr bool kAtBudget = (HeadDim == 128 && Group > 8) || kSpareRows;
  /// One warp group's shared memory (the whole CTA's at W = 1).
  using group_storage = tensor_core_storage<T, HeadDim, kTile, kKeyWarps * kRowsKept, T, kAtBudget,
                                            kThreads * WarpGroups, !kSpareRows>;
  using pipeline = typename group_storage::pipeline;
  using tile_layout = typename group_storage::tile_layout;
  static_assert(WarpGroups >= 1 && WarpGroups <= 4, "the in-CTA split takes 1 to 4 warp groups");
  /// W > 1: the groups' storages side by side; the merge area of all W x kKeyWarps warps' rows
  /// starts at the first (one group's merge area fits its own storage, so W of them fit W).
  struct split_storage {
    group_storage groups[WarpGroups];
    __device__ __forceinline__ group_storage& group(int w) { return groups[w]; }
    __device__ __forceinline__ float* merge_o() { return groups[0].merge_o(); }
    __device__ __forceinline__ float* merge_m() { return merge_o() + WarpGroups * kKeyWarps * kRowsKept * HeadDim; }
    __device__ __forceinline__ float* merge_l() { return merge_m() + WarpGroups * kKeyWarps * kRowsKept; }
  };
  using storage = std::conditional_t<WarpGroups == 1, group_storage, split_storage>;
  static_assert(WarpGroups == 1 || (group_storage::kMergeBytes <= group_storage::kPipelineBytes &&
                                    sizeof(group_storage) == pipeline::kGroupElems * sizeof(T)),
                "a warp group's storage is its K and V stages, and its merge rows fit them");

  /// Attends the group's rows over keys [kv_begin, kv_end) (every one visible to every row:
  /// a window starts kv_begin) and calls epilogue(row_info, c, float (&o)[8], m, l) per row and
  /// 8-dim vector, as attention_agent::run does (v_scale: 1, a 16-bit cache's kv_dequant).
  template <class Epilogue>
  __device__ __forceinline__ static void run(storage& smem, const kv_source<KV>& src, const decode_rows& rows,
                                             int kv_begin, int kv_end, const T* q, std::int64_t q_stride,
                                             float scale_log2, float /*v_scale: 1*/, const score_transform& transform,
                                             Epilogue&& epilogue) {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    // W > 1: thread tid of warp group `group`, whose keys are the group-th run of num_tiles
    // tiles of the CTA's [kv_begin, kv_end). Every group's pipeline steps num_tiles times (the
    // CTA's barriers): a group's tiles past its keys load nothing (kv_pipeline zero-fills and
    // fetches no block id past kv_end) and are skipped below as the last tile's keys are.
    // group and the CTA's thread index are read again after the loop (not held across it).
    const int group = WarpGroups == 1 ? 0 : static_cast<int>(threadIdx.x) / kThreads;
    const auto [tid, warp, lane, g, t4] = fragment_lane{WarpGroups == 1 ? static_cast<int>(threadIdx.x)
                                                                         : static_cast<int>(threadIdx.x) % kThreads};
    const int key_warp = kDimWarps == 1 ? warp : warp % kKeyWarps;
    const int dim_warp = kDimWarps == 1 ? 0 : warp / kKeyWarps;
    // example-begin in-cta-split
    int num_tiles = kv_end > kv_begin ? (kv_end - kv_begin + kTile - 1) / kTile : 0;
    if constexpr (WarpGroups > 1) {
      num_tiles = (num_tiles + WarpGroups - 1) / WarpGroups;
      kv_begin += group * num_tiles * kTile;  // past kv_end for a group with no keys: it loads none
      kv_end = min(kv_begin + num_tiles * kTile, kv_end);
    }
    // example-end in-cta-split
    group_storage& first = [&]() -> group_storage& {  // the stages' base (a group adds its offset)
      if constexpr (WarpGroups == 1) {
        return smem;
      } else {
        return smem.group(0);
      }
    }();

    // Rows past the group are zeros; so is everything of a CTA with no keys (its rows only
    // write zeros or an empty split: the queries are not read). Below group 16, rows 8-15 of
    // the mma tiles repeat rows 0-7 (their scores are not used): loaded values stay in their
    // registers, where zeros were re-made in the loop at every tile (16 moves at head dim 128).
    const T* q_rows[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = kHalves == 2 ? g + 8 * h : g;
      q_rows[h] = (WarpGroups == 1 ? num_tiles > 0 : kv_end > kv_begin) && head < Group
                      ? q + static_cast<std::int64_t>(rows.seq) * q_stride +
                            static_cast<std::int64_t>(rows.first_head + head) * HeadDim
                      : nullptr;
    }
    std::uint32_t qa[kKSteps][4];
    load_q_fragments<T>(qa, q_rows, t4);

    float m[kHalves], l[kHalves];
    float o[kHalves][kDimTiles][4];  // O^T: the warp's dims x heads (slice_values)
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      m[h] = kNegInf;
      l[h] = 0.0f;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) o[h][n][0] = o[h][n][1] = o[h][n][2] = o[h][n][3] = 0.0f;
    }
    // The warp's ldmatrix rows in every stage (its keys' places do not move from tile to tile),
    // and where its dims start in a V row (D 256: whole groups of 8 swizzled chunks, bytes;
    // under kSpareRows at group 8 read again from the thread index at each use, not held).
    const slice_rows<tile_layout> slice{key_warp * kWarpKeys, lane};
    const auto dim_bytes = [dim_warp] {
      const int w = kSpareRows && Group <= 8 ? thread_index_again() % kThreads / 32 / kKeyWarps : dim_warp;
      return static_cast<std::uint32_t>(w * kWarpDims * sizeof(T));
    };

    pipeline pipe = first.start(src, kv_begin, kv_end, num_tiles, tid, group);
    for (int tile = 0; tile < num_tiles; ++tile) {
      pipe.advance(tile);
      // W > 1: the group's stages are its offset on (pipeline::group_offset).
      const T* k_tile = pipe.k_tile(tile) + pipe.group_offset();
      const T* v_tile = pipe.v_tile(tile) + pipe.group_offset();
      const int first_key = kv_begin + tile * kTile + key_warp * kWarpKeys;  // the warp's keys
      if (first_key >= kv_end) continue;                                      // warp-uniform
      constexpr std::uint32_t kSliceBytes = 8 * tile_layout::kRowElems * sizeof(T);
      float s[kSlices][4];
#pragma unroll
      for (int j = 0; j < kSlices; ++j) slice_scores<T>(s[j], qa, shared_address(k_tile) + j * kSliceBytes, slice);
      std::uint32_t p[kSlices][kHalves];
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        softmax_slices<T, Mod.soft_cap>(
            s, h, t4, scale_log2, transform,
            [&](int j, int e, float v, float (&x)[2]) {  // keys past the end: zero-filled, masked
              const int key = first_key + 8 * j + 2 * t4 + e;
              x[e] = key < kv_end ? v : kNegInf;
            },
            m[h], l[h], o, p);
      }
#pragma unroll
      for (int j = 0; j < kSlices; ++j) {
        slice_values<T>(o, p[j], shared_address(v_tile) + dim_bytes() + j * kSliceBytes, slice);
      }
    }
    pipe.finish();  // the pipeline's shared memory is free for the merge

    // ---- merge the key warps' states (log-sum-exp) and hand rows to the epilogue -----------
    // merge_o [key warp][row][HeadDim] (a dim warp's columns from its first dim), merge_m and
    // merge_l [key warp][row] (the dim warps of a slice hold the same m and l: dim warp 0's);
    // W > 1: the key warps of every group, group w's after w kKeyWarps others.
    const int cta_tid = WarpGroups == 1 ? tid : thread_index_again();
    const int part = (WarpGroups == 1 ? 0 : cta_tid / kThreads * kKeyWarps) + key_warp;
    stash_slices<HeadDim>(smem.merge_o() + dim_warp * kWarpDims, smem.merge_m(), smem.merge_l(), part * kRowsKept, g, t4,
                          t4 == 0 && dim_warp == 0, o, m, l);
    __syncthreads();

    for (int item = cta_tid; item < Group * kRowVecs; item += kThreads * WarpGroups) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      float out[8], row_max, sum;
      merge_row_states<kKeyWarps * WarpGroups, HeadDim>(smem.merge_o(), smem.merge_m(), smem.merge_l(), row, kRowsKept,
                                                        c, out, row_max, sum);
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
          const auto sees = [&](int key) {  // row g + 8 h: causal, and its own window
            return key < row_end[h] && (!Mod.sliding_window || key >= row_begin[h]);
          };
          softmax_fragments<T, Mod.soft_cap>(
              s, h, scale_log2, transform,
              [&](int j, int e, float v, float (&x)[2]) { x[e] = sees(first_key + 8 * j + 2 * t4 + e) ? v : kNegInf; },
              m[h], l[h], o, pa);
        }
        value_fragments<T, tile_layout>(o, pa, v_tile, chunk, dim_warp * (kWarpDims / 8), lane);
      }
    }
    pipe.finish();  // the pipeline's shared memory is free for the rows' states

    // ---- rows to the epilogue through shared memory (fragments hold 2 dims per lane) ------
    stash_fragments<HeadDim>(smem.merge_o(), smem.merge_m(), smem.merge_l(), row_warp * 16 + g, dim_warp * kWarpDims,
                             dim_warp == 0 && t4 == 0, t4, o, m, l);
    __syncthreads();

    for (int item = tid; item < kCtaRows * kRowVecs; item += kThreads) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      const row_info info = rows.at(row);
      if (!info.valid) continue;
      float out[8], row_max, sum;
      merge_row_states<1, HeadDim>(smem.merge_o(), smem.merge_m(), smem.merge_l(), row, 0, c, out, row_max, sum);
      epilogue(info, c, out, row_max, sum);
    }
  }
};

}  // namespace rungs::attention::detail
