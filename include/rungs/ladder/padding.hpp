// padding_tally: the cost of a ladder over a trace of batches.
//
// Every batch that lands on a rung runs the whole rung: its padded rows (or tokens, for
// bucket grids) are computed and discarded. Batches above the top rung run eagerly,
// unpadded but without a graph. The tally answers "what fraction of the work my graphs do
// is padding, and how often do I fall back to eager?" for one ladder and one trace.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <concepts>
#include <cstdint>

namespace rungs {

/// A lookup result the tally can count: rung_lookup (rows) and bucket_lookup (tokens).
template <class L>
concept padding_outcome = requires(const L& l) {
  { l.eager() } -> std::convertible_to<bool>;
  { l.real() } -> std::convertible_to<std::int64_t>;
  { l.padded() } -> std::convertible_to<std::int64_t>;
};

struct padding_tally {
  std::int64_t batches = 0;     ///< lookups counted
  std::int64_t eager = 0;       ///< of which above the top rung
  std::int64_t real = 0;        ///< rows (tokens) really used by batches that ran on a rung
  std::int64_t padding = 0;     ///< rows (tokens) padded on those batches
  std::int64_t eager_real = 0;  ///< rows (tokens) of the eager batches

  template <padding_outcome L>
  constexpr void add(const L& l) noexcept {
    ++batches;
    if (l.eager()) {
      ++eager;
      eager_real += static_cast<std::int64_t>(l.real());
    } else {
      real += static_cast<std::int64_t>(l.real());
      padding += static_cast<std::int64_t>(l.padded()) - static_cast<std::int64_t>(l.real());
    }
  }

  /// Batches that ran on a rung.
  constexpr std::int64_t on_rungs() const noexcept { return batches - eager; }
  /// Share of the rung runs' work that is padding: padding / (real + padding).
  constexpr double wasted_fraction() const noexcept {
    const std::int64_t run = real + padding;
    return run > 0 ? static_cast<double>(padding) / static_cast<double>(run) : 0.0;
  }

  friend constexpr bool operator==(const padding_tally&, const padding_tally&) = default;
};

/// Looks every size of `trace` up on `ladder` (anything with lookup(n)) and tallies it.
template <class Ladder, class Trace>
constexpr padding_tally tally_padding(const Ladder& ladder, const Trace& trace) {
  padding_tally t;
  for (const auto& n : trace) t.add(ladder.lookup(n));
  return t;
}

}  // namespace rungs
