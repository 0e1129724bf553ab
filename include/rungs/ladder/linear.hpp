// Linear: Gaudi's linear bucketing range with ramp-up, (min, step, max).
//
// Ramp-up doubles from min while the value stays below step (small batches pay little
// padding), then every multiple of step up to max:
//   Linear{2, 32, 64}     -> 2 4 8 16 32 64
//   Linear{128, 128, 512} -> 128 256 384 512
//   Linear{3, 32, 100}    -> 3 6 12 24 32 64 96 100
// Unlike the upstream code (see docs/ladders.md), min and max are always rungs: an
// off-stride max is appended rather than dropped (upstream's (100, 128, 1000) ends at 896
// and a 1000-token prompt has no bucket), and nothing below min is produced.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <cstddef>
#include <ostream>
#include <span>

namespace rungs {

struct Linear {
  rung_t min = 1;
  rung_t step = 1;
  rung_t max = 1;

  friend constexpr bool operator==(const Linear&, const Linear&) = default;

  constexpr void validate() const {
    detail::require_positive("linear ladder", "min", min);
    detail::require_positive("linear ladder", "step", step);
    detail::require_positive("linear ladder", "max", max);
    if (min > max) detail::reject("linear ladder", "min", min, "must not exceed", "max", max);
    detail::require_rung_count("linear ladder", capacity());
  }

  /// The exact rung count, computed without generating (so an absurd ladder is rejected
  /// before anything is allocated). Requires positive parameters.
  constexpr std::size_t capacity() const {
    std::size_t n = 0;
    rung_t last = 0;
    for (rung_t r = min; r <= max && (n == 0 || r < step); r *= 2) ++n, last = r;
    const rung_t stable = max / step - last / step;  // multiples of step above the ramp
    const rung_t top = stable > 0 ? (max / step) * step : last;
    return n + static_cast<std::size_t>(stable) + (top != max ? 1 : 0);
  }

  constexpr std::size_t generate(std::span<rung_t> out) const {
    std::size_t n = 0;
    rung_t last = 0;
    for (rung_t r = min; r <= max && (n == 0 || r < step); r *= 2) out[n++] = last = r;
    for (rung_t r = (last / step + 1) * step; r <= max; r += step) out[n++] = last = r;
    if (last != max) out[n++] = max;
    return n;
  }

  friend std::ostream& operator<<(std::ostream& os, const Linear& p) {
    return os << "Linear{.min = " << p.min << ", .step = " << p.step << ", .max = " << p.max << "}";
  }
};

}  // namespace rungs
