#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/phased_buckets.hpp>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "support.hpp"

using namespace rungs::engine;
using rungs_test::grid;
using rungs_test::token_ladder;

namespace {
template <class Space>
std::string sequence_of(const auto& order, const Space& space) {
  std::ostringstream os;
  bool first = true;
  for (std::size_t i : capture_sequence(order, space)) {
    os << (first ? "" : " ") << space.at(i);
    first = false;
  }
  return os.str();
}

grid gaudi_prompt() { return {phase::prompt, {1, 2, 4}, {128, 256, 384, 512, 640, 768, 896, 1024}}; }
}  // namespace

TEST_CASE("max_bs sorts batch descending, then sequence ascending (the Gaudi document's example)") {
  grid g{phase::decode, {1, 32, 64}, {128, 256}};
  CHECK(sequence_of(max_bs{}, g) == "(64, 128) (64, 256) (32, 128) (32, 256) (1, 128) (1, 256)");
}

TEST_CASE("min_tokens sorts by (bs*seq, seq, bs) ascending") {
  CHECK(sequence_of(min_tokens{}, gaudi_prompt()) ==
        "(1, 128) (2, 128) (1, 256) (1, 384) (4, 128) (2, 256) (1, 512) (1, 640) (2, 384) (1, 768) (1, 896) "
        "(4, 256) (2, 512) (1, 1024) (2, 640) (4, 384) (2, 768) (2, 896) (4, 512) (2, 1024) (4, 640) (4, 768) "
        "(4, 896) (4, 1024)");
}

TEST_CASE("largest_first sorts tokens descending, ties in ladder order") {
  token_ladder l{{1, 2, 4, 8, 16, 24, 32}};
  CHECK(sequence_of(largest_first{}, l) == "32 24 16 8 4 2 1");
  grid g{phase::prompt, {1, 2}, {256, 512}};
  CHECK(sequence_of(largest_first{}, g) == "(2, 512) (1, 512) (2, 256) (1, 256)");
}

TEST_CASE("ladder_order keeps the space's order; by_phase puts prompt first") {
  // A grid keeps its listing order (a hand-written priority list, say).
  grid_buckets<rungs::bucket_grid<2>> listed(rungs::bucket_grid<2>({{4, 128}, {1, 128}, {2, 256}}), phase::decode);
  CHECK(sequence_of(ladder_order{}, listed) == "(4, 128) (1, 128) (2, 256)");
  phased_buckets both(grid{phase::prompt, {1, 2}, {128, 256}}, grid{phase::decode, {1, 2}, {128, 256}});
  CHECK(sequence_of(by_phase<>{}, both) == "(1, 128) (2, 128) (1, 256) (2, 256) (2, 128) (2, 256) (1, 128) (1, 256)");
  CHECK(by_phase<>{}.name() == "prompt min-tokens, decode max-bs");
}

namespace {
// A user-defined order: odd batch sizes first (any type with before() and name()).
struct odd_first {
  bool before(const bucket& a, const bucket& b) const { return (a.batch() % 2) > (b.batch() % 2); }
  std::string_view name() const { return "odd-first"; }
};
}  // namespace

TEST_CASE("a user-defined order plugs in through the capture_order concept") {
  static_assert(capture_order<odd_first>);
  static_assert(!capture_order<int>);
  token_ladder l{{2, 3, 4, 5}};
  CHECK(sequence_of(odd_first{}, l) == "3 5 2 4");
}

TEST_CASE("parse_order reads every name order_names lists, and only those") {
  CHECK(std::holds_alternative<largest_first>(parse_order("largest-first").policy()));
  CHECK(std::holds_alternative<max_bs>(parse_order("max-bs").policy()));
  CHECK(std::holds_alternative<min_tokens>(parse_order("min-tokens").policy()));
  CHECK(std::holds_alternative<ladder_order>(parse_order("ladder").policy()));
  CHECK(std::holds_alternative<by_phase<>>(parse_order("by-phase").policy()));
  CHECK(parse_order("by-phase").name() == "prompt min-tokens, decode max-bs");
  CHECK_THROWS_WITH(parse_order("smallest-first"),
                    "capture order 'smallest-first' is not one of largest-first, max-bs, min-tokens, ladder, by-phase");
  CHECK_THROWS_AS(parse_order(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_order("max-bs, min-tokens"), std::invalid_argument);
}
