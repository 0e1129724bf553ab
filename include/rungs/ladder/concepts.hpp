// LadderPolicy: what a ladder policy value must offer to be used by rungs::ladder (run
// time) and rungs::static_ladder (compile time) through the same code.
//
// A policy is a small value (Linear{.min = 2, .step = 32, .max = 64}) with:
//   constexpr void validate() const;                       throws ladder_error naming the rule
//   constexpr std::size_t capacity() const;                upper bound on its rung count
//   constexpr std::size_t generate(std::span<rung_t>) const;  writes the rungs, returns count
//   operator== and operator<< (so equal configurations compare and print alike).
// generate() writes into caller-provided storage instead of returning a vector: the
// compile-time ladder sizes a std::array with capacity() and never allocates, which keeps
// it working on compilers without constexpr std::vector.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <concepts>
#include <cstddef>
#include <iosfwd>
#include <span>

namespace rungs {

template <class P>
concept LadderPolicy = std::equality_comparable<P> &&
    requires(const P& p, std::span<rung_t> out, std::ostream& os) {
      p.validate();
      { p.capacity() } -> std::convertible_to<std::size_t>;
      { p.generate(out) } -> std::convertible_to<std::size_t>;
      { os << p } -> std::convertible_to<std::ostream&>;
    };

namespace detail {

/// Spells out, one static_assert per operation, what a would-be policy lacks; the first
/// error line names the missing operation (the instantiation context names the type).
template <class P>
constexpr bool check_ladder_policy() {
  static_assert(requires(const P& p) { p.validate(); },
                "rungs: a ladder policy needs `constexpr void validate() const` that throws "
                "rungs::ladder_error for invalid parameters");
  static_assert(requires(const P& p) { { p.capacity() } -> std::convertible_to<std::size_t>; },
                "rungs: a ladder policy needs `constexpr std::size_t capacity() const` "
                "(an upper bound on its rung count)");
  static_assert(
      requires(const P& p, std::span<rung_t> out) {
        { p.generate(out) } -> std::convertible_to<std::size_t>;
      },
      "rungs: a ladder policy needs `constexpr std::size_t generate(std::span<rung_t>) const` "
      "(writes the ascending rungs, returns how many)");
  static_assert(std::equality_comparable<P>, "rungs: a ladder policy needs operator==");
  static_assert(requires(std::ostream& os, const P& p) { os << p; },
                "rungs: a ladder policy needs `std::ostream& operator<<(std::ostream&, const P&)`");
  return LadderPolicy<P>;
}

}  // namespace detail
}  // namespace rungs
