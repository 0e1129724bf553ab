// Floating-point semantics of the PTX instructions the executor implements, bit-exact where
// the PTX ISA defines the result: round to nearest even, .ftz (subnormal inputs and results
// flushed to a zero of the same sign), .sat (clamp to [0, 1], NaN -> +0), and NaN results
// returned as the canonical NaN (f32 0x7fffffff, f16/bf16 0x7fff, f64 0x7fffffffffffffff), the
// value NVIDIA GPUs produce for every NaN result. The approximate instructions (ex2, rsqrt,
// sin, cos) are computed with the host's libm, inside the ISA's stated error bounds; their
// special values (0, +-inf, NaN) are exact.
#pragma once

#include <rungs/numeric/float16.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace rungs::sim::detail {

inline constexpr std::uint32_t kCanonicalNanF32 = 0x7fffffffu;
inline constexpr std::uint16_t kCanonicalNan16 = 0x7fffu;
inline constexpr std::uint64_t kCanonicalNanF64 = 0x7fffffffffffffffull;

inline float as_f32(std::uint64_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits)); }
inline double as_f64(std::uint64_t bits) { return std::bit_cast<double>(bits); }

inline float flush(float x) {  // .ftz: a subnormal becomes a zero of the same sign
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

inline float f32_in(std::uint64_t bits, bool ftz) {
  const float x = as_f32(bits);
  return ftz ? flush(x) : x;
}

inline std::uint64_t f32_out(float r, bool ftz, bool sat) {
  if (std::isnan(r)) return sat ? 0u : kCanonicalNanF32;
  if (sat) r = r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
  if (sat && r == 0.0f) r = 0.0f;  // -0 clamps to +0
  if (ftz) r = flush(r);
  return std::bit_cast<std::uint32_t>(r);
}

inline std::uint64_t f64_out(double r) {
  return std::isnan(r) ? kCanonicalNanF64 : std::bit_cast<std::uint64_t>(r);
}

// min/max.f32: a NaN operand is ignored (both NaN: canonical NaN); -0 orders below +0.
inline std::uint64_t f32_minmax(float a, float b, bool is_max, bool ftz) {
  if (ftz) {
    a = flush(a);
    b = flush(b);
  }
  if (std::isnan(a) && std::isnan(b)) return kCanonicalNanF32;
  if (std::isnan(a)) return std::bit_cast<std::uint32_t>(b);
  if (std::isnan(b)) return std::bit_cast<std::uint32_t>(a);
  if (a == b) {  // equal, or +0 and -0
    const bool a_neg = std::signbit(a);
    const bool pick_a = is_max ? !a_neg : a_neg;
    return std::bit_cast<std::uint32_t>(pick_a ? a : b);
  }
  return std::bit_cast<std::uint32_t>(is_max ? (a > b ? a : b) : (a < b ? a : b));
}

// f32 -> f16 / bf16 bits, round to nearest even (rungs/numeric/float16.hpp), canonical NaN.
inline std::uint16_t f16_from_f32(float x) {
  return std::isnan(x) ? kCanonicalNan16 : rungs::detail::f16_bits_from_float(x);
}
inline std::uint16_t bf16_from_f32(float x) {
  return std::isnan(x) ? kCanonicalNan16 : rungs::detail::bf16_bits_from_float(x);
}
// f16 / bf16 -> f32: exact (subnormals kept); a NaN becomes the canonical f32 NaN.
inline std::uint32_t f32_from_f16(std::uint16_t h) {
  const float x = rungs::detail::f16_bits_to_float(h);
  return std::isnan(x) ? kCanonicalNanF32 : std::bit_cast<std::uint32_t>(x);
}
inline std::uint32_t f32_from_bf16(std::uint16_t h) {
  const float x = rungs::detail::bf16_bits_to_float(h);
  return std::isnan(x) ? kCanonicalNanF32 : std::bit_cast<std::uint32_t>(x);
}

// ex2.approx(.ftz).f32: 2^x; 2^-inf = +0, 2^+inf = +inf, 2^NaN = NaN. The ISA bounds the
// relative error (2^-22 over the full range); libm's exp2f is within 1 ulp.
inline std::uint64_t ex2_f32(float x, bool ftz) {
  if (ftz) x = flush(x);
  if (std::isnan(x)) return kCanonicalNanF32;
  return f32_out(std::exp2(x), ftz, false);
}

// OCP 8-bit floats (the PTX ISA's .e4m3 and .e5m2): E4M3 has bias 7, no infinity, NaN
// S.1111.111, largest finite 448 (0x7e); E5M2 has bias 15, IEEE-style infinities (0x7c) and NaNs
// (0x7d-0x7f), largest finite 57344 (0x7b). Both have subnormals (exponent field 0).
struct fp8_format {
  int man_bits, bias;
  double max_finite;
  std::uint8_t max_code;
  bool has_inf;
};
inline constexpr fp8_format kE4M3{3, 7, 448.0, 0x7e, false};
inline constexpr fp8_format kE5M2{2, 15, 57344.0, 0x7b, true};
inline constexpr std::uint8_t kCanonicalNanFp8 = 0x7f;

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32, one element: round to nearest even; a magnitude beyond
// the largest finite value after rounding (infinities included) becomes that value with the
// input's sign (.satfinite, mandatory for these conversions); NaN becomes 0x7f (the executor's
// canonical fp8 NaN, as it returns canonical NaNs for the other types).
inline std::uint8_t fp8_from_f32(float x, const fp8_format& f) {
  if (std::isnan(x)) return kCanonicalNanFp8;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  if (std::isinf(a)) return sign | f.max_code;
  const int min_exp = 1 - f.bias;                      // exponent of the smallest normal
  const int e = std::max(std::ilogb(a), min_exp);       // subnormals share the smallest normal's quantum
  const double quantum = std::ldexp(1.0, e - f.man_bits);
  const double r = std::nearbyint(a / quantum) * quantum;  // exact division by a power of two; ties to even
  if (r > f.max_finite) return sign | f.max_code;
  if (r == 0.0) return sign;
  const int re = std::ilogb(r);
  if (re < min_exp) return sign | static_cast<std::uint8_t>(r / std::ldexp(1.0, min_exp - f.man_bits));
  const auto mant = static_cast<unsigned>(r / std::ldexp(1.0, re - f.man_bits)) - (1u << f.man_bits);
  return sign | static_cast<std::uint8_t>(((re + f.bias) << f.man_bits) | mant);
}

// One fp8 element as a double (exact); NaN for E4M3's S.1111.111 and E5M2's NaN codes.
inline double fp8_to_double(std::uint8_t b, const fp8_format& f) {
  const double sign = (b & 0x80) != 0 ? -1.0 : 1.0;
  const unsigned exp_field = (b & 0x7fu) >> f.man_bits;
  const unsigned mant = b & ((1u << f.man_bits) - 1u);
  const unsigned exp_max = (0x7fu >> f.man_bits);
  if (f.has_inf && exp_field == exp_max) return mant == 0 ? sign * INFINITY : NAN;
  if (!f.has_inf && (b & 0x7f) == 0x7f) return NAN;
  if (exp_field == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - f.bias - f.man_bits);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.man_bits), static_cast<int>(exp_field) - f.bias);
}

// cvt.rn.f16x2.{e4m3x2,e5m2x2}, one element: every fp8 value is an f16 value, so the widening
// is exact; a NaN becomes the canonical f16 NaN.
inline std::uint16_t f16_from_fp8(std::uint8_t b, const fp8_format& f) {
  const double v = fp8_to_double(b, f);
  return std::isnan(v) ? kCanonicalNan16 : rungs::detail::f16_bits_from_float(static_cast<float>(v));
}

// Float -> integer conversions saturate to the destination range; NaN converts to 0.
template <class I>
I float_to_int(double x) {
  if (std::isnan(x)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

}  // namespace rungs::sim::detail
