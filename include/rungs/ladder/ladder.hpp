// rungs::ladder: a ladder built at run time (from a configuration, the environment, the
// command line) from any LadderPolicy value, with the same generation code and the same
// table lookup as the compile-time rungs::static_ladder.
//
//   rungs::ladder l{rungs::CaptureSizes::vllm(512)};
//   l.lookup(33);  // {size 33, rung 40, index 8}: 7 padded rows, 17.5%
//   l.lookup(600); // eager
#pragma once

#include <rungs/ladder/concepts.hpp>
#include <rungs/ladder/lookup_table.hpp>
#include <rungs/ladder/rung.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace rungs {

class ladder {
 public:
  /// Validates the policy (throws ladder_error naming the parameter and the rule),
  /// generates its rungs and builds the lookup table.
  template <class P>
    requires(!std::same_as<std::remove_cvref_t<P>, ladder>)
  explicit ladder(const P& policy) {
    static_assert(detail::check_ladder_policy<P>());
    policy.validate();
    detail::require_rung_count("ladder", policy.capacity());  // before allocating for it
    rungs_.resize(policy.capacity());
    rungs_.resize(policy.generate(rungs_));
    detail::check_generated_rungs(rungs_);
    shift_ = detail::rung_table_shift(rungs_);
    table_.resize(detail::rung_table_entries(rungs_.back(), shift_));
    detail::fill_rung_table<std::uint16_t>(rungs_, shift_, table_);
    std::ostringstream os;
    os << policy;
    description_ = os.str();
  }

  /// The rungs, ascending.
  std::span<const rung_t> rungs() const noexcept { return rungs_; }
  std::size_t size() const noexcept { return rungs_.size(); }
  rung_t operator[](std::size_t i) const noexcept { return rungs_[i]; }
  rung_t front() const noexcept { return rungs_.front(); }
  /// The largest rung; sizes above it run eagerly.
  rung_t top() const noexcept { return rungs_.back(); }
  /// The policy it was built from, as written by the policy's operator<<.
  const std::string& description() const noexcept { return description_; }

  /// The smallest rung >= n, or the eager fallback when n > top(). Never allocates.
  rung_lookup lookup(rung_t n) const noexcept {
    return detail::lookup_rung(rungs_.data(), rungs_.back(), table_.data(), shift_, n);
  }

  /// Same rungs (however they were described).
  friend bool operator==(const ladder& a, const ladder& b) { return a.rungs_ == b.rungs_; }

 private:
  std::vector<rung_t> rungs_;
  std::vector<std::uint16_t> table_;
  unsigned shift_ = 0;
  std::string description_;
};

}  // namespace rungs
