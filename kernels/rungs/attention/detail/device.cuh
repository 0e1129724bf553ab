// Device building blocks of rungs' paged-attention kernels: element types, 16-byte vectors,
// cp.async, exp2, and the lane-group all-reduce. Needs sm_80 or newer (cp.async, bf16).
#pragma once

#if !defined(__CUDACC__)
#error "rungs/attention/detail/device.cuh is device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include <rungs/numeric/float16.hpp>

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
template <class HostT>
using device_type_t = typename device_type<HostT>::type;

static_assert(sizeof(__half) == sizeof(rungs::f16) && sizeof(__nv_bfloat16) == sizeof(rungs::bf16));

template <class T>
inline constexpr bool is_device_element = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

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
