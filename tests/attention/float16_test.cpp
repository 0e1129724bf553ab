// rungs::f16 / rungs::bf16 conversions, exhaustively: every bit pattern round-trips, and every
// midpoint between neighbours rounds to the even one (round to nearest even), with the values
// just either side of it rounding to the nearer neighbour.
#include <rungs/numeric/float16.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

template <class H>
void check_round_trip_and_midpoints(std::uint16_t max_finite) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const H h = H::from_bits(static_cast<std::uint16_t>(bits));
    const float f = static_cast<float>(h);
    if (std::isnan(f)) {
      const H back(f);
      CHECK(std::isnan(static_cast<float>(back)));
      continue;
    }
    const H back(f);
    if (back.bits != bits) FAIL_CHECK("bits " << bits << " -> " << f << " -> " << back.bits);
  }
  // Midpoints between positive neighbours (including 0 and the largest finite, whose upper
  // neighbour is infinity); the negative side mirrors them.
  for (std::uint32_t lo = 0; lo <= max_finite; ++lo) {
    const float a = static_cast<float>(H::from_bits(static_cast<std::uint16_t>(lo)));
    const float b = static_cast<float>(H::from_bits(static_cast<std::uint16_t>(lo + 1)));
    // b - a is exact in float; (a + b) / 2 would overflow near bf16's largest value.
    const float mid = lo == max_finite ? a + (a - static_cast<float>(H::from_bits(static_cast<std::uint16_t>(lo - 1)))) / 2
                                       : a + (b - a) / 2;
    const std::uint16_t even = static_cast<std::uint16_t>(lo % 2 == 0 ? lo : lo + 1);
    for (float sign : {1.0f, -1.0f}) {
      const std::uint16_t s = sign < 0 ? 0x8000 : 0;
      const float m = sign * mid;
      if (H(m).bits != (even | s)) FAIL_CHECK("midpoint " << m << " of bits " << lo << " -> " << H(m).bits);
      const float below = std::nextafter(m, 0.0f);
      const float above = std::nextafter(m, sign * std::numeric_limits<float>::infinity());
      if (H(below).bits != (lo | s)) FAIL_CHECK("below midpoint " << below << " -> " << H(below).bits);
      if (H(above).bits != ((lo + 1) | s)) FAIL_CHECK("above midpoint " << above << " -> " << H(above).bits);
    }
  }
}

}  // namespace

TEST_CASE("f16: every value round-trips; ties round to even; known values") {
  check_round_trip_and_midpoints<rungs::f16>(0x7bff);
  CHECK(rungs::f16(1.0f).bits == 0x3c00);
  CHECK(rungs::f16(-2.0f).bits == 0xc000);
  CHECK(rungs::f16(65504.0f).bits == 0x7bff);
  CHECK(rungs::f16(65519.99f).bits == 0x7bff);
  CHECK(rungs::f16(65520.0f).bits == 0x7c00);  // rounds to infinity
  CHECK(rungs::f16(1e10f).bits == 0x7c00);
  CHECK(rungs::f16(-std::numeric_limits<float>::infinity()).bits == 0xfc00);
  CHECK(rungs::f16(0x1p-24f).bits == 0x0001);   // smallest subnormal
  CHECK(rungs::f16(0x1p-25f).bits == 0x0000);   // tie between 0 and 2^-24: even
  CHECK(rungs::f16(0x1.8p-24f).bits == 0x0002); // tie between 1 and 2 ulps: even
  CHECK(rungs::f16(0x1p-14f).bits == 0x0400);   // smallest normal
  CHECK(rungs::f16(-0.0f).bits == 0x8000);
  CHECK(static_cast<float>(rungs::f16::from_bits(0x3555)) == 0x1.554p-2f);
  CHECK((rungs::f16(std::numeric_limits<float>::quiet_NaN()).bits & 0x7e00) == 0x7e00);
  STATIC_REQUIRE(rungs::f16(0.5f).bits == 0x3800);  // usable in constant expressions
}

#if defined(__FLT16_MAX__)
TEST_CASE("f16 agrees with the compiler's _Float16 on random floats") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f)) continue;
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    if (rungs::f16(f).bits != expected) FAIL_CHECK(f << ": " << rungs::f16(f).bits << " != " << expected);
  }
}
#endif

TEST_CASE("bf16: every value round-trips; ties round to even; known values") {
  check_round_trip_and_midpoints<rungs::bf16>(0x7f7f);
  CHECK(rungs::bf16(1.0f).bits == 0x3f80);
  CHECK(rungs::bf16(-3.0f).bits == 0xc040);
  CHECK(rungs::bf16(1.00390625f).bits == 0x3f80);  // 1 + 2^-8: tie, even is 1
  CHECK(rungs::bf16(1.01171875f).bits == 0x3f82);  // 1 + 3 * 2^-8: tie, even is 1 + 2^-6
  CHECK(rungs::bf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds to infinity
  CHECK(rungs::bf16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
  CHECK(std::isnan(static_cast<float>(rungs::bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not truncate to infinity.
  CHECK(std::isnan(static_cast<float>(rungs::bf16(std::bit_cast<float>(0x7f800001u)))));
  STATIC_REQUIRE(rungs::bf16(2.0f).bits == 0x4000);
}

TEST_CASE("to_double and narrow") {
  CHECK(rungs::to_double(rungs::bf16(0.1f)) == static_cast<double>(static_cast<float>(rungs::bf16(0.1f))));
  CHECK(rungs::to_double(0.25f) == 0.25);
  CHECK(rungs::narrow<double>(0.1) == 0.1);
  CHECK(rungs::narrow<float>(0.1) == 0.1f);
  CHECK(rungs::narrow<rungs::f16>(0.1).bits == rungs::f16(0.1f).bits);
}
