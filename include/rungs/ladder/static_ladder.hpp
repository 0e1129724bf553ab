// rungs::static_ladder<Policy>: a ladder fixed at compile time by a policy value,
//
//   using decode = rungs::static_ladder<rungs::Linear{.min = 2, .step = 32, .max = 64}>;
//   static_assert(decode::lookup(20).rung == 32);
//
// Its rungs and lookup table are constexpr arrays computed by the policy's own generate()
// and by the table code rungs::ladder uses at run time, so the two never disagree. Two
// policies with equal values name the same type. An invalid policy does not compile; the
// diagnostic quotes the violated rule (e.g. `reject("linear ladder", "step", step, "must
// be positive")`).
#pragma once

#include <rungs/ladder/concepts.hpp>
#include <rungs/ladder/lookup_table.hpp>
#include <rungs/ladder/rung.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace rungs {

namespace detail {

template <auto Policy>
struct static_rungs {
  using policy_type = std::remove_cvref_t<decltype(Policy)>;
  static_assert(check_ladder_policy<policy_type>());
  // An invalid policy stops here, before capacity() could divide by a zero step:
  // constant evaluation reaches the throwing reject() call inside validate().
  static constexpr std::size_t capacity = (Policy.validate(), Policy.capacity());

  struct generated {
    std::array<rung_t, capacity> values{};
    std::size_t size = 0;
  };
  static constexpr generated all = [] {
    generated g{};
    g.size = Policy.generate(g.values);
    return g;
  }();
  static constexpr std::array<rung_t, all.size> values = [] {
    std::array<rung_t, all.size> a{};
    for (std::size_t i = 0; i < all.size; ++i) a[i] = all.values[i];
    check_generated_rungs(a);
    return a;
  }();
};

}  // namespace detail

template <auto Policy>
class static_ladder {
  using base = detail::static_rungs<Policy>;
  static constexpr std::size_t n = base::values.size();
  static constexpr unsigned shift = detail::rung_table_shift(base::values);
  using index_type = std::conditional_t<(n <= 256), std::uint8_t, std::uint16_t>;

 public:
  static constexpr auto policy = Policy;
  /// The rungs, ascending.
  static constexpr std::array<rung_t, n> values = base::values;
  /// table[k]: index of the smallest rung >= k << shift.
  static constexpr auto table = [] {
    std::array<index_type, detail::rung_table_entries(base::values.back(), shift)> t{};
    detail::fill_rung_table<index_type>(base::values, shift, t);
    return t;
  }();

  static constexpr std::span<const rung_t> rungs() noexcept { return values; }
  static constexpr std::size_t size() noexcept { return n; }
  static constexpr rung_t front() noexcept { return values.front(); }
  static constexpr rung_t top() noexcept { return values.back(); }

  /// The smallest rung >= n, or the eager fallback when n > top().
  static constexpr rung_lookup lookup(rung_t size) noexcept {
    return detail::lookup_rung(values.data(), values.back(), table.data(), shift, size);
  }
};

}  // namespace rungs
