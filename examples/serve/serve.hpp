// The serving loop: continuous batching of chat turns through rungs.
//
//   arrivals ──► rungs::serving::scheduler ──► rungs::engine::engine ──► greedy sampler
//                 waiting queue, admission       pads to a bucket, replays    │
//                 with watermark, preemption     its graph or runs eagerly    │
//                 by recompute, chat sessions    (backend: host or CUDA)      │
//                 ▲                                                           │
//                 └──────────── commit(sampled tokens): first tokens, finished turns
//
// The step itself (schedule, route by phase, pad, run, sample, commit) is the library's:
// rungs::engine::engine::step (rungs/engine/engine.hpp). This file adds what a server adds
// around it: arrivals, serving time, idle periods, per-step records and status lines. The
// engine returns one row per sequence (the final hidden state of its last new token); the
// runtime turns rows into tokens.
//
// Time: serving time is wall time since the first step, or with the virtual clock the modeled
// cost of the work done (virtual_costs), so that a run does not depend on the machine's speed
// (the tests use it). Either way a period with nothing to run (every chat is thinking) is
// skipped rather than slept through: arrivals inside it happen at their scheduled time and the
// engine is told it is idle (the `idle` capture timing captures then). Latencies (time to
// first token, inter-token) are in serving time.
#pragma once

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/any_engine.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/observer.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/serving/scheduler.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "workload.hpp"

namespace demo {

namespace eng = rungs::engine;

using eng::step_routing;

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
};

/// Serving time: wall time since start(), or (virtual) the seconds spent, plus the idle
/// periods skipped.
class serving_clock {
 public:
  explicit serving_clock(std::optional<virtual_costs> costs = {}) : costs_(costs) {}

  const std::optional<virtual_costs>& costs() const { return costs_; }
  void start() { t0_ = std::chrono::steady_clock::now(); }
  double now() const {
    if (costs_) return elapsed_;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() + elapsed_;
  }
  /// Work that took `modeled` seconds: the virtual clock advances; the wall clock has already.
  void spend(double modeled) {
    if (costs_) elapsed_ += modeled;
  }
  /// Nothing to run until `t`: serving time jumps there.
  void skip_to(double t) {
    const double n = now();
    if (t > n) elapsed_ += t - n;
  }

 private:
  std::optional<virtual_costs> costs_;
  std::chrono::steady_clock::time_point t0_{};
  double elapsed_ = 0;
};

struct serve_options {
  std::optional<virtual_costs> virtual_clock{};  ///< none: wall time
  double status_every = 0.5;                     ///< seconds of serving time between status lines
  std::int32_t preemption_lines = 8;             ///< preemption events printed (then only counted)
  /// Data-parallel ranks (serve_demo_dp): the all-reduce MAX the engine is synced to, through
  /// which the loop also agrees when to step, idle and stop, and each step's virtual time
  /// (the slowest rank's). Empty: one rank.
  std::function<void(std::span<std::int64_t>)> ranks{};
};

/// One engine step inside a scheduler step.
struct engine_run {
  eng::phase ph = eng::phase::decode;           // the bucket space's phase it looked up in
  eng::step_kind kind = eng::step_kind::prefill;  // what its sequences do: prefill, mixed, uniform decode
  std::int64_t seqs = 0, tokens = 0;
  std::optional<std::string> bucket{};  // its coordinates, e.g. "(4, 256)"; none: no bucket covers it
  eng::run_kind run = eng::run_kind::eager;
  std::optional<eng::eager_reason> reason{};
  std::int64_t padded_seqs = 0, padded_tokens = 0;  // rows the replay computed for nothing
  std::optional<std::string> captured{};            // a graph captured during this step
};

/// What the loop records per scheduler step (the --json series and the plot).
struct step_record {
  double t = 0;           ///< serving time at the end of the step
  double seconds = 0;     ///< the step's duration
  std::int64_t step = 0;
  serving::step_phase phase = serving::step_phase::decode;
  std::int32_t seqs = 0, tokens = 0, sampled = 0, admitted = 0, preempted = 0;
  std::size_t running = 0, waiting = 0;
  serving::admission_stop stopped = serving::admission_stop::none;  ///< why the waiting were not admitted
  rungs::kv::kv_metrics kv{};
  double padded_fraction = 0;  ///< padded tokens / tokens computed by replays so far
  std::int64_t eager_steps = 0, graphs = 0;
  std::vector<engine_run> runs;
};

/// One finished turn.
struct turn_record {
  serving::request_id id = 0;
  serving::session_id conversation = 0;
  std::int32_t turn = 0;
  double available = 0, first_token = -1, finished = -1;
  std::int32_t prompt_tokens = 0;   ///< this turn's new tokens
  std::int32_t context_tokens = 0;  ///< conversation history and this turn's prompt
  std::vector<token_id> output;
  std::vector<double> token_times;
  std::int32_t preemptions = 0;
};

struct serve_result {
  std::vector<step_record> steps;
  std::vector<turn_record> turns;  ///< in request order
  serving::scheduler_stats scheduler{};
  eng::engine_stats engine{};
  rungs::kv::kv_metrics kv{};
  double startup_seconds = 0, serving_seconds = 0, idle_seconds = 0;
  std::int64_t startup_captures = 0;  ///< graphs captured before the first step
  std::int64_t idle_periods = 0, idle_captures = 0;
  std::int64_t dummy_steps = 0;       ///< data parallel: steps run on padding only for the other ranks
  std::size_t peak_waiting = 0;
  std::int32_t peak_live_blocks = 0;
};

/// What the loop needs from the model side, besides the engine:
///   copy_blocks(span<const kv::block_copy>)     copy-on-write of KV blocks before a step
///   sample(rows, n, span<token_id> out)         greedy token of each of the first n rows
template <class R, class Rows>
concept serve_runtime = requires(R& r, const Rows& rows, std::span<const rungs::kv::block_copy> copies,
                                 std::span<token_id> out) {
  r.copy_blocks(copies);
  r.sample(rows, std::int64_t{1}, out);
};

/// The serving loop around an engine: rungs::engine::any_engine<Backend> (built from the flags).
template <class Engine, class Runtime>
  requires serve_runtime<Runtime, typename Engine::rows_type>
class server {
 public:
  server(Engine& engine, Runtime& runtime, const std::vector<demo_request>& requests, serve_options opts,
         std::ostream& log)
      : engine_(engine),
        hook_{runtime},
        requests_(requests),
        opts_(std::move(opts)),
        log_(log),
        arrivals_(trace_rows(requests)),
        clock_(opts_.virtual_clock) {}

  serve_result run() {
    const auto t_start = std::chrono::steady_clock::now();
    engine_.start();  // the timing policy's startup captures
    result_.startup_seconds = clock_.costs() ? engine_.stats().capture_seconds
                                             : std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    result_.startup_captures = engine_.stats().captures;
    clock_.start();
    result_.turns.resize(requests_.size());
    double next_status = 0;
    for (;;) {
      // One rank: its own state. Data parallel: whether any rank has requests left or queued
      // work, and the earliest next arrival of any rank (as times travel: rank_sync.hpp).
      std::array<std::int64_t, 3> state{arrivals_.remaining() > 0 ? 1 : 0, 0, 0};
      if (state[0]) {
        for (std::size_t i : arrivals_.take(now())) submit(i);
        const std::optional<double> next = arrivals_.next();
        state[1] = engine_.idle_queues() ? 0 : 1;
        state[2] = next ? -eng::time_bits(*next) : std::numeric_limits<std::int64_t>::min();
      }
      if (opts_.ranks) opts_.ranks(state);
      if (state[0] == 0) break;
      if (state[1] == 0) {
        idle_until(state[2] == std::numeric_limits<std::int64_t>::min() ? std::nullopt
                                                                         : std::optional(eng::bits_time(-state[2])));
        continue;
      }
      const double begin = now();
      const eng::engine_step& ran = engine_.step(hook_);
      const serving::scheduled_step& step = *ran.plan;
      // The step's cost on the virtual clock: data parallel, every rank spends the slowest's.
      std::array<std::int64_t, 1> spent{eng::time_bits(modeled_seconds(ran) + ran.capture_seconds)};
      if (opts_.ranks) opts_.ranks(spent);
      if (!ran.ran()) {
        clock_.spend(eng::bits_time(spent[0]));
        // The only runnable request gave its blocks back, or (data parallel) this rank ran a
        // dummy batch for the others.
        for (serving::request_id id : step.preempted) note_preemption(id, begin);
        if (!ran.runs.empty()) ++result_.dummy_steps;
        if (!step.preempted.empty() || !ran.runs.empty()) continue;
        throw std::logic_error("serving loop: the scheduler has work but planned an empty step (running " +
                               std::to_string(engine_.running()) + ", waiting " +
                               std::to_string(engine_.waiting()) + ")");
      }
      step_record rec;
      rec.step = static_cast<std::int64_t>(result_.steps.size());
      rec.phase = step.phase;
      rec.seqs = static_cast<std::int32_t>(step.entries.size());
      rec.tokens = step.tokens;
      rec.sampled = step.sampling;
      rec.admitted = static_cast<std::int32_t>(step.admitted.size());
      rec.preempted = static_cast<std::int32_t>(step.preempted.size());
      rec.stopped = step.stopped;
      for (serving::request_id id : step.preempted) note_preemption(id, begin);
      // Queues and KV blocks as the step ran (after planning, before finished turns freed
      // their blocks), as rungs-plan simulate records them.
      rec.running = ran.running;
      rec.waiting = ran.waiting;
      rec.kv = ran.kv;
      for (const eng::engine_run& run : ran.runs) rec.runs.push_back(describe(run));
      const serving::step_events& ev = *ran.events;
      clock_.spend(eng::bits_time(spent[0]));
      const double end = now();
      record_tokens(step, ev, end);

      const eng::engine_stats& s = engine_.stats();
      const rungs::kv::kv_metrics& m = rec.kv;
      rec.t = end;
      rec.seconds = end - begin;
      rec.padded_fraction = padded_fraction(s);
      rec.eager_steps = s.eager_steps();
      rec.graphs = s.captures;
      result_.peak_waiting = std::max(result_.peak_waiting, rec.waiting);
      result_.peak_live_blocks = std::max(result_.peak_live_blocks, m.live_blocks);
      result_.steps.push_back(std::move(rec));
      if (result_.steps.size() == 1 || end >= next_status || arrivals_.remaining() == 0) {
        status(result_.steps.back());
        while (next_status <= end) next_status += opts_.status_every;
      }
    }
    result_.serving_seconds = now();
    result_.scheduler = engine_.scheduler_stats();
    result_.engine = engine_.stats();
    result_.kv = engine_.kv_metrics();
    return std::move(result_);
  }

  /// Serving time (see serving_clock).
  double now() const { return clock_.now(); }

  static double padded_fraction(const eng::engine_stats& s) {
    const std::int64_t all = s.real_tokens + s.padded_tokens;
    return all ? static_cast<double>(s.padded_tokens) / static_cast<double>(all) : 0.0;
  }

 private:
  void submit(std::size_t i) {
    const demo_request& d = requests_[i];
    turn_record& t = result_.turns[i];
    t.id = i + 1;
    t.conversation = d.row.conversation;
    t.turn = d.row.turn;
    t.available = arrivals_.available_at(i);
    t.prompt_tokens = d.row.prompt_tokens;
    serving::request r;
    r.id = i + 1;
    r.prompt = d.prompt;
    r.max_output_tokens = d.row.output_tokens;
    r.session = d.row.conversation;
    engine_.submit(std::move(r));
    t.context_tokens = static_cast<std::int32_t>(engine_.tokens(i + 1).size());
  }

  // Nothing runnable: skip to the next arrival, telling the engine it is idle.
  void idle_until(std::optional<double> next) {
    if (!next) throw std::logic_error("serving loop: requests remain but none is queued, running or due");
    const double start = now();
    const double capture_seconds = engine_.stats().capture_seconds;
    ++result_.idle_periods;
    result_.idle_captures += engine_.idle({.max_captures = 1 << 20, .seconds = std::max(0.0, *next - start)});
    clock_.spend(engine_.stats().capture_seconds - capture_seconds);
    clock_.skip_to(*next);
    result_.idle_seconds += now() - start;
  }

  // The step's cost on the virtual clock (0 on the wall clock, where it passed for real): the
  // token rows each run computed (a replay's bucket, padding included; a dummy's bucket).
  double modeled_seconds(const eng::engine_step& ran) const {
    if (!clock_.costs()) return 0;
    double s = 0;
    for (const eng::engine_run& run : ran.runs) s += clock_.costs()->step(run.tokens_run);
    return s;
  }

  engine_run describe(const eng::engine_run& r) const {
    engine_run run{.ph = r.ph, .kind = eng::kind_of(r.seqs - r.decodes, r.decodes, r.tokens), .seqs = r.seqs,
                   .tokens = r.tokens, .run = r.run, .reason = r.reason};
    if (r.bucket) {
      const eng::bucket& b = engine_.runner().at(*r.bucket);
      run.bucket = to_text(b);
      if (r.run == eng::run_kind::replay) {
        run.padded_seqs = b.shape.seqs - run.seqs;
        run.padded_tokens = b.shape.tokens - run.tokens;
      }
    }
    if (r.captured) run.captured = to_text(engine_.runner().at(*r.captured));
    return run;
  }

  void record_tokens(const serving::scheduled_step& step, const serving::step_events& ev, double t) {
    for (std::size_t i = 0; i < step.entries.size(); ++i) {
      if (!step.entries[i].samples) continue;
      turn_record& tr = result_.turns[step.entries[i].request - 1];
      if (tr.first_token < 0) tr.first_token = t;
      tr.token_times.push_back(t);
    }
    for (const serving::finished_request& f : ev.finished) {
      const std::size_t i = f.id - 1;
      turn_record& tr = result_.turns[i];
      tr.finished = t;
      tr.output = f.output;
      tr.preemptions = f.preemptions;
      if (arrivals_.finished(i, t) && f.session != 0) engine_.end_session(f.session);
    }
  }

  void note_preemption(serving::request_id id, double t) {
    if (preemptions_shown_ >= opts_.preemption_lines) return;
    const turn_record& r = result_.turns[id - 1];
    char line[192];
    std::snprintf(line, sizeof line, "[%7.2f s] KV cache full: preempted request %llu", t, static_cast<unsigned long long>(id));
    log_ << line;
    if (r.conversation != 0) log_ << " (chat " << r.conversation << " turn " << r.turn << ")";
    log_ << (preemptions_shown_ == 0 ? ", requeued first: it recomputes, hitting its own cached blocks" : ", requeued first");
    if (++preemptions_shown_ == opts_.preemption_lines) log_ << " (further preemptions are only counted)";
    log_ << "\n";
  }

  // One line: where the step's batches landed, the queues, the KV cache and the engine so far.
  void status(const step_record& r) {
    const rungs::kv::kv_metrics& m = r.kv;
    std::ostringstream runs;
    for (const engine_run& run : r.runs) {
      runs << (runs.tellp() > 0 ? ", " : "") << eng::to_string(run.kind) << " " << run.seqs << "x" << run.tokens << " -> ";
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
                  "[%7.2f s] step %5lld | running %3zu waiting %3zu%-6s| KV %5.1f%% %4d+%d/%d | prefix %5.1f%% | "
                  "padded %5.1f%% | eager %lld | graphs %lld | %s",
                  r.t, static_cast<long long>(r.step), r.running, r.waiting, why, 100.0 * m.usage(), m.live_blocks,
                  m.cached_blocks, m.num_blocks, 100.0 * m.prefix_hit_rate(), 100.0 * r.padded_fraction,
                  static_cast<long long>(r.eager_steps), static_cast<long long>(r.graphs), runs.str().c_str());
    log_ << line << "\n";
  }

  static std::string to_text(const eng::bucket& b) {
    std::ostringstream os;
    os << b;
    return os.str();
  }

  // The engine's step hook: the runtime samples the rows of each runner step in order.
  struct sample_hook {
    Runtime& runtime;
    void copy_blocks(std::span<const rungs::kv::block_copy> copies) { runtime.copy_blocks(copies); }
    void sample(const serving::scheduled_step&, std::span<const std::size_t> entries,
                const typename Engine::rows_type& rows, std::span<token_id> out) {
      runtime.sample(rows, static_cast<std::int64_t>(entries.size()), out);
    }
  };

  Engine& engine_;
  sample_hook hook_;
  const std::vector<demo_request>& requests_;
  serve_options opts_;
  std::ostream& log_;
  serving::turn_arrivals arrivals_;
  serve_result result_;
  serving_clock clock_;
  std::int32_t preemptions_shown_ = 0;
};

}  // namespace demo
