// rungs/checked.hpp: every boundary of int64 addition and multiplication, both signs.
#include <rungs/checked.hpp>

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

using rungs::checked_add;
using rungs::checked_mul;

namespace {
constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
}  // namespace

TEST_CASE("checked_add: the sum, or nothing past either end of int64") {
  CHECK(checked_add(2, 3) == 5);
  CHECK(checked_add(max - 1, 1) == max);
  CHECK(checked_add(max, 1) == std::nullopt);
  CHECK(checked_add(min + 1, -1) == min);
  CHECK(checked_add(min, -1) == std::nullopt);
  CHECK(checked_add(max, min) == -1);
  static_assert(checked_add(1, 2) == 3);
}

TEST_CASE("checked_mul: the product, or nothing past either end of int64") {
  CHECK(checked_mul(0, max) == 0);
  CHECK(checked_mul(min, 0) == 0);
  CHECK(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31) == std::int64_t{1} << 62);
  CHECK(checked_mul(std::int64_t{1} << 62, 2) == std::nullopt);       // 2^63
  CHECK(checked_mul(std::int64_t{1} << 62, -2) == min);               // -2^63 fits
  CHECK(checked_mul(-(std::int64_t{1} << 62) - 1, 2) == std::nullopt);
  CHECK(checked_mul(-1, min) == std::nullopt);
  CHECK(checked_mul(min, -1) == std::nullopt);
  CHECK(checked_mul(-1, -max) == max);
  CHECK(checked_mul(-3, -3) == 9);
  // A 3-D bucket's batch * (query + context_blocks * block_size) at the largest rungs.
  constexpr std::int64_t r = 2147483647;
  CHECK(checked_mul(r, 2 * r) == r * 2 * r);  // 2^63 - 2^33 + 2
  CHECK(checked_mul(r, 3 * r) == std::nullopt);
  static_assert(checked_mul(6, 7) == 42);
}

TEST_CASE("checked_trunc: a double converts only inside int64; floor_share never exceeds its whole") {
  CHECK(rungs::checked_trunc(-2.9) == -2);
  CHECK(rungs::checked_trunc(4611686018427387904.0) == std::int64_t{1} << 62);
  CHECK(rungs::checked_trunc(-9223372036854775808.0) == min);
  CHECK(rungs::checked_trunc(9223372036854775808.0) == std::nullopt);  // 2^63
  CHECK(rungs::checked_trunc(1e308) == std::nullopt);
  CHECK(rungs::checked_trunc(std::numeric_limits<double>::infinity()) == std::nullopt);
  CHECK(rungs::checked_trunc(std::numeric_limits<double>::quiet_NaN()) == std::nullopt);
  CHECK(rungs::floor_share(1000, 1000 * 0.3) == 300);
  // INT64_MAX as a double is 2^63: the whole share is the whole itself.
  CHECK(rungs::floor_share(max, static_cast<double>(max) * 1.0) == max);
}
