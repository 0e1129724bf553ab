// One rank of a multi-rank engine scenario, run the same way over simulated_ranks (threads,
// rank_sync_test.cpp) and over MPI (processes, tests/mpi): data-parallel ranks with their
// own batch sizes, capture costs that differ by rank, and a capture that fails on rank 1
// only. Whatever the transport, every rank must log the same captures and runs.
#pragma once

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/rank_sync.hpp>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <rungs/ladder/explicit.hpp>

#include "support.hpp"

namespace rungs_test {

struct rank_trace {
  std::vector<std::string> captures;  // "when:bucket[:outcome]"
  std::vector<std::string> runs;      // per step "bucket:run kind" ("-" for none)
  std::int64_t wrong_rows = 0;        // steps whose output rows were not the rank's own batch
  engine_stats stats;
};

/// Per step, each rank's batch size (the first `ranks` columns are used); the agreed batch is
/// the maximum over the ranks in use.
inline const std::vector<std::vector<std::int64_t>> rank_batches = {{1, 3, 2, 1}, {5, 1, 1, 2}, {2, 2, 2, 2},
                                                                     {1, 1, 9, 1}, {20, 1, 1, 1}, {3, 4, 1, 2}};

/// Runs rank r's batches on a runner over rungs 1 2 4 8 16 (delayed capture, 40 MiB budget),
/// agreeing through `sync` (any rank_sync; kept by reference for the run).
template <class Sync>
rank_trace run_rank(Sync& sync, int r, const std::vector<std::vector<std::int64_t>>& batches = rank_batches) {
  constexpr std::int64_t MiB = 1 << 20;
  toy_model model;
  host_backend::options sim{.simulate = simulated_capture{
                                // Costs differ by rank (memory fragmentation, other tenants).
                                .bytes = {.base = (r + 1) * MiB, .per_unit = MiB},
                                // Only rank 1 fails to capture rung 4.
                                .fail = [r](std::size_t, const bucket& b) -> std::optional<std::string> {
                                  if (r == 1 && b.batch() == 4) return "out of memory on rank 1";
                                  return std::nullopt;
                                }}};
  graph_runner<token_ladder, largest_first, delayed, host_backend> e(
      token_ladder{{1, 2, 4, 8, 16}}, host_backend(std::ref(model), sim),
      {.budget = {.bytes = 40 * MiB}, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.sync_with(sync);
  rank_trace t;
  e.observe(capture_log{&t.captures});
  batch_builder bb(2);
  for (const auto& step : batches) {
    const std::int64_t n = step[static_cast<std::size_t>(r)];
    auto res = e.step(bb.make(n, 1));
    t.runs.push_back((res.bucket ? std::to_string(e.at(*res.bucket).batch()) : std::string("-")) + ":" +
                     std::string(to_string(res.run)));
    if (res.rows.size() != static_cast<std::size_t>(n * tiny_model.row_width())) ++t.wrong_rows;
  }
  t.stats = e.stats();
  return t;
}

/// Ranks on vLLM's dispatch key (capture sizes 1 2 4 8 16, one speculative token: decode
/// graphs (1, 2) (2, 2) (4, 2), mixed graphs 1 .. 16) whose first step disagrees on the mode:
/// rank 0 decodes 3 sequences uniformly (2 tokens each: a decode graph alone), every other
/// rank prefills one 10-token prompt (mixed). Agreed: mixed, 3 rows, 10 tokens -> mixed 16.
/// Second step: rank r decodes r + 1 sequences uniformly: a decode graph for them all.
/// Returns "phase bucket:run" per step; wrong_rows counts outputs that were not the rank's own.
template <class Sync>
rank_trace run_dispatch_rank(Sync& sync, int r) {
  const rungs::ladder sizes{rungs::Explicit{1, 2, 4, 8, 16}};
  toy_model model;
  graph_runner<dispatch_buckets, by_phase<largest_first, largest_first>, startup, host_backend> e(
      dispatch_buckets(sizes, {.spec_tokens = 1, .max_num_seqs = 4}), host_backend(std::ref(model)),
      {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.sync_with(sync);
  batch_builder bb;
  rank_trace t;
  auto record = [&](const auto& res, std::int64_t rows) {
    std::ostringstream os;
    os << to_string(e.at(*res.bucket).ph) << e.at(*res.bucket) << ":" << to_string(res.run);
    t.runs.push_back(os.str());
    if (res.rows.size() != static_cast<std::size_t>(rows * tiny_model.row_width())) ++t.wrong_rows;
  };
  if (r == 0) record(e.step(bb.make(3, 10, 2)), 3);
  else record(e.step(bb.make(1, 0, 10)), 1);
  record(e.step(bb.make(r + 1, 10, 2)), r + 1);
  t.stats = e.stats();
  return t;
}

/// The scenario over `ranks` simulated ranks (threads of this process): each rank's trace.
inline std::vector<rank_trace> run_simulated(int ranks) {
  simulated_ranks group(ranks);
  std::vector<rank_trace> traces(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto h = group.rank(r);
      traces[static_cast<std::size_t>(r)] = run_rank(h, r);
    });
  for (auto& t : threads) t.join();
  return traces;
}

}  // namespace rungs_test
