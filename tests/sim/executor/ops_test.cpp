// The executor's instructions against the PTX ISA's semantics, with exact expected bits
// (rounding to nearest even, .ftz, .sat, canonical NaN, saturating conversions, shift
// clamps). Each TEST_CASE's [op:...] tags name the opcode+modifier strings it covers; the
// coverage check (coverage_test.cpp) requires one for every string rungs' kernels use.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <vector>

#include "eval.hpp"

using namespace rungs_sim_test;

namespace {
constexpr std::uint32_t kNaN = 0x7fffffffu;  // the canonical f32 NaN
constexpr std::uint32_t kQNaN = 0x7fc00001u; // some other NaN as input
constexpr std::uint32_t kInf = 0x7f800000u, kNegInf = 0xff800000u;
constexpr std::uint32_t kOne = 0x3f800000u;
}  // namespace

TEST_CASE("add/sub/mul.f32 round to nearest even, keep subnormals, canonicalise NaN",
          "[op:add.f32][op:sub.f32][op:mul.f32][op:mul.rn.f32]") {
  CHECK(eval32("add.f32 %d, %a, %b", bits(1.5f), bits(2.25f)) == bits(3.75f));
  CHECK(eval32("add.f32 %d, %a, %b", kOne, 0x33800000u) == kOne);           // 1 + 2^-24: tie, to even
  CHECK(eval32("add.f32 %d, %a, %b", 0x3f800001u, 0x33800000u) == 0x3f800002u);  // tie, odd: up
  CHECK(eval32("add.f32 %d, %a, %b", 1u, 1u) == 2u);                        // subnormals kept
  CHECK(eval32("add.f32 %d, %a, %b", kQNaN, kOne) == kNaN);
  CHECK(eval32("add.f32 %d, %a, %b", kInf, kNegInf) == kNaN);
  CHECK(eval32("add.ftz.f32 %d, %a, %b", 1u, 1u) == 0u);                    // .ftz: subnormal in -> +0
  CHECK(eval32("add.ftz.f32 %d, %a, %b", 0x80000001u, 0u) == 0u);  // -0 + +0 = +0
  CHECK(eval32("add.sat.f32 %d, %a, %b", bits(0.75f), bits(0.5f)) == kOne);
  CHECK(eval32("add.sat.f32 %d, %a, %b", bits(-1.0f), bits(0.5f)) == 0u);
  CHECK(eval32("add.sat.f32 %d, %a, %b", kQNaN, kOne) == 0u);              // .sat: NaN -> +0
  CHECK(eval32("sub.f32 %d, %a, %b", kOne, kOne) == 0u);                    // x - x = +0
  CHECK(eval32("sub.f32 %d, %a, %b", bits(1.0f), bits(3.0f)) == bits(-2.0f));
  CHECK(eval32("mul.f32 %d, %a, %b", bits(3.0f), bits(0.5f)) == bits(1.5f));
  CHECK(eval32("mul.rn.f32 %d, %a, %b", bits(3.0f), bits(0.5f)) == bits(1.5f));
  CHECK(eval32("mul.f32 %d, %a, %b", 0u, kInf) == kNaN);
  CHECK(eval32("mul.rn.f32 %d, %a, %b", 0x00800000u, bits(0.5f)) == 0x00400000u);  // to subnormal, exact
}

TEST_CASE("fma.rn.f32 rounds once", "[op:fma.rn.f32]") {
  // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly; a separate multiply would lose the 2^-24.
  CHECK(eval32("fma.rn.f32 %d, %a, %b, %c", 0x3f800800u, 0x3f800800u, bits(-1.0f)) == 0x3a000400u);
  CHECK(eval32("fma.rn.f32 %d, %a, %b, %c", bits(2.0f), bits(3.0f), bits(1.0f)) == bits(7.0f));
  CHECK(eval32("fma.rn.f32 %d, %a, %b, %c", kInf, 0u, kOne) == kNaN);
  CHECK(eval32("fma.rn.ftz.f32 %d, %a, %b, %c", 1u, kOne, 0u) == 0u);
  CHECK(eval32("fma.rn.sat.f32 %d, %a, %b, %c", bits(2.0f), bits(3.0f), 0u) == kOne);
}

TEST_CASE("a whole warp gives each lane the bits one lane gets (the executor's whole-warp lane loops, AVX2 where the CPU has it)",
          "[op:fma.rn.f32][op:add.f32][op:sub.f32][op:mul.f32][op:cvt.f32.f16][op:setp.lt.s32][op:setp.lt.f32]") {
  using row = std::array<std::uint32_t, 4>;  // a, b, c, expected d
  // Each instruction over 32 lanes, the cases below repeated across them (so the lanes differ).
  const auto warp_of = [](const std::string& instruction, const std::vector<row>& cases) {
    std::vector<std::array<std::uint32_t, 3>> in;
    for (unsigned l = 0; l < 32; ++l) {
      const row& r = cases[l % cases.size()];
      in.push_back({r[0], r[1], r[2]});
    }
    const std::vector<std::uint32_t> out = eval32(instruction, in);
    for (unsigned l = 0; l < 32; ++l) {
      INFO(instruction << ", lane " << l);
      CHECK(out[l] == cases[l % cases.size()][3]);
    }
  };
  warp_of("fma.rn.f32 %d, %a, %b, %c", {{0x3f800800u, 0x3f800800u, bits(-1.0f), 0x3a000400u},  // rounded once
                                        {bits(2.0f), bits(3.0f), bits(1.0f), bits(7.0f)},
                                        {kInf, 0u, kOne, kNaN}});
  warp_of("add.f32 %d, %a, %b", {{kOne, 0x33800000u, 0, kOne}, {kQNaN, kOne, 0, kNaN}, {kInf, kNegInf, 0, kNaN},
                                 {bits(1.5f), bits(2.25f), 0, bits(3.75f)}});
  warp_of("sub.f32 %d, %a, %b", {{kOne, kOne, 0, 0u}, {kInf, kInf, 0, kNaN}, {bits(3.0f), kOne, 0, bits(2.0f)}});
  warp_of("mul.f32 %d, %a, %b", {{bits(3.0f), bits(-2.0f), 0, bits(-6.0f)}, {kInf, 0u, 0, kNaN},
                                 {0x00800000u, bits(0.5f), 0, 0x00400000u}});  // a subnormal product kept
  warp_of("{ .reg .f16 low, high; mov.b32 {low, high}, %a; cvt.f32.f16 %d, high; }",
          {{0x3c000000u, 0, 0, kOne}, {0x00010000u, 0, 0, 0x33800000u}, {0xfc000000u, 0, 0, kNegInf},
           {0xfe010000u, 0, 0, kNaN}, {0x80000000u, 0, 0, 0x80000000u}});
  warp_of("setp.lt.s32 %p, %a, %b; selp.u32 %d, 1, 0, %p", {{~0u, 0u, 0, 1u}, {0u, ~0u, 0, 0u}, {5u, 5u, 0, 0u}});
  warp_of("setp.lt.u32 %p, %a, %b; selp.u32 %d, 1, 0, %p", {{~0u, 0u, 0, 0u}, {0u, ~0u, 0, 1u}});
  warp_of("setp.lt.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p", {{kQNaN, kOne, 0, 0u}, {bits(-1.0f), kOne, 0, 1u}});
}

// The decoded forms (sim/executor/ptx.hpp, decoded) run an instruction over a whole warp without
// its handler; one lane runs through the handler. The two must give every lane the same bits.
TEST_CASE("a whole warp's decoded forms give each lane the bits its handler gives one lane",
          "[op:min.f32][op:max.f32][op:max.ftz.f32][op:ex2.approx.f32][op:ex2.approx.ftz.f32][op:shl.b32]"
          "[op:shr.s32][op:shr.u32][op:add.s32][op:sub.s32][op:mul.lo.s32][op:mad.lo.s32][op:mul.wide.s32]"
          "[op:mul.wide.u32][op:and.b32][op:or.b32][op:xor.b32][op:cvt.s64.s32][op:cvt.u64.u32][op:selp.b32]"
          "[op:setp.ge.f32][op:setp.neu.f32][op:mov.u32][op:mov.b32]") {
  const std::uint32_t values[] = {0u,          1u,          ~0u,         0x7fffffffu, 0x80000000u, 31u,
                                  32u,         33u,         7u,          0xffff0000u, kOne,        bits(-2.5f),
                                  kQNaN,       kInf,        kNegInf,     0x00000001u, bits(1.5f),  bits(100.0f),
                                  bits(-0.75f), 0x3c00bc00u, 0x12345678u, 0xdeadbeefu, 0x00800000u};
  constexpr std::size_t n = sizeof values / sizeof values[0];
  std::vector<std::array<std::uint32_t, 3>> in;
  for (std::size_t l = 0; l < 32; ++l) in.push_back({values[l % n], values[(l * 7 + 3) % n], values[(l * 11 + 5) % n]});
  const std::string wide = "  .reg .b64 %w;\n";
  for (const std::string instruction : {
           "min.f32 %d, %a, %b", "max.f32 %d, %a, %b", "max.ftz.f32 %d, %a, %b", "min.ftz.f32 %d, %a, 0f80000000",
           "ex2.approx.f32 %d, %a", "ex2.approx.ftz.f32 %d, %a", "shl.b32 %d, %a, %b", "shr.s32 %d, %a, %b",
           "shr.u32 %d, %a, %b", "shr.s32 %d, %a, 3", "add.s32 %d, %a, 7", "sub.s32 %d, %a, %b",
           "mul.lo.s32 %d, %a, %b", "mad.lo.s32 %d, %a, %b, %c", "mad.lo.u32 %d, %a, 9, %c",
           "mul.wide.s32 %w, %a, %b; shr.u64 %w, %w, 32; cvt.u32.u64 %d, %w",
           "mul.wide.u32 %w, %a, %b; shr.u64 %w, %w, 29; cvt.u32.u64 %d, %w",
           "cvt.s64.s32 %w, %a; shr.u64 %w, %w, 16; cvt.u32.u64 %d, %w",
           "cvt.u64.u32 %w, %a; shl.b64 %w, %w, 3; shr.u64 %w, %w, 2; cvt.u32.u64 %d, %w", "and.b32 %d, %a, %b",
           "or.b32 %d, %a, 0xff00", "xor.b32 %d, %a, %b", "mov.u32 %d, 12345", "mov.b32 %d, %b",
           "setp.gt.u32 %p, %a, %b; selp.b32 %d, %a, %c, !%p", "setp.ge.f32 %p|%q, %a, %b; selp.u32 %d, 1, 0, %q",
           "setp.neu.f32 %p, %a, %b; selp.u32 %d, 1, 0, %p", "setp.le.s32 %p, %a, 0; selp.b32 %d, %b, 5, %p"}) {
    const std::vector<std::uint32_t> warp = eval32(instruction, in, wide);  // a whole warp: decoded
    for (unsigned l = 0; l < 32; ++l) {
      INFO(instruction << ", lane " << l << ": a 0x" << std::hex << in[l][0] << ", b 0x" << in[l][1] << ", c 0x" << in[l][2]);
      CHECK(warp[l] == eval32(instruction, {in[l]}, wide)[0]);  // one lane: the handlers
    }
  }
}

TEST_CASE("div/rcp.rn.f32 are IEEE-exact; rcp of zeros is a signed infinity", "[op:div.rn.f32][op:rcp.rn.f32]") {
  CHECK(eval32("div.rn.f32 %d, %a, %b", kOne, bits(3.0f)) == 0x3eaaaaabu);
  CHECK(eval32("div.rn.f32 %d, %a, %b", 0u, 0u) == kNaN);
  CHECK(eval32("rcp.rn.f32 %d, %a", bits(3.0f)) == 0x3eaaaaabu);
  CHECK(eval32("rcp.rn.f32 %d, %a", 0u) == kInf);
  CHECK(eval32("rcp.rn.f32 %d, %a", 0x80000000u) == kNegInf);
  CHECK(eval32("rcp.rn.f32 %d, %a", 1u) == kInf);  // 1 / 2^-149 overflows
  CHECK(eval32("rcp.rn.f32 %d, %a", kQNaN) == kNaN);
}

TEST_CASE("ex2.approx: exact special values, .ftz flushes input and result, ISA error bound",
          "[op:ex2.approx.ftz.f32][op:ex2.approx.f32]") {
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", 0u) == kOne);
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", kNegInf) == 0u);
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", kInf) == kInf);
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", kQNaN) == kNaN);
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", bits(3.0f)) == bits(8.0f));
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", 0x80000001u) == kOne);          // -subnormal -> -0 -> 1
  CHECK(eval32("ex2.approx.ftz.f32 %d, %a", bits(-130.0f)) == 0u);          // 2^-130 flushed
  CHECK(eval32("ex2.approx.f32 %d, %a", bits(-130.0f)) == 0x00080000u);     // 2^-130 kept
  CHECK(eval32("ex2.approx.f32 %d, %a", bits(200.0f)) == kInf);
  for (float x : {-3.3f, -0.7f, 0.1f, 1.9f, 12.25f}) {
    const float y = from_bits(eval32("ex2.approx.ftz.f32 %d, %a", bits(x)));
    CHECK(std::fabs(y - std::exp2(static_cast<double>(x))) <= std::exp2(static_cast<double>(x)) * 0x1p-22);
  }
}

TEST_CASE("max.f32: a NaN operand is ignored; two NaNs give the canonical NaN; -0 < +0", "[op:max.f32]") {
  CHECK(eval32("max.f32 %d, %a, %b", bits(2.0f), bits(3.0f)) == bits(3.0f));
  CHECK(eval32("max.f32 %d, %a, %b", kOne, kQNaN) == kOne);
  CHECK(eval32("max.f32 %d, %a, %b", kQNaN, kOne) == kOne);
  CHECK(eval32("max.f32 %d, %a, %b", kQNaN, kQNaN) == kNaN);
  CHECK(eval32("max.f32 %d, %a, %b", 0x80000000u, 0u) == 0u);
  CHECK(eval32("max.f32 %d, %a, %b", 0u, 0x80000000u) == 0u);
  CHECK(eval32("max.f32 %d, %a, %b", kNegInf, bits(-1e30f)) == bits(-1e30f));
  CHECK(eval32("min.f32 %d, %a, %b", 0u, 0x80000000u) == 0x80000000u);
  CHECK(eval32("min.f32 %d, %a, %b", kQNaN, bits(-2.0f)) == bits(-2.0f));
  CHECK(eval32("max.ftz.f32 %d, %a, %b", 5u, 0x80000000u) == 0u);  // 5 * 2^-149 flushed to +0
}

TEST_CASE("neg/abs.f32 change only the sign bit", "[op:neg.f32][op:abs.f32]") {
  CHECK(eval32("neg.f32 %d, %a", kOne) == 0xbf800000u);
  CHECK(eval32("neg.f32 %d, %a", 0u) == 0x80000000u);
  CHECK(eval32("abs.f32 %d, %a", bits(-2.0f)) == bits(2.0f));
  CHECK(eval32("abs.f32 %d, %a", 0x80000001u) == 1u);
}

TEST_CASE("lg2.approx and tanh.approx: exact special values, results within the ISA's bounds; copysign moves a sign bit",
          "[op:lg2.approx.f32][op:lg2.approx.ftz.f32][op:tanh.approx.f32][op:copysign.f32][op:copysign.f64]") {
  CHECK(eval32("lg2.approx.f32 %d, %a", bits(8.0f)) == bits(3.0f));
  CHECK(eval32("lg2.approx.f32 %d, %a", 0u) == kNegInf);
  CHECK(eval32("lg2.approx.f32 %d, %a", bits(-1.0f)) == kNaN);
  CHECK(eval32("lg2.approx.f32 %d, %a", kInf) == kInf);
  CHECK(eval32("lg2.approx.f32 %d, %a", 1u) == bits(-149.0f));         // the smallest subnormal, 2^-149
  CHECK(eval32("lg2.approx.ftz.f32 %d, %a", 1u) == kNegInf);           // flushed to +0 first
  const float l3 = from_bits(eval32("lg2.approx.f32 %d, %a", bits(3.0f)));
  CHECK(std::fabs(l3 - 1.5849625f) <= 0x1p-22f);                        // the ISA: 2^-22 absolute near 1..2
  CHECK(eval32("tanh.approx.f32 %d, %a", 0x80000000u) == 0x80000000u);  // -0 keeps its sign
  CHECK(eval32("tanh.approx.f32 %d, %a", kInf) == kOne);
  CHECK(eval32("tanh.approx.f32 %d, %a", kNegInf) == 0xbf800000u);
  CHECK(eval32("tanh.approx.f32 %d, %a", kQNaN) == kNaN);
  const float t = from_bits(eval32("tanh.approx.f32 %d, %a", bits(0.5f)));
  CHECK(std::fabs(t - 0.46211716f) <= 0.46211716f * std::exp2(-10.987f));
  // copysign d, a, b: b with a's sign.
  CHECK(eval32("copysign.f32 %d, %a, %b", 0xbf800000u, bits(2.0f)) == bits(-2.0f));
  CHECK(eval32("copysign.f32 %d, %a, %b", 0u, bits(-3.0f)) == bits(3.0f));
  CHECK(eval32("copysign.f32 %d, %a, %b", 0xbf800000u, 0x7fc00001u) == 0xffc00001u);  // a NaN's payload kept
  CHECK(eval64("copysign.f64 %ld, %la, %lb", 0x8000000000000000ull, 0x4000000000000000ull) == 0xc000000000000000ull);
}

TEST_CASE("rsqrt/sin/cos.approx: exact special values, results within the ISA's bounds",
          "[op:rsqrt.approx.f32][op:sin.approx.f32][op:cos.approx.f32]") {
  CHECK(eval32("rsqrt.approx.f32 %d, %a", bits(4.0f)) == bits(0.5f));
  CHECK(eval32("rsqrt.approx.f32 %d, %a", 0u) == kInf);
  CHECK(eval32("rsqrt.approx.f32 %d, %a", 0x80000000u) == kNegInf);
  CHECK(eval32("rsqrt.approx.f32 %d, %a", bits(-1.0f)) == kNaN);
  CHECK(eval32("sin.approx.f32 %d, %a", 0u) == 0u);
  CHECK(eval32("cos.approx.f32 %d, %a", 0u) == kOne);
  CHECK(eval32("sin.approx.f32 %d, %a", kInf) == kNaN);
  for (float x : {-3.1f, -1.0f, 0.5f, 2.0f, 3.1f}) {  // absolute error <= 2^-20.9 on [-pi, pi]
    CHECK(std::fabs(from_bits(eval32("sin.approx.f32 %d, %a", bits(x))) - std::sin(static_cast<double>(x))) < 0x1p-20);
    CHECK(std::fabs(from_bits(eval32("cos.approx.f32 %d, %a", bits(x))) - std::cos(static_cast<double>(x))) < 0x1p-20);
  }
}

TEST_CASE("cvt between f32 and integers: nearest even, saturation, NaN -> 0",
          "[op:cvt.rni.f32.f32][op:cvt.rn.f32.s32][op:cvt.rni.s32.f32]") {
  CHECK(eval32("cvt.rni.f32.f32 %d, %a", bits(2.5f)) == bits(2.0f));
  CHECK(eval32("cvt.rni.f32.f32 %d, %a", bits(3.5f)) == bits(4.0f));
  CHECK(eval32("cvt.rni.f32.f32 %d, %a", bits(-0.5f)) == 0x80000000u);
  CHECK(eval32("cvt.rni.f32.f32 %d, %a", kQNaN) == kNaN);
  CHECK(eval32("cvt.rn.f32.s32 %d, %a", 16777217u) == 0x4b800000u);  // 2^24 + 1 -> 2^24 (even)
  CHECK(eval32("cvt.rn.f32.s32 %d, %a", 16777219u) == 0x4b800002u);  // 2^24 + 3 -> 2^24 + 4
  CHECK(eval32("cvt.rn.f32.s32 %d, %a", 0xffffffffu) == bits(-1.0f));
  CHECK(eval32("cvt.rni.s32.f32 %d, %a", bits(2.5f)) == 2u);
  CHECK(eval32("cvt.rni.s32.f32 %d, %a", bits(-2.5f)) == static_cast<std::uint32_t>(-2));
  CHECK(eval32("cvt.rni.s32.f32 %d, %a", bits(1e10f)) == 0x7fffffffu);
  CHECK(eval32("cvt.rni.s32.f32 %d, %a", bits(-1e10f)) == 0x80000000u);
  CHECK(eval32("cvt.rni.s32.f32 %d, %a", kQNaN) == 0u);
  CHECK(eval32("cvt.rzi.s32.f32 %d, %a", bits(-2.7f)) == static_cast<std::uint32_t>(-2));
}

TEST_CASE("f64 conversions and arithmetic", "[op:cvt.rn.f32.u64][op:cvt.rn.f32.f64][op:cvt.rn.f64.s64][op:mul.f64]") {
  CHECK(eval64("cvt.rn.f32.u64 %d, %la; cvt.u64.u32 %ld, %d", ~0ull) == 0x5f800000u);  // 2^64 - 1 -> 2^64
  CHECK(eval64("cvt.rn.f32.f64 %d, %la; cvt.u64.u32 %ld, %d", 0x3fd5555555555555ull) == 0x3eaaaaabu);
  CHECK(eval64("cvt.rn.f64.s64 %ld, %la", (1ull << 53) + 1) == 0x4340000000000000ull);  // 2^53 + 1 -> 2^53
  CHECK(eval64("cvt.rn.f64.s64 %ld, %la", ~0ull) == 0xbff0000000000000ull);             // -1
  CHECK(eval64("mul.f64 %ld, %la, %lb", 0x3ff8000000000000ull, 0x4000000000000000ull) == 0x4008000000000000ull);
  CHECK(eval64("mul.f64 %ld, %la, %lb", 0x7ff0000000000000ull, 0) == 0x7fffffffffffffffull);
}

TEST_CASE("integer add/sub/mul/mad: wrap, .hi, .wide", "[op:add.s32][op:sub.s32][op:mul.lo.s32][op:mul.hi.s32]"
          "[op:mad.lo.s32][op:mul.wide.s32][op:mul.wide.u32][op:mad.wide.u32][op:add.s64][op:add.u64][op:sub.s64]"
          "[op:mul.lo.s64]") {
  CHECK(eval32("add.s32 %d, %a, %b", 0x7fffffffu, 1u) == 0x80000000u);
  CHECK(eval32("sub.s32 %d, %a, %b", 0u, 1u) == 0xffffffffu);
  CHECK(eval32("add.sat.s32 %d, %a, %b", 0x7fffffffu, 1u) == 0x7fffffffu);
  CHECK(eval32("mul.lo.s32 %d, %a, %b", 0x10000u, 0x10001u) == 0x10000u);
  CHECK(eval32("mul.hi.s32 %d, %a, %b", static_cast<std::uint32_t>(-2), 3u) == 0xffffffffu);
  CHECK(eval32("mul.hi.s32 %d, %a, %b", 0x40000000u, 4u) == 1u);
  CHECK(eval32("mad.lo.s32 %d, %a, %b, %c", 3u, 4u, 5u) == 17u);
  CHECK(eval64("mul.wide.s32 %ld, %a, %b", static_cast<std::uint32_t>(-2), 3u) == 0xfffffffffffffffaull);
  CHECK(eval64("mul.wide.u32 %ld, %a, %b", 0xffffffffu, 2u) == 0x1fffffffeull);
  CHECK(eval64("mad.wide.u32 %ld, %a, %b, %lc", 0xffffffffu, 0xffffffffu, 1u) == 0xfffffffe00000002ull);
  CHECK(eval64("add.s64 %ld, %la, %lb", ~0ull, 2) == 1u);
  CHECK(eval64("add.u64 %ld, %la, %lb", 1ull << 40, 1ull << 40) == 1ull << 41);
  CHECK(eval64("sub.s64 %ld, %la, %lb", 0, 1) == ~0ull);
  CHECK(eval64("mul.lo.s64 %ld, %la, %lb", 1ull << 40, 1ull << 30) == 0u);  // 2^70 wraps to 0
}

TEST_CASE("integer div/rem: truncation toward zero; division by zero is reported",
          "[op:div.s32][op:div.u32][op:rem.s32][op:div.s64][op:div.u64][op:rem.u32][op:rem.s64]") {
  CHECK(eval32("div.s32 %d, %a, %b", static_cast<std::uint32_t>(-7), 2u) == static_cast<std::uint32_t>(-3));
  CHECK(eval32("rem.s32 %d, %a, %b", static_cast<std::uint32_t>(-7), 2u) == static_cast<std::uint32_t>(-1));
  CHECK(eval32("div.u32 %d, %a, %b", 0xfffffff9u, 2u) == 0x7ffffffcu);
  CHECK(eval32("div.s32 %d, %a, %b", 0x80000000u, 0xffffffffu) == 0x80000000u);
  CHECK(eval64("div.s64 %ld, %la, %lb", static_cast<std::uint64_t>(-9), 4) == static_cast<std::uint64_t>(-2));
  CHECK(eval64("div.u64 %ld, %la, %lb", ~0ull, 1ull << 32) == 0xffffffffu);
  CHECK(eval32("rem.u32 %d, %a, %b", 0xfffffff9u, 16u) == 9u);  // unsigned: 4294967289 mod 16
  CHECK(eval64("rem.s64 %ld, %la, %lb", static_cast<std::uint64_t>(-9), 4) == static_cast<std::uint64_t>(-1));
  CHECK(eval64("rem.s64 %ld, %la, %lb", (1ull << 40) + 4, static_cast<std::uint64_t>(-3)) == 2u);  // 2^40 + 4 = 5 mod 3
  CHECK_THROWS_WITH(eval32("div.s32 %d, %a, %b", 1u, 0u), Catch::Contains("division by zero") && Catch::Contains("PTX line"));
  CHECK_THROWS_WITH(eval32("rem.s32 %d, %a, %b", 1u, 0u), Catch::Contains("remainder by zero"));
}

TEST_CASE("integer min/max/neg", "[op:min.s32][op:max.s32][op:max.u32][op:neg.s32]") {
  CHECK(eval32("min.s32 %d, %a, %b", 0xffffffffu, 1u) == 0xffffffffu);
  CHECK(eval32("max.s32 %d, %a, %b", 0xffffffffu, 1u) == 1u);
  CHECK(eval32("min.u32 %d, %a, %b", 0xffffffffu, 1u) == 1u);
  CHECK(eval32("max.u32 %d, %a, %b", 0xffffffffu, 1u) == 0xffffffffu);  // unsigned: the sign bit is 2^31
  CHECK(eval32("max.u32 %d, %a, %b", 0x7fffffffu, 0x80000000u) == 0x80000000u);
  CHECK(eval32("max.u32 %d, %a, %b", 15u, 7u) == 15u);
  CHECK(eval32("neg.s32 %d, %a", 5u) == static_cast<std::uint32_t>(-5));
  CHECK(eval32("neg.s32 %d, %a", 0x80000000u) == 0x80000000u);
}

TEST_CASE("shifts clamp the amount at the register width", "[op:shl.b32][op:shr.s32][op:shr.u32][op:shl.b64][op:shr.u64]") {
  CHECK(eval32("shl.b32 %d, %a, %b", 1u, 31u) == 0x80000000u);
  CHECK(eval32("shl.b32 %d, %a, %b", 1u, 32u) == 0u);
  CHECK(eval32("shr.s32 %d, %a, %b", 0x80000000u, 40u) == 0xffffffffu);
  CHECK(eval32("shr.s32 %d, %a, %b", 0x80000000u, 4u) == 0xf8000000u);
  CHECK(eval32("shr.u32 %d, %a, %b", 0x80000000u, 31u) == 1u);
  CHECK(eval32("shr.u32 %d, %a, %b", 0x80000000u, 33u) == 0u);
  CHECK(eval64("shl.b64 %ld, %la, %b", 1, 63) == 1ull << 63);
  CHECK(eval64("shl.b64 %ld, %la, %b", 1, 64) == 0);
  CHECK(eval64("shr.u64 %ld, %la, %b", 1ull << 63, 64) == 0);
  CHECK(eval64("shr.u64 %ld, %la, %b", 1ull << 63, 62) == 2);
  CHECK(eval64("shr.s64 %ld, %la, %b", 1ull << 63, 62) == ~1ull);
}

TEST_CASE("bit operations", "[op:and.b32][op:or.b32][op:xor.b32][op:not.b32][op:and.b64][op:or.b64][op:xor.b64]"
          "[op:not.b64][op:bfi.b64][op:bfi.b32]") {
  CHECK(eval32("and.b32 %d, %a, %b", 0xff00ff00u, 0x0ff00ff0u) == 0x0f000f00u);
  CHECK(eval32("or.b32 %d, %a, %b", 0xff00ff00u, 0x0ff00ff0u) == 0xfff0fff0u);
  CHECK(eval32("xor.b32 %d, %a, %b", 0xff00ff00u, 0x0ff00ff0u) == 0xf0f0f0f0u);
  CHECK(eval32("not.b32 %d, %a", 0x0000ffffu) == 0xffff0000u);
  CHECK(eval64("and.b64 %ld, %la, %lb", ~0ull, 0x8000000000000001ull) == 0x8000000000000001ull);
  CHECK(eval64("or.b64 %ld, %la, %lb", 1ull << 63, 1) == 0x8000000000000001ull);
  CHECK(eval64("xor.b64 %ld, %la, %lb", ~0ull, 1) == ~1ull);
  CHECK(eval64("not.b64 %ld, %la", 0) == ~0ull);
  CHECK(eval64("bfi.b64 %ld, %la, %lb, 32, 32", 0x12345678ull, 0xffffffffaaaaaaaaull) == 0x12345678aaaaaaaaull);
  CHECK(eval64("bfi.b64 %ld, %la, %lb, 60, 8", 0xffull, 0) == 0xf000000000000000ull);  // clipped at bit 63
  CHECK(eval64("bfi.b64 %ld, %la, %lb, 4, 0", 0xffull, 5) == 5);                        // len 0: b
  CHECK(eval32("bfi.b32 %d, %a, %b, 8, 8", 0x12345612u, 0xaaaaaaaau) == 0xaaaa12aau);     // a's low 8 bits
  CHECK(eval32("bfi.b32 %d, %a, %b, 16, 16", 0xbeefu, 0x0000ffffu) == 0xbeefffffu);
  CHECK(eval32("bfi.b32 %d, %a, %b, 28, 8", 0xffu, 0) == 0xf0000000u);                   // clipped at bit 31
  CHECK(eval32("bfi.b32 %d, %a, %b, 4, 0", 0xffu, 5) == 5);                              // len 0: b
}

TEST_CASE("prmt.b32 (default mode): each byte picked from {b, a} or its sign replicated", "[op:prmt.b32]") {
  // a = 0x33221100 (bytes 0-3), b = 0xf7e6d5c4 (bytes 4-7).
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0x3210u) == 0x33221100u);  // identity
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0x7654u) == 0xf7e6d5c4u);  // b
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0x0123u) == 0x00112233u);  // reversed
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0x1404u) == 0x11c400c4u);  // fp8 pairs: b0, b1 high
  // Sign replication: selector 8 + n gives 0xff when byte n's top bit is set, else 0.
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0xc8b4u) == 0xff0000c4u);
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0x000fu) == 0x000000ffu);  // byte 7's sign
  // Only the low 16 bits of c select.
  CHECK(eval32("prmt.b32 %d, %a, %b, %c", 0x33221100u, 0xf7e6d5c4u, 0xabcd3210u) == 0x33221100u);
}

TEST_CASE("16-bit logic and moves, u16/u32 conversions, unsigned min, setp and selp (the fp8 conversions' forms)",
          "[op:and.b16][op:or.b16][op:mov.u16][op:cvt.u16.u32][op:cvt.u32.u16][op:min.u32][op:selp.u32]"
          "[op:setp.gt.u32]") {
  // cvt.u16.u32 keeps the low half; and/or.b16 act on 16 bits.
  CHECK(eval32("cvt.u16.u32 %ha, %a; cvt.u16.u32 %hb, %b; and.b16 %hd, %ha, %hb; cvt.u32.u16 %d, %hd", 0x1234ff0fu,
               0xf0f0u) == 0xf000u);
  CHECK(eval32("cvt.u16.u32 %ha, %a; cvt.u16.u32 %hb, %b; or.b16 %hd, %ha, %hb; cvt.u32.u16 %d, %hd", 0xffff00ffu,
               0x8000u) == 0x80ffu);
  CHECK(eval32("cvt.u16.u32 %ha, %a; mov.u16 %hb, %ha; cvt.u32.u16 %d, %hb", 0xabcd1234u) == 0x1234u);
  CHECK(eval32("mov.u16 %hb, 32512; cvt.u32.u16 %d, %hb", 0) == 0x7f00u);
  // Unsigned: 0xffffffff is the largest u32, 0x80000000 above 1.
  CHECK(eval32("min.u32 %d, %a, %b", 0xffffffffu, 5) == 5);
  CHECK(eval32("min.u32 %d, %a, %b", 0x80000000u, 0x7fffffffu) == 0x7fffffffu);
  CHECK(eval32("setp.gt.u32 %p, %a, %b; selp.u32 %d, 7, 9, %p", 0x80000000u, 1) == 7);
  CHECK(eval32("setp.gt.u32 %p, %a, %b; selp.u32 %d, 7, 9, %p", 1, 0x80000000u) == 9);
  CHECK(eval32("setp.gt.u32 %p, %a, %b; selp.u32 %d, %a, %b, %p", 4, 4) == 4);
}

TEST_CASE("setp: signed, unsigned and ordered/unordered float comparisons; predicate logic; selp",
          "[op:setp.lt.s32][op:setp.ge.s32][op:setp.gt.s32][op:setp.ne.s32][op:setp.eq.s32][op:setp.le.s32]"
          "[op:setp.lt.u32][op:setp.ge.u32][op:setp.eq.b32][op:setp.eq.s16][op:setp.eq.s64][op:setp.ge.s64]"
          "[op:setp.lt.s64][op:setp.ne.s64][op:setp.lt.u64][op:setp.eq.f32][op:setp.lt.f32][op:setp.leu.f32]"
          "[op:setp.gt.f32][op:setp.ltu.f32][op:setp.neu.f32][op:and.pred][op:or.pred][op:not.pred]"
          "[op:selp.f32][op:selp.b32][op:selp.b64]") {
  const auto p = [](const std::string& s, std::uint32_t a, std::uint32_t b) {
    return eval32(s + " %p, %a, %b; selp.b32 %d, 1, 0, %p", a, b);
  };
  const std::uint32_t m1 = 0xffffffffu;
  CHECK(p("setp.lt.s32", m1, 1) == 1);
  CHECK(p("setp.lt.u32", m1, 1) == 0);
  CHECK(p("setp.ge.s32", 1, 1) == 1);
  CHECK(p("setp.gt.s32", m1, 1) == 0);
  CHECK(p("setp.ne.s32", 2, 1) == 1);
  CHECK(p("setp.eq.s32", 2, 2) == 1);
  CHECK(p("setp.le.s32", 0x80000000u, m1) == 1);
  CHECK(p("setp.ge.u32", 0x80000000u, m1) == 0);
  CHECK(p("setp.eq.b32", 7, 7) == 1);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; setp.eq.s16 %p, %ha, %hb; selp.b32 %d, 1, 0, %p", 0xffffffffu) == 1);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; setp.eq.s16 %p, %ha, %hb; selp.b32 %d, 1, 0, %p", 0x0001ffffu) == 0);
  CHECK(p("setp.eq.f32", 0, 0x80000000u) == 1);  // +0 == -0
  CHECK(p("setp.eq.f32", kQNaN, kQNaN) == 0);
  CHECK(p("setp.lt.f32", kQNaN, kOne) == 0);
  CHECK(p("setp.ltu.f32", kQNaN, kOne) == 1);
  CHECK(p("setp.leu.f32", kQNaN, kOne) == 1);
  CHECK(p("setp.leu.f32", bits(2.0f), kOne) == 0);
  CHECK(p("setp.gt.f32", bits(2.0f), kOne) == 1);
  CHECK(p("setp.neu.f32", kQNaN, kQNaN) == 1);
  CHECK(p("setp.neu.f32", kOne, kOne) == 0);
  CHECK(p("setp.ne.f32", kQNaN, kOne) == 0);  // ordered: false with a NaN
  const auto p64 = [](const std::string& s, std::uint64_t a, std::uint64_t b) {
    return eval64(s + " %p, %la, %lb; selp.b64 %ld, 1, 0, %p", a, b);
  };
  CHECK(p64("setp.eq.s64", 1ull << 40, 1ull << 40) == 1);
  CHECK(p64("setp.ge.s64", ~0ull, 0) == 0);
  CHECK(p64("setp.lt.s64", ~0ull, 0) == 1);
  CHECK(p64("setp.ne.s64", 1, 0) == 1);
  CHECK(p64("setp.lt.u64", ~0ull, 0) == 0);
  // setp with a second destination: p|q gets the comparison and its complement.
  CHECK(eval32("setp.lt.s32 %p|%q, %a, %b; selp.b32 %d, 1, 0, %q", 1, 2) == 0);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; setp.gt.s32 %q, %b, 5; and.pred %p, %p, %q; selp.b32 %d, 1, 0, %p", 1, 6) == 1);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; setp.gt.s32 %q, %b, 5; and.pred %p, %p, %q; selp.b32 %d, 1, 0, %p", 1, 4) == 0);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; setp.gt.s32 %q, %b, 5; or.pred %p, %p, %q; selp.b32 %d, 1, 0, %p", 9, 6) == 1);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; not.pred %p, %p; selp.b32 %d, 1, 0, %p", 1) == 0);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; selp.b32 %d, 1, 0, !%p", 1) == 0);
  CHECK(eval32("setp.lt.s32 %p, %a, 5; selp.f32 %d, %b, %c, %p", 1, bits(2.0f), bits(3.0f)) == bits(2.0f));
  CHECK(eval64("setp.lt.s32 %p, %a, 5; selp.b64 %ld, %la, %lb, %p", 9, 1ull << 40, 1ull << 41) == 1ull << 40);  // %p false: %lb
}

TEST_CASE("integer conversions extend by the source type and wrap or saturate",
          "[op:cvt.s64.s32][op:cvt.u32.u64][op:cvt.u64.u32]") {
  CHECK(eval64("cvt.s64.s32 %ld, %a", 0xfffffffeu) == static_cast<std::uint64_t>(-2));
  CHECK(eval64("cvt.u64.u32 %ld, %a", 0xfffffffeu) == 0xfffffffeull);
  CHECK(eval64("cvt.u32.u64 %d, %la; cvt.u64.u32 %ld, %d", 0x123456789ull) == 0x23456789ull);
  CHECK(eval64("cvt.sat.s32.s64 %d, %la; cvt.u64.u32 %ld, %d", 1ull << 40) == 0x7fffffffull);
  CHECK(eval64("cvt.sat.u32.s64 %d, %la; cvt.u64.u32 %ld, %d", ~0ull) == 0);
}

TEST_CASE("16-bit floats: widening is exact, narrowing rounds to nearest even, NaN is canonical",
          "[op:cvt.f32.f16][op:cvt.rn.f16x2.f32][op:cvt.rn.bf16x2.f32][op:cvt.rn.bf16.f32][op:cvt.f32.bf16]"
          "[op:cvt.rn.f16.f32][op:mov.b32]") {
  // nvcc's inline-asm form of __half2float: a nested scope with .f16 registers.
  const std::string widen = "{ .reg .f16 low, high; mov.b32 {low, high}, %a; cvt.f32.f16 %d, high; }";
  CHECK(eval32(widen, 0x3c000000u) == kOne);
  CHECK(eval32(widen, 0x00010000u) == 0x33800000u);  // the smallest subnormal, 2^-24
  CHECK(eval32(widen, 0xfc000000u) == kNegInf);
  CHECK(eval32(widen, 0xfe010000u) == kNaN);
  CHECK(eval32(widen, 0x80000000u) == 0x80000000u);
  // cvt.rn.f16x2.f32 d, a, b: a in the upper half, b in the lower.
  CHECK(eval32("cvt.rn.f16x2.f32 %d, %a, %b", kOne, bits(65520.0f)) == 0x3c007c00u);   // tie -> even = inf
  CHECK(eval32("cvt.rn.f16x2.f32 %d, %a, %b", bits(65519.0f), 0x33000000u) == 0x7bff0000u);  // 2^-25: tie -> +0
  CHECK(eval32("cvt.rn.f16x2.f32 %d, %a, %b", 0x33400000u, kQNaN) == 0x00017fffu);    // 1.5 * 2^-25 -> 2^-24
  CHECK(eval32("cvt.rn.bf16x2.f32 %d, %a, %b", kOne, 0x3f808000u) == 0x3f803f80u);     // tie, even: down
  CHECK(eval32("cvt.rn.bf16x2.f32 %d, %a, %b", 0x3f818000u, 0x3f808001u) == 0x3f823f81u);  // tie odd: up; above tie: up
  CHECK(eval32("cvt.rn.bf16x2.f32 %d, %a, %b", kQNaN, 0x7f7fffffu) == 0x7fff7f80u);    // NaN; max float -> inf
  // Scalar narrowing and widening (nvcc: __float2bfloat16; sm_90's native bf16 -> f32).
  CHECK(eval32("cvt.rn.bf16.f32 %ha, %a; cvt.u32.u16 %d, %ha", 0x3f818000u) == 0x3f82u);
  CHECK(eval32("cvt.rn.bf16.f32 %ha, %a; cvt.u32.u16 %d, %ha", kQNaN) == 0x7fffu);
  CHECK(eval32("cvt.rn.f16.f32 %ha, %a; cvt.u32.u16 %d, %ha", bits(65520.0f)) == 0x7c00u);
  CHECK(eval32("cvt.rn.f16.f32 %ha, %a; cvt.u32.u16 %d, %ha", 0x33400000u) == 0x0001u);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; cvt.f32.bf16 %d, %ha", 0x0000bf80u) == 0xbf800000u);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; cvt.f32.bf16 %d, %ha", 0x00000001u) == 0x00010000u);  // subnormal kept
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; cvt.f32.bf16 %d, %ha", 0x0000ffc1u) == kNaN);
  // bf16 -> f32 as nvcc writes it: mov.b32 %f, {0, %rs}.
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; mov.b32 %d, {0, %ha}", 0x00003f80u) == kOne);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; mov.b32 %d, {%hb, %ha}", 0x12345678u) == 0x56781234u);
  CHECK(eval32("mov.f32 %d, 0f3F800000", 0) == kOne);
  CHECK(eval32("mov.b32 %d, %a", 0xabcdef01u) == 0xabcdef01u);
}

TEST_CASE("f16/bf16 arithmetic, scalar and pairs: one rounding to nearest even, .ftz, .sat, canonical NaN",
          "[op:add.f16x2][op:sub.f16x2][op:mul.f16x2][op:fma.rn.f16x2][op:add.ftz.f16x2][op:mul.ftz.f16x2]"
          "[op:add.sat.f16x2][op:add.f16][op:fma.rn.f16][op:add.rn.bf16x2][op:fma.rn.bf16x2][op:mul.rn.bf16]") {
  // f16: 1 = 0x3c00, 2 = 0x4000, 3 = 0x4200, 0.5 = 0x3800, 2^-11 = 0x1000, 2^-12 = 0x0c00,
  // 2^-24 = 0x0001 (the smallest subnormal), 65504 = 0x7bff (the largest), inf = 0x7c00.
  // A pair's first element is its low 16 bits.
  CHECK(eval32("add.f16x2 %d, %a, %b", 0x3c004000u, 0x38003c00u) == 0x3e004200u);  // {1 + 0.5, 2 + 1}
  CHECK(eval32("add.f16x2 %d, %a, %b", 0x3c013c00u, 0x10001000u) == 0x3c023c00u);  // ties: 1 + 2^-11 -> 1 (even); 1 + 2^-10 + 2^-11 -> 1 + 2^-9
  CHECK(eval32("sub.f16x2 %d, %a, %b", 0x3c004200u, 0x3c003c00u) == 0x00004000u);  // x - x = +0; 3 - 1
  CHECK(eval32("add.f16x2 %d, %a, %b", 0x7bff7e01u, 0x7bff3c00u) == 0x7c007fffu);  // 65504 + 65504 = inf; NaN -> canonical
  CHECK(eval32("mul.f16x2 %d, %a, %b", 0x5c003c00u, 0x5c00bc00u) == 0x7c00bc00u);  // 256 x 256 = 65536 -> inf; 1 x -1
  CHECK(eval32("mul.f16x2 %d, %a, %b", 0x0c000001u, 0x0c003c00u) == 0x00010001u);  // 2^-12 x 2^-12 = 2^-24; subnormal kept
  CHECK(eval32("mul.ftz.f16x2 %d, %a, %b", 0x0c000001u, 0x0c003c00u) == 0x00000000u);  // subnormal result, input flushed
  CHECK(eval32("add.ftz.f16x2 %d, %a, %b", 0x80013c00u, 0x80000001u) == 0x80003c00u);  // -2^-24 flushed to -0, + -0; 1 + (0)
  CHECK(eval32("add.sat.f16x2 %d, %a, %b", 0x3c00bc00u, 0x3c003800u) == 0x3c000000u);  // 2 -> 1; -0.5 -> +0
  // fma rounds once: 2048 + 1070/1024 x 1960/2048 = 2049 + 48 2^-21 is just above the tie
  // between 2048 and 2050 (f16 steps by 2 there), so it rounds up to 2050 (0x6801). In f32 the
  // sum would round to 2049 exactly first, and the tie then to the even 2048 (0x6800).
  CHECK(eval32("fma.rn.f16x2 %d, %a, %b, %c", 0xbc2e3c2eu, 0x3ba83ba8u, 0xe8006800u) == 0xe8016801u);
  CHECK(eval32("fma.rn.f16x2 %d, %a, %b, %c", 0x40003c00u, 0x42004200u, 0xbc003c00u) == 0x45004400u);  // {1 x 3 + 1, 2 x 3 - 1}
  // Scalars live in 16-bit registers (mov.b32 {low, high} splits a word).
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; add.f16 %hd, %ha, %hb; cvt.u32.u16 %d, %hd", 0x3c004000u) == 0x4200u);
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; fma.rn.f16 %hd, %ha, %hb, %ha; cvt.u32.u16 %d, %hd", 0x42004000u) == 0x4800u);  // 2 x 3 + 2 = 8
  // bf16: 1 = 0x3f80, 2 = 0x4000, 3 = 0x4040, 7 = 0x40e0, 2^-8 = 0x3b80; a step of 2^-7 at 1.
  CHECK(eval32("add.rn.bf16x2 %d, %a, %b", 0x3f813f80u, 0x3b803b80u) == 0x3f823f80u);  // ties to even, as f16's
  CHECK(eval32("fma.rn.bf16x2 %d, %a, %b, %c", 0x40003f80u, 0x40404040u, 0x3f80bf80u) == 0x40e04000u);  // {1 x 3 - 1, 2 x 3 + 1}
  CHECK(eval32("mov.b32 {%ha, %hb}, %a; mul.rn.bf16 %hd, %ha, %hb; cvt.u32.u16 %d, %hd", 0x40404000u) == 0x40c0u);  // 2 x 3 = 6
}

TEST_CASE("f16/bf16 min, max, neg, abs by element; min/max.f64 as f32's",
          "[op:max.f16x2][op:min.f16x2][op:max.bf16x2][op:neg.f16x2][op:abs.bf16x2][op:max.f64][op:min.f64]") {
  CHECK(eval32("max.f16x2 %d, %a, %b", 0x3c007e00u, 0x40004200u) == 0x40004200u);  // {max(NaN, 3) = 3, max(1, 2) = 2}
  CHECK(eval32("min.f16x2 %d, %a, %b", 0x80007e00u, 0x00007c01u) == 0x80007fffu);  // {two NaNs: canonical, min(-0, +0) = -0}
  CHECK(eval32("max.bf16x2 %d, %a, %b", 0xbf803f80u, 0xc0004000u) == 0xbf804000u);  // {max(1, 2), max(-1, -2)}
  CHECK(eval32("neg.f16x2 %d, %a", 0xbc003c00u) == 0x3c00bc00u);
  CHECK(eval32("abs.bf16x2 %d, %a", 0xbf80ffc1u) == 0x3f807fc1u);  // sign bits only, a NaN's payload kept
  const auto f64 = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  CHECK(eval64("max.f64 %ld, %la, %lb", f64(1.0), f64(2.0)) == f64(2.0));
  CHECK(eval64("max.f64 %ld, %la, %lb", f64(std::nan("")), f64(-2.0)) == f64(-2.0));
  CHECK(eval64("max.f64 %ld, %la, %lb", f64(-0.0), f64(0.0)) == f64(0.0));
  CHECK(eval64("min.f64 %ld, %la, %lb", f64(0.0), f64(-0.0)) == f64(-0.0));
  CHECK(eval64("min.f64 %ld, %la, %lb", f64(std::nan("")), f64(std::nan(""))) == 0x7fffffffffffffffull);
}

TEST_CASE("directed roundings of f32 and f64 add/sub/mul/div (and f32 fma): exact results kept, overflow and underflow",
          "[op:add.rp.f64][op:add.rm.f64][op:mul.rp.f64][op:mul.rm.f64][op:div.rp.f64][op:div.rm.f64][op:add.rz.f64]"
          "[op:add.rp.f32][op:add.rm.f32][op:add.rz.f32][op:div.rp.f32][op:div.rm.f32][op:fma.rp.f32][op:mul.rz.f32]") {
  const auto f64 = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  const auto d = [&](const char* op, double a, double b) {
    return eval64(std::string(op) + " %ld, %la, %lb", f64(a), f64(b));
  };
  const double tiny = std::ldexp(1.0, -60);
  CHECK(d("add.rp.f64", 1.0, tiny) == 0x3ff0000000000001ull);  // 1 + 2^-52
  CHECK(d("add.rm.f64", 1.0, tiny) == f64(1.0));
  CHECK(d("add.rz.f64", -1.0, -tiny) == f64(-1.0));
  CHECK(d("add.rm.f64", -1.0, -tiny) == 0xbff0000000000001ull);
  CHECK(d("add.rp.f64", 1.0, 2.0) == f64(3.0));  // exact: unchanged
  const double one_ulp = std::nextafter(1.0, 2.0);  // (1 + 2^-52)^2 = 1 + 2^-51 + 2^-104
  CHECK(d("mul.rm.f64", one_ulp, one_ulp) == 0x3ff0000000000002ull);
  CHECK(d("mul.rp.f64", one_ulp, one_ulp) == 0x3ff0000000000003ull);
  CHECK(d("div.rm.f64", 1.0, 3.0) == 0x3fd5555555555555ull);  // 1/3 rounded to nearest is below 1/3
  CHECK(d("div.rp.f64", 1.0, 3.0) == 0x3fd5555555555556ull);
  CHECK(d("div.rp.f64", -1.0, 3.0) == 0xbfd5555555555555ull);
  CHECK(d("div.rm.f64", 1.0, 0.0) == f64(INFINITY));  // division by zero is exact
  const double max = std::numeric_limits<double>::max();
  CHECK(d("mul.rm.f64", max, 2.0) == f64(max));  // a positive overflow rounded down: the largest
  CHECK(d("mul.rp.f64", max, 2.0) == f64(INFINITY));
  CHECK(d("mul.rp.f64", std::ldexp(1.0, -1074), 0.5) == 1u);  // 2^-1075 rounds up to 2^-1074 (nearest: +0)
  CHECK(d("mul.rm.f64", std::ldexp(1.0, -1074), 0.5) == 0u);
  // f32: 1 + 2^-30; 1/3 rounded to nearest (0x3eaaaaab) is above 1/3.
  CHECK(eval32("add.rp.f32 %d, %a, %b", kOne, 0x30800000u) == 0x3f800001u);
  CHECK(eval32("add.rm.f32 %d, %a, %b", kOne, 0x30800000u) == kOne);
  CHECK(eval32("add.rz.f32 %d, %a, %b", 0xbf800000u, 0xb0800000u) == 0xbf800000u);
  CHECK(eval32("div.rm.f32 %d, %a, %b", kOne, bits(3.0f)) == 0x3eaaaaaau);
  CHECK(eval32("div.rp.f32 %d, %a, %b", kOne, bits(3.0f)) == 0x3eaaaaabu);
  CHECK(eval32("fma.rp.f32 %d, %a, %b, %c", 0x3f800001u, 0x3f800001u, 0u) == 0x3f800003u);  // 1 + 2^-22 + 2^-46 up
  CHECK(eval32("fma.rm.f32 %d, %a, %b, %c", 0x3f800001u, 0x3f800001u, 0u) == 0x3f800002u);
  CHECK(eval32("mul.rz.f32 %d, %a, %b", 0x7f7fffffu, bits(2.0f)) == 0x7f7fffffu);  // overflow toward zero
}

TEST_CASE("cvt.rna.tf32.f32: 10 fraction bits, ties away from zero, low 13 bits zero; .satfinite",
          "[op:cvt.rna.tf32.f32][op:cvt.rna.satfinite.tf32.f32]") {
  // tf32's step at 1 is 2^-10 (bit 13, 0x2000); 0x1000 is half of it.
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", 0x3f801000u) == 0x3f802000u);  // a tie: away from zero (even would be 1)
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", 0xbf801000u) == 0xbf802000u);
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", 0x3f800fffu) == 0x3f800000u);  // below the tie
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", 0x3fffffffu) == 0x40000000u);  // carries into the next binade
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", 0x7f7ff000u) == kInf);         // past the largest tf32: infinity
  CHECK(eval32("cvt.rna.satfinite.tf32.f32 %d, %a", 0x7f7ff000u) == 0x7f7fe000u);
  CHECK(eval32("cvt.rna.satfinite.tf32.f32 %d, %a", kNegInf) == 0xff7fe000u);
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", kNegInf) == kNegInf);
  CHECK(eval32("cvt.rna.tf32.f32 %d, %a", kQNaN) == kNaN);
}

TEST_CASE("inline-asm scopes: '.reg.b32' without a space, as cuda_fp16.hpp writes it") {
  CHECK(eval32("{ .reg.b32 f, g;\n .reg.b16 r;\n mov.b32 f, %a;\n add.s32 g, f, 1;\n mov.b32 %d, g; }", 41u) == 42u);
}

TEST_CASE("fp8 narrowing: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 rounds to nearest even, saturates, a in the high byte",
          "[op:cvt.rn.satfinite.e4m3x2.f32][op:cvt.rn.satfinite.e5m2x2.f32]") {
  // OCP FP8. E4M3: bias 7, 3 mantissa bits, largest 448 = 0x7e, NaN 0x7f, no infinity.
  auto e4m3 = [](float a, float b) {
    return eval32("cvt.rn.satfinite.e4m3x2.f32 %hd, %a, %b; cvt.u32.u16 %d, %hd", bits(a), bits(b));
  };
  CHECK(e4m3(1.0f, -1.0f) == 0x38b8u);                 // 1 = 0 0111 000; the sign bit
  CHECK(e4m3(448.0f, 1.75f) == 0x7e3eu);               // the largest; 1.75 = 0 0111 110
  CHECK(e4m3(464.0f, 1e9f) == 0x7e7eu);                // tie between 448 and 480 (beyond): 448; huge: 448
  CHECK(e4m3(-INFINITY, INFINITY) == 0xfe7eu);         // .satfinite: infinities become +-448
  CHECK(e4m3(std::nanf(""), -0.0f) == 0x7f80u);        // NaN -> 0x7f; -0 keeps its sign
  CHECK(e4m3(1.0625f, 1.1875f) == 0x383au);            // ties to even: 1.0625 -> 1 (0x38), 1.1875 -> 1.25 (0x3a)
  CHECK(e4m3(0x1p-9f, 0x1p-10f) == 0x0100u);           // smallest subnormal; half of it ties to +0
  CHECK(e4m3(0x1.8p-10f, 0x1p-6f) == 0x0108u);         // 0.75 of the smallest rounds up; 2^-6 is the smallest normal
  CHECK(e4m3(0x1.cp-7f, 0x1.ep-7f) == 0x0708u);        // 7/8 2^-6 is the largest subnormal; 15/16 2^-6 ties to 2^-6 (even)
  // E5M2: bias 15, 2 mantissa bits, largest 57344 = 0x7b, infinity 0x7c, NaN 0x7f.
  auto e5m2 = [](float a, float b) {
    return eval32("cvt.rn.satfinite.e5m2x2.f32 %hd, %a, %b; cvt.u32.u16 %d, %hd", bits(a), bits(b));
  };
  CHECK(e5m2(1.0f, -2.0f) == 0x3cc0u);                 // 1 = 0 01111 00; -2 = 1 10000 00
  CHECK(e5m2(57344.0f, 61440.0f) == 0x7b7bu);          // the largest; the tie with 65536 (beyond) saturates
  CHECK(e5m2(INFINITY, std::nanf("")) == 0x7b7fu);     // .satfinite: +inf -> 57344, not 0x7c
  CHECK(e5m2(0x1p-16f, 0x1p-17f) == 0x0100u);          // smallest subnormal; half of it ties to +0
  CHECK(e5m2(1.125f, 1.375f) == 0x3c3eu);              // ties to even: 1.125 -> 1, 1.375 -> 1.5 (0x3e)
}

TEST_CASE("fp8 widening: cvt.rn.f16x2.{e4m3x2,e5m2x2} is exact, the high byte to the high half",
          "[op:cvt.rn.f16x2.e4m3x2][op:cvt.rn.f16x2.e5m2x2]") {
  auto e4m3 = [](std::uint32_t two) { return eval32("cvt.u16.u32 %ha, %a; cvt.rn.f16x2.e4m3x2 %d, %ha", two); };
  CHECK(e4m3(0x38b8u) == 0x3c00bc00u);  // 1, -1
  CHECK(e4m3(0x7e01u) == 0x5f001800u);  // 448 = 1.75 2^8; 2^-9 (a normal f16)
  CHECK(e4m3(0x7fffu) == 0x7fff7fffu);  // both NaN encodings -> the canonical f16 NaN
  CHECK(e4m3(0x0780u) == 0x23008000u);  // 7/8 2^-6 = 1.75 2^-7 (the largest subnormal); -0
  auto e5m2 = [](std::uint32_t two) { return eval32("cvt.u16.u32 %ha, %a; cvt.rn.f16x2.e5m2x2 %d, %ha", two); };
  CHECK(e5m2(0x3cc0u) == 0x3c00c000u);  // 1, -2: E5M2 is f16's top byte
  CHECK(e5m2(0x7cfcu) == 0x7c00fc00u);  // infinities stay infinite
  CHECK(e5m2(0x7d01u) == 0x7fff0100u);  // NaN -> canonical; 2^-16 (an f16 subnormal)
}
