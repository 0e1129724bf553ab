// Capture-timing policies: when an engine captures its graphs.
//
// A timing policy is a small value answering three questions from the capture queue alone:
//   at_startup(q)        which bucket to capture before the first step (asked until none),
//   during_step(q, b)    which bucket to capture inside a step that runs in bucket b (or
//                        eagerly, b == nullopt); asked again only when the budget refuses
//                        the answer, so a step captures at most one graph,
//   when_idle(q)         which bucket to capture when the caller reports idle time.
// It sees only the queue (static order, slot states, use counts), never clocks or memory
// readings, so ranks that execute the same buckets make the same decisions.
//
//   startup   everything, in capture order, before the first step. Slow start, then fully
//             predictable latency (every engine's default).
//   delayed   vLLM's lazy/delayed PR: optionally the largest bucket at startup; then each
//             step captures its own bucket if it has no graph, else the next uncaptured one
//             in capture order. Fast start; the first steps pay one capture each.
//   lazy      a bucket is captured only when a step needs it, after `eager_uses` eager runs
//             in it; unused buckets never cost memory.
//   idle      nothing inside steps; the caller's idle signals capture in capture order.
#pragma once

#include <rungs/detail/named_choice.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <rungs/engine/capture_queue.hpp>

namespace rungs::engine {

template <class T>
concept capture_timing =
    std::copyable<T> && requires(const T& t, const capture_queue& q, std::optional<std::size_t> b) {
      { t.name() } -> std::convertible_to<std::string_view>;
      { t.at_startup(q) } -> std::same_as<std::optional<std::size_t>>;
      { t.during_step(q, b) } -> std::same_as<std::optional<std::size_t>>;
      { t.when_idle(q) } -> std::same_as<std::optional<std::size_t>>;
    };

struct startup {
  constexpr std::string_view name() const { return "startup"; }
  std::optional<std::size_t> at_startup(const capture_queue& q) const { return q.next_pending(); }
  std::optional<std::size_t> during_step(const capture_queue&, std::optional<std::size_t>) const { return {}; }
  std::optional<std::size_t> when_idle(const capture_queue&) const { return {}; }
  friend constexpr bool operator==(startup, startup) = default;
};

struct delayed {
  /// Capture the largest bucket before the first step so later graphs reuse its memory
  /// (the reviewers' ask on the PR).
  bool largest_at_startup = false;

  constexpr std::string_view name() const { return "delayed"; }
  std::optional<std::size_t> at_startup(const capture_queue& q) const {
    if (auto l = q.largest(); largest_at_startup && l && q.pending(*l)) return l;
    return {};
  }
  std::optional<std::size_t> during_step(const capture_queue& q, std::optional<std::size_t> b) const {
    if (b && q.pending(*b)) return b;
    return q.next_pending();
  }
  std::optional<std::size_t> when_idle(const capture_queue&) const { return {}; }
  friend constexpr bool operator==(delayed, delayed) = default;
};

struct lazy {
  /// Eager runs in a bucket before it is captured (llama.cpp waits for stable shapes).
  std::int64_t eager_uses = 0;

  constexpr std::string_view name() const { return "lazy"; }
  std::optional<std::size_t> at_startup(const capture_queue&) const { return {}; }
  std::optional<std::size_t> during_step(const capture_queue& q, std::optional<std::size_t> b) const {
    // uses() counts the current step: its (eager_uses + 1)-th run is the first replay.
    if (b && q.pending(*b) && q.uses(*b) > eager_uses) return b;
    return {};
  }
  std::optional<std::size_t> when_idle(const capture_queue&) const { return {}; }
  friend constexpr bool operator==(lazy, lazy) = default;
};

struct idle {
  constexpr std::string_view name() const { return "idle"; }
  std::optional<std::size_t> at_startup(const capture_queue&) const { return {}; }
  std::optional<std::size_t> during_step(const capture_queue&, std::optional<std::size_t>) const { return {}; }
  std::optional<std::size_t> when_idle(const capture_queue& q) const { return q.next_pending(); }
  friend constexpr bool operator==(idle, idle) = default;
};

/// One of the timings above, chosen at run time (a configuration file, a flag): one type for
/// every timing, so an engine built with it is one instantiation whichever is chosen. It
/// forwards to the policy it holds, so it behaves exactly as that policy.
class any_timing {
 public:
  using variant = std::variant<startup, delayed, lazy, idle>;
  any_timing() = default;
  template <class T>
    requires std::constructible_from<variant, T>
  any_timing(T t) : t_(std::move(t)) {}  // NOLINT: implicit from any of the policies

  std::string_view name() const {
    return std::visit([](const auto& t) { return std::string_view(t.name()); }, t_);
  }
  std::optional<std::size_t> at_startup(const capture_queue& q) const {
    return std::visit([&](const auto& t) { return t.at_startup(q); }, t_);
  }
  std::optional<std::size_t> during_step(const capture_queue& q, std::optional<std::size_t> b) const {
    return std::visit([&](const auto& t) { return t.during_step(q, b); }, t_);
  }
  std::optional<std::size_t> when_idle(const capture_queue& q) const {
    return std::visit([&](const auto& t) { return t.when_idle(q); }, t_);
  }
  /// The policy it holds.
  const variant& policy() const { return t_; }

 private:
  variant t_;
};
static_assert(capture_timing<any_timing>);

/// The timings' names in flags and configuration files, as parse_timing reads them.
inline constexpr std::string_view timing_names = "startup, delayed, lazy, idle";

/// The timing named `name` (timing_names), with its default parameters. Throws
/// std::invalid_argument naming it and the choices.
inline any_timing parse_timing(std::string_view name) {
  return rungs::detail::parse_named<any_timing>(name, timing_names, "capture timing", startup{}, delayed{}, lazy{}, idle{});
}
static_assert(rungs::detail::count_names(timing_names) == std::variant_size_v<any_timing::variant>,
              "timing_names lists one name per policy of any_timing, in parse_timing's order");

}  // namespace rungs::engine
