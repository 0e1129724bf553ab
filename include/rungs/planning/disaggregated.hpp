// disaggregated: prefill and decode on separate replicas, as Splitwise (ISCA 2024) and
// DistServe (OSDI 2024) serve them: P prefill replicas compute each prompt and its first
// token (the request's time to first token ends there), its KV moves over a link to one of D
// decode replicas, which generate the rest.
//
// Both pools are fleets (planning/fleet.hpp) of the same replica configuration, each run by
// the one serving loop (serving::driver through planning::simulate's simulator):
//   prefill pool   the trace with one output token a request (a prefill-only leg), behind its
//                  router;
//   link           each prefill replica sends its requests' KV in the order their prefills end,
//                  one transfer at a time (its own NIC): a transfer takes latency + the prompt's
//                  KV bytes of one rank / bandwidth (each tensor-parallel rank sends its own
//                  share over its own link, so one rank's bytes set the time), not overlapped
//                  with the prefill (Splitwise and DistServe overlap it layer by layer: this is
//                  an upper bound on what the transfer costs);
//   decode pool    a trace of the handoffs: each request arrives when its KV has arrived, its
//                  prompt and first token as the prompt with the prompt's KV transferred
//                  (serving::request::transferred_tokens: the scheduler allocates their blocks
//                  and computes only the first token), output_tokens - 1 to generate, behind
//                  its router.
// The prefill pool does not wait for the decode pool (the prefill side's KV is freed at the
// handoff and a request waiting for a decode slot holds KV nowhere: as if buffered in host
// memory), so the pools run one after the other. A request's first token is the prefill
// replica's; its inter-token gaps are the decode replica's, and the gap from its first token
// to its second (transfer, queueing on the decode pool, the step) is one of them.
//
// Conversations are refused: a chat's next turn arrives after the previous answer, which the
// decode pool produces after the prefill pool has run.
#pragma once

#include <rungs/kv/capacity.hpp>
#include <rungs/planning/fleet.hpp>
#include <rungs/planning/fleet_search.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rungs::planning {

/// The link a request's KV crosses from its prefill replica to its decode replica, one way.
struct kv_link {
  /// Bytes/s. Default: 400 Gb/s InfiniBand NDR (a ConnectX-7, one per GPU in a DGX H100).
  double bytes_per_second = 50e9;
  /// Seconds a transfer takes before its first byte arrives. Default: an assumption (RDMA's
  /// few microseconds, doubled for the transfer's setup); the serving stack's own overhead is
  /// not in it.
  double latency_seconds = 10e-6;

  void validate() const {
    if (!(bytes_per_second > 0) || !std::isfinite(bytes_per_second))
      throw std::invalid_argument("disaggregate: link bandwidth = " + std::to_string(bytes_per_second) +
                                  " bytes/s must be a positive, finite number");
    if (!(latency_seconds >= 0) || !(latency_seconds <= 3600))
      throw std::invalid_argument("disaggregate: link latency = " + std::to_string(latency_seconds) +
                                  " s must be in [0, 3600]");
  }
  /// Seconds to move `bytes`.
  double seconds(std::int64_t bytes) const { return latency_seconds + static_cast<double>(bytes) / bytes_per_second; }
};

/// A link by name: nvlink (H100's NVLink 4, 450 GB/s one way: intra-node), infiniband-400g
/// (the default, 50 GB/s), pcie5 (PCIe 5.0 x16, 63 GB/s one way), pcie4 (31.5 GB/s). Datasheet
/// rates; latency as kv_link's default. None: not a known name.
inline std::optional<kv_link> kv_link_preset(std::string_view name) {
  if (name == "nvlink") return kv_link{.bytes_per_second = 450e9};
  if (name == "infiniband-400g") return kv_link{.bytes_per_second = 50e9};
  if (name == "pcie5") return kv_link{.bytes_per_second = 63e9};
  if (name == "pcie4") return kv_link{.bytes_per_second = 31.5e9};
  return std::nullopt;
}
inline constexpr std::string_view kv_link_presets = "nvlink, infiniband-400g, pcie5, pcie4";

struct disaggregation {
  std::int32_t prefill = 1, decode = 1;  ///< replicas in each pool
  router_options prefill_router{}, decode_router{};
  kv_link link{};
};

/// What the prefill pool leaves: its fleet and, per trace request, the handoff.
struct prefill_pool_result {
  fleet_result fleet;                   ///< the prefill leg of every request (one output token each)
  std::vector<double> kv_ready;         ///< per trace request: when its KV reached the decode pool (-1: no decode leg)
  std::vector<double> transfer_seconds; ///< per trace request: its transfer alone (0: none)
  std::int64_t transfer_bytes = 0;      ///< over every transfer, one rank's
};

struct disaggregated_result {
  disaggregation plan;                        ///< the pools, routers and link served with
  prefill_pool_result prefill;
  fleet_result decode;                        ///< the decode legs (its trace: decode_trace)
  std::vector<serving::trace_request> decode_trace;  ///< the handoffs, by arrival
  std::vector<std::size_t> decode_of;         ///< per decode_trace request: its trace request
  std::vector<request_record> requests;       ///< in trace order: first token from prefill, finish from decode
  latency_summary ttft, itl;                  ///< over every request (the handoff gap among the inter-token gaps)
  latency_summary transfer;                   ///< the transfers' seconds
  latency_summary handoff;                    ///< first token to second token, over requests with two or more
  /// Both pools as one simulation_result (fleet_result::total's rules over every replica of
  /// both pools), with the latencies above.
  simulation_result total;
};

namespace detail {

inline void check_disaggregation(const disaggregation& d, const std::vector<serving::trace_request>& trace) {
  for (const std::int32_t n : {d.prefill, d.decode})
    if (n < 1 || n > 4096)
      throw std::invalid_argument("disaggregate: " + std::to_string(d.prefill) + ":" + std::to_string(d.decode) +
                                  ": each pool needs 1 to 4096 replicas");
  d.link.validate();
  if (d.decode_router.kind == router::prefix_affinity)
    throw std::invalid_argument("disaggregate: the decode pool is routed round-robin or least-loaded (its requests "
                                "bring their KV; there is no prefix to route by)");
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (trace[i].conversation != 0)
      throw std::invalid_argument("disaggregate: trace request " + std::to_string(i + 1) + " is turn " +
                                  std::to_string(trace[i].turn) + " of conversation " +
                                  std::to_string(trace[i].conversation) +
                                  ": a chat's next turn waits for the decode pool's answer; disaggregated plans "
                                  "take standalone requests");
}

}  // namespace detail

/// The prefill pool of `d` on `trace`, and each request's handoff over d.link.
inline prefill_pool_result simulate_prefill_pool(const simulation_config& config,
                                                 const std::vector<serving::trace_request>& trace, const disaggregation& d) {
  std::vector<serving::trace_request> prefill = trace;
  for (serving::trace_request& r : prefill) r.output_tokens = 1;
  prefill_pool_result p;
  p.fleet = simulate_fleet(config, prefill, d.prefill, d.prefill_router);
  const std::int64_t per_token = kv::bytes_per_token(config.model);
  p.kv_ready.assign(trace.size(), -1);
  p.transfer_seconds.assign(trace.size(), 0);
  // Each prefill replica's link sends one transfer at a time, in the order prefills end.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (p.fleet.requests[i].rejected.empty() && trace[i].output_tokens > 1) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p.fleet.requests[a].first_token < p.fleet.requests[b].first_token;
  });
  std::vector<double> link_free(static_cast<std::size_t>(d.prefill), 0.0);
  for (const std::size_t i : order) {
    double& free_at = link_free[static_cast<std::size_t>(p.fleet.replica_of[i])];
    const std::int64_t bytes = per_token * trace[i].prompt_tokens;
    const double start = std::max(free_at, p.fleet.requests[i].first_token);
    p.transfer_seconds[i] = d.link.seconds(bytes);
    free_at = p.kv_ready[i] = start + p.transfer_seconds[i];
    p.transfer_bytes += bytes;
  }
  return p;
}

/// The decode pool of `d` after `p`: the handoffs as a trace, served by d.decode replicas;
/// combines both pools into the result.
inline disaggregated_result simulate_decode_pool(const simulation_config& config,
                                                 const std::vector<serving::trace_request>& trace, const disaggregation& d,
                                                 prefill_pool_result p) {
  disaggregated_result r;
  r.plan = d;
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (p.kv_ready[i] >= 0) r.decode_of.push_back(i);
  std::stable_sort(r.decode_of.begin(), r.decode_of.end(),
                   [&](std::size_t a, std::size_t b) { return p.kv_ready[a] < p.kv_ready[b]; });
  for (const std::size_t i : r.decode_of) {
    serving::trace_request q = trace[i];
    q.arrival = p.kv_ready[i];
    q.prompt_tokens = trace[i].prompt_tokens + 1;  // the prompt and the first token, whose KV is computed here
    q.transferred_tokens = trace[i].prompt_tokens;
    q.output_tokens = trace[i].output_tokens - 1;
    r.decode_trace.push_back(std::move(q));
  }
  simulation_config c = config;
  c.keep_itl_samples = true;
  if (!r.decode_trace.empty()) r.decode = simulate_fleet(c, r.decode_trace, d.decode, d.decode_router);

  // Every request: the prefill leg, then its decode leg.
  r.requests = p.fleet.requests;
  std::vector<double> itl, transfer, handoff;
  for (std::size_t k = 0; k < r.decode_of.size(); ++k) {
    const std::size_t i = r.decode_of[k];
    const request_record& leg = r.decode.requests[k];
    request_record& rec = r.requests[i];
    transfer.push_back(p.transfer_seconds[i]);
    if (!leg.rejected.empty()) {
      rec.rejected = "decode: " + leg.rejected;
      continue;
    }
    rec.finished = leg.finished;
    rec.output_tokens += leg.output_tokens;
    rec.preemptions += leg.preemptions;
    handoff.push_back(leg.first_token - rec.first_token);
  }
  itl = handoff;
  for (simulation_result& s : r.decode.replicas) {
    itl.insert(itl.end(), s.itl_samples.begin(), s.itl_samples.end());
    if (!config.keep_itl_samples) std::vector<double>().swap(s.itl_samples);
  }
  std::vector<double> ttft;
  for (const request_record& q : r.requests)
    if (q.rejected.empty()) ttft.push_back(q.ttft());
  r.ttft = summarize(std::move(ttft));
  r.itl = summarize(std::move(itl));
  r.transfer = summarize(std::move(transfer));
  r.handoff = summarize(std::move(handoff));

  // Both pools' replicas as one fleet: counts summed, peaks the largest (fleet_result::total).
  fleet_result both;
  both.replicas = p.fleet.replicas;
  for (simulation_result s : r.decode.replicas) {
    for (request_record& q : s.requests) q.trace_index = r.decode_of[q.trace_index];
    both.replicas.push_back(std::move(s));
  }
  simulation_config quiet = config;
  quiet.keep_itl_samples = false;
  detail::combine_replicas(quiet, trace.size(), both);
  r.total = std::move(both.total);
  r.total.ttft = r.ttft;
  r.total.itl = r.itl;
  r.total.rejected = 0;
  for (const request_record& q : r.requests) r.total.rejected += q.rejected.empty() ? 0 : 1;
  r.total.requests = r.requests;
  detail::summarize_first(r.requests, config.first_requests, r.total);
  r.prefill = std::move(p);
  return r;
}

/// Serves `trace` disaggregated (see the file comment). Throws std::invalid_argument for a
/// pool outside [1, 4096] replicas, a bad link, a prefix-affinity decode router, a trace with
/// conversations, or anything simulate_fleet refuses.
inline disaggregated_result simulate_disaggregated(const simulation_config& config,
                                                   const std::vector<serving::trace_request>& trace,
                                                   const disaggregation& d) {
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  detail::check_disaggregation(d, trace);
  return simulate_decode_pool(config, trace, d, simulate_prefill_pool(config, trace, d));
}

/// One disaggregated fleet a search simulated. decode = 0: the prefill pool alone, checked
/// against the objective's TTFT bounds only.
struct disaggregated_trial {
  std::int32_t prefill = 0, decode = 0;
  bool met = false;
  latency_summary ttft, itl;
  std::int64_t rejected = 0;
};

struct disaggregated_search_result {
  /// The split found: the fewest prefill replicas meeting the TTFT bounds, then the fewest
  /// decode replicas meeting the whole objective with them; none when no pool of at most
  /// max_replicas does.
  std::optional<std::pair<std::int32_t, std::int32_t>> split;
  std::vector<disaggregated_trial> tried;  ///< in the order simulated
  /// The fleet of `split` (disaggregated_result of the chosen trial); none without a split.
  std::optional<disaggregated_result> chosen;
};

/// The smallest disaggregated fleet for `objective` (routers and link from `d`; its pool sizes
/// are searched). A request's first token comes from the prefill pool alone, so the TTFT
/// bounds depend on P only: P is the fewest prefill replicas whose pool meets them (every P
/// when the objective bounds no TTFT: 1), found as search_fleet finds a count (doubling, then
/// bisection); then D is the fewest decode replicas with which the whole fleet meets the
/// objective, the prefill pool simulated once and reused. Not every P:D is tried: a larger P
/// could in principle need fewer decode replicas (it only moves handoffs earlier); the
/// answer's P - 1 misses the TTFT bounds and its D - 1 misses the objective. Throws as
/// search_fleet and simulate_disaggregated do.
inline disaggregated_search_result search_disaggregated(const simulation_config& config,
                                                        const std::vector<serving::trace_request>& trace,
                                                        const service_objective& objective, disaggregation d,
                                                        std::int32_t max_replicas = 64) {
  check_search(objective, max_replicas);
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  detail::check_disaggregation(d, trace);
  simulation_config c = config;
  c.record_steps = false;
  service_objective ttft_bounds;
  for (const slo_bound& b : objective)
    if (b.metric <= slo_metric::ttft_max) ttft_bounds.push_back(b);
  disaggregated_search_result s;
  std::optional<prefill_pool_result> prefill;  // of the last P that met: the fewest
  std::optional<std::int32_t> p = 1;
  if (!ttft_bounds.empty())
    p = detail::fewest(max_replicas, [&](std::int32_t n) {
      d.prefill = n;
      prefill_pool_result r = simulate_prefill_pool(c, trace, d);
      const bool met = meets(r.fleet.ttft, r.fleet.itl, ttft_bounds);
      s.tried.push_back({.prefill = n, .decode = 0, .met = met, .ttft = r.fleet.ttft, .itl = {}, .rejected = r.fleet.rejected});
      if (met) prefill = std::move(r);  // each count that meets is fewer than the last
      return met;
    });
  if (!p) return s;
  d.prefill = *p;
  if (!prefill) prefill = simulate_prefill_pool(c, trace, d);
  std::optional<disaggregated_result> best;  // of the last D that met: the fewest
  const std::optional<std::int32_t> q = detail::fewest(max_replicas, [&](std::int32_t n) {
    d.decode = n;
    disaggregated_result r = simulate_decode_pool(c, trace, d, *prefill);
    const bool met = meets(r.ttft, r.itl, objective);
    s.tried.push_back({.prefill = *p, .decode = n, .met = met, .ttft = r.ttft, .itl = r.itl, .rejected = r.total.rejected});
    if (met) best = std::move(r);
    return met;
  });
  if (!q) return s;
  s.split = std::pair{*p, *q};
  s.chosen = std::move(best);
  return s;
}

}  // namespace rungs::planning
