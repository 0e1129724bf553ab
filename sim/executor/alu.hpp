// Helpers the ALU handlers share (alu.cpp, bits.cpp, convert.cpp): type classes and the
// PTX ISA's comparisons.
#pragma once

#include "machine.hpp"

#include <cmath>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace rungs::sim::detail {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

inline bool is_float(vtype t) { return t == vtype::f32 || t == vtype::f64; }
inline bool is_int(vtype t) { return !is_float(t) && t != vtype::pred && t != vtype::f16 && t != vtype::bf16 &&
                                     t != vtype::f16x2 && t != vtype::bf16x2 && t != vtype::tf32 &&
                                     t != vtype::none; }

// The 16-bit float types as elements: f16 or bf16, one per register or a pair (f16x2, bf16x2:
// the first in the low 16 bits). elems is 0 for every other type.
struct half_form {
  bool bf = false;
  unsigned elems = 0;
  // An element's exact value; .ftz (f16 only) flushes a subnormal to a zero of its sign.
  float widen(std::uint64_t bits, bool ftz) const {
    const auto h = static_cast<std::uint16_t>(bits);
    if (bf) return as_f32(f32_from_bf16(h));
    const float x = as_f32(f32_from_f16(h));
    return ftz && (h & 0x7c00u) == 0 ? std::copysign(0.0f, x) : x;
  }
  // x rounded to nearest even as the element type (canonical NaN); .ftz flushes a subnormal.
  std::uint16_t narrow(float x, bool ftz) const {
    if (std::isnan(x)) return kCanonicalNan16;
    if (bf) return bf16_from_f32(x);
    const std::uint16_t h = f16_from_f32(x);
    return ftz && (h & 0x7c00u) == 0 ? static_cast<std::uint16_t>(h & 0x8000u) : h;
  }
};
inline half_form half_form_of(vtype t) {
  switch (t) {
    case vtype::f16: return {false, 1};
    case vtype::f16x2: return {false, 2};
    case vtype::bf16: return {true, 1};
    case vtype::bf16x2: return {true, 2};
    default: return {};
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Eight lanes of 64-bit register slots as AVX2 vectors, for the lane loops compiled for AVX2: the
// low 32 bits of lanes p[0 .. 8) in order (one shuffle and one permute where the compiler's
// vectorised loops moved them a lane at a time), and eight 32-bit results stored zero-extended.
__attribute__((target("avx2"))) inline __m256i low32x8(const std::uint64_t* p) {
  const __m256 lo = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m256 hi = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4)));
  const __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));  // lanes 0 1 4 5 | 2 3 6 7
  return _mm256_castpd_si256(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
}
__attribute__((target("avx2"))) inline void store32x8(std::uint64_t* d, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4), _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
}
// An f32 result's bits, a NaN made the canonical NaN (as f32_out).
__attribute__((target("avx2"))) inline __m256i canonical_f32x8(__m256 r) {
  const __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
  return _mm256_castps_si256(_mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kCanonicalNanF32))), nan));
}
#endif

// f16 -> f32 over a whole warp with the processor's conversion, where it has AVX2 and F16C
// (convert.cpp; exec_cvt and the decoded cvt.f32.f16 use it).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,f16c"))) void f32_from_f16_warp_hw(std::uint64_t* d, const std::uint64_t* a);
#else
void f32_from_f16_warp_hw(std::uint64_t* d, const std::uint64_t* a);
#endif

inline bool float_compare(double a, double b, cmp c) {
  const bool un = std::isnan(a) || std::isnan(b);
  switch (c) {
    case cmp::eq: return !un && a == b;
    case cmp::ne: return !un && a != b;
    case cmp::lt: return !un && a < b;
    case cmp::le: return !un && a <= b;
    case cmp::gt: return !un && a > b;
    case cmp::ge: return !un && a >= b;
    case cmp::equ: return un || a == b;
    case cmp::neu: return un || a != b;
    case cmp::ltu: return un || a < b;
    case cmp::leu: return un || a <= b;
    case cmp::gtu: return un || a > b;
    case cmp::geu: return un || a >= b;
    case cmp::num: return !un;
    case cmp::nan: return un;
  }
  return false;
}

template <class T>
inline bool int_compare(T a, T b, cmp c) {
  switch (c) {
    case cmp::eq: return a == b;
    case cmp::ne: return a != b;
    case cmp::lt: return a < b;
    case cmp::le: return a <= b;
    case cmp::gt: return a > b;
    case cmp::ge: return a >= b;
    default: return false;
  }
}

}  // namespace rungs::sim::detail
