// The per-CTA agent of rungs' paged attention (CUB's "agent" layer): one CTA attends a set
// of query rows of one sequence and one KV head over one KV split [kv_begin, kv_end).
//
// Thread layout (geometry.hpp): lane tx of a thread row owns head dims [8 tx, 8 tx + 8); thread
// row ty = (row group, token group). Every thread holds the queries and running softmax state
// (max m, sum l, output accumulator) of Rows query rows in registers. Decode puts all heads of
// the GQA group in every thread (one row group) and spreads a tile's tokens over the thread
// rows; prefill spreads 8-row slices of the flattened (token, head) rows over the thread rows
// and lets each walk the whole tile. Either way each KV vector crosses global memory once per
// CTA, staged in shared memory by a 3-stage cp.async pipeline whose block ids are fetched one
// tile ahead. Scores are kept in log2 units (queries pre-scaled by sm_scale * log2 e), so the
// online softmax runs on ex2. At the end the token groups' states merge through shared
// memory (log-sum-exp) and the epilogue functor writes each 8-dim output vector.
//
// The KV cache's element type KV is the queries' T or an fp8 format: the pipeline moves 16-byte
// vectors of whatever the cache holds (8 elements of 2 bytes, 16 of fp8), and a lane widens its
// 8 dims of a token with load_float8 (device.cuh), which returns fp8 values in units of
// kv_unit<KV>; the caller's scales absorb that unit and the cache's dequantisation scales.
//
// Score transforms (score_mod.hpp) are compiled in by the Mod policy (as score_mod_bits): a sliding window masks
// keys before each row's window (the kernel also starts the CTA's KV range at its first row's
// window, so keys no row sees are never loaded), a soft-cap bends each summed score. Sinks
// act on the final normalisation, in the kernel's epilogue and the split merge. With the
// default Mod the code is that of plain causal attention.
#pragma once

#include <rungs/attention/detail/device.cuh>
#include <rungs/attention/geometry.hpp>
#include <rungs/attention/score_mod.hpp>

#include <cuda/std/limits>

#include <cstddef>
#include <cstdint>

namespace rungs::attention::detail {

/// One query row as the agent sees it.
struct row_info {
  bool valid;  ///< false: no such row (past the sequence's tokens); nothing is written
  int token;   ///< query token row (decode: the sequence)
  int head;    ///< query head
  int end;     ///< keys [0, end) are visible to the row
};

/// Decode rows: the Group query heads of one KV head, for one sequence.
struct decode_rows {
  int seq;
  int first_head;
  int kv_len;
  __device__ row_info at(int row) const { return {true, seq, first_head + row, kv_len}; }
};

/// Prefill rows: flattened (new token, head in group) pairs of one sequence and KV head.
/// Query i of q_len new tokens sees keys [0, kv_len - q_len + i + 1).
struct prefill_rows {
  int q_begin;      ///< first packed query token of the sequence
  int q_len;
  int kv_len;
  int first_head;   ///< kv_head * group
  int group;
  int first_row;    ///< flattened row of the CTA's row 0
  int max_total_q;  ///< bound of the packed query buffer (guards bad q_indptr)
  __device__ row_info at(int row) const {
    const int flat = first_row + row;
    const int token = flat / group;
    const int q_token = q_begin + token;
    const bool valid = token < q_len && q_token >= 0 && q_token < max_total_q;
    return {valid, q_token, first_head + (flat - token * group), kv_len - q_len + token + 1};
  }
};

/// Where the agent reads the KV stream from.
template <class KV>
struct kv_source {
  const KV* k_cache;
  const KV* v_cache;
  const std::int32_t* table;  ///< the sequence's block-table row
  int num_kv_heads;
  int kv_head;
  int log2_block;             ///< log2(block size); a constant after inlining for static sizes

};

/// The KV stream's shared-memory pipeline: Stages stages of Tile tokens of K and V (KV
/// elements, rows of HeadDim), moved by 16-byte cp.async vectors spread over the CTA's Threads,
/// tokens past kv_end zero-filled, never read; the block ids of a tile are fetched one tile
/// ahead, so the table lookup's latency hides behind compute. LdmatrixRows: rows that the
/// tensor cores' ldmatrix reads 8 at a time without bank conflicts: where a row is whole groups
/// of 8 16-byte chunks (head dims 64, 128, 256 of 16-bit elements) a token's chunk c is stored
/// at c ^ (token % 8) (Swizzle); otherwise (80, 96) rows are padded by one chunk to an odd
/// number of chunks (Padded: 8 consecutive rows start in 8 different bank groups). Otherwise
/// rows are plain.
///
/// HoldRows: k_rows and v_rows are held whole in registers (opaque_pointer; 4 registers), so a
/// copy's address is one wide multiply-add; otherwise the compiler recombines the caches'
/// bases with a shared offset at every copy (two 64-bit adds more each) and keeps the
/// registers: the SIMT decode's 5-8 rows of state at 168 and 255 registers need them.
///
/// Spare (for a loop at its register budget: head dim 128's group-16 tensor-core decode at
/// sm_90's 128 registers, which spills otherwise): the current stage is tile % Stages at each use (a
/// multiply-high, a shift and a multiply-add) instead of a counter that each advance steps on
/// (stage_elems), and a copy's places come from a fresh read of the thread index at each tile
/// instead of being held across the loop.
///
/// CtaThreads: the CTA's threads where the pipeline is one of several warp groups' (the
/// tensor-core decode's in-CTA split): tid is then the thread's index in its group, smem_k the
/// first group's stages, and the group's own stages kGroupElems elements on per group, an offset
/// its copies' places add (held, or under Spare read again from the thread index with them), so
/// that the stage pointers stay the CTA's and the group costs no register where Spare counts
/// them.
template <class KV, int HeadDim, int Tile, int Threads, int Stages, bool LdmatrixRows, bool HoldRows = false,
          bool Spare = false, int CtaThreads = Threads>
struct kv_pipeline {
  static constexpr int kCopyElems = 16 / static_cast<int>(sizeof(KV));
  static constexpr int kCopyVecs = HeadDim / kCopyElems;
  static_assert(HeadDim % kCopyElems == 0, "a cache row must be whole 16-byte vectors");
  static constexpr bool Swizzle = LdmatrixRows && kCopyVecs % 8 == 0;
  static constexpr bool Padded = LdmatrixRows && !Swizzle;
  static_assert(!Padded || kCopyVecs % 2 == 0, "a padded row must be an odd number of chunks");
  static constexpr int kRowElems = HeadDim + (Padded ? kCopyElems : 0);  ///< elements between rows
  static constexpr int kTileVecs = Tile * kCopyVecs;
  static constexpr int kLoadsPerThread = (kTileVecs + Threads - 1) / Threads;
  static constexpr int kStageElems = Tile * kRowElems;

  /// Elements from a stage of K to the same stage of V (V's stages follow K's).
  static constexpr int kVElems = Stages * kStageElems;
  /// CtaThreads > Threads: elements from one warp group's stages to the next group's.
  static constexpr bool kGrouped = CtaThreads != Threads;
  static constexpr int kGroupElems = 2 * Stages * kStageElems;
  static constexpr unsigned kRowBytes = HeadDim * sizeof(KV);

  const kv_source<KV>& src;
  KV* smem_k;  ///< [Stages][Tile][kRowElems] of K, then the same of V
  int kv_begin;
  int kv_end;
  int num_tiles;
  int tid;
  int position_mask;  ///< block size - 1
  /// Copy k's lead (fetch_ids): where its token's row is, as rows of HeadDim elements from
  /// the head's rows in block 0, less the token's place in its tile.
  int leads[kLoadsPerThread];
  /// HoldRows: first_row of K and V, and the sequence's block-table row, held whole (start);
  /// otherwise the compiler rebuilds them from the kernel's parameters where they are used.
  const char* k_rows = nullptr;
  const char* v_rows = nullptr;
  const std::int32_t* table = nullptr;

  /// This thread's first copy of the head's rows in a tile at lead 0: the cache plus kv_head B
  /// rows plus 16 tid bytes. Copy k of a tile reads lead k rows plus 16 k Threads bytes on: a
  /// tile's copies are its vectors in order, 16 bytes apart in the rows of a block (vector
  /// v = token (D / kCopyElems) + chunk).
  __device__ __forceinline__ const char* first_row(const KV* cache) const {
    return reinterpret_cast<const char*>(cache) + (static_cast<unsigned>(src.kv_head << src.log2_block) * kRowBytes + tid * 16);
  }
  __device__ __forceinline__ const std::int32_t* table_row() const { return HoldRows ? table : src.table; }
  /// Unless Spare: elements from smem_k to the stage of the tile advance() made current. It
  /// starts at the stage of tile -1 (Stages - 1) and each advance steps it on by one stage.
  int stage_elems = (Stages - 1) * kStageElems;
  /// kGrouped, unless Spare: elements from smem_k to this thread's group's stages.
  int group_elems = 0;
  /// Elements from smem_k to this thread's group's stages (0 for a CTA of one group).
  __device__ __forceinline__ int group_offset() const {
    if constexpr (!kGrouped) {
      return 0;
    } else if constexpr (Spare) {
      return thread_index_again() / Threads * kGroupElems;
    } else {
      return group_elems;
    }
  }

  /// Element offset of chunk c of a stage's row `token` (copy vector v = token * kCopyVecs + c:
  /// unswizzled, v itself, which spares the compiler recombining token and c).
  __device__ __forceinline__ static int place(int v, int token, int c) {
    if constexpr (Swizzle) {
      return token * HeadDim + (c ^ (token & 7)) * kCopyElems;
    } else if constexpr (Padded) {
      return token * kRowElems + c * kCopyElems;
    } else {
      return v * kCopyElems;
    }
  }

  /// Whether every thread copies the same chunk of a row in each of its copies, rows
  /// kTokenStride apart (Threads a multiple of the row's vectors: head dims 64, 128, 256 of
  /// 16-bit caches, 64 and 128 of fp8): then a thread's shared-memory places are one place plus
  /// constant steps (the swizzle repeats every 8 rows), and so are its global ones (first_row).
  /// The other head dims take the general path (a vector's token and chunk per copy).
  static constexpr bool kFixedChunk = Threads % kCopyVecs == 0 && kTileVecs % Threads == 0;
  /// Fixed chunk of a 16-bit cache: a warp's lanes load the block-table entries of all its
  /// tokens at once and the copies take theirs by shuffles (fetch_ids). fp8 caches load one
  /// entry per copy (2 copies a thread at head dim 128): with the shuffles their tensor-core
  /// decode's tile loop was 3 instructions shorter on sm_90, but every fp8 kernel's was longer
  /// on sm_80 (by 207-289 instructions) and the tensor-core prefill's on sm_90 (by 20).
  static constexpr bool kSharedIds = kFixedChunk && sizeof(KV) == 2;
  static constexpr int kTokenStride = Threads / kCopyVecs;
  /// Swizzled rows kTokenStride apart share the chunk's place where the stride is whole
  /// swizzle periods of 8 rows (head dims 64, 128); at 4 (head dim 256) copies alternate
  /// between two places (token bit 2 flips chunk bit 2).
  static_assert(!kFixedChunk || !Swizzle || kTokenStride % 4 == 0);
  static constexpr bool kTwoPlaces = kFixedChunk && Swizzle && kTokenStride % 8 != 0;

  /// Shared ids: the tokens a warp's copy k covers, and the warp's tokens in all (at most 32:
  /// one block-table entry per lane, shared by shuffles).
  static constexpr int kWarpTokens = 32 / kCopyVecs;
  static constexpr int kWarpTableLoads = kLoadsPerThread * kWarpTokens;
  static_assert(!kSharedIds || (32 % kCopyVecs == 0 && kWarpTableLoads <= 32));

  /// The lead of token t in block `id` for a tile starting at `start`: id H B + t % B - (t -
  /// start), rows from the head's rows in block 0, in 32 bits (a pool's rows, num_blocks H B,
  /// stay below 2^31: as many rows of 64 fp8 dims are 128 GiB; the product with the row's bytes
  /// is 64-bit). Past kv_end the id is 0: a row of block 0, inside the pool, that the zero-size
  /// cp.async never reads. Computed by the lane that loads the id, so a copy's address is its
  /// lead's wide multiply-add with first_row.
  __device__ __forceinline__ int lead(std::int32_t id, int t, int start) const {
    return id * (src.num_kv_heads << src.log2_block) + start - (t & ~position_mask);
  }

  /// The leads of tile `tile`'s copies, from their block ids. Shared ids: lane j of a warp
  /// loads the entry of its warp's token j (copy j / kWarpTokens), once per tile where each of
  /// a thread's copies would load its own, and the copies take their leads by shuffles
  /// (spread_ids).
  __device__ __forceinline__ void fetch_ids(int tile) {
    const int start = kv_begin + tile * Tile;
    if constexpr (kSharedIds) {
      const int lane = tid % 32;
      const int t = start + (tid / 32) * kWarpTokens + lane % kWarpTokens + lane / kWarpTokens * kTokenStride;
      leads[0] = lead(lane < kWarpTableLoads && t < kv_end ? __ldg(table_row() + (t >> src.log2_block)) : 0, t, start);
    } else {
#pragma unroll
      for (int k = 0; k < kLoadsPerThread; ++k) {
        const int v = tid + k * Threads;
        const int t = start + (tid + k * Threads) / kCopyVecs;
        leads[k] = lead((v < kTileVecs && t < kv_end) ? __ldg(table_row() + (t >> src.log2_block)) : 0, t, start);
      }
    }
  }

  /// Shared ids: hands each copy of the thread the lead its warp's lanes computed
  /// (fetch_ids), leads[k] for copy k. Called by every thread of the CTA at once, outside the
  /// branches on the tile count (a shuffle the compiler cannot prove converged gets a slow
  /// path).
  __device__ __forceinline__ void spread_ids() {
    if constexpr (kSharedIds) {
      const int token0 = tid / kCopyVecs;
      int spread[kLoadsPerThread];
#pragma unroll
      for (int k = 0; k < kLoadsPerThread; ++k) {
        spread[k] = __shfl_sync(0xffffffffu, leads[0], k * kWarpTokens + token0 % kWarpTokens);
      }
#pragma unroll
      for (int k = 0; k < kLoadsPerThread; ++k) leads[k] = spread[k];
    }
  }

  /// Copy k's global address from `rows` (first_row of K or V).
  __device__ __forceinline__ const char* row_address(const char* rows, int k) const {
    return rows + (static_cast<std::int64_t>(leads[k]) * kRowBytes + k * Threads * 16);
  }

  /// Issues the copies of tile `tile` into the stage `stage` elements from smem_k (spread_ids
  /// first). Copy k is vector v = tid + k Threads of the tile: token v / (D / kCopyElems), chunk
  /// v % (D / kCopyElems); its global bytes are first_row + lead k rows + 16 k Threads.
  __device__ __forceinline__ void issue(int tile, int stage) {
    const int ahead = kv_end - (kv_begin + tile * Tile);  // tokens of the sequence from the tile's start
    KV* k_stage = smem_k + stage;
    const char* k_first = HoldRows ? k_rows : first_row(src.k_cache);
    const char* v_first = HoldRows ? v_rows : first_row(src.v_cache);
    if constexpr (kFixedChunk) {
      // One chunk c for every copy: its place in the stage is computed once; copy k adds k
      // kTokenStride whole rows.
      const int me = Spare ? (kGrouped ? thread_index_again() % Threads : thread_index_again()) : tid;
      const int token0 = me / kCopyVecs;
      const int c = me - token0 * kCopyVecs;
      const int group = group_offset();
      const int dst0 = place(me, token0, c) + group;
      // kTwoPlaces: odd copies' chunk place (rows token0 + kTokenStride (2k + 1)), less their rows,
      // in the group's stages too.
      const int dst1 = kTwoPlaces ? place(me, token0 + kTokenStride, c) - kTokenStride * HeadDim + group : dst0;
#pragma unroll
      for (int k = 0; k < kLoadsPerThread; ++k) {
        const bool in = token0 + k * kTokenStride < ahead;
        KV* dst = k_stage + (k % 2 == 0 ? dst0 : dst1) + k * kTokenStride * HeadDim;
        cp_async_16(dst, row_address(k_first, k), in);
        cp_async_16(dst + kVElems, row_address(v_first, k), in);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kLoadsPerThread; ++k) {
        const int v = tid + k * Threads;
        if (kTileVecs % Threads == 0 || v < kTileVecs) {
          const int token = v / kCopyVecs;
          const int c = v - token * kCopyVecs;
          KV* dst = k_stage + place(v, token, c) + group_offset();
          cp_async_16(dst, row_address(k_first, k), token < ahead);
          cp_async_16(dst + kVElems, row_address(v_first, k), token < ahead);
        }
      }
    }
  }

  /// Issues the first Stages - 1 tiles (one commit group each, empty past the end).
  __device__ __forceinline__ void start() {
    if constexpr (HoldRows) {
      k_rows = opaque_pointer(first_row(src.k_cache));
      v_rows = opaque_pointer(first_row(src.v_cache));
      table = opaque_pointer(src.table);
    }
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < num_tiles) fetch_ids(s);
      spread_ids();
      if (s < num_tiles) issue(s, s * kStageElems);
      cp_async_commit();
    }
    if (Stages - 1 < num_tiles) fetch_ids(Stages - 1);
  }

  /// Waits until `tile` is in shared memory for the whole CTA (which is then done with
  /// tile - 1) and issues tile + Stages - 1 into tile - 1's stage.
  __device__ __forceinline__ void advance(int tile) {
    cp_async_wait<Stages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();              // everyone's have, and everyone is done with tile - 1
    const int next = tile + Stages - 1;
    // tile - 1's stage is free and is tile + Stages - 1's; the next stage on is tile's.
    const int free = Spare ? (next % Stages) * kStageElems : stage_elems;
    if constexpr (!Spare) stage_elems = free == (Stages - 1) * kStageElems ? 0 : free + kStageElems;
    spread_ids();
    if (next < num_tiles) {
      issue(next, free);
      if (next + 1 < num_tiles) fetch_ids(next + 1);
    }
    cp_async_commit();
  }

  /// Drains the copies; the stages are free for other use after the barrier.
  __device__ __forceinline__ void finish() {
    cp_async_wait<0>();
    __syncthreads();
  }

  /// The K and V of tile `tile`, the one advance() made current.
  __device__ __forceinline__ const KV* k_tile(int tile) const { return smem_k + stage_of(tile); }
  __device__ __forceinline__ const KV* v_tile(int tile) const { return smem_k + kVElems + stage_of(tile); }
  __device__ __forceinline__ int stage_of(int tile) const {
    return Spare ? (tile % Stages) * kStageElems : stage_elems;
  }
};

/// The log-sum-exp merge of Parts partial states of one query row: part p's unnormalised
/// output (8-dim vector c at acc + slot * HeadDim), max score ms[slot] and sum ls[slot], slot =
/// first + p * stride. Gives the merged o, max and sum as the epilogue takes them (-inf, 0 and
/// zeros when no part saw a key).
template <int Parts, int HeadDim>
__device__ __forceinline__ void merge_row_states(const float* acc, const float* ms, const float* ls, int first,
                                                 int stride, int c, float (&o)[8], float& row_max, float& sum) {
  row_max = -::cuda::std::numeric_limits<float>::infinity();
#pragma unroll
  for (int p = 0; p < Parts; ++p) row_max = fmaxf(row_max, ms[first + p * stride]);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = 0.0f;
  sum = 0.0f;
  if (row_max == -::cuda::std::numeric_limits<float>::infinity()) return;
#pragma unroll
  for (int p = 0; p < Parts; ++p) {
    const int slot = first + p * stride;
    const float w = exp2_approx(ms[slot] - row_max);
    sum = fmaf(ls[slot], w, sum);
    const float4* part = reinterpret_cast<const float4*>(acc + slot * HeadDim + c * 8);
    const float4 a = part[0];
    const float4 b = part[1];
    o[0] = fmaf(w, a.x, o[0]);
    o[1] = fmaf(w, a.y, o[1]);
    o[2] = fmaf(w, a.z, o[2]);
    o[3] = fmaf(w, a.w, o[3]);
    o[4] = fmaf(w, b.x, o[4]);
    o[5] = fmaf(w, b.y, o[5]);
    o[6] = fmaf(w, b.z, o[6]);
    o[7] = fmaf(w, b.w, o[7]);
  }
}

/// Run-time values of the agents' score transforms, in the agents' log2 units.
struct score_transform {
  int window;          ///< a row ending at key e sees keys [e - window, e) (Mod.sliding_window)
  float cap_log2;      ///< the cap c * log2(e) (Mod.soft_cap)
  float two_over_cap;  ///< 2 / c

  /// The soft-cap c tanh(x / c) of a score in log2 units: with s = x log2(e) and C = c log2(e),
  /// C tanh(s / C) = C (1 - 2 / (2^(2 s / c) + 1)). The SFU's ex2 (relative error ~2^-22)
  /// keeps the absolute error near C * 2^-22; tanh.approx's 2^-11 relative error would not
  /// (c = 50 gives 0.035 in the scores). Overflow to +inf gives C, 0 gives -C.
  __device__ __forceinline__ float soft_cap(float s) const {
    const float t = exp2_approx(s * two_over_cap);
    return cap_log2 * (1.0f - 2.0f * rcp_rn(t + 1.0f));
  }
};

template <class T, int HeadDim, int Rows, int RowGroups, unsigned ModBits = 0, class KV = T>
struct attention_agent {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  static_assert(is_device_element<T>, "rungs attention kernels take __half or __nv_bfloat16 queries");
  static_assert(is_kv_element<KV>, "rungs attention kernels take a 16-bit or fp8 KV cache");
  static_assert(HeadDim % geometry::vector_elements == 0 && HeadDim <= 256, "head dim: a multiple of 8, at most 256");
  static_assert(Rows >= 1 && Rows <= geometry::max_rows_per_thread, "at most 8 query rows per thread");

  static constexpr int kThreads = geometry::threads;
  static constexpr int kRowVecs = HeadDim / geometry::vector_elements;  // 16-byte vectors per row
  static constexpr int kLanes = geometry::lanes_per_row(HeadDim);
  static constexpr int kThreadRows = geometry::thread_rows(HeadDim);
  static constexpr int kRowGroups = RowGroups;
  static constexpr int kTokenGroups = kThreadRows / RowGroups;
  static constexpr int kTile = geometry::tile_tokens(HeadDim);
  static constexpr int kGroupTokens = kTile / kTokenGroups;
  static constexpr int kChunk = geometry::chunk_tokens;
  static constexpr int kStages = geometry::stages;
  static constexpr int kCtaRows = Rows * RowGroups;
  using pipeline = kv_pipeline<KV, HeadDim, kTile, kThreads, kStages, false>;

  static_assert(kThreadRows % RowGroups == 0, "row groups must divide the thread rows");
  static_assert(kGroupTokens % kChunk == 0, "a token group's share of a tile must be whole chunks");

  static constexpr std::size_t kPipelineBytes = std::size_t{2} * kStages * kTile * HeadDim * sizeof(KV);
  static constexpr std::size_t kMergeFloats = std::size_t{kThreadRows} * Rows * (HeadDim + 2);
  static constexpr std::size_t kSmemBytes =
      kPipelineBytes > kMergeFloats * sizeof(float) ? kPipelineBytes : kMergeFloats * sizeof(float);
  static_assert(kSmemBytes <= 48 * 1024, "the agent must fit 48 KiB of static shared memory");

  /// Shared memory: the K/V pipeline, reused by the final merge.
  struct storage {
    alignas(16) unsigned char bytes[kSmemBytes];
  };

  /// Attends the CTA's rows (rows.at(0 .. kCtaRows-1)) over keys [kv_begin, kv_end), then
  /// calls epilogue(row_info, vector index c, float (&o)[8], m, l) once per valid row and
  /// 8-dim vector, with o the unnormalised output (sum of 2^(s - m) v), m the row's max
  /// score (log2 units; -inf when it saw no key) and l the sum of 2^(s - m).
  template <class RowMap, class Epilogue>
  __device__ __forceinline__ static void run(storage& smem, const kv_source<KV>& src, const RowMap& rows, int kv_begin,
                                             int kv_end, const T* q, std::int64_t q_stride, float scale_log2,
                                             const score_transform& transform, Epilogue&& epilogue) {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    const int tid = static_cast<int>(threadIdx.x);
    const int tx = tid % kLanes;
    const int ty = tid / kLanes;
    const int row_group = ty / kTokenGroups;
    const int token_group = ty % kTokenGroups;
    const bool lane_active = tx < kRowVecs;  // lanes past D/8 (D 80, 96) only pad the reduction
    const unsigned mask = lane_group_mask<kLanes>();

    // This thread's rows: queries (scaled to log2 units), visible-key bounds.
    float qf[Rows][8];
    int row_end[Rows];
    int row_begin[Rows];  // read only under Mod.sliding_window
    int group_end = kv_begin;  // past the last key any of this thread row's rows sees
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const row_info info = rows.at(row_group * Rows + r);
      if (info.valid && lane_active) {
        const uint4 raw = *reinterpret_cast<const uint4*>(q + static_cast<std::int64_t>(info.token) * q_stride +
                                                          static_cast<std::int64_t>(info.head) * HeadDim + tx * 8);
        to_float8<T>(raw, qf[r]);
#pragma unroll
        for (int e = 0; e < 8; ++e) qf[r][e] *= scale_log2;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) qf[r][e] = 0.0f;
      }
      row_end[r] = info.valid ? min(info.end, kv_end) : kv_begin;
      row_begin[r] = info.end - transform.window;
      group_end = max(group_end, row_end[r]);
    }

    float m[Rows];
    float l[Rows];
    float acc[Rows][8];
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      m[r] = kNegInf;
      l[r] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
    }

    // ---- KV pipeline ---------------------------------------------------------------------
    const int num_tiles = kv_end > kv_begin ? (kv_end - kv_begin + kTile - 1) / kTile : 0;
    pipeline pipe{src, reinterpret_cast<KV*>(smem.bytes), kv_begin, kv_end, num_tiles, tid, (1 << src.log2_block) - 1, {}};
    pipe.start();
    for (int tile = 0; tile < num_tiles; ++tile) {
      pipe.advance(tile);
      const int tile_start = kv_begin + tile * kTile;
      const KV* ks = pipe.k_tile(tile);
      const KV* vs = pipe.v_tile(tile);
#pragma unroll
      for (int chunk = 0; chunk < kGroupTokens / kChunk; ++chunk) {
        const int j0 = token_group * kGroupTokens + chunk * kChunk;
        if (tile_start + j0 >= group_end) break;  // uniform across the lane group

        // Scores of kChunk tokens for every row: 8-dim partial dots, then the lane-group sum.
        float s[Rows][kChunk];
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          float kf[8];
          if (lane_active) {
            load_float8<KV>(ks + (j0 + i) * HeadDim + tx * 8, kf);
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) kf[e] = 0.0f;
          }
#pragma unroll
          for (int r = 0; r < Rows; ++r) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; ++e) dot = fmaf(qf[r][e], kf[e], dot);
            s[r][i] = dot;
          }
        }
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
#pragma unroll
          for (int i = 0; i < kChunk; ++i) s[r][i] = lane_group_sum<kLanes>(s[r][i], mask);
        }
        if constexpr (Mod.soft_cap) {
#pragma unroll
          for (int r = 0; r < Rows; ++r) {
#pragma unroll
            for (int i = 0; i < kChunk; ++i) s[r][i] = transform.soft_cap(s[r][i]);
          }
        }

        // Online softmax: one rescale per chunk. A row that has seen nothing keeps m = -inf;
        // `base` avoids (-inf) - (-inf).
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
          float chunk_max = m[r];
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            const int key = tile_start + j0 + i;
            if (key >= row_end[r] || (Mod.sliding_window && key < row_begin[r])) s[r][i] = kNegInf;
            chunk_max = fmaxf(chunk_max, s[r][i]);
          }
          const float base = chunk_max == kNegInf ? 0.0f : chunk_max;
          const float rescale = exp2_approx(m[r] - base);
          m[r] = chunk_max;
          float sum = 0.0f;
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            s[r][i] = exp2_approx(s[r][i] - base);
            sum += s[r][i];
          }
          l[r] = l[r] * rescale + sum;
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][e] *= rescale;
        }

        if (lane_active) {
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            float vf[8];
            load_float8<KV>(vs + (j0 + i) * HeadDim + tx * 8, vf);
#pragma unroll
            for (int r = 0; r < Rows; ++r) {
#pragma unroll
              for (int e = 0; e < 8; ++e) acc[r][e] = fmaf(s[r][i], vf[e], acc[r][e]);
            }
          }
        }
      }
    }
    pipe.finish();  // the pipeline's shared memory is free for the merge

    // ---- merge the token groups' states (log-sum-exp) and hand rows to the epilogue --------
    float* merge_acc = reinterpret_cast<float*>(smem.bytes);   // [kThreadRows][Rows][HeadDim]
    float* merge_m = merge_acc + kThreadRows * Rows * HeadDim;  // [kThreadRows][Rows]
    float* merge_l = merge_m + kThreadRows * Rows;
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const int slot = ty * Rows + r;
      if (lane_active) {
        float4* dst = reinterpret_cast<float4*>(merge_acc + slot * HeadDim + tx * 8);
        dst[0] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        dst[1] = make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
      }
      if (tx == 0) {
        merge_m[slot] = m[r];
        merge_l[slot] = l[r];
      }
    }
    __syncthreads();

    for (int item = tid; item < kCtaRows * kRowVecs; item += kThreads) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      const row_info info = rows.at(row);
      if (!info.valid) continue;
      const int group = row / Rows;
      const int r = row - group * Rows;
      float o[8], row_max, sum;
      merge_row_states<kTokenGroups, HeadDim>(merge_acc, merge_m, merge_l, group * kTokenGroups * Rows + r, Rows, c, o,
                                              row_max, sum);
      epilogue(info, c, o, row_max, sum);
    }
  }
};

}  // namespace rungs::attention::detail
