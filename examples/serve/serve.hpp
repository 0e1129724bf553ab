// The demo's side of the serving loop: continuous batching of chat turns through rungs.
//
//   arrivals ──► rungs::serving::scheduler ──► rungs::engine::engine ──► greedy sampler
//                 waiting queue, admission       pads to a bucket, replays    │
//                 with watermark, preemption     its graph or runs eagerly    │
//                 by recompute, chat sessions    (backend: host or CUDA)      │
//                 ▲                                                           │
//                 └──────────── commit(sampled tokens): first tokens, finished turns
//
// The loop is the library's: rungs::serving::driver (rungs/serving/driver.hpp) around
// rungs::engine's step, as rungs-plan simulate runs it. This file adds what the demo chooses:
// the virtual clock's costs, the hook that turns the engine's rows into tokens, and the status
// lines (serve_log). run.hpp's serve_engine puts them together.
//
// Time: serving time is wall time since the first step, or with the virtual clock the modelled
// cost of the work done (virtual_costs), so that a run does not depend on the machine's speed
// (the tests use it). Either way a period with nothing to run (every chat is thinking) is
// skipped rather than slept through: arrivals inside it happen at their scheduled time and the
// engine is told it is idle (the `idle` capture timing captures then). Latencies (time to
// first token, inter-token) are in serving time.
#pragma once

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/serving/clock.hpp>
#include <rungs/serving/driver.hpp>
#include <rungs/serving/scheduler.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "workload.hpp"

namespace demo {

namespace eng = rungs::engine;

using eng::step_routing;
using rungs::serving::request_record;
using rungs::serving::run_record;
using rungs::serving::serve_result;
using rungs::serving::step_record;

/// The virtual clock's costs. An engine step takes `step_seconds` plus `token_seconds` per
/// token row it computes (a replay computes its whole bucket, padding included); a capture takes
/// what the backend reports, which the host backend makes `capture_seconds` plus
/// `capture_seconds_per_unit` per cost unit of the bucket (bs x seq, or bs) instead of a
/// measurement. The values put the default host run near its wall-clock length.
struct virtual_costs {
  double step_seconds = 0.002;
  double token_seconds = 5e-5;
  double capture_seconds = 0.005;
  double capture_seconds_per_unit = 1e-5;

  double step(std::int64_t tokens_computed) const {
    return step_seconds + token_seconds * static_cast<double>(tokens_computed);
  }
  /// The clock's price of an engine step: each runner step's token rows (serving::step_cost).
  double operator()(const eng::engine_step& ran) const {
    double s = 0;
    for (const eng::engine_run& run : ran.runs) s += step(run.tokens_run);
    return s;
  }
};

/// The virtual clock: serving time is the modelled cost of the work, from the first step.
using virtual_clock = rungs::serving::modelled_clock<virtual_costs>;

/// The driver's observer: a status line per `every` seconds of serving time (and for the first
/// and last steps), and the first `preemption_lines` preemptions.
class serve_log {
 public:
  serve_log(std::ostream& log, double every, const std::vector<demo_request>& requests,
            std::int32_t preemption_lines = 8)
      : log_(log), every_(every), requests_(requests), preemption_lines_(preemption_lines) {}

  void preempted(serving::request_id id, double t) {
    if (shown_ >= preemption_lines_) return;
    const serving::trace_request& r = requests_[id - 1].row;
    char line[192];
    std::snprintf(line, sizeof line, "[%7.2f s] KV cache full: preempted request %llu", t, static_cast<unsigned long long>(id));
    log_ << line;
    if (r.conversation != 0) log_ << " (chat " << r.conversation << " turn " << r.turn << ")";
    log_ << (shown_ == 0 ? ", requeued first: it recomputes, hitting its own cached blocks" : ", requeued first");
    if (++shown_ == preemption_lines_) log_ << " (further preemptions are only counted)";
    log_ << "\n";
  }

  void stepped(const step_record& r, std::size_t remaining) {
    if (r.step != 0 && r.end < next_ && remaining != 0) return;
    status(r);
    while (next_ <= r.end) next_ += every_;
  }

 private:
  // One line: where the step's batches landed, the queues, the KV cache and the engine so far.
  void status(const step_record& r) {
    const rungs::kv::kv_metrics& m = r.kv;
    std::ostringstream runs;
    for (const run_record& run : r.runs) {
      runs << (runs.tellp() > 0 ? ", " : "") << eng::to_string(run.kind()) << " " << run.seqs << "x" << run.tokens << " -> ";
      if (run.run == eng::run_kind::replay) runs << *run.bucket << " replay";
      else runs << "eager (" << eng::to_string(*run.reason) << ")";
    }
    const char* why = r.waiting == 0                                   ? ""
                      : r.stopped == serving::admission_stop::kv_blocks ? " (KV)"
                      : r.stopped == serving::admission_stop::preemption ? " (KV)"
                      : r.stopped == serving::admission_stop::max_seqs   ? " (seqs)"
                      : r.stopped == serving::admission_stop::token_budget ? " (tokens)"
                                                                           : "";
    char line[320];
    std::snprintf(line, sizeof line,
                  "[%7.2f s] step %5lld | running %3d waiting %3d%-6s| KV %5.1f%% %4d+%d/%d | prefix %5.1f%% | "
                  "padded %5.1f%% | eager %lld | graphs %lld | %s",
                  r.end, static_cast<long long>(r.step), r.running, r.waiting, why, 100.0 * m.usage(), m.live_blocks,
                  m.cached_blocks, m.num_blocks, 100.0 * m.prefix_hit_rate(), 100.0 * r.padded_fraction,
                  static_cast<long long>(r.eager_steps), static_cast<long long>(r.graphs), runs.str().c_str());
    log_ << line << "\n";
  }

  std::ostream& log_;
  double every_;
  const std::vector<demo_request>& requests_;
  std::int32_t preemption_lines_;
  std::int32_t shown_ = 0;
  double next_ = 0;
};

/// The engine's step hook: the runtime samples the rows of each runner step in order and
/// copies KV blocks. A runtime has
///   copy_blocks(span<const kv::block_copy>)     copy-on-write of KV blocks before a step
///   sample(rows, n, span<token_id> out)         greedy token of each of the first n rows
template <class Runtime, class Rows>
struct sample_hook {
  Runtime& runtime;
  std::function<void()> measure{};  ///< called as each runner step samples (a hybrid model's KV)
  void copy_blocks(std::span<const rungs::kv::block_copy> copies) { runtime.copy_blocks(copies); }
  void sample(const serving::scheduled_step&, std::span<const std::size_t> entries, const Rows& rows,
              std::span<token_id> out) {
    runtime.sample(rows, static_cast<std::int64_t>(entries.size()), out);
    if (measure) measure();
  }
};

}  // namespace demo
