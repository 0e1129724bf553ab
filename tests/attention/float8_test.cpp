// rungs::e4m3 / rungs::e5m2 (float8.hpp) against hand-checked bit patterns, and exhaustively:
// every code widens exactly and round-trips, every midpoint between neighbours rounds to the
// even one and the floats either side of it to the nearer one, and everything past the largest
// finite value saturates (cvt.rn.satfinite).
#include <rungs/dtype.hpp>
#include <rungs/numeric/float8.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

template <class H>
std::uint8_t bits_of(float x) {
  return H(x).bits;
}
template <class H>
float value_of(std::uint8_t b) {
  return static_cast<float>(H::from_bits(b));
}

template <class H>
void check_exhaustively(std::uint8_t max_code) {
  for (unsigned b = 0; b <= 0xff; ++b) {
    const float f = value_of<H>(static_cast<std::uint8_t>(b));
    if (std::isnan(f)) {
      CHECK(bits_of<H>(f) == 0x7f);
      continue;
    }
    if (std::isinf(f)) {  // E5M2's infinities saturate on the way back
      CHECK(bits_of<H>(f) == ((b & 0x80) | max_code));
      continue;
    }
    if (bits_of<H>(f) != b) FAIL_CHECK("code " << b << " -> " << f << " -> " << int(bits_of<H>(f)));
  }
  for (unsigned lo = 0; lo <= max_code; ++lo) {
    const float a = value_of<H>(static_cast<std::uint8_t>(lo));
    // Past the largest finite value the "next" one is a step of the same size further.
    const float b = lo < max_code ? value_of<H>(static_cast<std::uint8_t>(lo + 1))
                                  : a + (a - value_of<H>(static_cast<std::uint8_t>(lo - 1)));
    const float mid = a + (b - a) / 2;  // exact in float
    const unsigned even = lo % 2 == 0 ? lo : lo + 1;
    for (float sign : {1.0f, -1.0f}) {
      const unsigned s = sign < 0 ? 0x80 : 0;
      const float m = sign * mid;
      const auto sat = [&](unsigned code) { return (code > max_code ? max_code : code) | s; };
      if (bits_of<H>(m) != sat(even)) FAIL_CHECK("midpoint " << m << " -> " << int(bits_of<H>(m)));
      const float below = std::nextafter(m, 0.0f);
      const float above = std::nextafter(m, sign * inf);
      if (bits_of<H>(below) != sat(lo)) FAIL_CHECK("below midpoint " << below << " -> " << int(bits_of<H>(below)));
      if (bits_of<H>(above) != sat(lo + 1)) FAIL_CHECK("above midpoint " << above << " -> " << int(bits_of<H>(above)));
    }
  }
}

}  // namespace

TEST_CASE("e4m3: hand-checked codes; round to nearest even; saturation; NaN") {
  using rungs::e4m3;
  CHECK(bits_of<e4m3>(1.0f) == 0x38);      // 0 0111 000
  CHECK(bits_of<e4m3>(-2.0f) == 0xc0);     // 1 1000 000
  CHECK(bits_of<e4m3>(0.1f) == 0x1d);      // 1.6 x 2^-4: mantissa 4.8/8 -> 5
  CHECK(value_of<e4m3>(0x1d) == 0.1015625f);
  CHECK(bits_of<e4m3>(17.0f) == 0x58);     // 1.0625 x 16: a tie, to the even 16
  CHECK(bits_of<e4m3>(19.0f) == 0x5a);     // 1.1875 x 16: a tie, to the even 20
  CHECK(bits_of<e4m3>(448.0f) == 0x7e);    // the largest finite value
  CHECK(bits_of<e4m3>(464.0f) == 0x7e);    // the tie with 480 (the NaN code's place) goes to even
  CHECK(bits_of<e4m3>(470.0f) == 0x7e);    // rounds past 448: saturates
  CHECK(bits_of<e4m3>(1e30f) == 0x7e);
  CHECK(bits_of<e4m3>(inf) == 0x7e);
  CHECK(bits_of<e4m3>(-inf) == 0xfe);
  CHECK(bits_of<e4m3>(std::nanf("")) == 0x7f);
  CHECK(bits_of<e4m3>(-std::nanf("")) == 0x7f);
  CHECK(bits_of<e4m3>(-0.0f) == 0x80);
  CHECK(bits_of<e4m3>(0x1p-9f) == 0x01);   // the smallest subnormal
  CHECK(bits_of<e4m3>(0x1p-10f) == 0x00);  // half of it: a tie, to the even 0
  CHECK(bits_of<e4m3>(std::nextafter(0x1p-10f, 1.0f)) == 0x01);
  CHECK(bits_of<e4m3>(3 * 0x1p-10f) == 0x02);  // 1.5 quanta: to the even 2
  CHECK(bits_of<e4m3>(7 * 0x1p-9f) == 0x07);   // the largest subnormal
  CHECK(bits_of<e4m3>(0x1p-6f) == 0x08);       // the smallest normal
  CHECK(bits_of<e4m3>(15 * 0x1p-10f) == 0x08); // 7.5 quanta: to the even 8, the smallest normal
  CHECK(bits_of<e4m3>(1e-45f) == 0x00);        // a binary32 subnormal
  CHECK(value_of<e4m3>(0x01) == 0x1p-9f);
  CHECK(value_of<e4m3>(0x7e) == 448.0f);
  CHECK(value_of<e4m3>(0xfe) == -448.0f);
  CHECK(std::isnan(value_of<e4m3>(0x7f)));
  CHECK(std::isnan(value_of<e4m3>(0xff)));
  CHECK(std::signbit(value_of<e4m3>(0x80)));
  check_exhaustively<e4m3>(0x7e);
}

TEST_CASE("e5m2: hand-checked codes; round to nearest even; saturation; infinities and NaN") {
  using rungs::e5m2;
  CHECK(bits_of<e5m2>(1.0f) == 0x3c);     // binary16 1.0 is 0x3c00
  CHECK(bits_of<e5m2>(0.1f) == 0x2e);     // 1.6 x 2^-4: mantissa 2.4/4 -> 2
  CHECK(value_of<e5m2>(0x2e) == 0.09375f);
  CHECK(bits_of<e5m2>(57344.0f) == 0x7b);  // the largest finite value
  CHECK(bits_of<e5m2>(61440.0f) == 0x7b);  // the tie with 65536 rounds up to even, then saturates
  CHECK(bits_of<e5m2>(inf) == 0x7b);       // .satfinite: no infinity is written
  CHECK(bits_of<e5m2>(-inf) == 0xfb);
  CHECK(bits_of<e5m2>(std::nanf("")) == 0x7f);
  CHECK(bits_of<e5m2>(0x1p-16f) == 0x01);  // the smallest subnormal
  CHECK(bits_of<e5m2>(0x1p-17f) == 0x00);  // a tie, to the even 0
  CHECK(bits_of<e5m2>(3 * 0x1p-17f) == 0x02);
  CHECK(bits_of<e5m2>(0x1p-14f) == 0x04);  // the smallest normal
  CHECK(value_of<e5m2>(0x7c) == inf);
  CHECK(value_of<e5m2>(0xfc) == -inf);
  CHECK(std::isnan(value_of<e5m2>(0x7d)));
  CHECK(std::isnan(value_of<e5m2>(0xfe)));
  CHECK(value_of<e5m2>(0x01) == 0x1p-16f);
  // E5M2 is the top byte of binary16: every finite code widens to that f16's value.
  for (unsigned b = 0; b < 0x7c; ++b) {
    CHECK(value_of<e5m2>(static_cast<std::uint8_t>(b)) ==
          static_cast<float>(rungs::f16::from_bits(static_cast<std::uint16_t>(b << 8))));
  }
  check_exhaustively<e5m2>(0x7b);
}

TEST_CASE("fp8 dtypes: host types, sizes, and narrow/to_double through float") {
  STATIC_REQUIRE(std::is_same_v<rungs::host_type<rungs::dtype::fp8_e4m3>, rungs::e4m3>);
  STATIC_REQUIRE(std::is_same_v<rungs::host_type<rungs::dtype::fp8>, rungs::e4m3>);
  STATIC_REQUIRE(std::is_same_v<rungs::host_type<rungs::dtype::fp8_e5m2>, rungs::e5m2>);
  STATIC_REQUIRE(rungs::is_fp8(rungs::dtype::fp8_e5m2) && !rungs::is_fp8(rungs::dtype::bf16));
  CHECK(rungs::narrow<rungs::e4m3>(1000.0).bits == 0x7e);
  CHECK(rungs::to_double(rungs::e4m3::from_bits(0x38)) == 1.0);
  CHECK(rungs::to_double(rungs::e5m2::from_bits(0xc0)) == -2.0);
}
