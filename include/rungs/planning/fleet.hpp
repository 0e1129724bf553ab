// fleet: a trace served by N replicas, each with its own scheduler, KV pool and graphs (a
// planning::simulate each), behind a router (planning/router.hpp).
//
// The replicas advance in lockstep with the arrivals: before each first turn or standalone
// request is routed, every replica runs the steps that start before its arrival, so the router
// reads each replica's queue and KV cache as they are then (a step under way counts as done).
// A replica that received nothing takes its idle gap only once its next arrival is known, so
// under round-robin (which reads no state) each replica computes exactly what `simulate` on
// its own share computes.
//
// The fleet's latencies are over every request of every replica (TTFT of the requests that
// ran, every inter-token gap); its end is the last replica's.
#pragma once

#include <rungs/planning/router.hpp>
#include <rungs/planning/simulate.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rungs::planning {

struct fleet_result {
  std::vector<simulation_result> replicas;  ///< each replica's own result (requests in its share's order)
  std::vector<std::int32_t> replica_of;     ///< per trace request: the replica it was sent to
  std::vector<request_record> requests;     ///< in trace order (trace_index: the fleet trace's)
  latency_summary ttft, itl;
  std::int64_t rejected = 0;
  std::int64_t output_tokens = 0;
  double end_seconds = 0;
  /// The fleet as one simulation_result (how rungs-plan simulate reports it): latencies over
  /// every request; counts summed over the replicas (steps, eager steps, graphs and their
  /// memory, capture time, tokens, preemptions, prefix hits, replica-seconds with requests
  /// waiting for KV, step tokens); peaks the largest replica's (startup, end, running,
  /// waiting, KV usage); the first requests in the fleet's order of submission.
  simulation_result total;
};

/// The replica each request goes to under round-robin.
inline std::vector<std::int32_t> route_round_robin(const std::vector<serving::trace_request>& trace, std::int32_t replicas) {
  std::vector<std::int32_t> to(trace.size());
  std::unordered_map<serving::session_id, std::int32_t> conversation;
  std::int64_t next = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const serving::session_id c = trace[i].conversation;
    if (c != 0)
      if (auto it = conversation.find(c); it != conversation.end()) {
        to[i] = it->second;
        continue;
      }
    to[i] = static_cast<std::int32_t>(next++ % replicas);
    if (c != 0) conversation.emplace(c, to[i]);
  }
  return to;
}

namespace detail {

// First turns and standalone requests, by arrival (ties: trace order), as they reach a router.
inline std::vector<std::size_t> routed_by_arrival(const std::vector<serving::trace_request>& trace,
                                                  const serving::turn_arrivals& turns) {
  std::vector<bool> later(trace.size(), false);
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (const auto n = turns.next_turn(i)) later[*n] = true;
  std::vector<std::size_t> routed;
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (!later[i]) routed.push_back(i);
  std::stable_sort(routed.begin(), routed.end(),
                   [&](std::size_t a, std::size_t b) { return trace[a].arrival < trace[b].arrival; });
  return routed;
}

// The replicas in lockstep (see the header comment); fills f.replica_of and f.replicas.
inline void run_fleet(const simulation_config& c, const std::vector<serving::trace_request>& trace, std::int32_t replicas,
               const router_options& r, fleet_result& f) {
  std::vector<std::unique_ptr<simulator>> sims;  // an engine stays where it was built
  for (std::int32_t k = 0; k < replicas; ++k) sims.push_back(std::make_unique<simulator>(c, trace, true));
  const serving::turn_arrivals turns(trace, true);
  const std::vector<std::int32_t> round_robin =
      r.kind == router::round_robin ? route_round_robin(trace, replicas) : std::vector<std::int32_t>{};
  const std::vector<std::size_t> routed = routed_by_arrival(trace, turns);
  f.replica_of.assign(trace.size(), -1);
  std::vector<replica_view> views(sims.size());
  std::vector<kv::token_id> prompt;
  for (const std::size_t i : routed) {
    for (auto& s : sims) s->advance(trace[i].arrival);
    std::size_t to = 0;
    if (r.kind == router::round_robin) {
      to = static_cast<std::size_t>(round_robin[i]);
    } else {
      if (r.kind == router::prefix_affinity) {
        prompt.resize(static_cast<std::size_t>(trace[i].prompt_tokens));
        serving::trace_prompt(trace[i], i, prompt);  // what the replica's scheduler would be sent
      }
      for (std::size_t k = 0; k < sims.size(); ++k)
        views[k] = {.outstanding = static_cast<std::int64_t>(sims[k]->outstanding()),
                    .cached_tokens = r.kind == router::prefix_affinity ? sims[k]->cached_prefix_tokens(prompt) : 0};
      to = pick_replica(r, views);
    }
    sims[to]->route(i);
    for (std::optional<std::size_t> k = i; k; k = turns.next_turn(*k)) f.replica_of[*k] = static_cast<std::int32_t>(to);
  }
  for (auto& s : sims) {
    s->advance(std::numeric_limits<double>::infinity());
    f.replicas.push_back(s->finish());
  }
}

// f.replicas (each replica's result, its itl_samples kept) into the fleet's figures and
// f.total (see fleet_result::total).
inline void combine_replicas(const simulation_config& config, std::size_t trace_size, fleet_result& f) {
  f.requests.resize(trace_size);
  std::vector<double> ttft, itl;
  for (simulation_result& s : f.replicas) {
    for (const request_record& rec : s.requests) {
      if (rec.rejected.empty()) ttft.push_back(rec.ttft());
      f.requests[rec.trace_index] = rec;
    }
    itl.insert(itl.end(), s.itl_samples.begin(), s.itl_samples.end());
    if (!config.keep_itl_samples) std::vector<double>().swap(s.itl_samples);
    f.rejected += s.rejected;
    f.output_tokens += s.output_tokens;
    if (!s.requests.empty()) f.end_seconds = std::max(f.end_seconds, s.end_seconds);
  }
  f.ttft = summarize(std::move(ttft));
  f.itl = summarize(std::move(itl));

  simulation_result& t = f.total;
  t.timing = std::string(config.timing.name());
  t.ttft = f.ttft;
  t.itl = f.itl;
  t.rejected = f.rejected;
  t.output_tokens = f.output_tokens;
  t.end_seconds = f.end_seconds;
  double blocked = 0;  // request-seconds waiting for KV
  for (const simulation_result& s : f.replicas) {
    if (s.requests.empty() && s.engine.steps == 0) continue;  // a replica that never served
    t.num_blocks = s.num_blocks;
    t.startup_seconds = std::max(t.startup_seconds, s.startup_seconds);
    engine::engine_stats& e = t.engine;
    e.steps += s.engine.steps;
    e.replays += s.engine.replays;
    for (std::size_t k = 0; k < e.eager.size(); ++k) e.eager[k] += s.engine.eager[k];
    e.captures += s.engine.captures;
    e.capture_failures += s.engine.capture_failures;
    e.budget_refusals += s.engine.budget_refusals;
    e.real_rows += s.engine.real_rows;
    e.padded_rows += s.engine.padded_rows;
    e.real_tokens += s.engine.real_tokens;
    e.padded_tokens += s.engine.padded_tokens;
    e.capture_seconds += s.engine.capture_seconds;
    e.capture_bytes += s.engine.capture_bytes;
    t.scheduler.steps += s.scheduler.steps;
    t.scheduler.submitted += s.scheduler.submitted;
    t.scheduler.admitted += s.scheduler.admitted;
    t.scheduler.finished += s.scheduler.finished;
    t.scheduler.preemptions += s.scheduler.preemptions;
    t.scheduler.computed_tokens += s.scheduler.computed_tokens;
    t.scheduler.recomputed_tokens += s.scheduler.recomputed_tokens;
    t.scheduler.prefix_hit_tokens += s.scheduler.prefix_hit_tokens;
    t.capture_seconds_in_service += s.capture_seconds_in_service;
    t.max_waiting = std::max(t.max_waiting, s.max_waiting);
    t.max_running = std::max(t.max_running, s.max_running);
    t.max_waiting_for_blocks = std::max(t.max_waiting_for_blocks, s.max_waiting_for_blocks);
    t.seconds_waiting_for_blocks += s.seconds_waiting_for_blocks;
    blocked += s.mean_waiting_for_blocks * s.seconds_waiting_for_blocks;
    t.peak_kv_usage = std::max(t.peak_kv_usage, s.peak_kv_usage);
    t.step_tokens.insert(t.step_tokens.end(), s.step_tokens.begin(), s.step_tokens.end());
    t.tokens_run += s.tokens_run;
    t.dummy_steps += s.dummy_steps;
    // A cache in tiers: every replica has tiers of its own (its HBM, its host's DRAM and
    // disk); the fleet's hits and loads are their sums.
    if (t.tiers.empty())
      for (const simulated_tier& k : s.tiers) t.tiers.push_back({.tier = k.tier});
    for (std::size_t k = 0; k < s.tiers.size(); ++k) {
      t.tiers[k].hit_blocks += s.tiers[k].hit_blocks;
      t.tiers[k].hit_tokens += s.tiers[k].hit_tokens;
      t.tiers[k].load_seconds += s.tiers[k].load_seconds;
    }
    t.tier_looked_up_blocks += s.tier_looked_up_blocks;
  }
  for (simulated_tier& k : t.tiers)
    k.hit_rate = t.tier_looked_up_blocks ? static_cast<double>(k.hit_blocks) / static_cast<double>(t.tier_looked_up_blocks) : 0.0;
  if (t.seconds_waiting_for_blocks > 0) t.mean_waiting_for_blocks = blocked / t.seconds_waiting_for_blocks;
  t.requests = f.requests;
  summarize_first(f.requests, config.first_requests, t);
}

}  // namespace detail

/// Runs `trace` on `replicas` replicas of `config` behind `r`. Throws std::invalid_argument
/// for a replica count outside [1, 4096], prefix_affinity without prefix caching (there would
/// be no cache to route by), a negative max_imbalance, or anything simulate refuses.
inline fleet_result simulate_fleet(const simulation_config& config, const std::vector<serving::trace_request>& trace,
                                   std::int32_t replicas, const router_options& r = {}) {
  if (replicas < 1 || replicas > 4096)
    throw std::invalid_argument("fleet: replicas = " + std::to_string(replicas) + " must be in [1, 4096]");
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  if (r.kind == router::prefix_affinity && !config.prefix_caching)
    throw std::invalid_argument("fleet: the prefix-affinity router needs prefix caching (the replicas' caches are what it routes by)");
  if (r.max_imbalance < 0)
    throw std::invalid_argument("fleet: max_imbalance = " + std::to_string(r.max_imbalance) + " must not be negative");
  fleet_result f;
  simulation_config c = config;
  c.keep_itl_samples = true;
  detail::run_fleet(c, trace, replicas, r, f);
  detail::combine_replicas(config, trace.size(), f);
  return f;
}

}  // namespace rungs::planning
