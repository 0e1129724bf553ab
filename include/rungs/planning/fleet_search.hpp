// fleet_search: the smallest fleet whose simulated latencies meet a service-level objective.
//
// The search assumes that adding a replica never makes the fleet's latency quantiles worse
// (monotonicity): each replica then gets a subset of the traffic. It is an assumption, not a
// theorem: a router's choices, batching (a fuller batch can run a step at the same cost) and
// capture timings can break it at the margin. So the search
//   1. doubles the count from 1 (1, 2, 4, ...; the last capped at max_replicas) until a fleet
//      meets the objective, then bisects between the last count that failed and the first
//      that met: O(log N) simulations for an answer N;
//   2. has simulated the answer's lower neighbour N - 1 (it failed: the bisection's invariant;
//      none when N = 1), and simulates its upper neighbour N + 1 (when within max_replicas) to
//      check the assumption there: `monotone_above` is false when N + 1 fails.
// Every fleet simulated is kept in `tried`, in the order simulated.
#pragma once

#include <rungs/planning/fleet.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::planning {

/// A latency a service-level objective bounds: TTFT or inter-token latency, and a statistic.
enum class slo_metric { ttft_mean, ttft_p50, ttft_p90, ttft_p99, ttft_max, itl_mean, itl_p50, itl_p90, itl_p99, itl_max };

inline constexpr std::array<std::pair<std::string_view, slo_metric>, 10> slo_metric_names = {{
    {"ttft_mean", slo_metric::ttft_mean}, {"ttft_p50", slo_metric::ttft_p50}, {"ttft_p90", slo_metric::ttft_p90},
    {"ttft_p99", slo_metric::ttft_p99},   {"ttft_max", slo_metric::ttft_max}, {"itl_mean", slo_metric::itl_mean},
    {"itl_p50", slo_metric::itl_p50},     {"itl_p90", slo_metric::itl_p90},   {"itl_p99", slo_metric::itl_p99},
    {"itl_max", slo_metric::itl_max}}};

inline constexpr std::string_view to_string(slo_metric m) {
  for (const auto& [name, metric] : slo_metric_names)
    if (metric == m) return name;
  return "?";
}

/// The metric's value, in seconds, from the TTFT and inter-token latency summaries.
inline double slo_value(const latency_summary& ttft_summary, const latency_summary& itl_summary, slo_metric m) {
  const latency_summary& s = m <= slo_metric::ttft_max ? ttft_summary : itl_summary;
  switch (m) {
    case slo_metric::ttft_mean: case slo_metric::itl_mean: return s.mean;
    case slo_metric::ttft_p50: case slo_metric::itl_p50: return s.p50;
    case slo_metric::ttft_p90: case slo_metric::itl_p90: return s.p90;
    case slo_metric::ttft_p99: case slo_metric::itl_p99: return s.p99;
    case slo_metric::ttft_max: case slo_metric::itl_max: return s.max;
  }
  return s.max;
}

/// The metric's value in a fleet's result, in seconds.
inline double slo_value(const fleet_result& f, slo_metric m) { return slo_value(f.ttft, f.itl, m); }

/// A bound: metric <= seconds.
struct slo_bound {
  slo_metric metric = slo_metric::ttft_p99;
  double seconds = 0;
};

/// Every bound must hold (over the requests that ran: rejected ones are reported apart).
using service_objective = std::vector<slo_bound>;

inline bool meets(const latency_summary& ttft, const latency_summary& itl, const service_objective& o) {
  for (const slo_bound& b : o)
    if (!(slo_value(ttft, itl, b.metric) <= b.seconds)) return false;
  return true;
}
inline bool meets(const fleet_result& f, const service_objective& o) { return meets(f.ttft, f.itl, o); }

/// Checks an objective and a largest count for a search (naming the bad value).
inline void check_search(const service_objective& objective, std::int32_t max_replicas) {
  if (objective.empty()) throw std::invalid_argument("fleet search: the objective has no bound");
  for (const slo_bound& b : objective)
    if (!(b.seconds > 0) || !std::isfinite(b.seconds))
      throw std::invalid_argument("fleet search: " + std::string(to_string(b.metric)) + " <= " + std::to_string(b.seconds) +
                                  " s must be a positive, finite number of seconds");
  if (max_replicas < 1 || max_replicas > 4096)
    throw std::invalid_argument("fleet search: max_replicas = " + std::to_string(max_replicas) + " must be in [1, 4096]");
}

namespace detail {

/// The fewest n in [1, max] for which `met(n)` holds, assuming it stays true above (see the
/// header comment): doubling from 1 (the last capped at max), then bisection between the
/// last count that failed and the first that met. None when `met(max)` fails.
template <class Met>
std::optional<std::int32_t> fewest(std::int32_t max, Met met) {
  std::int32_t fail = 0;  // the largest count known to fail (0: none simulated)
  std::optional<std::int32_t> pass;
  for (std::int32_t n = 1;; n = 2 * n >= max ? max : 2 * n) {
    if (met(n)) {
      pass = n;
      break;
    }
    fail = n;
    if (n == max) return std::nullopt;
  }
  while (*pass - fail > 1) {
    const std::int32_t mid = fail + (*pass - fail) / 2;
    if (met(mid)) pass = mid;
    else fail = mid;
  }
  return pass;
}

}  // namespace detail

/// One fleet the search simulated.
struct fleet_trial {
  std::int32_t replicas = 0;
  bool met = false;
  fleet_result fleet;
};

struct fleet_search_result {
  /// The smallest count found that meets the objective; none when max_replicas does not.
  std::optional<std::int32_t> replicas;
  std::vector<fleet_trial> tried;
  /// The fleet of `replicas` (of max_replicas when none meets), in `tried`.
  const fleet_trial& chosen() const { return tried.at(chosen_index); }
  std::size_t chosen_index = 0;
  /// The upper neighbour (replicas + 1) met the objective too; nullopt when not simulated.
  std::optional<bool> monotone_above;
};

/// Searches replica counts in [1, max_replicas] (see the header comment). Throws
/// std::invalid_argument for an empty objective, a bound that is not a positive finite number
/// of seconds, a max_replicas outside [1, 4096], or anything simulate_fleet refuses.
inline fleet_search_result search_fleet(const simulation_config& config, const std::vector<serving::trace_request>& trace,
                                        const service_objective& objective, const router_options& r = {},
                                        std::int32_t max_replicas = 64) {
  check_search(objective, max_replicas);
  fleet_search_result s;
  simulation_config c = config;
  c.record_steps = false;
  auto trial = [&](std::int32_t n) -> std::size_t {
    fleet_result f = simulate_fleet(c, trace, n, r);
    const bool met = meets(f, objective);
    s.tried.push_back({.replicas = n, .met = met, .fleet = std::move(f)});
    return s.tried.size() - 1;
  };
  s.replicas = detail::fewest(max_replicas, [&](std::int32_t n) { return s.tried[trial(n)].met; });
  if (!s.replicas) {
    s.chosen_index = s.tried.size() - 1;
    return s;
  }
  for (std::size_t k = 0; k < s.tried.size(); ++k)
    if (s.tried[k].replicas == *s.replicas) s.chosen_index = k;
  if (*s.replicas < max_replicas) {
    bool known = false;
    for (const fleet_trial& t : s.tried)
      if (t.replicas == *s.replicas + 1) {
        s.monotone_above = t.met;
        known = true;
      }
    if (!known) s.monotone_above = s.tried[trial(*s.replicas + 1)].met;
  }
  return s;
}

}  // namespace rungs::planning
