// Explicit: a ladder given rung by rung, e.g. Explicit{1, 2, 4, 8, 16}.
//
// Explicit<N> holds its rungs in a plain array, so it is a structural value usable as a
// template argument (static_ladder<Explicit{1, 2, 4, 8}>); Explicit<> (dynamic extent)
// holds a std::vector for lists read at run time. Both check the same rules: at least one
// rung, every rung positive, strictly increasing (a duplicate or a descending pair is a
// typo worth reporting, not something to sort away).
#pragma once

#include <rungs/ladder/rung.hpp>

#include <concepts>
#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace rungs {

namespace detail {

constexpr void validate_explicit(std::span<const rung_t> values) {
  if (values.empty()) reject("explicit ladder", "rung count", 0, "must be positive");
  require_rung_count("explicit ladder", values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] <= 0) reject_element("explicit ladder", "values", i, values[i], "must be positive");
    if (values[i] > max_rung)
      reject_element("explicit ladder", "values", i, values[i], "exceeds the largest supported rung 2147483647");
    if (i > 0 && values[i] <= values[i - 1]) reject_not_increasing("explicit ladder", "values", i, values[i], values[i - 1]);
  }
}

constexpr std::size_t copy_rungs(std::span<const rung_t> values, std::span<rung_t> out) {
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return values.size();
}

inline std::ostream& print_explicit(std::ostream& os, std::span<const rung_t> values) {
  os << "Explicit{";
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  return os << "}";
}

}  // namespace detail

template <std::size_t N = std::dynamic_extent>
struct Explicit {
  static_assert(N > 0, "rungs::Explicit: a ladder needs at least one rung");
  rung_t values[N];

  friend constexpr bool operator==(const Explicit&, const Explicit&) = default;

  constexpr void validate() const { detail::validate_explicit(values); }
  constexpr std::size_t capacity() const { return N; }
  constexpr std::size_t generate(std::span<rung_t> out) const { return detail::copy_rungs(values, out); }

  friend std::ostream& operator<<(std::ostream& os, const Explicit& p) {
    return detail::print_explicit(os, p.values);
  }
};

/// Run-time explicit ladder (from a configuration file or the command line).
template <>
struct Explicit<std::dynamic_extent> {
  std::vector<rung_t> values;

  friend bool operator==(const Explicit&, const Explicit&) = default;

  void validate() const { detail::validate_explicit(values); }
  std::size_t capacity() const { return values.size(); }
  std::size_t generate(std::span<rung_t> out) const { return detail::copy_rungs(values, out); }

  friend std::ostream& operator<<(std::ostream& os, const Explicit& p) {
    return detail::print_explicit(os, p.values);
  }
};

template <std::integral... T>
Explicit(T...) -> Explicit<sizeof...(T)>;
Explicit(std::vector<rung_t>) -> Explicit<std::dynamic_extent>;

}  // namespace rungs
