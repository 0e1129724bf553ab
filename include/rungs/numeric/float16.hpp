// Host-side 16-bit floating-point storage types: IEEE binary16 (rungs::f16) and bfloat16
// (rungs::bf16), with exact conversions to float and round-to-nearest-even conversions from
// float, written with bit operations so that no CUDA header (cuda_fp16.h, cuda_bf16.h) is
// needed. Both types are 2 bytes, trivially copyable and bit-compatible with CUDA's __half
// and __nv_bfloat16, so host buffers of them can be copied to and from device buffers as is.
//
// Arithmetic is deliberately absent: these are storage types. Widen with to_float/to_double,
// compute in float or double, and narrow once (narrow<T>).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include <rungs/numeric/float8.hpp>

namespace rungs {

namespace detail {

// float -> binary16 bits, round to nearest even, with subnormals, overflow to infinity and
// quiet NaNs. After F. Giesen's float_to_half_fast3_rtne (public domain): subnormals round
// through one float addition of 0.5f, whose ulp (2^-24) is the half subnormal step.
constexpr std::uint16_t f16_bits_from_float(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t out = 0;
  if (u >= 0x47800000u) {                             // |x| >= 65536, inf or NaN
    out = u > 0x7f800000u ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  } else if (u < 0x38800000u) {                       // |x| < 2^-14: half subnormal or zero
    const float rounded = std::bit_cast<float>(u) + 0.5f;
    out = std::bit_cast<std::uint32_t>(rounded) - 0x3f000000u;
  } else {                                            // normal; may round up to infinity
    const std::uint32_t mantissa_odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + mantissa_odd;
    out = u >> 13;
  }
  return static_cast<std::uint16_t>(out | (sign >> 16));
}

constexpr float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) | sign);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// float -> bfloat16 bits, round to nearest even; NaNs stay NaN (quiet, sign and top payload kept).
constexpr std::uint16_t bf16_bits_from_float(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

/// IEEE 754 binary16, stored as its bits.
struct f16 {
  std::uint16_t bits = 0;

  f16() = default;
  constexpr explicit f16(float value) : bits(detail::f16_bits_from_float(value)) {}
  static constexpr f16 from_bits(std::uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  constexpr explicit operator float() const { return detail::f16_bits_to_float(bits); }
};

/// bfloat16 (the top half of an IEEE binary32), stored as its bits.
struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;
  constexpr explicit bf16(float value) : bits(detail::bf16_bits_from_float(value)) {}
  static constexpr bf16 from_bits(std::uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  constexpr explicit operator float() const { return detail::bf16_bits_to_float(bits); }
};

static_assert(sizeof(f16) == 2 && std::is_trivially_copyable_v<f16>);
static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16>);

/// Element types the host reference computes with: 8- and 16-bit storage, float or double.
template <class T>
concept storage_element = std::is_same_v<T, f16> || std::is_same_v<T, bf16> || fp8_element<T> ||
                          std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Exact widening of a storage element to double.
template <storage_element T>
constexpr double to_double(T value) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || fp8_element<T>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<double>(value);
  }
}

/// Narrowing from double to a storage element. 8- and 16-bit types round twice (double ->
/// float -> 8 or 16 bits), which can differ from a single rounding by one ulp at exact float
/// midpoints; the host reference only narrows its final outputs, which tests compare with a
/// tolerance. fp8 saturates (see float8.hpp).
template <storage_element T>
constexpr T narrow(double value) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || fp8_element<T>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

}  // namespace rungs
