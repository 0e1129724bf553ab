// router: where a fleet sends each request, from what every replica shows when it arrives.
//
//   round_robin      the k-th conversation (or standalone request) in trace order goes to
//                    replica k mod N; reads no replica state.
//   least_loaded     the replica with the fewest outstanding requests (sent to it and not
//                    finished: queued, running, or arrived during its step under way); ties go
//                    to the lowest replica index. SGLang's router's shortest-queue policy counts
//                    requests the same way.
//   prefix_affinity  the replica whose KV cache holds the longest prefix of the request's
//                    prompt (each replica's own prefix-caching allocator is asked, as create()
//                    would reuse it), unless that replica is overloaded: only replicas with at
//                    most `max_imbalance` more outstanding requests than the least-loaded one
//                    are candidates. Among candidates: the longest cached prefix, then the
//                    fewest outstanding requests, then the lowest index; with no prefix cached
//                    anywhere this is least_loaded. SGLang's cache-aware router balances by the
//                    same kind of absolute bound (balance_abs_threshold), Mooncake's conductor
//                    by an estimate of the queueing time; the bound is a request count here.
//
// A conversation's later turns always follow its first turn: its history lives in that
// replica's scheduler (and KV cache), so only first turns and standalone requests are routed.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string_view>

namespace rungs::planning {

enum class router { round_robin, least_loaded, prefix_affinity };

inline constexpr std::string_view to_string(router r) {
  switch (r) {
    case router::round_robin: return "round-robin";
    case router::least_loaded: return "least-loaded";
    case router::prefix_affinity: return "prefix-affinity";
  }
  return "?";
}

struct router_options {
  router kind = router::round_robin;
  /// prefix_affinity: a replica with more than this many outstanding requests above the
  /// least-loaded replica's is overloaded and gets no request for its cache (0: only the
  /// least-loaded replicas are candidates, so the cache only breaks ties).
  std::int64_t max_imbalance = 4;
};

/// What a router reads from one replica when a request arrives.
struct replica_view {
  std::int64_t outstanding = 0;    ///< requests sent there and not finished
  std::int64_t cached_tokens = 0;  ///< of the request's prompt, in its KV cache now
};

/// The replica a state-reading router picks (least_loaded or prefix_affinity; round_robin
/// reads no state and is decided in trace order by route_round_robin). `replicas` is not
/// empty.
inline std::size_t pick_replica(const router_options& o, std::span<const replica_view> replicas) {
  if (o.kind == router::round_robin || replicas.empty())
    throw std::invalid_argument("pick_replica: round-robin reads no replica state, and a fleet has replicas");
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  for (const replica_view& v : replicas) least = v.outstanding < least ? v.outstanding : least;
  std::size_t best = replicas.size();
  for (std::size_t k = 0; k < replicas.size(); ++k) {
    const replica_view& v = replicas[k];
    if (o.kind == router::prefix_affinity) {
      if (v.outstanding - least > o.max_imbalance) continue;  // overloaded
      if (best == replicas.size() || v.cached_tokens > replicas[best].cached_tokens ||
          (v.cached_tokens == replicas[best].cached_tokens && v.outstanding < replicas[best].outstanding))
        best = k;
    } else if (v.outstanding == least) {
      return k;
    }
  }
  return best;
}

}  // namespace rungs::planning
