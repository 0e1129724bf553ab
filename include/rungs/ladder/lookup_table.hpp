// The size -> rung lookup shared by the run-time ladder and the compile-time ladder, and
// its result type.
//
// The lookup is a table index, not a search: table[k] holds the index of the smallest rung
// >= k * q, where q is the largest power of two dividing every rung. Since every rung is a
// multiple of q, n <= rung exactly when ceil(n / q) <= rung / q, so table[ceil(n / q)] is
// the answer, and ladders in tokens or KV blocks (multiples of 128) need tables 128x
// smaller than their top rung. A size above the top rung is not an error: it is the eager
// fallback, the normal path for batches too large to be worth a graph.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <span>

namespace rungs {

/// Where a size lands on a ladder.
struct rung_lookup {
  static constexpr std::int32_t eager_index = -1;

  rung_t size = 0;   ///< the requested size (rows, tokens, blocks)
  rung_t rung = 0;   ///< the rung it runs at; equal to size when eager
  std::int32_t index = eager_index;  ///< the rung's position on the ladder, or eager_index

  /// Above the top rung: runs without a graph, unpadded.
  constexpr bool eager() const noexcept { return index < 0; }
  /// Padded rows: computed and thrown away (33 at rung 40: 7).
  constexpr rung_t padding() const noexcept { return rung - size; }
  /// Share of the run that is padding (33 at rung 40: 7 / 40 = 0.175).
  constexpr double padding_fraction() const noexcept {
    return rung > 0 ? static_cast<double>(rung - size) / static_cast<double>(rung) : 0.0;
  }
  // Units for padding_tally: rows really used and rows run.
  constexpr rung_t real() const noexcept { return size; }
  constexpr rung_t padded() const noexcept { return rung; }

  friend constexpr bool operator==(const rung_lookup&, const rung_lookup&) = default;

  /// "40 (padding 7, 17.5%)", or "eager" above the top rung (rungs-plan lookup's format).
  friend std::ostream& operator<<(std::ostream& os, const rung_lookup& l) {
    if (l.eager()) return os << "eager";
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.1f%%", 100.0 * l.padding_fraction());
    return os << l.rung << " (padding " << l.padding() << ", " << percent << ")";
  }
};

namespace detail {

/// Most entries a lookup table may have (8 MiB of 16-bit indices).
inline constexpr std::size_t max_table_entries = std::size_t{1} << 22;

/// log2 of the largest power of two dividing every rung.
constexpr unsigned rung_table_shift(std::span<const rung_t> rungs) noexcept {
  std::uint64_t bits = 0;
  for (rung_t r : rungs) bits |= static_cast<std::uint64_t>(r);
  return static_cast<unsigned>(std::countr_zero(bits));
}

constexpr std::size_t rung_table_entries(rung_t top, unsigned shift) noexcept {
  return static_cast<std::size_t>(top >> shift) + 1;
}

/// Checks what generate() returned: ascending, distinct, positive, and tabulable.
constexpr void check_generated_rungs(std::span<const rung_t> rungs) {
  if (rungs.empty()) reject("ladder", "rung count", 0, "must be positive (the policy generated no rungs)");
  for (std::size_t i = 0; i < rungs.size(); ++i) {
    if (rungs[i] <= 0) reject_element("ladder", "generated rung", i, rungs[i], "must be positive");
    if (rungs[i] > max_rung)
      reject_element("ladder", "generated rung", i, rungs[i], "exceeds the largest supported rung 2147483647");
    if (i > 0 && rungs[i] <= rungs[i - 1]) reject_not_increasing("ladder", "generated rung", i, rungs[i], rungs[i - 1]);
  }
  if (rung_table_entries(rungs.back(), rung_table_shift(rungs)) > max_table_entries)
    reject("ladder", "top rung", rungs.back(),
           "needs a lookup table of more than 4194304 entries; use rungs that share a larger "
           "power-of-two factor");
}

template <class Index>
constexpr void fill_rung_table(std::span<const rung_t> rungs, unsigned shift, std::span<Index> table) noexcept {
  std::size_t i = 0;
  for (std::size_t k = 0; k < table.size(); ++k) {
    while (rungs[i] < (static_cast<rung_t>(k) << shift)) ++i;
    table[k] = static_cast<Index>(i);
  }
}

/// The lookup itself: one compare, one shift, two loads, no allocation. A negative size
/// (a caller bug) compares above every rung as unsigned and reports eager rather than
/// reading outside the table.
template <class Index>
constexpr rung_lookup lookup_rung(const rung_t* rungs, rung_t top, const Index* table, unsigned shift,
                                  rung_t n) noexcept {
  const auto u = static_cast<std::uint64_t>(n);
  if (u > static_cast<std::uint64_t>(top)) [[unlikely]]
    return {n, n, rung_lookup::eager_index};
  const Index i = table[(u + ((std::uint64_t{1} << shift) - 1)) >> shift];
  return {n, rungs[i], static_cast<std::int32_t>(i)};
}

}  // namespace detail
}  // namespace rungs
