// The tensor-core decode over an fp8 cache (KV E4M3 or E5M2): the tensor-core decode's contract
// (tensor_core.cuh: same grid, pipeline, epilogue and split workspace) with no widening pass.
// The fp8 tile stays in shared memory as it landed (rows of D bytes, 16-byte chunks swizzled
// c ^ (key % 8) where a row has 8 of them), and each warp converts the K and V codes of its
// own mma fragments in registers (fp8x4_to: one cvt.rn.f16x2.e4m3x2 a pair on sm_89+), so a
// tile costs no extra barrier, no 16-bit copy of itself and no ldmatrix.
//
//  * Warps. Each of the 4 warps owns kTile / 4 keys of a tile (D 128: 8, one slice; D 64: 16,
//    two 8-key slices) and all D output dims: its scores (m16n8k16 over the head dim) and its
//    value step are its own, and the warps' states merge through shared memory at the end, as
//    the 16-bit decode's token warps do.
//  * K fragments. Both mmas take binary16 (PV): K as the cvt gives it, bfloat16 queries
//    scaled once into binary16's range (queries_to_half). The head-dim axis of Q and K is permuted alike (a score is a sum over dims,
//    so any order gives the same products): the mma's k index 16 ks + 2 t4 + e (+ 8) is dim
//    (D/4) t4 + 4 ks + e (+ 2). A thread's B values of key g over all k steps are then D/4
//    consecutive bytes of the key's row (two 16-byte loads at D 128), one word per k step.
//  * V fragments. The value step runs transposed, as the 16-bit decode's (fragments.cuh,
//    softmax_slices): O^T (dims x heads) += V^T P^T, m16n8k8 per slice (m16n8k16 over both at D
//    64), so the score accumulator is P^T's B fragment as it stands and every accumulator is
//    live below group 16 (O = P V idled the rows 8-15 of its 64). A of output tile n holds dims
//    (D/8) g + 2 n (rows 0-7) and + 1 (rows 8-15) of keys 2 t4, 2 t4 + 1: thread (g, t4) reads
//    the D/8 consecutive bytes at dim (D/8) g of its two keys' rows and interleaves them with
//    PRMT (byte i of one row, byte i of the other: one register's pair per dim). The stash puts
//    the dims back in order.
//  * Conversions. One cvt.rn.f16x2.e4m3x2 a pair on sm_89+, except the last word of each V row a
//    thread reads (kIntegerWords): the conversion pipe runs at a quarter of the integer pipe's
//    rate, and its 33 cvt a tile (264 cycles a warp) bound the tile loop at D 128 where 215
//    instructions issue; 4 pairs by integers (6 instructions each) leave 29.
//  * Softmax. softmax_slices over the warp's slices.
//
// Group 16 fills the mma rows; groups up to 8 use rows 0-7 of Q (rows 8-15 hold the loaded rows
// again, bfloat16 bits left unconverted: their scores are not used, and zeros there were re-made
// at every tile) and the first 8 heads of O^T.
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

template <class T, int HeadDim, int Group, unsigned ModBits, class KV>
struct fp8_decode_agent {
  static constexpr score_mod Mod = score_mod_from_bits(ModBits);
  static_assert(is_device_element<T> && is_fp8_element<KV>, "the fp8 decode takes 16-bit queries and an fp8 cache");
  static_assert(HeadDim == 64 || HeadDim == 128, "the fp8 tensor-core decode supports head dims 64 and 128");
  static_assert(Group >= 1 && (Group <= 8 || Group == 16), "the fp8 tensor-core decode takes GQA groups 1-8 and 16");

  /// The type of both mmas' operands: binary16 whatever T is. Every fp8 value is a binary16 (one
  /// cvt a pair on sm_89+, where bfloat16 would take 3 more instructions a pair: 48 a tile of
  /// the scores' K at head dim 128), P in [0, 1] rounds to binary16 with 3 more bits than to
  /// bfloat16 (below 2^-24 it flushes to zero, 2^-24 of the row's largest term), and bfloat16
  /// queries are scaled into binary16's range once (queries_to_half).
  using PV = __half;
  static constexpr int kThreads = geometry::threads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = geometry::tile_tokens(HeadDim);
  static constexpr int kWarpKeys = kTile / kWarps;    // 8 (D 128) or 16 (D 64)
  static constexpr int kSlices = kWarpKeys / 8;       // 8-key slices of a warp's scores
  static constexpr int kKSteps = HeadDim / 16;
  static constexpr int kDimTiles = HeadDim / 16;      // 16-dim tiles of O^T; a lane's V bytes of a key: 2 kDimTiles
  static constexpr int kKBytes = HeadDim / 4;         // a lane's K bytes of a key
  static constexpr int kRowVecs = HeadDim / geometry::vector_elements;
  static constexpr int kHalves = Group > 8 ? 2 : 1;
  static constexpr int kRowsKept = 8 * kHalves;
  static_assert(kWarpKeys == 8 || kWarpKeys == 16);

  /// E4M3 on sm_89+: the last word of each V row a lane reads (output tiles kDimTiles - 2 and
  /// kDimTiles - 1) takes the integer route (e4m3_high_bytes_to_half2, device.cuh: 6 integer
  /// instructions a pair with its PRMT) instead of the cvt (one a pair, but on the conversion pipe, which at
  /// a quarter of the integer pipe's rate bound the tile: 33 cvt, 264 cycles a warp against 215
  /// instructions; now 29). Its values come in units of 2^8, which the stash multiplies back
  /// (exact: a power of two).
  static constexpr bool kIntegerWords = fp8_hardware_cvt && std::is_same_v<KV, __nv_fp8_e4m3>;
  static constexpr float kIntegerScale = kIntegerWords ? 256.0f : 1.0f;

  /// Group 16 at head dim 128 (64 accumulators and 32 query registers) is at sm_90's 128
  /// registers: its pipeline spares registers (kv_pipeline's Spare) rather than holding the
  /// caches' rows (HoldRows), which spilled 8 bytes there.
  static constexpr bool kAtBudget = HeadDim == 128 && kHalves == 2;

  /// A row of 8 16-byte chunks (D 128) is swizzled; a row of 4 (D 64) is plain.
  static constexpr bool kSwizzle = HeadDim / 16 % 8 == 0;

  /// Shared memory: the fp8 pipeline, reused after it drains for the warps' row states
  /// (HeadDim floats, a max and a sum each), and past both the scores' scale and the V scale:
  /// group 16 at head dim 128 uses every register of the 4-CTA budget on sm_90 (as in
  /// tensor_core_decode_agent), and the scales wait there for every group alike.
  struct storage {
    using pipeline = kv_pipeline<KV, HeadDim, kTile, kThreads, geometry::stages, kSwizzle, !kAtBudget, kAtBudget>;
    static constexpr std::size_t kPipelineBytes = std::size_t{2} * geometry::stages * kTile * HeadDim * sizeof(KV);
    static constexpr std::size_t kMergeBytes = std::size_t{kWarps} * kRowsKept * (HeadDim + 2) * sizeof(float);
    static constexpr std::size_t kScalesAt = kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes;
    static constexpr std::size_t kBytes = kScalesAt + 2 * sizeof(float);
    static_assert(kBytes <= 48 * 1024, "the agent must fit 48 KiB of static shared memory");
    alignas(128) unsigned char bytes[kBytes];
    __device__ __forceinline__ float* scales() { return reinterpret_cast<float*>(bytes + kScalesAt); }
    __device__ __forceinline__ float* merge_o() { return reinterpret_cast<float*>(bytes); }
    __device__ __forceinline__ float* merge_m() { return merge_o() + kWarps * kRowsKept * HeadDim; }
    __device__ __forceinline__ float* merge_l() { return merge_m() + kWarps * kRowsKept; }
  };
  using pipeline = typename storage::pipeline;

  /// Byte offset in a stage of chunk c of key `key`'s row (pipeline::place), and of the same
  /// chunk's neighbours: chunk c + 1 (c even) is at offset ^ 16 and key + 1's (key even) at
  /// (offset + HeadDim) ^ 16 swizzled (bit 0 of c ^ (key % 8) flips), offset + HeadDim plain.
  /// A thread holds one K and one V offset across the loop and derives the rest (holding all
  /// four spilled on sm_90).
  __device__ __forceinline__ static int chunk_at(int key, int c) {
    return pipeline::place(key * pipeline::kCopyVecs + c, key, c);
  }
  __device__ __forceinline__ static int next_key_at(int at) {
    return kSwizzle ? (at + HeadDim) ^ 16 : at + HeadDim;
  }

  /// S = Q K^T of one 8-key tile over the permuted dims: the lane's key (g of the tile) has its
  /// kKBytes bytes from chunk offset k_at on (chunks 2 t4, 2 t4 + 1 at D 128; t4 at D 64).
  __device__ __forceinline__ static void scores(float (&s)[4], const std::uint32_t (&qa)[kKSteps][4], const KV* k_stage,
                                                int k_at) {
    s[0] = s[1] = s[2] = s[3] = 0.0f;
    std::uint32_t w[kKSteps];
#pragma unroll
    for (int i = 0; i < kKBytes / 16; ++i) {
      const uint4 v = *reinterpret_cast<const uint4*>(k_stage + (k_at ^ (16 * i)));
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      std::uint32_t b[2];
      fp8x4_to<PV, KV>(w[ks], b);
      mma_m16n8k16<PV>(s, qa[ks], b[0], b[1]);
    }
  }

  /// bfloat16 queries (A fragments: the warp holds every row of the group) as binary16, scaled
  /// by the one power of two 2^x that brings the group's largest magnitude into [2^14, 2^15):
  /// exact for every element of at least 2^-28 of the largest (binary16 keeps bfloat16's 8
  /// significant bits from 2^-14 up), the smaller ones within 2^-25 of the largest's scaled
  /// unit (binary16's subnormals); infinities and NaN stay what they are. Every warp loads the
  /// same rows, so all find the same x. Returns scale_log2 / 2^x, the scores' scale.
  __device__ __forceinline__ static float queries_to_half(std::uint32_t (&qa)[kKSteps][4], float scale_log2) {
    float top = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (r % 2 >= kHalves) continue;
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qa[ks][r]));
        top = fmaxf(top, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
#pragma unroll
    for (int lanes = 16; lanes > 0; lanes /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, lanes));
    // top's biased exponent e (at least 15, so that 2^(141 - e) is a normal float): top 2^(141 - e)
    // is below 2^15; infinity and NaN (e = 255) take 2^-114, which keeps them.
    const int e = max(static_cast<int>(__float_as_uint(top) >> 23), 15);
    const float up = __uint_as_float(static_cast<unsigned>(268 - e) << 23);  // 2^(141 - e)
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (r % 2 >= kHalves) continue;  // rows g + 8 below group 16: zeros the compiler keeps knowing
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qa[ks][r]));
        const __half2 h = __floats2half2_rn(f.x * up, f.y * up);
        qa[ks][r] = *reinterpret_cast<const std::uint32_t*>(&h);
      }
    }
    return scale_log2 * __uint_as_float(static_cast<unsigned>(e - 14) << 23);  // 2^(e - 141)
  }

  /// O^T += V^T P^T over the warp's keys (kSlices 8-key slices): A of output tile m is V^T
  /// over dims (D/8) g + 2 m (rows 0-7) and + 1 (rows 8-15), keys 2 t4, 2 t4 + 1 of a slice
  /// (the lane's D/8 bytes of those keys' rows at v_at, slice j 8 j rows on); B is P^T of a
  /// slice (p[j][h]: keys 2 t4, 2 t4 + 1 of head g + 8 h, the score accumulator's own
  /// layout). Each word of both rows is dims 4 i .. 4 i + 3 of the lane's: output tiles 2 i and
  /// 2 i + 1, converted just before their mma.
  __device__ __forceinline__ static void values(float (&o)[kHalves][kDimTiles][4],
                                                const std::uint32_t (&p)[kSlices][kHalves], const KV* v_stage,
                                                int v_at) {
    using Word = std::conditional_t<kDimTiles == 8, uint4, uint2>;
    constexpr int kWords = kDimTiles / 2;
    std::uint32_t rows[kSlices][2][kWords];
#pragma unroll
    for (int j = 0; j < kSlices; ++j) {
      const int at = v_at + 8 * j * HeadDim;  // 8 rows on: the swizzle repeats
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const Word w = *reinterpret_cast<const Word*>(v_stage + (e == 0 ? at : next_key_at(at)));
#pragma unroll
        for (int i = 0; i < kWords; ++i) rows[j][e][i] = reinterpret_cast<const std::uint32_t*>(&w)[i];
      }
    }
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      std::uint32_t a[2][kSlices][2];  // [tile 2 i + t][slice][rows 0-7, 8-15]
#pragma unroll
      for (int j = 0; j < kSlices; ++j) {
        const std::uint32_t r0 = rows[j][0][i], r1 = rows[j][1][i];
        if (kIntegerWords && i == kWords - 1) {  // the integer route, in units of 2^8 (the stash's kIntegerScale)
          // Byte d of both keys into the high bytes of the halves: one PRMT a pair, as the cvt's.
          a[0][j][0] = e4m3_high_bytes_to_half2<true>(__byte_perm(r0, r1, 0x4000));
          a[0][j][1] = e4m3_high_bytes_to_half2<true>(__byte_perm(r0, r1, 0x5010));
          a[1][j][0] = e4m3_high_bytes_to_half2<true>(__byte_perm(r0, r1, 0x6020));
          a[1][j][1] = e4m3_high_bytes_to_half2<true>(__byte_perm(r0, r1, 0x7030));
        } else {
          fp8x4_to<PV, KV>(__byte_perm(r0, r1, 0x5140), a[0][j]);  // dims 4 i, 4 i + 1
          fp8x4_to<PV, KV>(__byte_perm(r0, r1, 0x7362), a[1][j]);  // dims 4 i + 2, 4 i + 3
        }
      }
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          if constexpr (kSlices == 2) {
            const std::uint32_t a4[4] = {a[t][0][0], a[t][0][1], a[t][1][0], a[t][1][1]};
            mma_m16n8k16<PV>(o[h][2 * i + t], a4, p[0][h], p[1][h]);
          } else {
            mma_m16n8k8<PV>(o[h][2 * i + t], a[t][0][0], a[t][0][1], p[0][h]);
          }
        }
      }
    }
  }

  /// As tensor_core_decode_agent::run (the same arguments and epilogue calls).
  template <class Epilogue>
  __device__ __forceinline__ static void run(storage& smem, const kv_source<KV>& src, const decode_rows& rows,
                                             int kv_begin, int kv_end, const T* q, std::int64_t q_stride,
                                             float scale_log2, float v_scale, const score_transform& transform,
                                             Epilogue&& epilogue) {
    constexpr float kNegInf = -::cuda::std::numeric_limits<float>::infinity();
    auto [tid, warp, lane, g, t4] = fragment_lane{};  // g, t4: re-read after the loop
    const int num_tiles = kv_end > kv_begin ? (kv_end - kv_begin + kTile - 1) / kTile : 0;

    // Q as A fragments over the permuted dims: row g + 8 h, dims (D/4) t4 + 4 ks + 0, 1 (qa[ks][h])
    // and + 2, 3 (qa[ks][h + 2]). Rows past the group, and a CTA with no keys, are zeros.
    std::uint32_t qa[kKSteps][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = kHalves == 2 ? g + 8 * h : g;
      const bool real = num_tiles > 0 && head < Group;
      const uint4* row = reinterpret_cast<const uint4*>(q + static_cast<std::int64_t>(rows.seq) * q_stride +
                                                        static_cast<std::int64_t>(rows.first_head + head) * HeadDim +
                                                        kKBytes * t4);
#pragma unroll
      for (int i = 0; i < kKSteps / 2; ++i) {  // 8 dims: k steps 2 i and 2 i + 1
        const uint4 v = real ? row[i] : make_uint4(0u, 0u, 0u, 0u);
        qa[2 * i][h] = v.x, qa[2 * i][h + 2] = v.y, qa[2 * i + 1][h] = v.z, qa[2 * i + 1][h + 2] = v.w;
      }
    }

    float m[kHalves], l[kHalves];
    float o[kHalves][kDimTiles][4];  // O^T: dims (D/8) g + 2 n (0, 1) and + 1 (2, 3), heads 8 h + 2 t4 (+1)
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      m[h] = kNegInf;
      l[h] = 0.0f;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) o[h][n][0] = o[h][n][1] = o[h][n][2] = o[h][n][3] = 0.0f;
    }

    if constexpr (std::is_same_v<T, __nv_bfloat16>) scale_log2 = queries_to_half(qa, scale_log2);
    if (tid == 0) {  // published by the first tile's barrier (or the merge's)
      smem.scales()[0] = scale_log2;
      smem.scales()[1] = v_scale;
    }
    KV* k = reinterpret_cast<KV*>(smem.bytes);
    pipeline pipe{src, k, kv_begin, kv_end, num_tiles, tid, (1 << src.log2_block) - 1, {}};
    pipe.start();
    const int first = warp * kWarpKeys;  // the warp's first key in a tile
    const int k_at = chunk_at(first + g, kKBytes / 16 * t4);
    const int v_at = chunk_at(first + 2 * t4, 2 * kDimTiles * g / 16) + 2 * kDimTiles * g % 16;
    for (int tile = 0; tile < num_tiles; ++tile) {
      pipe.advance(tile);
      const int first_key = kv_begin + tile * kTile + first;
      if (first_key >= kv_end) continue;  // warp-uniform
      float s[kSlices][4];
#pragma unroll
      for (int j = 0; j < kSlices; ++j) scores(s[j], qa, pipe.k_tile(tile), k_at + 8 * j * HeadDim);
      std::uint32_t p[kSlices][kHalves];
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        softmax_slices<PV, Mod.soft_cap, kSlices>(
            s, h, t4, smem.scales()[0], transform,
            [&](int j, int e, float v, float (&x)[2]) {  // keys past the end: masked
              x[e] = first_key + 8 * j + 2 * t4 + e < kv_end ? v : kNegInf;
            },
            m[h], l[h], o, p);
      }
      values(o, p, pipe.v_tile(tile), v_at);
    }
    pipe.finish();  // the pipeline's shared memory is free for the merge

    // ---- the warps' states to shared memory, in dim order, and merged (log-sum-exp) ----------
    {  // the lane's row and columns read anew (held across the loop, they spill)
      const int lane_again = thread_index_again() % 32;
      g = lane_again / 4;
      t4 = lane_again % 4;
    }
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // head 8 h + 2 t4 + e: dims (D/8) g + 2 n and + 1 of tile n
        float* row = smem.merge_o() + (warp * kRowsKept + 8 * h + 2 * t4 + e) * HeadDim + 2 * kDimTiles * g;
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n) {
          const float unit = n >= kDimTiles - 2 ? kIntegerScale : 1.0f;  // the integer words' units (values)
          *reinterpret_cast<float2*>(row + 2 * n) = make_float2(o[h][n][e] * unit, o[h][n][2 + e] * unit);
        }
      }
      if (t4 == 0) {
        const int slot = warp * kRowsKept + g + 8 * h;
        smem.merge_m()[slot] = m[h];
        smem.merge_l()[slot] = l[h];
      }
    }
    __syncthreads();

    for (int item = tid; item < Group * kRowVecs; item += kThreads) {
      const int row = item / kRowVecs;
      const int c = item - row * kRowVecs;
      float out[8], row_max, sum;
      merge_row_states<kWarps, HeadDim>(smem.merge_o(), smem.merge_m(), smem.merge_l(), row, kRowsKept, c, out,
                                        row_max, sum);
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] *= smem.scales()[1];
      epilogue(rows.at(row), c, out, row_max, sum);
    }
  }
};

}  // namespace rungs::attention::detail
