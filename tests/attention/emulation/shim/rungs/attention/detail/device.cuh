// Emulation shim of rungs/attention/detail/device.cuh (see ../../../simt.hpp): the same
// building blocks, for host element types (rungs::f16, rungs::bf16; fp8 caches as rungs::e4m3
// and rungs::e5m2), on the SIMT emulator.
// It shadows the real header through the include path of the emulation test only.
#pragma once

#include <simt.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <rungs/numeric/float16.hpp>

namespace rungs::attention::detail {

template <class T>
inline constexpr bool is_device_element = std::is_same_v<T, rungs::f16> || std::is_same_v<T, rungs::bf16>;
template <class KV>
inline constexpr bool is_fp8_element = rungs::fp8_element<KV>;
template <class KV>
inline constexpr bool is_kv_element = is_device_element<KV> || is_fp8_element<KV>;
template <class KV>
inline constexpr float kv_unit = std::is_same_v<KV, rungs::e4m3> ? 256.0f : 1.0f;

template <class T>
void to_float8(const uint4& raw, float (&out)[8]) {
  std::uint16_t bits[8];
  std::memcpy(bits, &raw, sizeof bits);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<float>(T::from_bits(bits[i]));
}

// As the device's: x / kv_unit<KV> (exact).
template <class KV>
void load_float8(const KV* p, float (&out)[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<float>(p[i]) / kv_unit<KV>;
}

template <class KV>
uint2 float8_to_fp8x8(const float (&in)[8]) {
  std::uint8_t bits[8];
  for (int i = 0; i < 8; ++i) bits[i] = KV(in[i]).bits;
  uint2 raw;
  std::memcpy(&raw, bits, sizeof bits);
  return raw;
}

inline float div_rn(float a, float b) { return a / b; }

template <class T>
uint4 from_float8(const float (&in)[8]) {
  std::uint16_t bits[8];
  for (int i = 0; i < 8; ++i) bits[i] = T(in[i]).bits;
  uint4 raw;
  std::memcpy(&raw, bits, sizeof bits);
  return raw;
}

template <class T>
uint2 from_float4(const float4& in) {
  const std::uint16_t bits[4] = {T(in.x).bits, T(in.y).bits, T(in.z).bits, T(in.w).bits};
  uint2 raw;
  std::memcpy(&raw, bits, sizeof bits);
  return raw;
}

// cp.async: deferred until the issuing thread waits for the group. Both addresses must be
// 16-byte aligned, as on the GPU.
inline void cp_async_16(void* smem, const void* gmem, bool valid) {
  if (reinterpret_cast<std::uintptr_t>(smem) % 16 != 0 || reinterpret_cast<std::uintptr_t>(gmem) % 16 != 0) {
    simt::fail("cp.async with a misaligned address");
  }
  simt::self().open_group.push_back({smem, gmem, valid});
}
inline void cp_async_commit() {
  simt::fiber& f = simt::self();
  f.committed.push_back(std::move(f.open_group));
  f.open_group.clear();
}
template <int Pending>
void cp_async_wait() {
  simt::fiber& f = simt::self();
  while (f.committed.size() > static_cast<std::size_t>(Pending)) {
    for (const auto& c : f.committed.front()) {
      if (c.valid) std::memcpy(c.dst, c.src, 16);
      else std::memset(c.dst, 0, 16);
    }
    f.committed.erase(f.committed.begin());
  }
}

// threadIdx.x (on the GPU a read the compiler cannot merge with others) and p itself (on the GPU
// a move the compiler cannot see into): register-allocation devices with no effect on values.
inline int thread_index_again() { return static_cast<int>(threadIdx.x); }
template <class P>
P* opaque_pointer(P* p) {
  return p;
}

inline float exp2_approx(float x) { return std::exp2(x); }
inline float rcp_rn(float x) { return 1.0f / x; }

template <int Lanes>
unsigned lane_group_mask() {
  if constexpr (Lanes == 32) {
    return 0xffffffffu;
  } else {
    const unsigned lane = threadIdx.x % 32u;
    return ((1u << Lanes) - 1u) << (lane & ~static_cast<unsigned>(Lanes - 1));
  }
}

template <int Lanes>
float lane_group_sum(float v, unsigned mask) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0);
  if (mask != lane_group_mask<Lanes>()) simt::fail("lane_group_sum: the mask is not the caller's lane group");
  return simt::group_sum(v, mask);
}

}  // namespace rungs::attention::detail
