// Bit and byte operations (PTX ISA, "Integer Arithmetic" and "Logic and Shift": clz, popc,
// bfind, brev, bfe, bfi, prmt in every mode).
#include "alu.hpp"

#include <bit>

namespace rungs::sim::detail {

// clz, popc, bfind: a count or a bit position of a .b32/.b64 (bfind: .u/.s) value, as a u32.
// example-begin bit-count
void executor::exec_bit_count(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l) & io.wm;
    std::uint32_t r = 0;
    switch (in.code) {
      case op::clz: r = static_cast<std::uint32_t>(std::countl_zero(a) - (64 - io.bits)); break;
      case op::popc: r = static_cast<std::uint32_t>(std::popcount(a)); break;
      default: {  // bfind: the most significant bit unlike the sign (0xffffffff if none)
        const std::uint64_t v = io.sgn && io.rs(1, l) < 0 ? ~a & io.wm : a;
        const int msb = 63 - std::countl_zero(v);
        r = v == 0 ? 0xffffffffu : static_cast<std::uint32_t>(in.shiftamt ? static_cast<int>(io.bits) - 1 - msb : msb);
      }
    }
    executor::set(w, in.ops[0], l, r);
  });
}
// example-end bit-count

void executor::exec_brev(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l);
    std::uint64_t r = 0;
    for (unsigned i = 0; i < io.bits; ++i) r |= ((a >> i) & 1) << (io.bits - 1 - i);
    io.wr(l, r);
  });
}

// bfe d, a, pos, len: len bits of a from pos, zero-extended (.u) or sign-extended from the
// field's top bit (.s); bits past the register's top read as that sign bit.
void executor::exec_bfe(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l) & io.wm;
    const unsigned pos = static_cast<unsigned>(io.rd(2, l) & 0xff), len = static_cast<unsigned>(io.rd(3, l) & 0xff);
    const unsigned msb = io.bits - 1;
    const std::uint64_t sbit = io.sgn && len > 0 ? (a >> std::min(pos + len - 1, msb)) & 1 : 0;
    std::uint64_t r = 0;
    for (unsigned i = 0; i < io.bits; ++i) {
      const std::uint64_t bit = i < len && pos + i <= msb ? (a >> (pos + i)) & 1 : sbit;
      r |= bit << i;
    }
    io.wr(l, r);
  });
}

void executor::exec_bfi(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  const unsigned bits = io.bits;
  const std::uint64_t wm = io.wm;
  // bfi d, a, b, pos, len: insert a's low len bits into b at pos
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = io.rd(1, l);
    std::uint64_t f = io.rd(2, l) & wm;
    const unsigned pos = static_cast<unsigned>(io.rd(3, l) & 0xff), len = static_cast<unsigned>(io.rd(4, l) & 0xff);
    for (unsigned i = 0; i < len && pos + i < bits; ++i) {
      f = (f & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
    }
    io.wr(l, f);
  });
}

// prmt.b32{.mode} d, a, b, c (PTX ISA: prmt). Default mode: byte i of d is byte c[4i+2:4i] of
// {b, a}, replaced by its sign bit replicated when c[4i+3] is set. The other modes pick, from
// the selector s = c[1:0], byte i of d as: f4e (s+i) mod 8, b4e (s-i) mod 8, rc8 s, ecl
// max(i, s), ecr min(i, s), rc16 2(s mod 2) + i mod 2 (the ISA's table, row by row).
void executor::exec_prmt(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t bytes = (io.rd(1, l) & 0xffffffffu) | ((io.rd(2, l) & 0xffffffffu) << 32);
    const std::uint64_t c = io.rd(3, l);
    std::uint64_t d = 0;
    if (in.pmode != prmt_mode::none) {
      const unsigned sel = static_cast<unsigned>(c & 3u);
      for (unsigned i = 0; i < 4; ++i) {
        unsigned pick = 0;
        switch (in.pmode) {
          case prmt_mode::f4e: pick = (sel + i) % 8; break;
          case prmt_mode::b4e: pick = (sel + 8 - i) % 8; break;
          case prmt_mode::rc8: pick = sel; break;
          case prmt_mode::ecl: pick = std::max(i, sel); break;
          case prmt_mode::ecr: pick = std::min(i, sel); break;
          default: pick = 2 * (sel % 2) + i % 2; break;  // rc16
        }
        d |= ((bytes >> (8 * pick)) & 0xffu) << (8 * i);
      }
      io.wr(l, d);
      return;
    }
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned sel = static_cast<unsigned>(c >> (4 * i)) & 0xfu;
      std::uint64_t byte = (bytes >> (8 * (sel & 7u))) & 0xffu;
      if ((sel & 8u) != 0) byte = (byte & 0x80u) != 0 ? 0xffu : 0u;
      d |= byte << (8 * i);
    }
    io.wr(l, d);
  });
}

// lop3.b32 d, a, b, c, immLut: any function of three inputs, bit by bit; bit i of d is bit
// (a_i << 2 | b_i << 1 | c_i) of immLut (PTX ISA, "lop3": immLut = F(0xF0, 0xCC, 0xAA)).
void executor::exec_lop3(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint32_t a = static_cast<std::uint32_t>(io.rd(1, l)), b = static_cast<std::uint32_t>(io.rd(2, l));
    const std::uint32_t c = static_cast<std::uint32_t>(io.rd(3, l)), lut = static_cast<std::uint32_t>(io.rd(4, l)) & 0xffu;
    std::uint32_t r = 0;
    for (unsigned i = 0; i < 32; ++i) {
      const unsigned row = ((a >> i) & 1u) << 2 | ((b >> i) & 1u) << 1 | ((c >> i) & 1u);
      r |= ((lut >> row) & 1u) << i;
    }
    io.wr(l, r);
  });
}

// bmsk.mode.b32 d, a, b: the mask of b bits from bit a (PTX ISA, "bmsk"). .wrap takes a and b
// modulo 32; .clamp gives no bits from a >= 32 and every bit from a up for b >= 32. A width of 0
// (after wrapping) is no bits, as is a field reaching past bit 31 only in its part above it.
void executor::exec_bmsk(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const lane_io io{*this, w, in, pc, mask};
  for_lanes(mask, [&](unsigned l) {
    const std::uint32_t a = static_cast<std::uint32_t>(io.rd(1, l)), b = static_cast<std::uint32_t>(io.rd(2, l));
    const std::uint32_t a1 = a & 0x1fu, b1 = b & 0x1fu, sum = a1 + b1;
    std::uint32_t from = ~0u << a1, to = sum >= 32 ? 0u : ~0u << sum;
    if (in.clamp && a >= 32) from = 0;
    if (sum >= 32 || (in.clamp && (a >= 32 || b >= 32))) to = 0;
    else if (b1 == 0) to = ~0u;
    io.wr(l, from & ~to);
  });
}

}  // namespace rungs::sim::detail
