// Serving time for the driver (rungs/serving/driver.hpp): a clock is a policy value.
//
//   wall_clock             time passes by itself (the serving demo's default)
//   modelled_clock<Cost>   time is what the work costs: each step advances it by Cost's price of
//                          the step plus its captures, so a run does not depend on the machine
//                          (the demo's virtual clock, and rungs-plan simulate's cost model)
//
// Either way a period with nothing to run is skipped rather than slept through (skip_to), and
// time 0 is where `time_origin` says: the server starting (a cold start, the startup captures
// delaying the first step, as the simulator models it) or the first step.
#pragma once

#include <rungs/engine/engine.hpp>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <utility>

namespace rungs::serving {

/// Where serving time 0 is.
enum class time_origin : std::uint8_t {
  server_start,  ///< the process starting: requests that arrive during startup captures wait for them
  first_step,    ///< the first step, after the startup captures
};

/// What the driver needs of a clock:
///   startup(f)   runs f (the startup captures; it returns their modelled seconds) and returns
///                the seconds the startup took; serving time then starts at `time_origin`'s 0
///   now()        serving time, in seconds
///   cost(step)   the seconds an engine step took, captures included, as the ranks agree on it
///                (the slowest rank's); 0 on a clock where time passes by itself
///   spend(s)     work took s seconds (a step, or captures while idle)
///   skip_to(t)   nothing runs until t: serving time jumps there (never back)
template <class C>
concept serving_clock = requires(C& c, const C& cc, const engine::engine_step& s, double t, double (*start)()) {
  { c.startup(start) } -> std::same_as<double>;
  { cc.now() } -> std::same_as<double>;
  { cc.cost(s) } -> std::same_as<double>;
  c.spend(t);
  c.skip_to(t);
};

/// Wall time since the origin, plus the idle periods skipped.
class wall_clock {
 public:
  explicit wall_clock(time_origin origin = time_origin::first_step) : origin_(origin) {}

  template <class F>
  double startup(F&& start) {
    const auto before = std::chrono::steady_clock::now();
    if (origin_ == time_origin::server_start) t0_ = before;
    std::forward<F>(start)();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    if (origin_ == time_origin::first_step) t0_ = std::chrono::steady_clock::now();
    return seconds;
  }
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() + skipped_; }
  /// The step's time has passed already.
  double cost(const engine::engine_step&) const { return 0; }
  void spend(double) {}
  void skip_to(double t) {
    const double n = now();
    if (t > n) skipped_ += t - n;
  }

 private:
  time_origin origin_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  double skipped_ = 0;
};

/// The price of an engine step's runs in seconds, without its captures (the clock adds them):
/// `double operator()(const engine::engine_step&) const`.
template <class C>
concept step_cost = std::copyable<C> && requires(const C& c, const engine::engine_step& s) {
  { c(s) } -> std::convertible_to<double>;
};

/// Serving time that advances by what the work costs (see the file comment).
template <step_cost Cost>
class modelled_clock {
 public:
  explicit modelled_clock(Cost cost, time_origin origin = time_origin::first_step)
      : cost_(std::move(cost)), origin_(origin) {}

  template <class F>
  double startup(F&& start) {
    const double seconds = std::forward<F>(start)();
    if (origin_ == time_origin::server_start) t_ = seconds;
    return seconds;
  }
  double now() const { return t_; }
  double cost(const engine::engine_step& s) const { return static_cast<double>(cost_(s)) + s.capture_seconds; }
  void spend(double seconds) { t_ += seconds; }
  void skip_to(double t) { t_ = std::max(t_, t); }
  const Cost& pricing() const { return cost_; }  ///< the step cost

 private:
  Cost cost_;
  time_origin origin_;
  double t_ = 0;
};

}  // namespace rungs::serving
