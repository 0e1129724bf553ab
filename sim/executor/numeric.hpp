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
#include <type_traits>

namespace rungs::sim::detail {

inline constexpr std::uint32_t kCanonicalNanF32 = 0x7fffffffu;
inline constexpr std::uint16_t kCanonicalNan16 = 0x7fffu;
inline constexpr std::uint64_t kCanonicalNanF64 = 0x7fffffffffffffffull;

inline float as_f32(std::uint64_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits)); }
inline double as_f64(std::uint64_t bits) { return std::bit_cast<double>(bits); }

inline float flush(float x) {  // .ftz: a subnormal becomes a zero of the same sign (bits: exponent 0)
  const auto u = std::bit_cast<std::uint32_t>(x);
  return (u & 0x7f800000u) == 0 ? std::bit_cast<float>(u & 0x80000000u) : x;
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

// min/max of f32 or f64 values: a NaN operand is ignored (both NaN: NaN); -0 orders below +0.
template <class F>
F float_minmax(F a, F b, bool is_max) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return (is_max ? !std::signbit(a) : std::signbit(a)) ? a : b;  // equal, or +0 and -0
  return is_max ? (a > b ? a : b) : (a < b ? a : b);
}
// min/max.f32 as bits, the canonical NaN for two NaNs.
inline std::uint64_t f32_minmax(float a, float b, bool is_max, bool ftz) {
  const float r = ftz ? float_minmax(flush(a), flush(b), is_max) : float_minmax(a, b, is_max);
  return std::isnan(r) ? kCanonicalNanF32 : std::bit_cast<std::uint32_t>(r);
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

inline int sign_of(double d) { return (d > 0) - (d < 0); }

// TwoSum: the sign of (a + b) - s, where s is a + b rounded to nearest (the error a + b - s is
// exactly representable); an overflow to an infinity lies beyond the exact sum.
inline int two_sum_error_sign(double a, double b, double s) {
  if (!std::isfinite(s)) return std::isfinite(a) && std::isfinite(b) ? -sign_of(s) : 0;
  const double bb = s - a;
  return sign_of((a - (s - bb)) + (b - bb));
}

// Directed rounding (.rz, .rm, .rp) of an exact value x, given r = x rounded to nearest in the
// result type and the sign of x - r (computed exactly by the caller): r when exact, otherwise r
// or its neighbour on x's side. Overflow and underflow follow: an overflow rounded to nearest
// is an infinity with x below it, so toward zero or away from it gives the largest finite
// value; a tiny x rounded to a zero rounds up (or down) to the smallest subnormal.
template <class F>
F round_directed(F r, int sign_x_minus_r, bool down, bool up) {
  if (sign_x_minus_r == 0 || r != r) return r;
  const bool below = sign_x_minus_r < 0;
  constexpr F inf = std::numeric_limits<F>::infinity();
  if (down) return below ? std::nextafter(r, -inf) : r;
  if (up) return below ? r : std::nextafter(r, inf);
  return (below && r > 0) || (!below && r < 0) ? std::nextafter(r, F{0}) : r;  // toward zero
}

// Rounding to odd: x toward zero, then to the neighbour with an odd last bit when inexact. A
// value rounded to odd at p + 2 bits or more, then to nearest at p bits, is x rounded once.
template <class F>
F round_to_odd(F r, int sign_x_minus_r) {
  const F t = round_directed(r, sign_x_minus_r, false, false);
  using U = std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>;
  if (sign_x_minus_r == 0 || !std::isfinite(t) || (std::bit_cast<U>(t) & 1) != 0) return t;
  return std::nextafter(t, t > 0 ? std::numeric_limits<F>::infinity() : -std::numeric_limits<F>::infinity());
}

// Arithmetic on f16 and bf16 elements (add, sub, mul, fma; the ISA's .rn): computed from the
// elements' exact float values and rounded once to the element type, to nearest even.
// add, sub and mul of two 16-bit values are correctly rounded in float and rounded again to 16
// bits without error (float's 24 bits are at least 2 x 11 + 2: double rounding is innocuous).
// fma's exact a b + c can need 80 bits, so it is rounded to odd at double precision (TwoSum
// gives the sign of its error) and again at float precision: the final rounding to 16 bits is
// then the only one that counts.
inline float round_to_odd_f32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);  // exact: two 24-bit significands
  const double s = p + static_cast<double>(c);
  const double ro = round_to_odd(s, two_sum_error_sign(p, c, s));
  const float f = static_cast<float>(ro);
  return round_to_odd(f, std::isfinite(ro) ? sign_of(ro - static_cast<double>(f)) : 0);  // ro - f: exact
}

// ex2.approx(.ftz).f32: 2^x; 2^-inf = +0, 2^+inf = +inf, 2^NaN = NaN. The ISA bounds the
// relative error (2^-22 over the full range); libm's exp2f is within 1 ulp.
inline std::uint64_t ex2_f32(float x, bool ftz) {
  if (ftz) x = flush(x);
  if (std::isnan(x)) return kCanonicalNanF32;
  return f32_out(std::exp2(x), ftz, false);
}

// OCP 8-bit floats (the PTX ISA's .e4m3 and .e5m2). The conversions are rungs' own host types
// (rungs/numeric/float8.hpp), which fp8 KV caches are quantised with: narrowing is
// cvt.rn.satfinite's round to nearest even, a magnitude beyond the largest finite value after
// rounding (infinities included) becoming that value with the input's sign, NaN becoming 0x7f
// (the executor's canonical fp8 NaN, as it returns canonical NaNs for the other types).
enum class fp8_kind { e4m3, e5m2 };

inline std::uint8_t fp8_from_f32(float x, fp8_kind k) {
  return k == fp8_kind::e4m3 ? rungs::e4m3(x).bits : rungs::e5m2(x).bits;
}

// cvt.rn.f16x2.{e4m3x2,e5m2x2}, one element: every fp8 value is an f16 value, so the widening
// is exact; a NaN becomes the canonical f16 NaN.
inline std::uint16_t f16_from_fp8(std::uint8_t b, fp8_kind k) {
  const float v = k == fp8_kind::e4m3 ? static_cast<float>(rungs::e4m3::from_bits(b))
                                      : static_cast<float>(rungs::e5m2::from_bits(b));
  return std::isnan(v) ? kCanonicalNan16 : rungs::detail::f16_bits_from_float(v);
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
