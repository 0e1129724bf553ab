// Typed run-time to compile-time dispatch (after Boost.Mp11's mp_with_index and FlashInfer's
// DISPATCH_* macros, without the macros).
//
//   rungs::dispatch<64, 80, 96, 128, 256>("head_dim", head_dim, [&]<int D>() { ... });
//
// calls the lambda instantiated for the value equal to the run-time argument. A value outside
// the list throws rungs::unsupported_value naming the parameter, the value, and every supported
// value, so a user learns what the build offers instead of getting a silent fallback.
#pragma once

#include <concepts>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace rungs {

/// Thrown when a run-time value has no compile-time specialisation.
class unsupported_value : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {
template <auto First, auto... Rest>
inline constexpr auto first_value = First;

template <auto... Values>
std::string supported_list() {
  std::ostringstream os;
  bool first = true;
  ((os << (first ? "" : ", ") << +Values, first = false), ...);
  return os.str();
}
}  // namespace detail

namespace detail {
template <class R, auto V, auto... Rest, class T, class F, class Fail>
R dispatch_one(const T& value, F& f, Fail& fail) {
  if (value == V) return f.template operator()<V>();
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_one<R, Rest...>(value, f, fail);
  } else {
    fail();  // throws
    throw;   // unreachable: keeps every path returning
  }
}
}  // namespace detail

/// Invokes `f.template operator()<V>()` for the V in `Values...` equal to `value`.
/// All instantiations must return the same type. Throws unsupported_value otherwise.
template <auto... Values, class T, class F>
  requires(sizeof...(Values) > 0 && (std::equality_comparable_with<T, decltype(Values)> && ...))
decltype(auto) dispatch(std::string_view parameter, const T& value, F&& f) {
  using R = decltype(f.template operator()<detail::first_value<Values...>>());
  static_assert((std::is_same_v<R, decltype(f.template operator()<Values>())> && ...),
                "rungs::dispatch: every instantiation of the callable must return the same type");
  auto fail = [&] {
    std::ostringstream os;
    os << parameter << " = " << +value << " is not supported by this build; supported: "
       << detail::supported_list<Values...>();
    throw unsupported_value(os.str());
  };
  return detail::dispatch_one<R, Values...>(value, f, fail);
}

/// True when `value` is one of `Values...` (for checks before dispatching).
template <auto... Values, class T>
constexpr bool is_one_of(const T& value) {
  return ((value == Values) || ...);
}

}  // namespace rungs
