// Conversions (PTX ISA: cvt, cvta): integer and floating point of every width, packed
// f16x2/bf16x2 and the fp8 pairs.
#include "alu.hpp"

#include <algorithm>
#include <cmath>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rungs::sim::detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// f16 -> f32 over a whole warp with the processor's conversion (exact, as f32_from_f16; a NaN
// made canonical the same way).
__attribute__((target("avx2,f16c"))) void f32_from_f16_warp_hw(std::uint64_t* d, const std::uint64_t* a) {
  for (unsigned l = 0; l < kLanes; l += 8) {
    const __m256i h = _mm256_and_si256(low32x8(a + l), _mm256_set1_epi32(0xffff));  // each lane's low 16 bits
    const __m128i h16 = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    store32x8(d + l, canonical_f32x8(_mm256_cvtph_ps(h16)));
  }
}
#else
void f32_from_f16_warp_hw(std::uint64_t*, const std::uint64_t*) {}
#endif

namespace {

// cvt d, a: one value (PTX ISA: cvt). Returns false when the combination is not implemented.
inline bool convert(const instr& in, std::uint64_t a, std::uint64_t& out) {
  const vtype dt = in.type, st = in.type2;
  // cvt.rna{.satfinite}.tf32.f32: to tf32's 10 fraction bits, nearest with ties away from
  // zero, kept in f32 bits with the low 13 zero (wmma's tf32 inputs). Infinities stay (or,
  // .satfinite, become the largest finite tf32 of their sign); NaN is the canonical NaN.
  if (dt == vtype::tf32 || in.round == rounding::rna) {
    if (dt != vtype::tf32 || st != vtype::f32 || in.round != rounding::rna) return false;
    const auto x = static_cast<std::uint32_t>(a);
    const std::uint32_t sign = x & 0x80000000u, mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return out = kCanonicalNanF32, true;
    if (mag == 0x7f800000u) return out = in.satfinite ? (sign | 0x7f7fe000u) : x, true;
    std::uint32_t r = (mag + 0x1000u) & 0xffffe000u;  // a carry into the exponent is the next binade (or infinity)
    if (in.satfinite && r >= 0x7f800000u) r = 0x7f7fe000u;
    out = sign | r;
    return true;
  }
  const unsigned dbits = type_bits(dt), sbits = type_bits(st);
  const bool irnd = in.round == rounding::rni || in.round == rounding::rzi || in.round == rounding::rmi ||
                    in.round == rounding::rpi;
  auto source_double = [&]() -> double {
    switch (st) {
      case vtype::f16: return rungs::detail::f16_bits_to_float(static_cast<std::uint16_t>(a));
      case vtype::bf16: return rungs::detail::bf16_bits_to_float(static_cast<std::uint16_t>(a));
      case vtype::f32: return f32_in(a, in.ftz);
      case vtype::f64: return as_f64(a);
      default: return 0.0;
    }
  };
  auto round_integral = [&](double x) {
    switch (in.round) {
      case rounding::rni: return std::nearbyint(x);  // the host's default mode: nearest even
      case rounding::rzi: return std::trunc(x);
      case rounding::rmi: return std::floor(x);
      case rounding::rpi: return std::ceil(x);
      default: return x;
    }
  };
  const bool src_float = st == vtype::f16 || st == vtype::bf16 || st == vtype::f32 || st == vtype::f64;
  const bool dst_float = dt == vtype::f16 || dt == vtype::bf16 || dt == vtype::f32 || dt == vtype::f64;
  if (!src_float && !dst_float) {  // integer <-> integer: extend by the source, then clamp or wrap
    const std::int64_t sv = is_signed(st) ? sext(a, sbits) : 0;
    const std::uint64_t uv = a & width_mask(sbits);
    if (in.sat) {
      if (is_signed(dt)) {
        const std::int64_t lo = -(std::int64_t{1} << (dbits - 1)), hi = (std::int64_t{1} << (dbits - 1)) - 1;
        if (is_signed(st)) out = static_cast<std::uint64_t>(std::clamp(sv, lo, hi));
        else out = uv > static_cast<std::uint64_t>(hi) ? static_cast<std::uint64_t>(hi) : uv;
      } else {
        const std::uint64_t hi = width_mask(dbits);
        if (is_signed(st)) out = sv < 0 ? 0 : std::min(static_cast<std::uint64_t>(sv), hi);
        else out = std::min(uv, hi);
      }
    } else {
      out = is_signed(st) ? static_cast<std::uint64_t>(sv) : uv;
    }
    out &= width_mask(dbits);
    return true;
  }
  if (src_float && !dst_float) {  // float -> integer: integer rounding required; saturates; NaN -> 0
    if (!irnd) return false;
    const double x = round_integral(source_double());
    switch (dt) {
      case vtype::s8: out = static_cast<std::uint8_t>(float_to_int<std::int8_t>(x)); return true;
      case vtype::s16: out = static_cast<std::uint16_t>(float_to_int<std::int16_t>(x)); return true;
      case vtype::s32: out = static_cast<std::uint32_t>(float_to_int<std::int32_t>(x)); return true;
      case vtype::s64: out = static_cast<std::uint64_t>(float_to_int<std::int64_t>(x)); return true;
      case vtype::u8: out = float_to_int<std::uint8_t>(x); return true;
      case vtype::u16: out = float_to_int<std::uint16_t>(x); return true;
      case vtype::u32: out = float_to_int<std::uint32_t>(x); return true;
      case vtype::u64: out = float_to_int<std::uint64_t>(x); return true;
      default: return false;
    }
  }
  if (!src_float && dst_float) {  // integer -> float: round to nearest even only
    if (in.round != rounding::rn) return false;
    const bool s = is_signed(st);
    const std::int64_t sv = sext(a, sbits);
    const std::uint64_t uv = a & width_mask(sbits);
    switch (dt) {
      case vtype::f32: {
        const float r = s ? static_cast<float>(sv) : static_cast<float>(uv);
        out = f32_out(r, in.ftz, in.sat);
        return true;
      }
      case vtype::f64: out = f64_out(s ? static_cast<double>(sv) : static_cast<double>(uv)); return true;
      default: return false;
    }
  }
  // float -> float
  if (dt == vtype::f32 && (st == vtype::f16 || st == vtype::bf16)) {
    if (in.round != rounding::none) return false;
    out = st == vtype::f16 ? f32_from_f16(static_cast<std::uint16_t>(a)) : f32_from_bf16(static_cast<std::uint16_t>(a));
    if (in.ftz || in.sat) out = f32_out(as_f32(out), in.ftz, in.sat);
    return true;
  }
  if ((dt == vtype::f16 || dt == vtype::bf16) && st == vtype::f32) {
    if (in.round != rounding::rn || in.sat) return false;
    const float x = f32_in(a, in.ftz);
    out = dt == vtype::f16 ? f16_from_f32(x) : bf16_from_f32(x);
    return true;
  }
  if (dt == vtype::f32 && st == vtype::f32) {  // round to an integral value (cvt.rni.f32.f32)
    if (!irnd && in.round != rounding::none) return false;
    const float x = f32_in(a, in.ftz);
    out = f32_out(static_cast<float>(round_integral(x)), in.ftz, in.sat);
    return true;
  }
  if (dt == vtype::f32 && st == vtype::f64) {
    if (in.round != rounding::rn) return false;
    out = f32_out(static_cast<float>(as_f64(a)), in.ftz, in.sat);
    return true;
  }
  if (dt == vtype::f64 && st == vtype::f32) {
    if (in.round != rounding::none) return false;
    out = f64_out(static_cast<double>(f32_in(a, in.ftz)));
    return true;
  }
  if (dt == vtype::f64 && st == vtype::f64) {
    if (!irnd) return false;
    out = f64_out(round_integral(as_f64(a)));
    return true;
  }
  return false;
}

// The conversions a kernel runs most (widening an f16 to f32, an index to 64 bits), as lane
// loops with operands resolved once; the same results as convert(). False: not one of them.
template <class F>
void cvt_lanes(warp& w, const instr& in, std::uint32_t mask, F&& f) {
  std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
  const lanes_in a(w.regs, in.ops[1]);
  for_mask(mask, [&](unsigned l) { d[l] = f(a[l]); });
}

bool convert_lanes(warp& w, const instr& in, std::uint32_t mask) {
  if (in.ftz || in.sat || in.ops[0].kind != operand::k_reg) return false;
  const vtype dt = in.type, st = in.type2;
  if (dt == vtype::f32 && st == vtype::f16 && in.round == rounding::none && mask == 0xffffffffu && cpu_has_avx2()) {
    const lanes_in a(w.regs, in.ops[1]);
    f32_from_f16_warp_hw(w.regs.data() + std::size_t{in.ops[0].reg} * kLanes, a.p);
    return true;
  }
  if (dt == vtype::f32 && st == vtype::f16 && in.round == rounding::none) {
    cvt_lanes(w, in, mask, [](std::uint64_t a) -> std::uint64_t { return f32_from_f16(static_cast<std::uint16_t>(a)); });
    return true;
  }
  if (dt == vtype::f16 && st == vtype::f32 && in.round == rounding::rn) {
    cvt_lanes(w, in, mask, [](std::uint64_t a) -> std::uint64_t { return f16_from_f32(as_f32(a)); });
    return true;
  }
  if ((dt == vtype::s64 || dt == vtype::u64) && st == vtype::s32) {
    cvt_lanes(w, in, mask, [](std::uint64_t a) { return static_cast<std::uint64_t>(sext(a, 32)); });
    return true;
  }
  if ((dt == vtype::s64 || dt == vtype::u64) && st == vtype::u32) {
    cvt_lanes(w, in, mask, [](std::uint64_t a) { return a & 0xffffffffu; });
    return true;
  }
  return false;
}

}  // namespace

void executor::exec_cvt(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  if (t == vtype::e4m3x2 || t == vtype::e5m2x2) {  // cvt.rn.satfinite.{e4m3,e5m2}x2.f32 d, a, b: a high byte
    if (in.type2 != vtype::f32 || in.round != rounding::rn || !in.satfinite) io.no("this fp8 cvt (needs .rn.satfinite from f32)");
    const fp8_kind f = t == vtype::e4m3x2 ? fp8_kind::e4m3 : fp8_kind::e5m2;
    for_lanes(mask, [&](unsigned l) {
      const std::uint32_t hi = fp8_from_f32(f32_in(io.rd(1, l), in.ftz), f);
      const std::uint32_t lo = fp8_from_f32(f32_in(io.rd(2, l), in.ftz), f);
      io.wr(l, (hi << 8) | lo);
    });
    return;
  }
  if (t == vtype::f16x2 && (in.type2 == vtype::e4m3x2 || in.type2 == vtype::e5m2x2)) {  // a's high byte -> d's high half
    if (in.round != rounding::rn || in.satfinite) io.no("this fp8 widening (needs .rn)");
    const fp8_kind f = in.type2 == vtype::e4m3x2 ? fp8_kind::e4m3 : fp8_kind::e5m2;
    for_lanes(mask, [&](unsigned l) {
      const std::uint64_t a = io.rd(1, l);
      const std::uint32_t hi = f16_from_fp8(static_cast<std::uint8_t>(a >> 8), f);
      const std::uint32_t lo = f16_from_fp8(static_cast<std::uint8_t>(a), f);
      io.wr(l, (hi << 16) | lo);
    });
    return;
  }
  if (t == vtype::f16x2 || t == vtype::bf16x2) {  // cvt.rn.{f16x2,bf16x2}.f32 d, a, b: a high, b low
    if (in.type2 != vtype::f32 || in.round != rounding::rn || in.ops.size() != 3) io.no("this packed cvt");
    const bool bf = t == vtype::bf16x2;
    for_lanes(mask, [&](unsigned l) {
      const float a = f32_in(io.rd(1, l), in.ftz), b = f32_in(io.rd(2, l), in.ftz);
      const std::uint32_t hi = bf ? bf16_from_f32(a) : f16_from_f32(a);
      const std::uint32_t lo = bf ? bf16_from_f32(b) : f16_from_f32(b);
      io.wr(l, (hi << 16) | lo);
    });
    return;
  }
  if (in.ops.size() != 2) io.no("cvt operand count");
  if (convert_lanes(w, in, mask)) return;  // implemented combinations: no probe needed
  std::uint64_t probe = 0;
  if (!convert(in, 0, probe)) io.no("this cvt combination");
  for_lanes(mask, [&](unsigned l) {
    std::uint64_t r = 0;
    convert(in, io.rd(1, l), r);
    io.wr(l, r);
  });
}

void executor::exec_cvta(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  if (in.where == space::global) {
    for_lanes(mask, [&](unsigned l) { io.wr(l, io.rd(1, l)); });
  } else if (in.where == space::local || in.where == space::shared) {
    // The thread's local bytes at kLocalWindow, the CTA's shared bytes at kSharedWindow (machine.hpp).
    const bool local = in.where == space::local;
    const std::uint64_t base = local ? kLocalWindow : kSharedWindow;
    const char* name = local ? "local" : "shared";
    for_lanes(mask, [&](unsigned l) {
      const std::uint64_t a = io.rd(1, l);
      if (!in.to) return io.wr(l, a + base);
      if (!(local ? in_local_window(a) : in_shared_window(a))) {
        io.fail(l, std::string("cvta.to.") + name + " of 0x" + hex64(a) + ", not a generic " + name + " address");
      }
      io.wr(l, a - base);
    });
  } else {
    io.no("cvta outside the global, local and shared spaces");
  }
}

}  // namespace rungs::sim::detail
