#include <rungs/ladder.hpp>

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

using rungs::ladder;
using rungs::rung_t;

namespace {
// Every size up to the top maps to the smallest rung >= it; above the top, eager.
void check_lookup_property(const ladder& l) {
  const auto r = l.rungs();
  REQUIRE(std::adjacent_find(r.begin(), r.end(), std::greater_equal<>()) == r.end());
  for (rung_t n = 0; n <= l.top() + 3; ++n) {
    const rungs::rung_lookup got = l.lookup(n);
    const auto it = std::lower_bound(r.begin(), r.end(), n);
    INFO(l.description() << " n = " << n);
    if (it == r.end()) {
      REQUIRE(got.eager());
      REQUIRE(got.rung == n);
    } else {
      REQUIRE(got.index == it - r.begin());
      REQUIRE(got.rung == *it);
      REQUIRE(got.size == n);
    }
  }
}
}  // namespace

TEST_CASE("every size maps to the smallest rung covering it, for every kind of ladder") {
  check_lookup_property(ladder{rungs::Linear{2, 32, 64}});
  check_lookup_property(ladder{rungs::Linear{3, 32, 100}});
  check_lookup_property(ladder{rungs::Linear{128, 128, 2048}});
  check_lookup_property(ladder{rungs::Linear{100, 128, 1000}});
  check_lookup_property(ladder{rungs::Exponential{128, 128, 5777, 14}});
  check_lookup_property(ladder{rungs::Exponential{100, 64, 1000, 6}});
  check_lookup_property(ladder{rungs::CaptureSizes::vllm(512)});
  check_lookup_property(ladder{rungs::CaptureSizes::sglang(1000)});
  check_lookup_property(ladder{rungs::CaptureSizes::trtllm(700)});
  check_lookup_property(ladder{rungs::CaptureSizes::vllm_v1(513)});
  check_lookup_property(ladder{rungs::Pow2{3, 1000}});
  check_lookup_property(ladder{rungs::Explicit{1, 7, 64, 65, 1024}});
  check_lookup_property(ladder{rungs::Explicit{5}});
}

TEST_CASE("the run-time ladder: rungs, bounds, description") {
  const ladder l{rungs::CaptureSizes::vllm(512)};
  CHECK(l.size() == 67);
  CHECK(l.front() == 1);
  CHECK(l.top() == 512);
  CHECK(l[3] == 8);
  CHECK(l.lookup(33) == rungs::rung_lookup{33, 40, 7});
  CHECK(l.lookup(512) == rungs::rung_lookup{512, 512, 66});
  CHECK(l.lookup(513).eager());
  CHECK(l.lookup(0).rung == 1);
  // Equal rungs compare equal whatever policy produced them.
  CHECK(ladder{rungs::Linear{1, 1, 4}} == ladder{rungs::Explicit{1, 2, 3, 4}});
  CHECK(ladder{rungs::Linear{1, 1, 4}} != ladder{rungs::Pow2{1, 4}});
  const ladder copy = l;
  CHECK(copy.lookup(33) == l.lookup(33));
}

TEST_CASE("compile-time and run-time ladders agree") {
  auto agree = []<auto P>() {
    using S = rungs::static_ladder<P>;
    const ladder l{P};
    REQUIRE(std::equal(S::values.begin(), S::values.end(), l.rungs().begin(), l.rungs().end()));
    for (rung_t n = -1; n <= S::top() + 2; ++n) REQUIRE(S::lookup(n) == l.lookup(n));
  };
  agree.operator()<rungs::Linear{2, 32, 64}>();
  agree.operator()<rungs::Linear{3, 32, 100}>();
  agree.operator()<rungs::Exponential{128, 128, 2048, 10}>();
  agree.operator()<rungs::Exponential{1, 2, 4, 3}>();
  agree.operator()<rungs::CaptureSizes::vllm(512)>();
  agree.operator()<rungs::CaptureSizes::sglang(777)>();
  agree.operator()<rungs::Pow2{1, 4096}>();
  agree.operator()<rungs::Explicit{1, 3, 9, 27}>();
}
