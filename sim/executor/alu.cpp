// Arithmetic, logic, comparison, selection and the special functions (PTX ISA, "Integer
// Arithmetic", "Floating-Point", "Logic and Shift", "Comparison and Selection"), one handler
// per family. Values live in 64-bit register slots; a result is stored truncated to its
// type's width, and an operand is read through its type (sign-extended for .s types).
#include "alu.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>

namespace rungs::sim::detail {

void executor::exec_mov(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  const unsigned bits = io.bits;
  if (in.ops[0].kind == operand::k_vec) {  // unpack: mov.b32 {lo, hi}, %r (element by element, lanes inner)
    const auto& elems = in.ops[0].elems;
    const unsigned eb = bits / static_cast<unsigned>(elems.size());
    const std::uint64_t em = width_mask(eb);
    const lanes_in a(w.regs, in.ops[1]);
    std::uint64_t v[kLanes];  // the source first: a destination may be the source register
    for_mask(mask, [&](unsigned l) { v[l] = a[l]; });
    for (std::size_t e = 0; e < elems.size(); ++e) {
      if (elems[e].kind != operand::k_reg) continue;
      std::uint64_t* d = w.regs.data() + std::size_t{elems[e].reg} * kLanes;
      const unsigned shift = static_cast<unsigned>(e) * eb;
      for_mask(mask, [&](unsigned l) { d[l] = (v[l] >> shift) & em; });
    }
  } else if (in.ops[1].kind == operand::k_vec) {  // pack: mov.b32 %r, {lo, hi}
    const auto& elems = in.ops[1].elems;
    const unsigned eb = bits / static_cast<unsigned>(elems.size());
    const std::uint64_t em = width_mask(eb);
    std::uint64_t v[kLanes] = {};
    for (std::size_t e = 0; e < elems.size(); ++e) {
      const lanes_in a(w.regs, elems[e]);
      const unsigned shift = static_cast<unsigned>(e) * eb;
      for_mask(mask, [&](unsigned l) { v[l] |= (a[l] & em) << shift; });
    }
    std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
    const std::uint64_t wm = io.wm;
    for_mask(mask, [&](unsigned l) { d[l] = v[l] & wm; });
  } else if (t == vtype::pred) {
    for_lanes(mask, [&](unsigned l) { io.wr(l, io.pred(1, l) ? 1 : 0); });
  } else {
    std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
    const lanes_in a(w.regs, in.ops[1]);
    const std::uint64_t wm = io.wm;
    for_mask(mask, [&](unsigned l) { d[l] = a[l] & wm; });
  }
}

namespace {
// add, sub, mul, div and fma/mad .f32 over the lanes of `mask`, specialised by opcode and
// modifiers (the lane loop of the executor's most frequent instructions).
template <op Code, bool Ftz, bool Sat>
void f32_lanes(std::uint64_t* d, const lanes_in& a, const lanes_in& b, const std::uint64_t* c, std::uint32_t mask) {
  for_mask(mask, [&](unsigned l) {
    const float x = f32_in(a[l], Ftz), y = f32_in(b[l], Ftz);
    float r = 0;
    if constexpr (Code == op::fma) r = std::fma(x, y, f32_in(c[l], Ftz));
    else if constexpr (Code == op::add) r = x + y;
    else if constexpr (Code == op::sub) r = x - y;
    else if constexpr (Code == op::mul) r = x * y;
    else r = x / y;  // div.rn exact; div.approx/.full: within their bounds
    d[l] = f32_out(r, Ftz, Sat);
  });
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// add, sub, mul and fma.rn .f32 over a whole warp with AVX2 and the processor's fused
// multiply-add (the same correctly rounded results; std::fma without -mfma is a library call
// per lane, a tenth of a checked launch), used where the processor has them.
template <op Code>
__attribute__((target("avx2,fma"))) void f32_warp_hw(std::uint64_t* d, const std::uint64_t* a, const std::uint64_t* b,
                                                       const std::uint64_t* c) {
  for (unsigned l = 0; l < kLanes; l += 8) {
    const __m256 x = _mm256_castsi256_ps(low32x8(a + l)), y = _mm256_castsi256_ps(low32x8(b + l));
    __m256 r;
    if constexpr (Code == op::fma) r = _mm256_fmadd_ps(x, y, _mm256_castsi256_ps(low32x8(c + l)));
    else if constexpr (Code == op::add) r = _mm256_add_ps(x, y);
    else if constexpr (Code == op::sub) r = _mm256_sub_ps(x, y);
    else r = _mm256_mul_ps(x, y);
    store32x8(d + l, canonical_f32x8(r));
  }
}
#else
template <op Code>
void f32_warp_hw(std::uint64_t*, const std::uint64_t*, const std::uint64_t*, const std::uint64_t*) {}
#endif

template <op Code>
void f32_lanes(bool ftz, bool sat, std::uint64_t* d, const lanes_in& a, const lanes_in& b, const std::uint64_t* c,
               std::uint32_t mask) {
  if (ftz) {
    sat ? f32_lanes<Code, true, true>(d, a, b, c, mask) : f32_lanes<Code, true, false>(d, a, b, c, mask);
  } else {
    sat ? f32_lanes<Code, false, true>(d, a, b, c, mask) : f32_lanes<Code, false, false>(d, a, b, c, mask);
  }
}
}  // namespace

// The decoded forms (ptx.hpp, decoded): each one exactly a path of its opcode's handler over a
// whole warp (exec_arith's f32_warp_hw, add/sub without .sat and mul/mad .lo and mul.wide,
// exec_mov's copy and unpack, exec_cvt's convert_lanes, exec_minmax's f32, exec_ex2,
// exec_logic, exec_shift, exec_setp's setp_lanes, exec_selp, warp_sync's whole warp for shfl),
// so that path's conditions are the form's. The f32 add/sub/mul/fma forms and cvt.f32.f16 need
// the processor's AVX2 (their handlers' paths do too).
std::vector<decoded> decode_forms(const std::vector<instr>& code) {
  std::vector<decoded> out(code.size());
  const bool hw = cpu_has_avx2();
  for (std::size_t i = 0; i < code.size(); ++i) {
    const instr& in = code[i];
    decoded& dc = out[i];
    dc.code = in.code;
    dc.guard = in.guard;
    dc.guard_negate = in.guard_negate;
    const auto& ops = in.ops;
    const auto reg = [](const operand& o) { return o.kind == operand::k_reg; };
    const auto value = [](const operand& o) { return o.kind == operand::k_reg || o.kind == operand::k_imm; };
    // Source k (1, 2 or 3): a register, or the one immediate.
    const auto source = [&](unsigned k, const operand& o) {
      if (reg(o)) {
        *(k == 1 ? &dc.a : k == 2 ? &dc.b : &dc.c) = o.reg;
        return true;
      }
      if (o.kind != operand::k_imm || dc.imm_op != 0) return false;
      dc.imm_op = static_cast<std::uint8_t>(k);
      dc.imm = o.imm;
      return true;
    };
    // A register destination, then sources 1 .. n.
    const auto sources = [&](std::size_t n) {
      if (ops.size() != n + 1 || !reg(ops[0])) return false;
      for (std::size_t k = 1; k <= n; ++k) {
        if (!source(static_cast<unsigned>(k), ops[k])) return false;
      }
      dc.d = ops[0].reg;
      return true;
    };
    decoded::form_t form = decoded::none;
    switch (in.code) {
      case op::fma:
      case op::add:
      case op::sub:
      case op::mul:
      case op::mad:
        if (in.type == vtype::f32) {
          if (in.code == op::mad) break;
          if (!hw || in.ftz || in.sat || (in.round != rounding::none && in.round != rounding::rn)) break;
          if (!sources(in.code == op::fma ? 3 : 2)) break;
          form = in.code == op::fma   ? decoded::f32_fma
                 : in.code == op::add ? decoded::f32_add
                 : in.code == op::sub ? decoded::f32_sub
                                      : decoded::f32_mul;
        } else if ((in.code == op::add || in.code == op::sub) && in.type != vtype::f64 &&
                   half_form_of(in.type).elems == 0 && is_int(in.type) && !in.sat && sources(2)) {
          form = in.code == op::add ? decoded::int_add : decoded::int_sub;
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
        } else if ((in.code == op::mul || in.code == op::mad) && is_int(in.type) && half_form_of(in.type).elems == 0 &&
                   !in.sat && !in.hi && type_bits(in.type) >= 8 && (!in.wide || (in.code == op::mul && type_bits(in.type) == 32)) &&
                   sources(in.code == op::mad ? 3 : 2)) {
          // arith_int's mul/mad .lo (the product's low bits, whatever the signedness) and mul.wide of 32 bits
          form = in.code == op::mad ? decoded::int_mad : decoded::int_mul;
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
          dc.sub = !in.wide ? 0 : is_signed(in.type) ? 2 : 1;
        }
        break;
      case op::and_:
      case op::or_:
      case op::xor_:  // exec_logic on values (not predicates)
        if (in.type != vtype::pred && sources(2)) {
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
          dc.sub = in.code == op::and_ ? 0 : in.code == op::or_ ? 1 : 2;
          form = decoded::logic;
        }
        break;
      case op::min:
      case op::max:
        if (in.type == vtype::f32 && sources(2)) {
          dc.sub = static_cast<std::uint8_t>((in.code == op::max ? 1 : 0) | (in.ftz ? 2 : 0));
          form = decoded::f32_minmax;
        }
        break;
      case op::ex2:
        if (in.type == vtype::f32 && in.approx && sources(1)) {
          dc.sub = in.ftz ? 1 : 0;
          form = decoded::f32_ex2;
        }
        break;
      case op::shl:
      case op::shr:
        if (type_bits(in.type) >= 8 && sources(2)) {
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
          dc.sub = in.code == op::shl ? 0 : is_signed(in.type) ? 2 : 1;
          form = decoded::shift;
        }
        break;
      case op::setp: {  // d|q, a, b: exec_setp's setp_lanes forms
        const bool pair = !ops.empty() && ops[0].kind == operand::k_vec;
        if (ops.size() != 3 || (pair && ops[0].elems.empty())) break;
        const operand& d = pair ? ops[0].elems[0] : ops[0];
        const bool ordered = static_cast<unsigned>(in.compare) <= static_cast<unsigned>(cmp::ge);
        const bool int32 = ordered && (in.type == vtype::s32 || in.type == vtype::u32 || in.type == vtype::b32);
        if (!reg(d) || !(int32 || (in.type == vtype::f32 && !in.ftz)) || !source(1, ops[1]) || !source(2, ops[2])) break;
        dc.d = d.reg;
        dc.c = pair && ops[0].elems.size() > 1 && reg(ops[0].elems[1]) ? ops[0].elems[1].reg : decoded::kNoSlot;
        dc.bits = in.type == vtype::s32 ? 0 : in.type == vtype::f32 ? 2 : 1;
        dc.sub = static_cast<std::uint8_t>(in.compare);
        form = decoded::setp;
        break;
      }
      case op::selp:  // d, a, b, p: exec_selp
        if (ops.size() == 4 && reg(ops[0]) && reg(ops[3]) && source(1, ops[1]) && source(2, ops[2])) {
          dc.d = ops[0].reg;
          dc.c = ops[3].reg;
          dc.sub = ops[3].negate ? 1 : 0;
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
          form = decoded::selp;
        }
        break;
      case op::mov:
        if (ops.size() != 2 || !value(ops[1])) break;
        if (ops[0].kind == operand::k_vec) {
          const unsigned bits = type_bits(in.type);
          if (ops[0].elems.size() != 2 || bits < 2) break;
          const auto element = [&](const operand& e) { return reg(e) ? e.reg : decoded::kNoSlot; };
          dc.d = element(ops[0].elems[0]);
          dc.b = element(ops[0].elems[1]);
          if (reg(ops[1])) dc.a = ops[1].reg;
          else dc.imm_op = 1, dc.imm = ops[1].imm;
          dc.bits = static_cast<std::uint8_t>(bits / 2);
          form = decoded::unpack2;
        } else if (in.type != vtype::pred && sources(1)) {
          dc.bits = static_cast<std::uint8_t>(type_bits(in.type));
          form = decoded::mov;
        }
        break;
      case op::shfl:  // d|p, a, b, c, membermask, all registers (as nvcc writes them)
        if (ops.size() == 5 && reg(ops[1]) && reg(ops[2]) && reg(ops[3]) && reg(ops[4])) {
          const bool pair = ops[0].kind == operand::k_vec;
          if (pair && ops[0].elems.empty()) break;
          const operand& d = pair ? ops[0].elems[0] : ops[0];
          if (!reg(d)) break;
          const std::uint32_t p = pair && ops[0].elems.size() > 1 && reg(ops[0].elems[1]) ? ops[0].elems[1].reg : decoded::kNoSlot;
          dc.d = d.reg;
          dc.a = ops[1].reg;
          dc.b = ops[2].reg;
          dc.c = ops[3].reg;
          dc.imm = p | std::uint64_t{ops[4].reg} << 32;
          dc.bits = static_cast<std::uint8_t>(in.mode);
          form = decoded::shfl;
        }
        break;
      case op::cvt:
        if (hw && in.type == vtype::f32 && in.type2 == vtype::f16 && in.round == rounding::none && !in.ftz &&
            !in.sat && sources(1)) {
          form = decoded::cvt_f32_f16;
        } else if ((in.type == vtype::s64 || in.type == vtype::u64) && (in.type2 == vtype::s32 || in.type2 == vtype::u32) &&
                   !in.ftz && !in.sat && sources(1)) {  // exec_cvt's convert_lanes: an index widened to 64 bits
          dc.sub = in.type2 == vtype::s32 ? 1 : 0;
          form = decoded::cvt_widen32;
        }
        break;
      default: break;
    }
    if (form == decoded::none) {  // the handler reads the instruction itself
      dc.imm_op = 0;
      dc.imm = 0;
    }
    dc.form = form;
  }
  return out;
}

namespace {
// A decoded instruction's source k: its register's lanes, or its immediate broadcast (as lanes_in).
class decoded_sources {
 public:
  decoded_sources(const decoded& dc, const std::uint64_t* regs) : dc_(dc), regs_(regs) {}
  const std::uint64_t* operator()(unsigned k, std::uint32_t slot) {
    if (dc_.imm_op != k) return regs_ + std::size_t{slot} * kLanes;
    std::fill(imm_, imm_ + kLanes, dc_.imm);
    return imm_;
  }

 private:
  const decoded& dc_;
  const std::uint64_t* regs_;
  std::uint64_t imm_[kLanes];
};
}  // namespace

// The decoded forms of the less frequent instructions, apart from exec_decoded (whose frame and
// code stay those of the frequent ones).
[[gnu::noinline]] void executor::exec_decoded_more(warp& w, const decoded& dc) {
  std::uint64_t* r = w.regs.data();
  decoded_sources src(dc, r);
  std::uint64_t* d = r + std::size_t{dc.d} * kLanes;
  switch (dc.form) {
    case decoded::int_mul:
    case decoded::int_mad: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      if (dc.sub == 2) {
        for (unsigned l = 0; l < kLanes; ++l) {
          d[l] = static_cast<std::uint64_t>(sext(a[l], 32) * sext(b[l], 32));  // exact in 64 bits
        }
        return;
      }
      if (dc.sub == 1) {
        for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] & 0xffffffffu) * (b[l] & 0xffffffffu);
        return;
      }
      const std::uint64_t wm = width_mask(dc.bits);
      if (dc.form == decoded::int_mul) {
        for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] * b[l]) & wm;
      } else {
        const std::uint64_t* c = src(3, dc.c);
        for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] * b[l] + c[l]) & wm;
      }
      return;
    }
    case decoded::logic: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      const std::uint64_t wm = width_mask(dc.bits);
      if (dc.sub == 0) for (unsigned l = 0; l < kLanes; ++l) d[l] = a[l] & b[l] & wm;
      else if (dc.sub == 1) for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] | b[l]) & wm;
      else for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] ^ b[l]) & wm;
      return;
    }
    case decoded::cvt_widen32: {
      const std::uint64_t* a = src(1, dc.a);
      if (dc.sub != 0) for (unsigned l = 0; l < kLanes; ++l) d[l] = static_cast<std::uint64_t>(sext(a[l], 32));
      else for (unsigned l = 0; l < kLanes; ++l) d[l] = a[l] & 0xffffffffu;
      return;
    }
    case decoded::f32_minmax: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      const bool is_max = (dc.sub & 1) != 0, ftz = (dc.sub & 2) != 0;
      for (unsigned l = 0; l < kLanes; ++l) d[l] = f32_minmax(as_f32(a[l]), as_f32(b[l]), is_max, ftz) & 0xffffffffu;
      return;
    }
    case decoded::f32_ex2: {
      const std::uint64_t* a = src(1, dc.a);
      const bool ftz = dc.sub != 0;
      for (unsigned l = 0; l < kLanes; ++l) d[l] = ex2_f32(as_f32(a[l]), ftz) & 0xffffffffu;
      return;
    }
    case decoded::shift: {  // exec_shift: amounts unsigned, clamped at the width
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      const unsigned bits = dc.bits;
      const std::uint64_t wm = width_mask(bits);
      if (dc.sub == 0) {
        for (unsigned l = 0; l < kLanes; ++l) {
          const std::uint64_t n = b[l] & 0xffffffffu;
          d[l] = (n >= bits ? 0 : (a[l] & wm) << n) & wm;
        }
      } else if (dc.sub == 2) {
        for (unsigned l = 0; l < kLanes; ++l) {
          const std::uint64_t n = b[l] & 0xffffffffu;
          d[l] = static_cast<std::uint64_t>(sext(a[l] & wm, bits) >> (n >= bits ? bits - 1 : n)) & wm;
        }
      } else {
        for (unsigned l = 0; l < kLanes; ++l) {
          const std::uint64_t n = b[l] & 0xffffffffu;
          d[l] = (n >= bits ? 0 : (a[l] & wm) >> n) & wm;
        }
      }
      return;
    }
    case decoded::setp: {  // exec_setp's setp_lanes
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      std::uint64_t* q = dc.c == decoded::kNoSlot ? nullptr : r + std::size_t{dc.c} * kLanes;
      const auto c = static_cast<cmp>(dc.sub);
      bool res[kLanes];
      if (dc.bits == 2) {
        for (unsigned l = 0; l < kLanes; ++l) res[l] = float_compare(as_f32(a[l]), as_f32(b[l]), c);
      } else if (dc.bits == 0) {
        for (unsigned l = 0; l < kLanes; ++l) {
          res[l] = int_compare(static_cast<std::int32_t>(a[l]), static_cast<std::int32_t>(b[l]), c);
        }
      } else {
        for (unsigned l = 0; l < kLanes; ++l) {
          res[l] = int_compare(static_cast<std::uint32_t>(a[l]), static_cast<std::uint32_t>(b[l]), c);
        }
      }
      for (unsigned l = 0; l < kLanes; ++l) d[l] = res[l] ? 1 : 0;
      if (q) {
        for (unsigned l = 0; l < kLanes; ++l) q[l] = res[l] ? 0 : 1;
      }
      return;
    }
    case decoded::selp: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      const std::uint64_t* p = r + std::size_t{dc.c} * kLanes;
      const bool negate = dc.sub != 0;
      const std::uint64_t wm = width_mask(dc.bits);
      for (unsigned l = 0; l < kLanes; ++l) d[l] = (((p[l] & 1) != 0) != negate ? a[l] : b[l]) & wm;
      return;
    }
    default: return;
  }
}

void executor::exec_decoded(warp& w, const decoded& dc) {
  std::uint64_t* r = w.regs.data();
  decoded_sources src(dc, r);
  std::uint64_t* d = r + std::size_t{dc.form == decoded::unpack2 ? 0 : dc.d} * kLanes;  // (unpack2: its elements')
  switch (dc.form) {
    case decoded::f32_fma: return f32_warp_hw<op::fma>(d, src(1, dc.a), src(2, dc.b), src(3, dc.c));
    case decoded::f32_add: return f32_warp_hw<op::add>(d, src(1, dc.a), src(2, dc.b), nullptr);
    case decoded::f32_sub: return f32_warp_hw<op::sub>(d, src(1, dc.a), src(2, dc.b), nullptr);
    case decoded::f32_mul: return f32_warp_hw<op::mul>(d, src(1, dc.a), src(2, dc.b), nullptr);
    case decoded::int_add:
    case decoded::int_sub: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t* b = src(2, dc.b);
      const std::uint64_t wm = width_mask(dc.bits);
      if (dc.form == decoded::int_add) for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] + b[l]) & wm;
      else for (unsigned l = 0; l < kLanes; ++l) d[l] = (a[l] - b[l]) & wm;
      return;
    }
    case decoded::mov: {
      const std::uint64_t* a = src(1, dc.a);
      const std::uint64_t wm = width_mask(dc.bits);
      for (unsigned l = 0; l < kLanes; ++l) d[l] = a[l] & wm;
      return;
    }
    case decoded::unpack2: {
      const std::uint64_t* a = src(1, dc.a);
      std::uint64_t v[kLanes];  // the source first: an element may be the source register
      std::copy(a, a + kLanes, v);
      const std::uint64_t em = width_mask(dc.bits);
      if (dc.d != decoded::kNoSlot) {
        std::uint64_t* e = r + std::size_t{dc.d} * kLanes;
        for (unsigned l = 0; l < kLanes; ++l) e[l] = v[l] & em;
      }
      if (dc.b != decoded::kNoSlot) {
        std::uint64_t* e = r + std::size_t{dc.b} * kLanes;
        for (unsigned l = 0; l < kLanes; ++l) e[l] = (v[l] >> dc.bits) & em;
      }
      return;
    }
    case decoded::cvt_f32_f16: return f32_from_f16_warp_hw(d, src(1, dc.a));
    case decoded::shfl:  // the scheduler's (executor::step, shfl_decoded)
    case decoded::none: return;
    default: return exec_decoded_more(w, dc);
  }
}

// add, sub, mul, div (and fma for f32) with a directed rounding (.rz, .rm, .rp; interval
// arithmetic): the result rounded to nearest and the exact sign of the error it makes, then
// round_directed (numeric.hpp). f32 works in double: a product (48 bits) is exact, a sum is
// exact as TwoSum's pair, a quotient's error has the sign of its remainder (exact by fma). f64
// works likewise, its products and remainders exact in __float128 (113 bits, and an exponent
// range no double product leaves); fma.f64 with a directed rounding is not implemented.
namespace {
float f32_directed(op code, float a, float b, float c, bool down, bool up) {
  const double x = a, y = b;
  double hi = 0;
  int lo = 0;  // the sign of the exact result less hi
  switch (code) {
    case op::add: hi = x + y; lo = two_sum_error_sign(x, y, hi); break;
    case op::sub: hi = x - y; lo = two_sum_error_sign(x, -y, hi); break;
    case op::mul: hi = x * y; break;  // exact
    case op::div:
      hi = x / y;
      if (std::isfinite(hi) && y != 0) lo = sign_of(std::fma(-hi, y, x)) * sign_of(y);
      break;
    default: {  // fma: the product exact, then a sum
      const double p = x * y;
      hi = p + static_cast<double>(c);
      lo = two_sum_error_sign(p, c, hi);
      break;
    }
  }
  const float r = static_cast<float>(hi);
  const double d = hi - static_cast<double>(r);  // exact: hi and r lie within one float step
  return round_directed(r, std::isnan(d) ? 0 : (d != 0 ? sign_of(d) : lo), down, up);
}
double f64_directed(op code, double a, double b, bool down, bool up) {
  using quad = __float128;
  double r = 0;
  int sign = 0;
  switch (code) {
    case op::add: r = a + b; sign = two_sum_error_sign(a, b, r); break;
    case op::sub: r = a - b; sign = two_sum_error_sign(a, -b, r); break;
    case op::mul: {
      r = a * b;
      if (std::isfinite(a) && std::isfinite(b)) {
        const quad q = static_cast<quad>(a) * static_cast<quad>(b);  // exact
        sign = std::isinf(r) ? -sign_of(r) : (q > static_cast<quad>(r)) - (q < static_cast<quad>(r));
      }
      break;
    }
    default: {  // div: x - r has the sign of the remainder a - r b (exact in quad), times b's
      r = a / b;
      if (std::isfinite(a) && std::isfinite(b) && b != 0) {
        if (std::isinf(r)) {
          sign = -sign_of(r);
        } else {
          const quad rem = static_cast<quad>(a) - static_cast<quad>(r) * static_cast<quad>(b);
          sign = ((rem > 0) - (rem < 0)) * sign_of(b);
        }
      }
      break;
    }
  }
  return round_directed(r, sign, down, up);
}
}  // namespace

void executor::arith_f32(const lane_io& io) {
  const instr& in = io.in;
  const std::uint32_t mask = io.mask;
  const bool f_rn_only = in.round == rounding::none || in.round == rounding::rn;
  const bool ftz = in.ftz, sat = in.sat;
  if (in.round == rounding::rz || in.round == rounding::rm || in.round == rounding::rp) {
    if (in.code == op::mad) io.no("mad.f32 with a directed rounding");
    const bool down = in.round == rounding::rm, up = in.round == rounding::rp;
    for_lanes(mask, [&](unsigned l) {
      const float c = in.code == op::fma ? f32_in(io.rd(3, l), ftz) : 0.0f;
      io.wr(l, f32_out(f32_directed(in.code, f32_in(io.rd(1, l), ftz), f32_in(io.rd(2, l), ftz), c, down, up), ftz, sat));
    });
    return;
  }
  if (!f_rn_only) io.no("rounding mode other than .rn");
  const bool three = in.code == op::fma || in.code == op::mad;
  if (in.code == op::mad && in.round != rounding::rn) io.no("mad.f32 without .rn");
  if (in.code == op::div && in.round == rounding::none && !in.approx) io.no("div.f32 without .rn/.approx/.full");
  std::uint64_t* d = io.w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
  const lanes_in a(io.w.regs, in.ops[1]), b(io.w.regs, in.ops[2]);
  if (three) {
    const lanes_in c(io.w.regs, in.ops[3]);
    if (mask == 0xffffffffu && !ftz && !sat && cpu_has_avx2()) return f32_warp_hw<op::fma>(d, a.p, b.p, c.p);
    return f32_lanes<op::fma>(ftz, sat, d, a, b, c.p, mask);
  }
  if (mask == 0xffffffffu && !ftz && !sat && cpu_has_avx2()) {
    switch (in.code) {
      case op::add: return f32_warp_hw<op::add>(d, a.p, b.p, nullptr);
      case op::sub: return f32_warp_hw<op::sub>(d, a.p, b.p, nullptr);
      case op::mul: return f32_warp_hw<op::mul>(d, a.p, b.p, nullptr);
      default: break;
    }
  }
  switch (in.code) {
    case op::add: return f32_lanes<op::add>(ftz, sat, d, a, b, nullptr, mask);
    case op::sub: return f32_lanes<op::sub>(ftz, sat, d, a, b, nullptr, mask);
    case op::mul: return f32_lanes<op::mul>(ftz, sat, d, a, b, nullptr, mask);
    default: return f32_lanes<op::div>(ftz, sat, d, a, b, nullptr, mask);
  }
}

void executor::arith_f64(const lane_io& io) {
  const instr& in = io.in;
  const std::uint32_t mask = io.mask;
  const bool f_rn_only = in.round == rounding::none || in.round == rounding::rn;
  if (in.ftz || in.sat) io.no("f64 modifier");
  if (!f_rn_only) {
    if (in.round != rounding::rz && in.round != rounding::rm && in.round != rounding::rp) io.no("f64 modifier");
    if (in.code == op::fma || in.code == op::mad) io.no("fma.f64 with a directed rounding");
    const bool down = in.round == rounding::rm, up = in.round == rounding::rp;
    for_lanes(mask, [&](unsigned l) {
      io.wr(l, f64_out(f64_directed(in.code, as_f64(io.rd(1, l)), as_f64(io.rd(2, l)), down, up)));
    });
    return;
  }
  for_lanes(mask, [&](unsigned l) {
    const double a = as_f64(io.rd(1, l)), b = as_f64(io.rd(2, l));
    double r = 0;
    switch (in.code) {
      case op::add: r = a + b; break;
      case op::sub: r = a - b; break;
      case op::mul: r = a * b; break;
      case op::div: r = a / b; break;
      default: r = std::fma(a, b, as_f64(io.rd(3, l))); break;
    }
    io.wr(l, f64_out(r));
  });
  return;
}

// add, sub, mul, fma on f16, bf16 and their pairs (f16x2, bf16x2: two elements, the first in
// the low 16 bits), element by element: round to nearest even (numeric.hpp); .ftz (f16 only)
// flushes subnormal inputs and results to zeros of their sign, .sat clamps to [0, 1]; a NaN
// result is the canonical NaN. Other roundings, .relu and div have no 16-bit form here.
void executor::arith_f16(const lane_io& io) {
  const instr& in = io.in;
  const half_form h = half_form_of(in.type);
  if (in.round != rounding::none && in.round != rounding::rn) io.no("rounding mode other than .rn");
  if (in.code == op::div || in.code == op::mad) io.no("div/mad on 16-bit floats (PTX has neither)");
  if (h.bf && (in.ftz || in.sat)) io.no(".ftz/.sat on bf16 (PTX has neither)");
  const bool ftz = in.ftz, sat = in.sat;
  for_lanes(io.mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l), b = io.rd(2, l), c = in.code == op::fma ? io.rd(3, l) : 0;
    std::uint64_t r = 0;
    for (unsigned e = 0; e < h.elems; ++e) {
      const unsigned sh = 16 * e;
      const float x = h.widen(a >> sh, ftz), y = h.widen(b >> sh, ftz);
      float v = 0;
      switch (in.code) {
        case op::add: v = x + y; break;
        case op::sub: v = x - y; break;
        case op::mul: v = x * y; break;
        default: v = round_to_odd_f32(x, y, h.widen(c >> sh, ftz)); break;
      }
      if (sat && !std::isnan(v)) v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v + 0.0f);  // -0 clamps to +0
      r |= std::uint64_t{sat && std::isnan(v) ? std::uint16_t{0} : h.narrow(v, ftz)} << sh;
    }
    io.wr(l, r);
  });
}

void executor::arith_int(const lane_io& io) {
  const instr& in = io.in;
  const std::uint32_t mask = io.mask;
  const unsigned bits = io.bits;
  const std::uint64_t wm = io.wm;
  const bool sgn = io.sgn;
  if (in.code == op::div) {
    for_lanes(mask, [&](unsigned l) {
      const std::uint64_t a = io.rd(1, l) & wm, b = io.rd(2, l) & wm;
      if (b == 0) io.fail(l, "integer division by zero (undefined in PTX)");
      if (sgn) {
        const std::int64_t x = sext(a, bits), y = sext(b, bits);
        io.wr(l, (y == -1) ? static_cast<std::uint64_t>(-static_cast<std::uint64_t>(x))
                        : static_cast<std::uint64_t>(x / y));
      } else {
        io.wr(l, a / b);
      }
    });
    return;
  }
  if (in.code == op::add || in.code == op::sub) {
    if (in.sat && in.type != vtype::s32) io.no(".sat on this type");
    if (!in.sat) {
      std::uint64_t* d = io.w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
      const lanes_in a(io.w.regs, in.ops[1]), b(io.w.regs, in.ops[2]);
      if (in.code == op::add) for_mask(mask, [&](unsigned l) { d[l] = (a[l] + b[l]) & wm; });
      else for_mask(mask, [&](unsigned l) { d[l] = (a[l] - b[l]) & wm; });
      return;
    }
    for_lanes(mask, [&](unsigned l) {
      const std::int64_t r = in.code == op::add ? io.rs(1, l) + io.rs(2, l) : io.rs(1, l) - io.rs(2, l);
      io.wr(l, static_cast<std::uint64_t>(std::clamp<std::int64_t>(r, INT32_MIN, INT32_MAX)));
    });
    return;
  }
  {
    // mul / mad: .lo (default), .hi, .wide (result twice as wide); mad adds operand c.
    if (bits > 64 || (in.wide && bits > 32)) io.no("mul.wide on 64-bit types");
    const bool is_mad = in.code == op::mad;
    for_lanes(mask, [&](unsigned l) {
      std::uint64_t r = 0;
      if (sgn) {
        const int128 p = static_cast<int128>(io.rs(1, l)) * io.rs(2, l);
        r = in.wide ? static_cast<std::uint64_t>(p) : in.hi ? static_cast<std::uint64_t>(p >> bits) : static_cast<std::uint64_t>(p);
      } else {
        const uint128 p = static_cast<uint128>(io.rd(1, l) & wm) * (io.rd(2, l) & wm);
        r = in.wide ? static_cast<std::uint64_t>(p) : in.hi ? static_cast<std::uint64_t>(p >> bits) : static_cast<std::uint64_t>(p);
      }
      if (is_mad) r += io.rd(3, l);
      executor::set(io.w, in.ops[0], l, in.wide ? r & width_mask(2 * bits) : r & wm);
    });
    return;
  }
}

// add, sub, mul, mad, fma, div (PTX ISA, "Floating-Point" and "Integer Arithmetic"): one
// handler per type family.
void executor::exec_arith(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  if (in.type == vtype::f32) return arith_f32(io);
  if (in.type == vtype::f64) return arith_f64(io);
  if (half_form_of(in.type).elems != 0) return arith_f16(io);
  if (!is_int(in.type)) io.no("arithmetic on this type");
  arith_int(io);
}

void executor::exec_rem(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  const unsigned bits = io.bits;
  const std::uint64_t wm = io.wm;
  const bool sgn = io.sgn;
  if (!is_int(t)) io.no("rem on this type");
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l) & wm, b = io.rd(2, l) & wm;
    if (b == 0) fail_at(pc, w.index * kLanes + l, "integer remainder by zero (undefined in PTX)");
    if (sgn) {
      const std::int64_t x = sext(a, bits), y = sext(b, bits);
      io.wr(l, y == -1 ? 0 : static_cast<std::uint64_t>(x % y));
    } else {
      io.wr(l, a % b);
    }
  });
}

void executor::exec_minmax(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  const std::uint64_t wm = io.wm;
  const bool sgn = io.sgn;
  const bool is_max = in.code == op::max;
  std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
  const lanes_in a(w.regs, in.ops[1]), b(w.regs, in.ops[2]);
  if (t == vtype::f32) {
    const bool ftz = in.ftz;
    for_mask(mask, [&](unsigned l) { d[l] = f32_minmax(as_f32(a[l]), as_f32(b[l]), is_max, ftz) & wm; });
    return;
  }
  if (t == vtype::f64) {  // as f32's: a NaN operand ignored, -0 below +0
    if (in.ftz) io.no(".ftz on f64");
    for_mask(mask, [&](unsigned l) { d[l] = f64_out(float_minmax(as_f64(a[l]), as_f64(b[l]), is_max)); });
    return;
  }
  if (const half_form h = half_form_of(t); h.elems != 0) {
    // Element by element, as f32's rule on their exact values; the result is one of the
    // inputs (or the canonical NaN), so it needs no rounding. .NaN and .xorsign.abs: not here.
    if (h.bf && in.ftz) io.no(".ftz on bf16");
    for_mask(mask, [&](unsigned l) {
      std::uint64_t r = 0;
      for (unsigned e = 0; e < h.elems; ++e) {
        const float v = float_minmax(h.widen(a[l] >> 16 * e, in.ftz), h.widen(b[l] >> 16 * e, in.ftz), is_max);
        r |= std::uint64_t{h.narrow(v, in.ftz)} << 16 * e;
      }
      d[l] = r & wm;
    });
    return;
  }
  if (!is_int(t)) io.no("min/max on this type");
  const unsigned bits = io.bits;
  if (sgn) {
    for_mask(mask, [&](unsigned l) {
      const std::int64_t x = sext(a[l], bits), y = sext(b[l], bits);
      d[l] = static_cast<std::uint64_t>(is_max ? std::max(x, y) : std::min(x, y)) & wm;
    });
  } else {
    for_mask(mask, [&](unsigned l) {
      const std::uint64_t x = a[l] & wm, y = b[l] & wm;
      d[l] = (is_max ? std::max(x, y) : std::min(x, y)) & wm;
    });
  }
}

void executor::exec_negabs(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  const std::uint64_t wm = io.wm;
  const bool is_neg = in.code == op::neg;
  if (t == vtype::f32 || t == vtype::f64) {  // sign-bit operations (NaN inputs keep a NaN)
    const std::uint64_t sign = t == vtype::f32 ? 0x80000000ull : 0x8000000000000000ull;
    for_lanes(mask, [&](unsigned l) {
      std::uint64_t v = io.rd(1, l) & wm;
      if (in.ftz && t == vtype::f32) v = std::bit_cast<std::uint32_t>(flush(as_f32(v)));
      io.wr(l, is_neg ? v ^ sign : v & ~sign);
    });
    return;
  }
  if (const half_form h = half_form_of(t); h.elems != 0) {  // each element's sign bit
    if (in.ftz && h.bf) io.no(".ftz on bf16");
    for_lanes(mask, [&](unsigned l) {
      std::uint64_t r = 0;
      for (unsigned e = 0; e < h.elems; ++e) {
        std::uint64_t x = io.rd(1, l) >> 16 * e & 0xffff;
        if (in.ftz && (x & 0x7c00u) == 0) x &= 0x8000u;  // an f16 subnormal flushed
        r |= (is_neg ? x ^ 0x8000u : x & 0x7fffu) << 16 * e;
      }
      io.wr(l, r);
    });
    return;
  }
  if (!is_int(t)) io.no("neg/abs on this type");
  for_lanes(mask, [&](unsigned l) {
    const std::int64_t a = io.rs(1, l);
    io.wr(l, static_cast<std::uint64_t>(is_neg ? -static_cast<std::uint64_t>(a) : (a < 0 ? -static_cast<std::uint64_t>(a) : a)));
  });
}

void executor::exec_logic(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  if (t == vtype::pred) {
    for_lanes(mask, [&](unsigned l) {
      const bool a = io.pred(1, l);
      bool r = !a;
      if (in.code != op::not_) {
        const bool b = io.pred(2, l);
        r = in.code == op::and_ ? (a && b) : in.code == op::or_ ? (a || b) : (a != b);
      }
      io.wr(l, r ? 1 : 0);
    });
    return;
  }
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l);
    std::uint64_t r = ~a;
    if (in.code != op::not_) {
      const std::uint64_t b = io.rd(2, l);
      r = in.code == op::and_ ? (a & b) : in.code == op::or_ ? (a | b) : (a ^ b);
    }
    io.wr(l, r);
  });
}

void executor::exec_shift(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const unsigned bits = io.bits;
  const std::uint64_t wm = io.wm;
  const bool sgn = io.sgn;
  // Shift amounts are unsigned and clamp at the register width (PTX ISA: shl, shr).
  std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
  const lanes_in a(w.regs, in.ops[1]), b(w.regs, in.ops[2]);
  if (in.code == op::shl) {
    for_mask(mask, [&](unsigned l) {
      const std::uint64_t n = b[l] & 0xffffffffu;
      d[l] = (n >= bits ? 0 : (a[l] & wm) << n) & wm;
    });
  } else if (sgn) {
    for_mask(mask, [&](unsigned l) {
      const std::uint64_t n = b[l] & 0xffffffffu;
      d[l] = static_cast<std::uint64_t>(sext(a[l] & wm, bits) >> (n >= bits ? bits - 1 : n)) & wm;
    });
  } else {
    for_mask(mask, [&](unsigned l) {
      const std::uint64_t n = b[l] & 0xffffffffu;
      d[l] = (n >= bits ? 0 : (a[l] & wm) >> n) & wm;
    });
  }
}

namespace {
// setp on 32-bit integers and f32 (no .ftz) over the lanes of `mask`, the comparison chosen
// once per instruction (the same results as the lane-by-lane form below).
template <class T, class Convert>
void setp_lanes(warp& w, const instr& in, std::uint32_t mask, Convert conv) {
  const lanes_in a(w.regs, in.ops[1]), b(w.regs, in.ops[2]);
  const operand& d0 = in.ops[0].kind == operand::k_vec ? in.ops[0].elems[0] : in.ops[0];
  const bool has_q = in.ops[0].kind == operand::k_vec && in.ops[0].elems.size() > 1 && in.ops[0].elems[1].kind == operand::k_reg;
  std::uint64_t* d = w.regs.data() + std::size_t{d0.reg} * kLanes;
  std::uint64_t* q = has_q ? w.regs.data() + std::size_t{in.ops[0].elems[1].reg} * kLanes : nullptr;
  const auto run = [&](auto compare) {
    for_mask(mask, [&](unsigned l) {
      const bool r = compare(conv(a[l]), conv(b[l]));
      d[l] = r ? 1 : 0;
      if (q) q[l] = r ? 0 : 1;
    });
  };
  if constexpr (std::is_floating_point_v<T>) {
    run([c = in.compare](T x, T y) { return float_compare(x, y, c); });
    return;
  } else {
    switch (in.compare) {
      case cmp::eq: return run([](T x, T y) { return x == y; });
      case cmp::ne: return run([](T x, T y) { return x != y; });
      case cmp::lt: return run([](T x, T y) { return x < y; });
      case cmp::le: return run([](T x, T y) { return x <= y; });
      case cmp::gt: return run([](T x, T y) { return x > y; });
      default: return run([](T x, T y) { return x >= y; });
    }
  }
}
}  // namespace

void executor::exec_setp(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const bool ordered = static_cast<unsigned>(in.compare) <= static_cast<unsigned>(cmp::ge);
  const bool d_reg = (in.ops[0].kind == operand::k_vec ? in.ops[0].elems[0] : in.ops[0]).kind == operand::k_reg;
  if (d_reg && ordered && (in.type == vtype::s32 || in.type == vtype::u32 || in.type == vtype::b32)) {
    if (in.type == vtype::s32) return setp_lanes<std::int32_t>(w, in, mask, [](std::uint64_t v) { return static_cast<std::int32_t>(v); });
    return setp_lanes<std::uint32_t>(w, in, mask, [](std::uint64_t v) { return static_cast<std::uint32_t>(v); });
  }
  if (d_reg && in.type == vtype::f32 && !in.ftz) return setp_lanes<float>(w, in, mask, [](std::uint64_t v) { return as_f32(v); });
  const vtype t = in.type;
  const std::uint64_t wm = io.wm;
  const bool sgn = io.sgn;
  const operand& d = in.ops[0].kind == operand::k_vec ? in.ops[0].elems[0] : in.ops[0];
  const operand* q = in.ops[0].kind == operand::k_vec && in.ops[0].elems.size() > 1 ? &in.ops[0].elems[1] : nullptr;
  for_lanes(mask, [&](unsigned l) {
    bool r = false;
    if (t == vtype::f32) r = float_compare(f32_in(io.rd(1, l), in.ftz), f32_in(io.rd(2, l), in.ftz), in.compare);
    else if (t == vtype::f64) r = float_compare(as_f64(io.rd(1, l)), as_f64(io.rd(2, l)), in.compare);
    else if (sgn) r = int_compare(io.rs(1, l), io.rs(2, l), in.compare);
    else if (is_int(t)) r = int_compare(io.rd(1, l) & wm, io.rd(2, l) & wm, in.compare);
    else io.no("setp on this type");
    if (!is_float(t) && static_cast<unsigned>(in.compare) > static_cast<unsigned>(cmp::ge)) io.no("unordered compare on integers");
    set(w, d, l, r ? 1 : 0);
    if (q && q->kind == operand::k_reg) set(w, *q, l, r ? 0 : 1);
  });
}

void executor::exec_selp(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  std::uint64_t* d = w.regs.data() + std::size_t{in.ops[0].reg} * kLanes;
  const lanes_in a(w.regs, in.ops[1]), b(w.regs, in.ops[2]), p(w.regs, in.ops[3]);
  const bool negate = in.ops[3].negate;
  const std::uint64_t wm = io.wm;
  for_mask(mask, [&](unsigned l) { d[l] = (((p[l] & 1) != 0) != negate ? a[l] : b[l]) & wm; });
}

void executor::exec_ex2(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  if (in.type != vtype::f32 || !in.approx) io.no("ex2 form");
  for_lanes(mask, [&](unsigned l) { io.wr(l, ex2_f32(as_f32(io.rd(1, l)), in.ftz)); });
}

void executor::exec_math(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const vtype t = in.type;
  if (t == vtype::f64 && (in.code == op::rcp || in.code == op::sqrt) && in.round == rounding::rn) {
    for_lanes(mask, [&](unsigned l) {
      const double x = as_f64(io.rd(1, l));
      io.wr(l, f64_out(in.code == op::rcp ? 1.0 / x : std::sqrt(x)));
    });
    return;
  }
  if (t != vtype::f32) io.no("this type");
  if ((in.code == op::rsqrt || in.code == op::sin || in.code == op::cos || in.code == op::lg2 || in.code == op::tanh) &&
      !in.approx) {
    io.no("non-approx form");
  }
  if (in.code == op::tanh && in.ftz) io.no("tanh.approx with .ftz (PTX has none)");
  if ((in.code == op::rcp || in.code == op::sqrt) && !in.approx && in.round != rounding::rn) io.no("rounding mode");
  for_lanes(mask, [&](unsigned l) {
    const float x = f32_in(io.rd(1, l), in.ftz);
    float r = 0;
    switch (in.code) {
      case op::rcp: r = 1.0f / x; break;  // .rn exact; .approx within its 1-ulp bound
      case op::sqrt: r = std::sqrt(x); break;
      case op::rsqrt: r = 1.0f / std::sqrt(x); break;
      case op::sin: r = std::sin(x); break;
      case op::lg2: r = std::log2(x); break;  // -inf at +-0, NaN below 0; libm within 1 ulp
      case op::tanh: r = std::tanh(x); break;  // +-1 at +-inf; the ISA allows 2^-10.987 relative
      default: r = std::cos(x); break;
    }
    io.wr(l, f32_out(r, in.ftz, false));
  });
}

// copysign.{f32,f64} d, a, b: b with a's sign (PTX's operand order: nvcc writes copysignf(x, y)
// as copysign d, y, x); only sign bits move, so a NaN keeps its payload.
void executor::exec_copysign(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  if (in.type != vtype::f32 && in.type != vtype::f64) io.no("this type");
  const std::uint64_t sign = in.type == vtype::f32 ? 0x80000000ull : 0x8000000000000000ull;
  for_lanes(mask, [&](unsigned l) { io.wr(l, (io.rd(2, l) & ~sign) | (io.rd(1, l) & sign)); });
}

}  // namespace rungs::sim::detail
