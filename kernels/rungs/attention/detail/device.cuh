// Device building blocks of rungs' paged-attention kernels: element types, 16-byte vectors,
// fp8 KV conversions, cp.async, exp2, and the lane-group all-reduce. Needs sm_80 or newer
// (cp.async, bf16). fp8 is widened by sm_89's cvt.f16x2.e4m3x2 where the target has it, and
// by integer operations on sm_80 and sm_86 (no fp8 hardware): the same values either way.
#pragma once

#if !defined(__CUDACC__)
#error "rungs/attention/detail/device.cuh is device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include <rungs/numeric/float16.hpp>
#include <rungs/numeric/float8.hpp>

namespace rungs::attention::detail {

/// The CUDA type of a host storage type: rungs::f16 -> __half, rungs::bf16 -> __nv_bfloat16.
template <class HostT>
struct device_type;
template <>
struct device_type<rungs::f16> {
  using type = __half;
};
template <>
struct device_type<rungs::bf16> {
  using type = __nv_bfloat16;
};
template <>
struct device_type<rungs::e4m3> {
  using type = __nv_fp8_e4m3;
};
template <>
struct device_type<rungs::e5m2> {
  using type = __nv_fp8_e5m2;
};
template <class HostT>
using device_type_t = typename device_type<HostT>::type;

static_assert(sizeof(__half) == sizeof(rungs::f16) && sizeof(__nv_bfloat16) == sizeof(rungs::bf16));
static_assert(sizeof(__nv_fp8_e4m3) == 1 && sizeof(__nv_fp8_e5m2) == 1);

template <class T>
inline constexpr bool is_device_element = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class KV>
inline constexpr bool is_fp8_element = std::is_same_v<KV, __nv_fp8_e4m3> || std::is_same_v<KV, __nv_fp8_e5m2>;
/// Element types of a KV cache: the 16-bit types and the fp8 formats.
template <class KV>
inline constexpr bool is_kv_element = is_device_element<KV> || is_fp8_element<KV>;

/// Whether this compilation widens E4M3 with sm_89's cvt.rn.f16x2.e4m3x2 (one instruction a
/// pair, exact: every E4M3 value, NaN included, is a binary16) or, for sm_80 and sm_86 (no fp8
/// hardware), with integer operations (fp8x4_to_half_pairs). E5M2 is bytes on every GPU (an
/// E5M2 code is the top byte of a binary16: one PRMT a pair, no instruction to save).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
inline constexpr bool fp8_hardware_cvt = true;
#else
inline constexpr bool fp8_hardware_cvt = false;
#endif

/// What load_float8 returns for a cache element of value x is x / kv_unit<KV>: for E4M3 on the
/// integer route 2^8 (its codes are read as binary16 with the exponent rebased, see
/// fp8x4_to_half_pairs), 1 otherwise (the hardware conversion gives x itself; multiplying by
/// 2^-8 would cost one more instruction a pair). The kernels fold it into their K and V scales
/// in device code (a power of two: exact), so each architecture's code uses its own unit.
template <class KV>
inline constexpr float kv_unit = std::is_same_v<KV, __nv_fp8_e4m3> && !fp8_hardware_cvt ? 256.0f : 1.0f;

/// 8 elements (16 bytes) of T widened to float.
template <class T>
__device__ __forceinline__ void to_float8(const uint4& raw, float (&out)[8]) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

/// threadIdx.x, read by a volatile instruction the compiler does not merge with other reads:
/// values derived from it can be recomputed after a loop instead of held (or spilled) across.
__device__ __forceinline__ int thread_index_again() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

/// p itself, through a move the compiler cannot see into: a pointer it would otherwise take
/// apart and rebuild where it is used (a loop-invariant base plus a per-use offset, recombined
/// at every use) is held whole in registers.
template <class P>
__device__ __forceinline__ P* opaque_pointer(P* p) {
  std::uint64_t bits = reinterpret_cast<std::uint64_t>(p);
  asm("mov.b64 %0, %0;" : "+l"(bits));
  return reinterpret_cast<P*>(bits);
}

/// The binary16 pairs of 4 fp8 codes (one word, bytes b0..b3): (b0, b1) and (b2, b3), each
/// value x / kv_unit<KV>, exactly, subnormals included. E4M3 on sm_89+ (fp8_hardware_cvt): two
/// cvt.rn.f16x2.e4m3x2, NaN a NaN. Otherwise integer operations: an E5M2 code is the top byte
/// of a binary16; an E4M3 code s.eeee.mmm becomes the binary16 s.0eeee.mmm0000000, its value
/// times 2^-8 (the biases differ by 8), and its NaN (s.1111.111) maps to magnitude 0x3f80
/// (1.875): with KeepNan it gets bit 14 too, the all-ones exponent of a binary16 NaN. 0x3f80 is
/// the only magnitude at which adding 0x80 carries into bit 14, so the fix-up is two integer
/// operations, no compare (e4m3_high_bytes_to_half2).
template <bool KeepNan>
__device__ __forceinline__ std::uint32_t e4m3_high_bytes_to_half2(std::uint32_t p) {
  // p: the two codes in bytes 1 and 3 (bytes 0 and 2 are ignored).
  const std::uint32_t magnitude = (p >> 1) & 0x3f803f80u;  // exponent rebased by 8
  const std::uint32_t nan = KeepNan ? (magnitude + 0x00800080u) & 0x40004000u : 0u;
  return (p & 0x80008000u) | magnitude | nan;
}
template <class KV, bool KeepNan = false>
__device__ __forceinline__ void fp8x4_to_half_pairs(std::uint32_t x, std::uint32_t (&pairs)[2]) {
  if constexpr (fp8_hardware_cvt && std::is_same_v<KV, __nv_fp8_e4m3>) {
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, lo;\n\tcvt.rn.f16x2.e4m3x2 %1, hi;\n\t}"
        : "=r"(pairs[0]), "=r"(pairs[1])
        : "r"(x));
    return;
  }
  // Bytes into the high bytes of the pairs' halves.
  pairs[0] = ((x << 8) & 0x0000ff00u) | ((x << 16) & 0xff000000u);
  pairs[1] = ((x >> 8) & 0x0000ff00u) | (x & 0xff000000u);
  if constexpr (std::is_same_v<KV, __nv_fp8_e4m3>) {
#pragma unroll
    for (int p = 0; p < 2; ++p) pairs[p] = e4m3_high_bytes_to_half2<KeepNan>(pairs[p]);
  }
}

/// 8 fp8 codes (8 bytes) widened to float, exactly, divided by kv_unit<KV>
/// (fp8x4_to_half_pairs, then cvt.f32.f16); the integer route's E4M3 NaN (read as 1.875) is
/// restored by a compare.
template <class KV>
__device__ __forceinline__ void fp8x8_to_float(const uint2& raw, float (&out)[8]) {
  static_assert(is_fp8_element<KV>);
  const std::uint32_t words[2] = {raw.x, raw.y};
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    std::uint32_t pairs[2];
    fp8x4_to_half_pairs<KV>(words[w], pairs);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const std::uint32_t h = pairs[p];
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      out[4 * w + 2 * p] = f.x;
      out[4 * w + 2 * p + 1] = f.y;
      if constexpr (std::is_same_v<KV, __nv_fp8_e4m3> && !fp8_hardware_cvt) {
        if (fabsf(f.x) == 1.875f) out[4 * w + 2 * p] = __int_as_float(0x7fffffff);
        if (fabsf(f.y) == 1.875f) out[4 * w + 2 * p + 1] = __int_as_float(0x7fffffff);
      }
    }
  }
}

/// 4 fp8 codes (one word) widened to 2 pairs of T (fp8x4_to_half_pairs' pairs), and 8 codes
/// (8 bytes) to 8 elements of T (16 bytes), exactly, divided by kv_unit<KV>, NaN kept (every such value is a binary16 and a bfloat16 value). To bfloat16
/// through float: a value of at most 4 significant bits is its float's high half, so one PRMT
/// packs a pair where cvt.rn.bf16x2.f32 (F2FP, the conversion pipe: a quarter of the
/// integer pipe's rate) would round nothing.
template <class T, class KV>
__device__ __forceinline__ void fp8x4_to(std::uint32_t x, std::uint32_t (&pairs)[2]) {
  static_assert(is_fp8_element<KV> && is_device_element<T>);
  fp8x4_to_half_pairs<KV, true>(x, pairs);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&pairs[i]));
      pairs[i] = __byte_perm(__float_as_uint(f.x), __float_as_uint(f.y), 0x7632);
    }
  }
}
template <class T, class KV>
__device__ __forceinline__ uint4 fp8x8_to(const uint2& raw) {
  std::uint32_t lo[2], hi[2];
  fp8x4_to<T, KV>(raw.x, lo);
  fp8x4_to<T, KV>(raw.y, hi);
  return make_uint4(lo[0], lo[1], hi[0], hi[1]);
}

/// 8 consecutive cache elements widened to float, divided by kv_unit<KV>: 16 bytes of a
/// 16-bit type or 8 bytes of fp8 (p aligned to its size).
template <class KV>
__device__ __forceinline__ void load_float8(const KV* p, float (&out)[8]) {
  if constexpr (is_fp8_element<KV>) {
    fp8x8_to_float<KV>(*reinterpret_cast<const uint2*>(p), out);
  } else {
    to_float8<KV>(*reinterpret_cast<const uint4*>(p), out);
  }
}

/// 8 floats narrowed to 8 fp8 codes: round to nearest even with saturation, NaN -> 0x7f
/// (cvt.rn.satfinite, with the host types' integer code, rungs/numeric/float8.hpp, so that the
/// cache write stores exactly what the host reference stores).
template <class KV>
__device__ __forceinline__ uint2 float8_to_fp8x8(const float (&in)[8]) {
  static_assert(is_fp8_element<KV>);
  constexpr rungs::detail::fp8_format format =
      std::is_same_v<KV, __nv_fp8_e4m3> ? rungs::detail::e4m3_format : rungs::detail::e5m2_format;
  std::uint32_t words[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    words[i / 4] |= static_cast<std::uint32_t>(rungs::detail::fp8_bits_from_float_bits<format>(__float_as_uint(in[i])))
                    << (8 * (i % 4));
  }
  return make_uint2(words[0], words[1]);
}

/// 8 floats narrowed (round to nearest even) to 16 bytes of T.
template <class T>
__device__ __forceinline__ uint4 from_float8(const float (&in)[8]) {
  uint4 raw;
  if constexpr (std::is_same_v<T, __half>) {
    __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(in[2 * i], in[2 * i + 1]);
  } else {
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  }
  return raw;
}

/// 4 floats narrowed to 8 bytes of T.
template <class T>
__device__ __forceinline__ uint2 from_float4(const float4& in) {
  uint2 raw;
  if constexpr (std::is_same_v<T, __half>) {
    __half2* h = reinterpret_cast<__half2*>(&raw);
    h[0] = __floats2half2_rn(in.x, in.y);
    h[1] = __floats2half2_rn(in.z, in.w);
  } else {
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
    h[0] = __floats2bfloat162_rn(in.x, in.y);
    h[1] = __floats2bfloat162_rn(in.z, in.w);
  }
  return raw;
}

/// Asynchronous 16-byte global -> shared copy that bypasses L1 (the KV stream is read once).
/// When `valid` is false nothing is read and the 16 bytes are zero-filled, so a tile's
/// tokens past the end of the context are zeros, never stale or poisoned data.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const auto dst = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

/// 2^x with the SFU (ex2.approx, relative error ~2^-22); 2^-inf = +0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// 1 / x, IEEE round to nearest (rcp.rn.f32; the soft-cap's tanh needs the full precision).
__device__ __forceinline__ float rcp_rn(float x) { return __frcp_rn(x); }

/// a / b, IEEE round to nearest (div.rn.f32, whatever -prec-div or --use_fast_math say).
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }

/// Sum over the `Lanes` consecutive lanes that share a head-dim row (a power of two); every
/// lane of the group gets the sum. `mask` names exactly the group's lanes: groups of one warp
/// may take different branches (a group skips chunks past its last visible key), so the
/// shuffles must not wait for the other groups.
template <int Lanes>
__device__ __forceinline__ float lane_group_sum(float v, unsigned mask) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0);
#pragma unroll
  for (int offset = Lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset, Lanes);
  return v;
}

template <int Lanes>
__device__ __forceinline__ unsigned lane_group_mask() {
  if constexpr (Lanes == 32) {
    return 0xffffffffu;
  } else {
    const unsigned lane = threadIdx.x % 32u;
    return ((1u << Lanes) - 1u) << (lane & ~static_cast<unsigned>(Lanes - 1));
  }
}

}  // namespace rungs::attention::detail
