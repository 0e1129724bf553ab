#include <rungs/ladder/lookup_table.hpp>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using rungs::rung_lookup;
using rungs::rung_t;

namespace {
std::string text(const rung_lookup& l) {
  std::ostringstream os;
  os << l;
  return os.str();
}
}  // namespace

TEST_CASE("a batch of 33 runs at 40: 7 padded rows, 17.5%") {
  const rung_lookup l{33, 40, 8};
  CHECK_FALSE(l.eager());
  CHECK(l.padding() == 7);
  CHECK(l.padding_fraction() == Approx(0.175));
  CHECK(text(l) == "40 (padding 7, 17.5%)");
  CHECK(text({64, 64, 10}) == "64 (padding 0, 0.0%)");
  CHECK(text({1, 3, 0}) == "3 (padding 2, 66.7%)");
}

TEST_CASE("the eager result is explicit and carries no padding") {
  const rung_lookup l{600, 600, rung_lookup::eager_index};
  CHECK(l.eager());
  CHECK(l.padding() == 0);
  CHECK(l.padding_fraction() == 0.0);
  CHECK(text(l) == "eager");
}

TEST_CASE("the table granularity is the largest power of two dividing every rung") {
  using rungs::detail::rung_table_shift;
  const std::vector<rung_t> tokens{128, 256, 384, 512};
  const std::vector<rung_t> batches{1, 2, 4, 8};
  const std::vector<rung_t> even{2, 4, 8, 16, 32, 64};
  const std::vector<rung_t> odd_one{4, 8, 12, 100, 101};
  CHECK(rung_table_shift(tokens) == 7);
  CHECK(rung_table_shift(batches) == 0);
  CHECK(rung_table_shift(even) == 1);
  CHECK(rung_table_shift(odd_one) == 0);
}

TEST_CASE("table lookups equal a search for the smallest rung at least n") {
  const std::vector<rung_t> rungs{128, 256, 384, 1024, 1408};
  const unsigned shift = rungs::detail::rung_table_shift(rungs);
  std::vector<std::uint16_t> table(rungs::detail::rung_table_entries(rungs.back(), shift));
  CHECK(table.size() == 12);  // 1408 / 128 + 1, not 1409
  rungs::detail::fill_rung_table<std::uint16_t>(rungs, shift, table);
  for (rung_t n = 0; n <= 1500; ++n) {
    const rung_lookup l = rungs::detail::lookup_rung(rungs.data(), rungs.back(), table.data(), shift, n);
    const auto it = std::lower_bound(rungs.begin(), rungs.end(), n);
    if (it == rungs.end()) {
      CHECK(l == rung_lookup{n, n, rung_lookup::eager_index});
    } else {
      CHECK(l == rung_lookup{n, *it, static_cast<std::int32_t>(it - rungs.begin())});
    }
  }
  // A negative size is a caller bug; it must not index outside the table.
  CHECK(rungs::detail::lookup_rung(rungs.data(), rungs.back(), table.data(), shift, rung_t{-5}).eager());
}

TEST_CASE("a ladder whose table would be too large is refused") {
  const std::vector<rung_t> sparse{1, rung_t{1} << 30};
  CHECK_THROWS_WITH(rungs::detail::check_generated_rungs(sparse),
                    "ladder: top rung = 1073741824 needs a lookup table of more than 4194304 entries; use rungs "
                    "that share a larger power-of-two factor");
  const std::vector<rung_t> coarse{1 << 10, rung_t{1} << 30};  // shift 10: 2^20 + 1 entries
  CHECK_NOTHROW(rungs::detail::check_generated_rungs(coarse));
}
