// data_parallel: a trace served by N data-parallel ranks in lockstep, as vLLM's data-parallel
// mode runs them (DP attention with expert-parallel MoE layers, whose collectives need every
// rank in every forward), against the same ranks stepping independently.
//
// Each rank is a planning::simulate of its own (scheduler, KV pool, graphs) on its own thread,
// its driver and engine synced with the others through engine::simulated_ranks: the
// agreement is the driver's and the engine's own (serving::driver, graph_runner::agree: the
// code every rank_sync transport runs, MPI's included), not a copy.
//   - Split: the k-th conversation (or standalone request) in trace order goes to rank k mod N
//     (route_round_robin, fleet.hpp); a conversation's later turns follow its first.
//   - Each step, every rank pads to the bucket of the largest batch over the ranks (the
//     elementwise maximum of the batch keys); a rank with nothing to run runs a dummy batch of
//     that bucket, all padding (graph_runner::dummy_step, vLLM's execute_dummy_batch); when
//     no rank has anything, nobody steps and the ranks idle to the earliest next arrival.
//   - A step takes the slowest rank's time (the collective waits for it); captures are agreed
//     as in any synced engine (a failure anywhere drops the graph everywhere).
// `independent` is the same split on ranks that never wait for each other (simulate_fleet
// with round-robin: each rank is exactly simulate on its share), so the difference is what
// lockstep costs: padded token rows, dummy steps, and the latency and throughput lost to
// waiting for the slowest rank.
//
// Needs chunked prefill: a step is one runner step in one phase (step_routing::single), as in
// vLLM v1; with separate prefill and decode steps a prefilling rank and a decoding rank would
// agree on nothing.
#pragma once

#include <rungs/engine/rank_sync.hpp>
#include <rungs/planning/fleet.hpp>
#include <rungs/planning/simulate.hpp>

#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rungs::planning {

struct data_parallel_result {
  fleet_result lockstep;     ///< the ranks in lockstep: each rank's result (replicas) and the total
  fleet_result independent;  ///< the same split, each rank on its own (simulate_fleet, round-robin)
  /// Lockstep steps: every rank ran each one, its own batch or a dummy (rank 0's engine steps).
  std::int64_t steps = 0;
};

namespace detail {

inline void run_data_parallel(const simulation_config& c, const std::vector<serving::trace_request>& trace, std::int32_t ranks,
                       fleet_result& f) {
  f.replica_of = route_round_robin(trace, ranks);
  const serving::turn_arrivals turns(trace, true);
  const std::vector<std::size_t> routed = routed_by_arrival(trace, turns);
  f.replicas.resize(static_cast<std::size_t>(ranks));
  engine::simulated_ranks group(ranks);
  std::mutex failed;
  std::exception_ptr first;  // the error of the rank that stopped first (the others' say it stopped)
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      engine::simulated_ranks::handle sync = group.rank(r);
      try {
        simulator rank(c, trace, true, sync);
        for (const std::size_t i : routed)
          if (f.replica_of[i] == r) rank.route(i);
        f.replicas[static_cast<std::size_t>(r)] = rank.run();
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(failed);
          if (!first) first = std::current_exception();
        }
        sync.abort(e.what());
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace detail

/// Runs `trace` on `ranks` data-parallel ranks of `config` in lockstep, and on the same ranks
/// independently (see the file comment). Throws std::invalid_argument for a rank count
/// outside [1, 256], a configuration without chunked prefill, an arrival that is not a finite
/// non-negative time, or anything simulate refuses.
inline data_parallel_result simulate_data_parallel(const simulation_config& config,
                                                   const std::vector<serving::trace_request>& trace, std::int32_t ranks) {
  if (ranks < 1 || ranks > 256)
    throw std::invalid_argument("data parallel: ranks = " + std::to_string(ranks) + " must be in [1, 256]");
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  if (!config.scheduler.chunked_prefill)
    throw std::invalid_argument("data parallel: ranks step in lockstep on one bucket per step, which needs chunked "
                                "prefill (mixed steps); separate prefill and decode steps would put ranks in different "
                                "phases");
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (!(std::isfinite(trace[i].arrival) && trace[i].arrival >= 0))
      throw std::invalid_argument("data parallel: trace request " + std::to_string(i + 1) + " arrives at " +
                                  std::to_string(trace[i].arrival) + "; an arrival must be a finite time >= 0");
  data_parallel_result d;
  simulation_config c = config;
  c.keep_itl_samples = true;
  detail::run_data_parallel(c, trace, ranks, d.lockstep);
  d.steps = d.lockstep.replicas.front().engine.steps;
  detail::combine_replicas(config, trace.size(), d.lockstep);
  d.independent = simulate_fleet(config, trace, ranks);
  return d;
}

}  // namespace rungs::planning
