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

// Arithmetic on f16 and bf16 elements (add, sub, mul, fma; the ISA's .rn): computed from the
// elements' exact float values and rounded once to the element type, to nearest even.
// add, sub and mul of two 16-bit values are correctly rounded in float and rounded again to 16
// bits without error (float's 24 bits are at least 2 x 11 + 2: double rounding is innocuous).
// fma's exact a b + c can need 80 bits, so it is rounded to odd at double precision (TwoSum
// gives the exact error) and again at float precision: rounding to odd keeps the sticky
// information, so the final rounding to 16 bits is the only one that counts.
inline float round_to_odd_f32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);  // exact: two 24-bit significands
  const double s = p + static_cast<double>(c);
  const double bb = s - p;
  const double err = (p - (s - bb)) + (static_cast<double>(c) - bb);  // s + err = p + c exactly
  double ro = s;
  if (err != 0.0 && std::isfinite(s)) {
    const double t = (err > 0.0) == (s > 0.0) ? s : std::nextafter(s, 0.0);  // toward zero
    ro = (std::bit_cast<std::uint64_t>(t) & 1) ? t : std::nextafter(t, t > 0.0 ? HUGE_VAL : -HUGE_VAL);
  }
  float f = static_cast<float>(ro);
  if (std::isfinite(ro) && static_cast<double>(f) != ro) {
    const float t = (static_cast<double>(f) > ro) == (ro > 0.0) ? std::nextafter(f, 0.0f) : f;  // toward zero
    f = (std::bit_cast<std::uint32_t>(t) & 1) ? t : std::nextafter(t, t > 0.0f ? HUGE_VALF : -HUGE_VALF);
  }
  return f;
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
inline int sign_of(double d) { return (d > 0) - (d < 0); }

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
