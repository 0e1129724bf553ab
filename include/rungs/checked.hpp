// Checked 64-bit integer arithmetic for sizes computed from user input (token products of
// buckets, graph-memory budgets, KV byte counts), and the checked conversion of a double: the
// result, or nothing when it does not fit int64. Signed overflow is undefined behaviour, so every such product is checked before it
// is formed; the caller turns "nothing" into an error that names its values and rule.
//
//   if (const auto t = rungs::checked_mul(batch, tokens)) use(*t); else reject(...);
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace rungs {

/// a + b, or nullopt when the sum is outside int64.
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
  using limits = std::numeric_limits<std::int64_t>;
  if ((b > 0 && a > limits::max() - b) || (b < 0 && a < limits::min() - b)) return std::nullopt;
  return a + b;
}

/// a * b, or nullopt when the product is outside int64 (any signs).
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  using limits = std::numeric_limits<std::int64_t>;
  if (a == 0 || b == 0) return std::int64_t{0};
  // Division truncates toward zero, so each bound below is the exact threshold.
  const bool overflows = a > 0 ? (b > 0 ? a > limits::max() / b : b < limits::min() / a)
                               : (b > 0 ? a < limits::min() / b : a < limits::max() / b);
  if (overflows) return std::nullopt;
  return a * b;
}

/// v rounded toward zero, or nullopt when v is NaN, infinite or outside int64 (converting
/// such a double to an integer is undefined behaviour). 2^63 is the first double past int64.
constexpr std::optional<std::int64_t> checked_trunc(double v) noexcept {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

/// floor(share) for a share of `whole` (whole x factors in [0, 1], computed in double): at
/// most `whole`. Only the rounding of a whole near 2^63 to a double reaches 2^63, which then
/// stands for `whole` itself.
inline std::int64_t floor_share(std::int64_t whole, double share) noexcept {
  const std::int64_t v = checked_trunc(std::floor(share)).value_or(whole);
  return v < whole ? v : whole;
}

}  // namespace rungs
