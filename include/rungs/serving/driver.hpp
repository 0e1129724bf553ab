// rungs::serving::driver: the loop around rungs::engine's step, once (as vLLM v1's busy loop
// around EngineCore.step). The serving demo, its data-parallel ranks under MPI and rungs-plan
// simulate (one replica, a fleet's replicas, data-parallel ranks) are configurations of it:
//
//   driver<Engine, Clock>      Engine   rungs::engine::any_engine<Backend> (or anything with its
//                                       operations): the step itself, owning scheduler, KV
//                                       blocks and graphs
//                              Clock    a serving_clock (serving/clock.hpp): wall time, or time
//                                       modelled from the work (the demo's virtual costs, the
//                                       planner's cost model)
//
// One iteration, in named steps:
//   submit_arrivals   requests whose time has come are submitted (a chat's next turn arrives
//                     once its previous turn finished, plus the think time: turn_arrivals)
//   agree_activity    whether any rank has queued work, and the earliest next arrival
//   idle_until        nobody has work: skip to the next arrival, telling the engine it is idle
//                     (the idle capture timing captures then)
//   engine.step       schedule, run, sample (through the caller's hook), commit
//   agree_outcome     the step's seconds (the slowest rank's), whether anyone preempted, and
//                     the earliest next arrival, in case nothing ran anywhere
//   record_step       one step_record: queues, KV blocks, runs and their buckets; request
//                     times (first token, inter-token gaps, finish)
//
// Ranks. The agreements are an all-reduce MAX through one rank_sync (engine/rank_sync.hpp),
// the same through which the engine agrees each step's bucket and each capture: threads
// (engine::simulated_ranks), MPI processes (rungs::mpi::rank_sync) or none (one rank: nothing
// is exchanged). A rank with nothing to run still steps while another rank does (its engine
// runs a dummy batch of the agreed bucket), and all ranks keep one clock: times travel as the
// bits of non-negative doubles (engine::time_bits), exactly.
#pragma once

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/serving/clock.hpp>
#include <rungs/serving/scheduler.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rungs::serving {

/// One runner step of a recorded step: the engine's engine_run with its buckets resolved.
struct run_record {
  engine::phase ph = engine::phase::decode;          ///< the bucket phase it looked up
  std::int64_t seqs = 0;                             ///< sequences it ran (0: a dummy run)
  std::int64_t decodes = 0;                          ///< of which decoding
  std::int64_t tokens = 0;                           ///< new tokens it ran
  std::optional<engine::bucket> bucket{};            ///< the bucket it padded to; none: no bucket covers it
  engine::run_kind run = engine::run_kind::eager;    ///< replayed a graph, or ran eagerly
  std::optional<engine::eager_reason> reason{};      ///< why it ran eagerly
  std::optional<engine::bucket> captured{};          ///< a graph captured (and kept) during it
  std::int64_t tokens_run = 0;                       ///< token rows computed, padding included

  /// What its sequences do: prefill, mixed or uniform decode.
  engine::step_kind kind() const { return engine::kind_of(seqs - decodes, decodes, tokens); }
  /// Sequence rows a replay computed for nothing (0 when eager).
  std::int64_t padded_seqs() const { return replayed() ? bucket->shape.seqs - seqs : 0; }
  /// Token rows a replay computed for nothing (0 when eager).
  std::int64_t padded_tokens() const { return replayed() ? bucket->shape.tokens - tokens : 0; }
  bool replayed() const { return run == engine::run_kind::replay && bucket.has_value(); }
};

/// One step that ran, as the driver records it (the demo's --json series and status lines,
/// rungs-plan simulate's --plot series).
struct step_record {
  std::int64_t step = 0;     ///< its index among the steps that ran
  double start = 0, end = 0; ///< serving time
  step_phase phase = step_phase::decode;
  std::int32_t seqs = 0, tokens = 0, sampled = 0, admitted = 0, preempted = 0;
  std::int32_t running = 0, waiting = 0;   ///< after planning
  std::int32_t waiting_for_blocks = 0;     ///< of the waiting, held back by KV memory (all or none)
  admission_stop stopped = admission_stop::none;  ///< why the waiting were not admitted
  kv::kv_metrics kv{};                     ///< the KV pool as the step ran (after planning)
  double padded_fraction = 0;              ///< padded tokens / tokens computed by replays, so far
  std::int64_t eager_steps = 0, graphs = 0;  ///< engine steps run eagerly and graphs captured, so far
  std::vector<run_record> runs;            ///< in execution order

  double seconds() const { return end - start; }
  /// Every runner step of it replayed a graph.
  bool replayed() const {
    return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const run_record& r) { return r.replayed(); });
  }
};

/// One request of the trace. Times in serving seconds.
struct request_record {
  std::size_t trace_index = 0;
  session_id conversation = 0;
  std::int32_t turn = 0;
  double submitted = 0;             ///< when it became available (it waited from then on)
  double first_token = -1;
  double finished = -1;
  std::int32_t prompt_tokens = 0;   ///< with the conversation's history: what the scheduler was sent
  std::int32_t new_prompt_tokens = 0;  ///< this turn's own
  std::int32_t output_tokens = 0;
  std::int32_t preemptions = 0;
  std::string rejected;             ///< why it could never run; empty when it ran
  std::vector<token_id> output;     ///< its tokens, with driver_options::keep_outputs
  double ttft() const { return first_token - submitted; }
};

/// What a driver run leaves: every request, the steps, and the counters both the demo and the
/// planner report.
struct serve_result {
  std::vector<request_record> requests;  ///< in trace order (a routed driver: its own only)
  std::vector<step_record> steps;        ///< with driver_options::keep_steps
  std::vector<double> itl_samples;       ///< every inter-token gap, in the order they happened
  double startup_seconds = 0;            ///< the startup captures
  std::int64_t startup_captures = 0;     ///< graphs captured before the first step
  double end_seconds = 0;                ///< serving time at the end: the last step's end
  std::int64_t idle_periods = 0, idle_captures = 0;
  double idle_seconds = 0;
  double capture_seconds_in_service = 0;  ///< captures inside steps or idle gaps
  /// Data parallel: steps this rank ran on padding only, because another rank had work.
  std::int64_t dummy_steps = 0;
  /// Token rows computed over every step, padding included (a replay computes its bucket, an
  /// eager step its batch, a data-parallel one the batch agreed with the other ranks).
  std::int64_t tokens_run = 0;
  std::int64_t output_tokens = 0;
  std::int64_t rejected = 0;             ///< requests that could never run
  std::int64_t max_waiting = 0, max_running = 0;
  std::int64_t max_waiting_for_blocks = 0;  ///< most requests held back by KV memory at once
  double seconds_waiting_for_blocks = 0;    ///< time with at least one request held back by KV memory
  double mean_waiting_for_blocks = 0;       ///< their mean number over that time
  std::int32_t peak_live_blocks = 0;
  double peak_kv_usage = 0;                 ///< live blocks / blocks
  engine::engine_stats engine{};
  scheduler_stats scheduler{};
  kv::kv_metrics kv{};                      ///< the KV pool at the end
};

/// How a driver runs.
struct driver_options {
  /// Other ranks to agree with (data parallel); empty: one rank. The engine is synced to it.
  engine::rank_sync_ref ranks{};
  /// No request arrives until route() sends it here (a replica behind a router).
  bool routed = false;
  bool keep_steps = true;     ///< keep every step_record in serve_result::steps
  bool keep_outputs = false;  ///< keep every request's tokens in request_record::output
  /// A request that can never run (longer than max_model_len with its history and output, or
  /// refused by the scheduler) throws std::invalid_argument; otherwise it is recorded as
  /// rejected and the run goes on.
  bool strict = true;
  std::string who = "serving";  ///< names the driver in its errors
  /// The prompt of trace request `index`, `out.size()` (its prompt_tokens) tokens; empty:
  /// serving::trace_prompt's synthetic tokens.
  std::function<void(std::size_t index, std::span<token_id> out)> prompt{};
};

/// What an engine needs for a driver: any_engine's operations.
template <class E>
concept drivable_engine = requires(E& e, const E& ce, request r, session_id s) {
  e.start();
  e.submit(std::move(r));
  e.idle(engine::idle_budget{});
  { ce.idle_queues() } -> std::convertible_to<bool>;
  { ce.stats() } -> std::convertible_to<const engine::engine_stats&>;
  { ce.tokens(request_id{}) } -> std::convertible_to<std::span<const token_id>>;
  { ce.conversation_tokens(s) } -> std::convertible_to<std::span<const token_id>>;
  e.end_session(s);
  { ce.running() } -> std::convertible_to<std::size_t>;
  { ce.waiting() } -> std::convertible_to<std::size_t>;
  { ce.kv_metrics() } -> std::convertible_to<kv::kv_metrics>;
  { ce.runner().at(std::size_t{}) } -> std::convertible_to<engine::bucket>;
  { ce.runner().config().max_model_len } -> std::convertible_to<std::int64_t>;
};

/// An observer with nothing to observe. An observer may have (each optional)
///   preempted(request_id, double t)            a request gave its KV blocks back in the step
///                                              starting at t (it is requeued first)
///   stepped(const step_record&, size_t left)   a step ran; `left` requests are not finished
struct no_observer {};

/// The loop around an engine's step (see the file comment).
template <drivable_engine Engine, serving_clock Clock>
class driver {
 public:
  /// Serves `trace` (kept by reference) on `engine`: syncs the engine with `opts.ranks` and
  /// runs its startup captures.
  driver(Engine& engine, std::span<const trace_request> trace, Clock clock, driver_options opts = {})
      : engine_(engine), trace_(trace), clock_(std::move(clock)), opts_(std::move(opts)), arrivals_(trace, opts_.routed) {
    result_.requests.resize(trace.size());
    last_token_.assign(trace.size(), 0.0);
    if (opts_.ranks) engine_.runner().sync_with(opts_.ranks);  // the engine keeps a reference to opts_.ranks
    result_.startup_seconds = clock_.startup([this] {
      engine_.start();
      return engine_.stats().capture_seconds;
    });
    result_.startup_captures = engine_.stats().captures;
  }
  driver(const driver&) = delete;  // the engine refers to its rank link
  driver& operator=(const driver&) = delete;

  /// Runs until every request has finished; `hook` samples the engine's rows (engine::step).
  template <class Hook, class Observer = no_observer>
  void run(Hook& hook, Observer&& observer = {}) {
    run_until(std::numeric_limits<double>::infinity(), hook, observer);
  }

  /// Runs every step that starts before `until`, and returns early when no rank has work and
  /// nothing arrives before `until`: the idle gap is taken only once the next arrival is
  /// known, so a fleet's replica idles exactly as a replica served alone on its share. With
  /// other ranks, `until` must be infinite (every rank steps in every iteration).
  template <class Hook, class Observer = no_observer>
  void run_until(double until, Hook& hook, Observer&& observer = {}) {
    while (clock_.now() < until) {
      submit_arrivals();
      const activity a = agree_activity();
      if (!a.busy) {
        if (!a.next || *a.next >= until) return;
        idle_until(*a.next);
        continue;
      }
      const double start = clock_.now();
      const engine::engine_step& step = engine_.step(hook);
      if constexpr (requires { observer.preempted(request_id{}, 0.0); })
        for (const request_id id : step.plan->preempted) observer.preempted(id, start);
      const outcome o = agree_outcome(step);
      if (!o.seconds) {  // nothing ran on any rank
        if (o.preempted) continue;
        if (!o.next) throw std::logic_error(opts_.who + ": the waiting queues are stuck with nothing running");
        idle_until(*o.next);
        continue;
      }
      clock_.spend(*o.seconds);
      if (step.ran()) record_step(step, start, *o.seconds, observer);
      else record_dummy(step);
    }
  }

  /// Sends trace request `index` (a first turn or standalone request) here, at its arrival;
  /// its conversation's later turns follow it. Only with driver_options::routed.
  void route(std::size_t index) {
    arrivals_.release(index);
    routed_arrivals_.push_back(trace_[index].arrival);
    for (std::optional<std::size_t> k = index; k; k = arrivals_.next_turn(*k)) routed_.push_back(*k);
  }

  /// Requests sent here and not finished: queued or running, or arrived during the step under
  /// way (they are queued when it ends). A router's measure of load.
  std::size_t outstanding() const { return engine_.waiting() + engine_.running() + routed_arrivals_.size(); }

  /// Requests not finished (waiting to arrive, queued or running).
  std::size_t remaining() const { return arrivals_.remaining(); }

  double now() const { return clock_.now(); }  ///< serving time
  const Clock& clock() const { return clock_; }

  /// The result, after the last run; a routed driver's requests are its own, in trace order.
  serve_result finish() {
    result_.end_seconds = clock_.now();
    if (opts_.routed) {
      std::sort(routed_.begin(), routed_.end());
      std::vector<request_record> own;
      own.reserve(routed_.size());
      for (const std::size_t i : routed_) own.push_back(std::move(result_.requests[i]));
      result_.requests = std::move(own);
    }
    if (result_.seconds_waiting_for_blocks > 0)
      result_.mean_waiting_for_blocks = blocked_request_seconds_ / result_.seconds_waiting_for_blocks;
    result_.engine = engine_.stats();
    result_.scheduler = engine_.scheduler_stats();
    result_.kv = engine_.kv_metrics();
    return std::move(result_);
  }

 private:
  struct activity {
    bool busy = false;                // some rank has queued work
    std::optional<double> next{};     // the earliest next arrival of any rank
  };
  struct outcome {
    std::optional<double> seconds{};  // the step's time; none: nothing ran on any rank
    bool preempted = false;           // some rank preempted
    std::optional<double> next{};     // the earliest next arrival of any rank
  };
  static constexpr std::int64_t no_time = std::numeric_limits<std::int64_t>::min();

  // The earliest time over the ranks is the maximum of the negated bits.
  static std::int64_t earliest_bits(std::optional<double> t) { return t ? -engine::time_bits(*t) : no_time; }
  static std::optional<double> earliest_time(std::int64_t bits) {
    if (bits == no_time) return std::nullopt;
    return engine::bits_time(-bits);
  }

  activity agree_activity() {
    activity a{.busy = !engine_.idle_queues(), .next = arrivals_.next()};
    if (!opts_.ranks) return a;
    std::array<std::int64_t, 2> v{a.busy ? 1 : 0, earliest_bits(a.next)};
    opts_.ranks.max_each(v);
    return {.busy = v[0] != 0, .next = earliest_time(v[1])};
  }

  outcome agree_outcome(const engine::engine_step& step) {
    outcome o{.seconds = step.runs.empty() ? std::nullopt : std::optional<double>(clock_.cost(step)),
              .preempted = !step.plan->preempted.empty(),
              .next = arrivals_.next()};
    if (!opts_.ranks) return o;
    std::array<std::int64_t, 3> v{o.seconds ? engine::time_bits(*o.seconds) : -1, o.preempted ? 1 : 0,
                                  earliest_bits(o.next)};
    opts_.ranks.max_each(v);
    return {.seconds = v[0] < 0 ? std::nullopt : std::optional<double>(engine::bits_time(v[0])),
            .preempted = v[1] != 0,
            .next = earliest_time(v[2])};
  }

  void submit_arrivals() {
    const double now = clock_.now();
    arriving_.clear();
    arrivals_.take(now, arriving_);
    while (!routed_arrivals_.empty() && routed_arrivals_.front() <= now) routed_arrivals_.pop_front();
    for (const std::size_t index : arriving_) submit(index, now);
  }

  void submit(std::size_t index, double now) {
    const trace_request& r = trace_[index];
    request_record& rec = result_.requests[index];
    rec.trace_index = index;
    rec.conversation = r.conversation;
    rec.turn = r.turn;
    rec.submitted = arrivals_.available_at(index);  // it waited from then on, also while a step was running
    rec.new_prompt_tokens = r.prompt_tokens;
    rec.rejected = try_submit(index, r);
    if (rec.rejected.empty()) {
      rec.prompt_tokens = static_cast<std::int32_t>(engine_.tokens(index + 1).size());
      return;
    }
    if (opts_.strict)
      throw std::invalid_argument(opts_.who + ": trace request " + std::to_string(index + 1) + " (conversation " +
                                  std::to_string(r.conversation) + ", turn " + std::to_string(r.turn) + "): " +
                                  rec.rejected);
    ++result_.rejected;
    // The conversation goes on without it: its next turn is sent as if it had been answered.
    if (arrivals_.finished(index, now) && r.conversation != 0) engine_.end_session(r.conversation);
  }

  // Submits trace request `index`; returns why it can never run (empty: submitted). The
  // length is checked before the prompt is built, so a huge row costs no memory.
  std::string try_submit(std::size_t index, const trace_request& r) {
    const std::int64_t history =
        r.conversation != 0 ? static_cast<std::int64_t>(engine_.conversation_tokens(r.conversation).size()) : 0;
    const std::int64_t longest = history + r.prompt_tokens + r.output_tokens;
    const std::int64_t max_model_len = engine_.runner().config().max_model_len;
    if (longest > max_model_len)
      return "needs " + std::to_string(longest) + " tokens (history " + std::to_string(history) + " + prompt " +
             std::to_string(r.prompt_tokens) + " + output " + std::to_string(r.output_tokens) +
             "), more than max_model_len = " + std::to_string(max_model_len);
    request q;
    q.id = index + 1;
    q.max_output_tokens = r.output_tokens;
    q.session = r.conversation;
    q.transferred_tokens = r.transferred_tokens;
    q.prompt.resize(static_cast<std::size_t>(r.prompt_tokens));
    if (opts_.prompt) opts_.prompt(index, q.prompt);
    else trace_prompt(r, index, q.prompt);
    try {
      engine_.submit(std::move(q));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return {};
  }

  // Nothing runs until `next`: the engine may capture (the idle timing does).
  void idle_until(double next) {
    const double from = clock_.now();
    ++result_.idle_periods;
    if (next > from) {
      const double before = engine_.stats().capture_seconds;
      result_.idle_captures +=
          engine_.idle({.max_captures = std::numeric_limits<std::int64_t>::max(), .seconds = next - from});
      const double spent = engine_.stats().capture_seconds - before;
      result_.capture_seconds_in_service += spent;
      clock_.spend(spent);  // a capture under way finishes before the next step can start
    }
    clock_.skip_to(next);
    result_.idle_seconds += clock_.now() - from;
  }

  // This rank ran padding only, for the other ranks.
  void record_dummy(const engine::engine_step& step) {
    ++result_.dummy_steps;
    for (const engine::engine_run& r : step.runs) result_.tokens_run += r.tokens_run;
    result_.capture_seconds_in_service += step.capture_seconds;
  }

  // The engine ran `step` from `start`, taking `seconds`: its record and the requests' times.
  template <class Observer>
  void record_step(const engine::engine_step& step, double start, double seconds, Observer& observer) {
    step_record rec = describe(step, start);
    count(step, rec, seconds);
    record_tokens(*step.plan, *step.events, rec.end);
    if constexpr (requires { observer.stepped(rec, std::size_t{}); }) observer.stepped(rec, arrivals_.remaining());
    if (opts_.keep_steps) result_.steps.push_back(std::move(rec));
    ++steps_run_;
  }

  step_record describe(const engine::engine_step& step, double start) const {
    const scheduled_step& plan = *step.plan;
    const engine::engine_stats& s = engine_.stats();
    step_record rec{.step = steps_run_, .start = start, .end = clock_.now(), .phase = plan.phase,
                    .seqs = static_cast<std::int32_t>(plan.entries.size()), .tokens = plan.tokens,
                    .sampled = plan.sampling, .admitted = static_cast<std::int32_t>(plan.admitted.size()),
                    .preempted = static_cast<std::int32_t>(plan.preempted.size()),
                    .running = static_cast<std::int32_t>(step.running),
                    .waiting = static_cast<std::int32_t>(step.waiting),
                    .waiting_for_blocks = plan.waiting_for_blocks() ? static_cast<std::int32_t>(step.waiting) : 0,
                    .stopped = plan.stopped, .kv = step.kv, .padded_fraction = s.token_padding_ratio(),
                    .eager_steps = s.eager_steps(), .graphs = s.captures, .runs = {}};
    rec.runs.reserve(step.runs.size());
    for (const engine::engine_run& r : step.runs) {
      run_record run{.ph = r.ph, .seqs = r.seqs, .decodes = r.decodes, .tokens = r.tokens, .run = r.run,
                     .reason = r.reason, .tokens_run = r.tokens_run};
      if (r.bucket) run.bucket = engine_.runner().at(*r.bucket);
      if (r.captured) run.captured = engine_.runner().at(*r.captured);
      rec.runs.push_back(run);
    }
    return rec;
  }

  // The peaks and sums over steps.
  void count(const engine::engine_step& step, const step_record& rec, double seconds) {
    result_.capture_seconds_in_service += step.capture_seconds;
    for (const engine::engine_run& r : step.runs) result_.tokens_run += r.tokens_run;
    result_.peak_live_blocks = std::max(result_.peak_live_blocks, rec.kv.live_blocks);
    result_.peak_kv_usage =
        std::max(result_.peak_kv_usage, static_cast<double>(rec.kv.live_blocks) / rec.kv.num_blocks);
    result_.max_waiting = std::max<std::int64_t>(result_.max_waiting, rec.waiting);
    result_.max_running = std::max<std::int64_t>(result_.max_running, rec.running);
    if (rec.waiting_for_blocks > 0) {
      result_.max_waiting_for_blocks = std::max<std::int64_t>(result_.max_waiting_for_blocks, rec.waiting_for_blocks);
      result_.seconds_waiting_for_blocks += seconds;
      blocked_request_seconds_ += seconds * static_cast<double>(rec.waiting_for_blocks);
    }
  }

  // First tokens, inter-token gaps (every token after a request's first: a preempted request's
  // next token comes after its recompute) and finished requests, at the step's end `t`.
  void record_tokens(const scheduled_step& plan, const step_events& events, double t) {
    for (const step_entry& e : plan.entries) {
      if (!e.samples) continue;
      const std::size_t i = e.request - 1;
      request_record& rec = result_.requests[i];
      if (rec.first_token < 0) rec.first_token = t;
      else result_.itl_samples.push_back(t - last_token_[i]);
      last_token_[i] = t;
    }
    for (const finished_request& f : events.finished) {
      const std::size_t i = f.id - 1;
      request_record& rec = result_.requests[i];
      rec.finished = t;
      rec.output_tokens = static_cast<std::int32_t>(f.output.size());
      rec.preemptions = f.preemptions;
      if (opts_.keep_outputs) rec.output = f.output;
      result_.output_tokens += rec.output_tokens;
      if (arrivals_.finished(i, t) && f.session != 0) engine_.end_session(f.session);
    }
  }

  Engine& engine_;
  std::span<const trace_request> trace_;
  Clock clock_;
  driver_options opts_;
  turn_arrivals arrivals_;
  serve_result result_;
  std::int64_t steps_run_ = 0;
  std::vector<double> last_token_;       // per request: when its latest token came
  std::deque<double> routed_arrivals_;   // arrival times of routed requests not submitted yet
  std::vector<std::size_t> routed_;      // routed: this driver's requests (trace indices)
  std::vector<std::size_t> arriving_;    // scratch
  double blocked_request_seconds_ = 0;   // request-seconds held back by KV memory
};

}  // namespace rungs::serving
