// Comparison of kernel outputs (16-bit) with the float64 host reference, shared by the GPU
// tests and the emulation test. Plain C++.
#pragma once

#include <rungs/numeric/float16.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace rungs_test {

/// Per-element tolerance of a kernel output against the float64 reference: the output's
/// rounding to 16 bits dominates (half an ulp: 2^-11 relative for f16, 2^-8 for bf16, of values
/// of magnitude <= 1 here), with a 2x margin for the fp32 accumulation and ex2.approx.
template <class HostT>
constexpr double tolerance() {
  return std::is_same_v<HostT, rungs::f16> ? 1e-3 : 1e-2;
}

/// Compares rows [row_begin, row_end) of `got` (16-bit) with `want` (double), row_elements
/// apart; every element must be finite and within tol * max(1, |want|).
template <class HostT>
void require_close(const std::vector<HostT>& got, const std::vector<double>& want, std::int64_t row_elements,
                   std::int64_t row_begin, std::int64_t row_end, const std::string& what) {
  const double tol = tolerance<HostT>();
  double worst = 0;
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t i = row_begin * row_elements; i < row_end * row_elements; ++i) {
    const double g = rungs::to_double(got[static_cast<std::size_t>(i)]);
    const double w = want[static_cast<std::size_t>(i)];
    const double err = std::abs(g - w);
    if (!(err <= tol * std::max(1.0, std::abs(w)))) {  // NaN fails too
      if (bad++ == 0) first_bad = i;
    }
    if (std::isfinite(err)) worst = std::max(worst, err);
  }
  INFO(what << ": max error " << worst << ", " << bad << " elements out of tolerance " << tol
            << (bad ? ", first at element " + std::to_string(first_bad) + " (row " +
                          std::to_string(first_bad / row_elements) + ", got " +
                          std::to_string(rungs::to_double(got[static_cast<std::size_t>(first_bad)])) + ", want " +
                          std::to_string(want[static_cast<std::size_t>(first_bad)]) + ")"
                    : std::string()));
  CHECK(bad == 0);
}

/// Rows [row_begin, row_end) must be exactly +0 or -0.
template <class HostT>
void require_zero_rows(const std::vector<HostT>& got, std::int64_t row_elements, std::int64_t row_begin,
                       std::int64_t row_end, const std::string& what) {
  std::int64_t nonzero = 0;
  for (std::int64_t i = row_begin * row_elements; i < row_end * row_elements; ++i) {
    nonzero += (got[static_cast<std::size_t>(i)].bits & 0x7fff) != 0;
  }
  INFO(what);
  CHECK(nonzero == 0);
}

}  // namespace rungs_test
