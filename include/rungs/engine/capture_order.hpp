// Capture-order policies: in which order an engine captures its buckets' graphs.
//
// An order is a small value with `before(a, b)`, a strict weak ordering on buckets; the
// engine sorts the bucket space with it once (stable, so ties keep the ladder's order).
//   largest_first  tokens descending. Every CUDA engine's default: graphs share one memory
//                  pool, so the largest graph's allocations are reused by all later ones.
//   max_bs         batch descending, then sequence ascending (Gaudi's decode default: a
//                  loaded server decodes at its largest batch most of the time).
//   min_tokens     (bs*seq, seq, bs) ascending (Gaudi's prompt default: prefills are small).
//   ladder_order   the order of the bucket space itself.
//   by_phase<P, D> prompt buckets in order P, then decode buckets in order D (Gaudi).
// Any type with `before` and `name` is an order; see the capture_order concept.
#pragma once

#include <rungs/detail/named_choice.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

template <class O>
concept capture_order = std::copyable<O> && requires(const O& o, const bucket& a, const bucket& b) {
  { o.before(a, b) } -> std::convertible_to<bool>;
  { o.name() } -> std::convertible_to<std::string_view>;
};

struct largest_first {
  constexpr bool before(const bucket& a, const bucket& b) const { return a.tokens() > b.tokens(); }
  constexpr std::string_view name() const { return "largest-first"; }
  friend constexpr bool operator==(largest_first, largest_first) = default;
};

struct max_bs {
  constexpr bool before(const bucket& a, const bucket& b) const {
    if (a.batch() != b.batch()) return a.batch() > b.batch();
    return a.seq() < b.seq();
  }
  constexpr std::string_view name() const { return "max-bs"; }
  friend constexpr bool operator==(max_bs, max_bs) = default;
};

struct min_tokens {
  constexpr bool before(const bucket& a, const bucket& b) const {
    if (a.tokens() != b.tokens()) return a.tokens() < b.tokens();
    if (a.seq() != b.seq()) return a.seq() < b.seq();
    return a.batch() < b.batch();
  }
  constexpr std::string_view name() const { return "min-tokens"; }
  friend constexpr bool operator==(min_tokens, min_tokens) = default;
};

struct ladder_order {
  constexpr bool before(const bucket&, const bucket&) const { return false; }
  constexpr std::string_view name() const { return "ladder"; }
  friend constexpr bool operator==(ladder_order, ladder_order) = default;
};

/// Prompt buckets first, in `Prompt` order, then decode buckets in `Decode` order: the
/// Gaudi arrangement (prompt min_tokens, decode max_bs by default).
template <capture_order Prompt = min_tokens, capture_order Decode = max_bs>
struct by_phase {
  Prompt prompt{};
  Decode decode{};
  constexpr bool before(const bucket& a, const bucket& b) const {
    if (a.ph != b.ph) return a.ph == phase::prompt;
    return a.ph == phase::prompt ? static_cast<bool>(prompt.before(a, b)) : static_cast<bool>(decode.before(a, b));
  }
  std::string name() const {
    return "prompt " + std::string(prompt.name()) + ", decode " + std::string(decode.name());
  }
  friend constexpr bool operator==(const by_phase&, const by_phase&) = default;
};

/// One of the orders above, chosen at run time: one type for every order, so an engine built
/// with it is one instantiation whichever is chosen (the runner sorts its buckets with the
/// order once, at construction, so the indirection costs nothing per step).
class any_order {
 public:
  using variant = std::variant<largest_first, max_bs, min_tokens, ladder_order, by_phase<>>;
  any_order() = default;
  template <class O>
    requires std::constructible_from<variant, O>
  any_order(O o) : o_(std::move(o)) {}  // NOLINT: implicit from any of the policies

  bool before(const bucket& a, const bucket& b) const {
    return std::visit([&](const auto& o) { return static_cast<bool>(o.before(a, b)); }, o_);
  }
  std::string name() const {
    return std::visit([](const auto& o) { return std::string(o.name()); }, o_);
  }
  /// The policy it holds.
  const variant& policy() const { return o_; }

 private:
  variant o_;
};
static_assert(capture_order<any_order>);

/// The orders' names in flags and configuration files, as parse_order reads them.
inline constexpr std::string_view order_names = "largest-first, max-bs, min-tokens, ladder, by-phase";

/// The order named `name` (order_names; by-phase is by_phase<>: Gaudi's prompt min-tokens,
/// then decode max-bs). Throws std::invalid_argument naming it and the choices.
inline any_order parse_order(std::string_view name) {
  return rungs::detail::parse_named<any_order>(name, order_names, "capture order", largest_first{}, max_bs{}, min_tokens{},
                                        ladder_order{}, by_phase<>{});
}
static_assert(rungs::detail::count_names(order_names) == std::variant_size_v<any_order::variant>,
              "order_names lists one name per policy of any_order, in parse_order's order");

/// The capture sequence: bucket indices of `space` sorted by `order` (stable).
template <capture_order O, bucket_space S>
std::vector<std::size_t> capture_sequence(const O& order, const S& space) {
  std::vector<bucket> buckets;
  buckets.reserve(space.size());
  for (std::size_t i = 0; i < space.size(); ++i) buckets.push_back(space.at(i));
  std::vector<std::size_t> seq(buckets.size());
  std::iota(seq.begin(), seq.end(), std::size_t{0});
  std::stable_sort(seq.begin(), seq.end(),
                   [&](std::size_t a, std::size_t b) { return static_cast<bool>(order.before(buckets[a], buckets[b])); });
  return seq;
}

}  // namespace rungs::engine
