#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <cstdint>
#include <type_traits>

using rungs::rung_t;

namespace {
using decode = rungs::static_ladder<rungs::Linear{.min = 2, .step = 32, .max = 64}>;

// A kernel-side use: pick the captured graph at compile time.
template <auto Policy>
constexpr rung_t padded_batch(rung_t n) {
  return rungs::static_ladder<Policy>::lookup(n).rung;
}
}  // namespace

TEST_CASE("a compile-time ladder's rungs and lookups are constant expressions") {
  STATIC_REQUIRE(decode::size() == 6);
  STATIC_REQUIRE(decode::front() == 2);
  STATIC_REQUIRE(decode::top() == 64);
  STATIC_REQUIRE(decode::lookup(20).rung == 32);
  STATIC_REQUIRE(decode::lookup(20).index == 4);
  STATIC_REQUIRE(decode::lookup(65).eager());
  STATIC_REQUIRE(decode::lookup(1).rung == 2);
  STATIC_REQUIRE(decode::policy == rungs::Linear{2, 32, 64});
  STATIC_REQUIRE(decode::rungs().size() == 6);
  STATIC_REQUIRE(padded_batch<rungs::CaptureSizes::vllm(512)>(33) == 40);
}

TEST_CASE("the compile-time table is as small as the rungs allow") {
  // Rungs in multiples of 2: 64 / 2 + 1 entries, one byte each.
  STATIC_REQUIRE(decode::table.size() == 33);
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(decode::table[0])>, std::uint8_t>);
  using blocks = rungs::static_ladder<rungs::Exponential{128, 128, 5777, 14}>;
  STATIC_REQUIRE(blocks::table.size() == 5888 / 128 + 1);
  using wide = rungs::static_ladder<rungs::Linear{1, 1, 300}>;
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(wide::table[0])>, std::uint16_t>);
}

TEST_CASE("equal policies name the same compile-time ladder") {
  STATIC_REQUIRE(std::is_same_v<decode, rungs::static_ladder<rungs::Linear{2, 32, 64}>>);
  STATIC_REQUIRE(!std::is_same_v<decode, rungs::static_ladder<rungs::Linear{2, 32, 128}>>);
  STATIC_REQUIRE(std::is_same_v<rungs::static_ladder<rungs::CaptureSizes::vllm(64)>,
                                rungs::static_ladder<rungs::CaptureSizes::from({{1, 1}, {2, 2}, {4, 4}, {8, 8}}, 64)>>);
}
