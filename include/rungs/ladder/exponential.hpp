// Exponential: Gaudi's exponential bucketing range, (min, step, max, limit).
//
// `limit` target values spaced geometrically from min to max,
//   v_i = min * (max / min)^(i / (limit - 1)),  i = 0 .. limit-1,
// each rounded up to a multiple of step. When a rounded value is already a rung, the
// unused value of the grid min, min+step, min+2*step, ... <= max closest to v_i is taken
// instead (ties to the smaller), so the ladder keeps `limit` rungs while the grid allows;
// once the grid is used up, generation stops. This is the behaviour that produced the
// logs in gaudi-bucketing-exponential-zh.md (decode blocks 128 ... 4352 5888 for 5777 KV
// blocks), documented in docs/ladders.md:
//   Exponential{128, 128, 2048, 10} -> 128 256 384 512 640 768 896 1152 1536 2048
// The top rung is max rounded up to step (5777 -> 5888), except limit == 1, which gives
// just max. One deliberate difference from upstream: if the grid runs out before the last
// target, rungs still appends that top rung, so the ladder always covers max.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>

namespace rungs {

namespace detail {

// Constexpr log and exp, since std::pow is not constexpr in C++20. Accurate to a few ulp,
// which is all the geometric spacing needs (see snap_to_integer below).
inline constexpr double ln2 = 0.693147180559945309417232121458176568;

constexpr double log_positive(double x) {
  int e = 0;
  while (x >= 2.0) x /= 2.0, ++e;  // exact: powers of two only change the exponent
  while (x < 1.0) x *= 2.0, --e;
  if (x > 1.4142135623730951) x /= 2.0, ++e;  // x in [sqrt(1/2), sqrt(2)): fast convergence
  const double z = (x - 1.0) / (x + 1.0);     // log x = 2 atanh z, |z| < 0.172
  const double z2 = z * z;
  double term = z, sum = 0.0;
  for (int k = 1; k < 40; k += 2) sum += term / k, term *= z2;
  return 2.0 * sum + e * ln2;
}

constexpr double exp_of(double y) {
  const double kf = y / ln2;
  const auto k = static_cast<std::int64_t>(kf < 0 ? kf - 0.5 : kf + 0.5);
  const double r = y - static_cast<double>(k) * ln2;  // |r| <= ln2 / 2
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < 30; ++n) term *= r / n, sum += term;
  for (std::int64_t i = 0; i < k; ++i) sum *= 2.0;
  for (std::int64_t i = 0; i > k; --i) sum /= 2.0;
  return sum;
}

/// A geometric value within 1e-9 (relative) of an integer is that integer: ladders such
/// as (1, 1, 16, 5) must give exactly 1 2 4 8 16 whatever the last ulp of log/exp says,
/// instead of rounding 4.000000000000001 up to the next step.
constexpr double snap_to_integer(double v) {
  const double r = static_cast<double>(static_cast<std::int64_t>(v + 0.5));
  const double d = v > r ? v - r : r - v;
  return d <= 1e-9 * v ? r : v;
}

}  // namespace detail

struct Exponential {
  rung_t min = 1;
  rung_t step = 1;
  rung_t max = 1;
  rung_t limit = 1;

  /// Largest accepted limit. Real configurations use ceil(log2(max)) + 1 (at most 32);
  /// the bound keeps the duplicate resolution (quadratic in limit) cheap.
  static constexpr rung_t max_limit = 4096;

  friend constexpr bool operator==(const Exponential&, const Exponential&) = default;

  /// max rounded up to a multiple of step: the top rung (when limit > 1).
  constexpr rung_t top() const { return limit == 1 ? max : (max + step - 1) / step * step; }

  constexpr void validate() const {
    detail::require_positive("exponential ladder", "min", min);
    detail::require_positive("exponential ladder", "step", step);
    detail::require_positive("exponential ladder", "max", max);
    detail::require_positive("exponential ladder", "limit", limit);
    if (min > max) detail::reject("exponential ladder", "min", min, "must not exceed", "max", max);
    if (limit > max_limit)
      detail::reject("exponential ladder", "limit", limit, "exceeds the largest supported limit 4096");
    if (top() > max_rung)
      detail::reject("exponential ladder", "max", max,
                     "rounded up to a multiple of step exceeds the largest supported rung 2147483647");
  }

  constexpr std::size_t capacity() const { return static_cast<std::size_t>(limit); }

  constexpr std::size_t generate(std::span<rung_t> out) const {
    if (limit == 1) {
      out[0] = max;
      return 1;
    }
    std::size_t n = 0;  // out[0, n) holds the rungs so far, kept sorted
    auto position = [&](rung_t v) {  // first index with out[i] >= v
      std::size_t lo = 0, hi = n;
      while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (out[mid] < v) lo = mid + 1; else hi = mid;
      }
      return lo;
    };
    auto taken = [&](rung_t v) {
      const std::size_t i = position(v);
      return i < n && out[i] == v;
    };
    auto insert = [&](rung_t v) {
      std::size_t i = position(v);
      for (std::size_t j = n; j > i; --j) out[j] = out[j - 1];
      out[i] = v;
      ++n;
    };
    const rung_t last_grid = (max - min) / step;  // grid value j is min + j*step
    const double ratio = static_cast<double>(max) / static_cast<double>(min);
    const double log_ratio = detail::log_positive(ratio);
    for (rung_t i = 0; i < limit; ++i) {
      double v = i == 0 ? static_cast<double>(min)
                 : i == limit - 1
                     ? static_cast<double>(max)
                     : detail::snap_to_integer(
                           static_cast<double>(min) *
                           detail::exp_of(log_ratio * static_cast<double>(i) / static_cast<double>(limit - 1)));
      auto q = static_cast<rung_t>(v / static_cast<double>(step));
      if (static_cast<double>(q) * static_cast<double>(step) < v) ++q;
      const rung_t candidate = q * step;
      if (!taken(candidate)) {
        insert(candidate);
        continue;
      }
      // Nearest unused grid value below (or at) v and above it; the closer wins, ties down.
      const double jf = (v - static_cast<double>(min)) / static_cast<double>(step);
      rung_t below = jf < 0 ? -1 : static_cast<rung_t>(jf);
      if (below > last_grid) below = last_grid;
      rung_t above = below + 1;
      while (below >= 0 && taken(min + below * step)) --below;
      while (above <= last_grid && taken(min + above * step)) ++above;
      const bool has_below = below >= 0, has_above = above <= last_grid;
      if (!has_below && !has_above) break;  // the grid is used up
      const double d_below = has_below ? v - static_cast<double>(min + below * step) : 0.0;
      const double d_above = has_above ? static_cast<double>(min + above * step) - v : 0.0;
      insert(!has_above || (has_below && d_below <= d_above) ? min + below * step : min + above * step);
    }
    if (out[n - 1] < top()) insert(top());  // grid used up early: still cover max
    return n;
  }

  friend std::ostream& operator<<(std::ostream& os, const Exponential& p) {
    return os << "Exponential{.min = " << p.min << ", .step = " << p.step << ", .max = " << p.max
              << ", .limit = " << p.limit << "}";
  }
};

}  // namespace rungs
