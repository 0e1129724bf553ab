// Host-side 8-bit floating-point storage types for fp8 KV caches: OCP FP8 E4M3 (rungs::e4m3)
// and E5M2 (rungs::e5m2), bit-compatible with CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2.
//
// Narrowing from float follows the PTX ISA's cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32, the
// conversion fp8 KV caches are written with: round to nearest even (subnormals included); a
// magnitude whose rounded value exceeds the largest finite one, and an infinity, becomes the
// largest finite value with its sign (.satfinite); NaN becomes 0x7f (the PTX executor's
// canonical fp8 NaN, as the other types' NaNs are canonical there). Widening is exact.
//
//   E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity; S.1111.111 is NaN;
//         largest finite 448 (0x7e), smallest subnormal 2^-9 (0x01).
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits: the top byte of an IEEE binary16,
//         with its infinities (0x7c) and NaNs (0x7d-0x7f); largest finite 57344 (0x7b),
//         smallest subnormal 2^-16.
//
// The bit functions are integer-only and usable in device code (RUNGS_HOST_DEVICE), so the
// kernels' cache write quantises with exactly the host reference's rounding.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include <rungs/config.hpp>

namespace rungs {

namespace detail {

/// An OCP 8-bit float format.
struct fp8_format {
  int mantissa_bits;      ///< 3 (E4M3) or 2 (E5M2)
  int bias;               ///< 7 or 15
  std::uint8_t max_code;  ///< the largest finite magnitude's bits: 0x7e or 0x7b
  bool has_infinity;      ///< E5M2's exponent field 31 holds infinities and NaNs
};
inline constexpr fp8_format e4m3_format{3, 7, 0x7e, false};
inline constexpr fp8_format e5m2_format{2, 15, 0x7b, true};
inline constexpr std::uint8_t fp8_canonical_nan = 0x7f;

// m / 2^s rounded to nearest, ties to even (s in [1, 31]).
RUNGS_HOST_DEVICE constexpr std::uint32_t shift_right_rne(std::uint32_t m, int s) {
  const std::uint32_t q = m >> s;
  const std::uint32_t rest = m & ((std::uint32_t{1} << s) - 1u);
  const std::uint32_t half = std::uint32_t{1} << (s - 1);
  return q + ((rest > half || (rest == half && (q & 1u) != 0)) ? 1u : 0u);
}

/// The bits of binary32 `u` narrowed to format F: round to nearest even, .satfinite, NaN ->
/// 0x7f. Integer-only: usable in device code.
template <fp8_format F>
RUNGS_HOST_DEVICE constexpr std::uint8_t fp8_bits_from_float_bits(std::uint32_t u) {
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return fp8_canonical_nan;
  if (a >= 0x7f800000u) return sign | F.max_code;  // infinity saturates
  const int min_exponent = 1 - F.bias;             // exponent of the smallest normal
  // a = m * 2^(e - 23) with m the 24-bit significand (binary32 subnormals: e = -126, no
  // implicit bit; they round to zero in either format).
  const int field = static_cast<int>(a >> 23);
  const int e = field == 0 ? -126 : field - 127;
  const std::uint32_t m = (a & 0x7fffffu) | (field == 0 ? 0u : 0x800000u);
  // The quantum below the smallest normal is that of the smallest normal (subnormals).
  const int below = e < min_exponent ? min_exponent - e : 0;
  const int s = 23 - F.mantissa_bits + below;  // >= 20
  const std::uint32_t q = s > 31 ? 0u : shift_right_rne(m, s);
  // q counts quanta of 2^(max(e, min) - M) and includes the implicit bit, so adding the
  // exponent's steps above the smallest normal gives the code (a carry out of the mantissa
  // moves into the exponent field, as it should).
  const std::uint32_t code = (static_cast<std::uint32_t>(e > min_exponent ? e - min_exponent : 0) << F.mantissa_bits) + q;
  return sign | static_cast<std::uint8_t>(code > F.max_code ? F.max_code : code);
}

/// Format F's bits `b` widened to binary32 bits, exactly (E4M3's NaN and E5M2's NaNs become
/// quiet NaNs with the sign kept; E5M2's infinities stay infinite). Integer-only.
template <fp8_format F>
RUNGS_HOST_DEVICE constexpr std::uint32_t fp8_bits_to_float_bits(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t magnitude = b & 0x7fu;
  const int exponent_field = static_cast<int>(magnitude >> F.mantissa_bits);
  const std::uint32_t mantissa = magnitude & ((1u << F.mantissa_bits) - 1u);
  const int max_field = 0x7f >> F.mantissa_bits;
  if (F.has_infinity && exponent_field == max_field) return sign | 0x7f800000u | (mantissa != 0 ? 0x400000u : 0u);
  if (!F.has_infinity && magnitude == 0x7fu) return sign | 0x7fc00000u;
  if (magnitude == 0) return sign;
  if (exponent_field == 0) {  // subnormal: mantissa x 2^(1 - bias - M); normalise it
    int shift = 0;
    std::uint32_t m = mantissa;
    while ((m & (1u << F.mantissa_bits)) == 0) {
      m <<= 1;
      ++shift;
    }
    const int e = 1 - F.bias - shift;
    return sign | (static_cast<std::uint32_t>(e + 127) << 23) | ((m & ((1u << F.mantissa_bits) - 1u)) << (23 - F.mantissa_bits));
  }
  return sign | (static_cast<std::uint32_t>(exponent_field - F.bias + 127) << 23) | (mantissa << (23 - F.mantissa_bits));
}

template <fp8_format F>
struct fp8_storage {
  std::uint8_t bits = 0;

  fp8_storage() = default;
  /// Round to nearest even with saturation (cvt.rn.satfinite); NaN -> 0x7f.
  constexpr explicit fp8_storage(float value) : bits(fp8_bits_from_float_bits<F>(std::bit_cast<std::uint32_t>(value))) {}
  static constexpr fp8_storage from_bits(std::uint8_t b) {
    fp8_storage h;
    h.bits = b;
    return h;
  }
  /// Exact.
  constexpr explicit operator float() const { return std::bit_cast<float>(fp8_bits_to_float_bits<F>(bits)); }
};

}  // namespace detail

/// OCP FP8 E4M3 (CUDA's __nv_fp8_e4m3), stored as its bits.
using e4m3 = detail::fp8_storage<detail::e4m3_format>;
/// OCP FP8 E5M2 (CUDA's __nv_fp8_e5m2), stored as its bits.
using e5m2 = detail::fp8_storage<detail::e5m2_format>;

static_assert(sizeof(e4m3) == 1 && std::is_trivially_copyable_v<e4m3>);
static_assert(sizeof(e5m2) == 1 && std::is_trivially_copyable_v<e5m2>);

/// The 8-bit float storage types.
template <class T>
concept fp8_element = std::is_same_v<T, e4m3> || std::is_same_v<T, e5m2>;

}  // namespace rungs
