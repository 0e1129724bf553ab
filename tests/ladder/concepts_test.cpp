#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/concepts.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/pow2.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <ostream>
#include <span>

namespace concepts_test {
// A policy written outside rungs: odd numbers from 1 to max. It plugs into both ladders.
struct Odd {
  rungs::rung_t max = 1;
  friend constexpr bool operator==(const Odd&, const Odd&) = default;
  constexpr void validate() const { rungs::detail::require_positive("odd ladder", "max", max); }
  constexpr std::size_t capacity() const { return static_cast<std::size_t>((max + 1) / 2); }
  constexpr std::size_t generate(std::span<rungs::rung_t> out) const {
    std::size_t n = 0;
    for (rungs::rung_t r = 1; r <= max; r += 2) out[n++] = r;
    return n;
  }
  friend std::ostream& operator<<(std::ostream& os, const Odd& p) { return os << "Odd{" << p.max << "}"; }
};

// Generates a descending list: the ladder must refuse it rather than mis-index.
struct Backwards {
  friend constexpr bool operator==(const Backwards&, const Backwards&) = default;
  constexpr void validate() const {}
  constexpr std::size_t capacity() const { return 2; }
  constexpr std::size_t generate(std::span<rungs::rung_t> out) const {
    out[0] = 8;
    out[1] = 4;
    return 2;
  }
  friend std::ostream& operator<<(std::ostream& os, const Backwards&) { return os << "Backwards"; }
};

struct NotAPolicy {
  int x = 0;
};
}  // namespace concepts_test

using concepts_test::Backwards;
using concepts_test::NotAPolicy;
using concepts_test::Odd;

TEST_CASE("the library's policies satisfy LadderPolicy; other types do not") {
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::Linear>);
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::Exponential>);
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::CaptureSizes>);
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::Pow2>);
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::Explicit<3>>);
  STATIC_REQUIRE(rungs::LadderPolicy<rungs::Explicit<>>);
  STATIC_REQUIRE(rungs::LadderPolicy<Odd>);
  STATIC_REQUIRE_FALSE(rungs::LadderPolicy<NotAPolicy>);
  STATIC_REQUIRE_FALSE(rungs::LadderPolicy<int>);
}

TEST_CASE("a user-defined policy works at compile time and at run time alike") {
  using odd = rungs::static_ladder<Odd{9}>;
  STATIC_REQUIRE(odd::size() == 5);
  STATIC_REQUIRE(odd::lookup(4).rung == 5);
  const rungs::ladder l{Odd{9}};
  CHECK(std::vector<rungs::rung_t>(l.rungs().begin(), l.rungs().end()) == std::vector<rungs::rung_t>{1, 3, 5, 7, 9});
  CHECK(l.lookup(4) == odd::lookup(4));
  CHECK(l.description() == "Odd{9}");
}

TEST_CASE("a policy that generates rungs out of order is refused") {
  CHECK_THROWS_WITH(rungs::ladder{Backwards{}},
                    "ladder: generated rung[1] = 4 must be greater than generated rung[0] = 8 "
                    "(rungs are strictly increasing)");
}
