// Pow2: powers of two between min and max, e.g. Pow2{1, 64} -> 1 2 4 8 16 32 64.
//
// The shape TensorRT-LLM used before its 1,2,4-then-every-8 ladder. min and max are always
// rungs, powers of two or not: Pow2{3, 100} -> 3 4 8 16 32 64 100, so the configured
// bounds are covered exactly instead of being rounded to a power.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <cstddef>
#include <ostream>
#include <span>

namespace rungs {

struct Pow2 {
  rung_t min = 1;
  rung_t max = 1;

  friend constexpr bool operator==(const Pow2&, const Pow2&) = default;

  constexpr void validate() const {
    detail::require_positive("pow2 ladder", "min", min);
    detail::require_positive("pow2 ladder", "max", max);
    if (min > max) detail::reject("pow2 ladder", "min", min, "must not exceed", "max", max);
  }

  constexpr std::size_t capacity() const { return 33; }  // at most min, 2^1 .. 2^31, max

  constexpr std::size_t generate(std::span<rung_t> out) const {
    std::size_t n = 0;
    out[n++] = min;
    for (rung_t p = 1; p < max; p *= 2)
      if (p > min) out[n++] = p;
    if (max != min) out[n++] = max;
    return n;
  }

  friend std::ostream& operator<<(std::ostream& os, const Pow2& p) {
    return os << "Pow2{.min = " << p.min << ", .max = " << p.max << "}";
  }
};

}  // namespace rungs
