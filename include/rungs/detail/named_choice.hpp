// A policy family's names as flags and configuration files spell them, stated once: a
// comma-separated list whose i-th name selects the i-th value (capture_order.hpp's
// parse_order, capture_timing.hpp's parse_timing).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rungs::detail {

/// How many names a ", "-separated list holds.
constexpr std::size_t count_names(std::string_view names) {
  std::size_t n = names.empty() ? 0 : 1;
  for (std::size_t i = names.find(", "); i != std::string_view::npos; i = names.find(", ", i + 2)) ++n;
  return n;
}

/// The value whose position in `values` is the position of `name` in `names` (", "-separated);
/// throws std::invalid_argument naming `what`, the name and the choices when none matches.
template <class Result, class... Values>
Result parse_named(std::string_view name, std::string_view names, std::string_view what, const Values&... values) {
  std::string_view rest = names;
  Result found{};
  bool matched = false;
  auto try_one = [&](const auto& value) {
    const std::size_t end = rest.find(", ");
    const std::string_view candidate = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 2);
    if (!matched && candidate == name) {
      found = Result(value);
      matched = true;
    }
  };
  (try_one(values), ...);
  if (!matched)
    throw std::invalid_argument(std::string(what) + " '" + std::string(name) + "' is not one of " + std::string(names));
  return found;
}

}  // namespace rungs::detail
