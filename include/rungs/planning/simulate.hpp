// simulate: replays a workload through the serving scheduler, the KV block allocator and the
// engine's capture policies, with the cost model standing in for the GPU.
//
// Everything that decides is the real code, run through the library's one serving loop:
// rungs::engine::engine::step, whose scheduler (admission, chunked prefill, preemption, chat
// sessions) owns a rungs::kv allocator sized from the model's KV geometry, and whose graph
// runner (ladder lookup, capture order, capture timing, graph budget) runs the host backend
// with simulated capture cost and no forward: a cost-model backend, whose rows carry nothing.
// Only time is modelled: each step advances a virtual clock by cost_model::step_seconds (plus
// any capture the engine made inside it), captures at startup delay the server's start, and
// idle gaps between arrivals are handed to the engine's idle() (the idle timing captures
// there). A day of traffic runs in seconds because nothing executes.
//
// Time 0 is the server process starting (a cold start): requests that arrive while startup
// captures run wait for them, which is the trade-off between capture timings.
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/kv/capacity.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/planning/cost_model.hpp>
#include <rungs/serving/scheduler.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace rungs::planning {

using engine::any_order;
using engine::any_timing;

struct simulation_config {
  /// KV geometry of one device. Default: the blog's Mistral-7B (32 layers, 8 KV heads of
  /// 128, fp16: 128 KiB per token).
  kv::kv_shape model{.layers = 32, .kv_heads = 8, .head_dim = 128, .bytes_per_element = 2};
  std::int32_t block_size = 16;            ///< tokens per KV block: one of the kernels' 8, 16, 32, 64, 128
  std::int64_t kv_bytes = std::int64_t{7} << 30;
  double watermark = 0.01;                 ///< share of blocks admission keeps free (vLLM v0's 1%)
  bool prefix_caching = false;
  /// Longest request (history, prompt and output), the allocator's max_model_len.
  std::int32_t max_model_len = 8192;
  serving::scheduler_options scheduler{};
  rungs::ladder ladder{CaptureSizes::vllm(512)};
  any_timing timing{};
  /// The capture order (default largest first).
  any_order order{engine::largest_first{}};
  /// Graph memory budget (bytes); none: unlimited.
  std::optional<std::int64_t> graph_memory{};
  cost_model cost{};
  /// "The first requests": TTFT is reported for this many of the first submitted requests.
  std::size_t first_requests = 10;
  /// Keep a record of every step (for plots and tests); off for very long traces.
  bool record_steps = true;
  /// A request that can never run (longer than max_model_len with its history and output,
  /// or more KV blocks than the pool) throws std::invalid_argument; otherwise it is counted
  /// in simulation_result::rejected and the simulation goes on.
  bool strict = false;
  /// Keep every inter-token gap in simulation_result::itl_samples (a fleet merges them).
  bool keep_itl_samples = false;
};

/// One request, as the simulation saw it. Times in seconds from the server's start.
struct request_record {
  std::size_t trace_index = 0;
  serving::session_id conversation = 0;
  std::int32_t turn = 0;
  double submitted = 0;
  double first_token = -1;
  double finished = -1;
  std::int32_t prompt_tokens = 0;  ///< with the conversation's history
  std::int32_t output_tokens = 0;
  std::int32_t preemptions = 0;
  std::string rejected;            ///< why it could never run; empty when it ran
  double ttft() const { return first_token - submitted; }
};

/// One step.
struct step_record {
  double start = 0, seconds = 0;
  std::int32_t tokens = 0, seqs = 0;
  std::int32_t running = 0, waiting = 0;  ///< after planning the step
  std::int32_t waiting_for_blocks = 0;    ///< of the waiting, held back by KV memory
  std::int32_t live_blocks = 0;           ///< KV blocks held by sequences during the step
  std::int64_t rung = -1;                 ///< the bucket it padded to; -1 when none
  bool replay = false, captured = false;
  serving::step_phase phase = serving::step_phase::decode;
};

struct latency_summary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::size_t count = 0;
};

inline latency_summary summarize(std::vector<double> v) {
  latency_summary s;
  s.count = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  // Each quantile is the value of rank ceil(q n) in sorted order; nth_element finds the
  // ranks in increasing order, each within what is left above the previous (no full sort:
  // an hour of traffic has millions of inter-token gaps).
  auto from = v.begin();
  auto at = [&](double q) {
    const auto k = v.begin() + static_cast<std::ptrdiff_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    std::nth_element(from, k, v.end());
    from = k;
    return *k;
  };
  s.p50 = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  s.max = *std::max_element(from, v.end());
  return s;
}

struct simulation_result {
  std::string timing;
  std::int32_t num_blocks = 0;
  double startup_seconds = 0;       ///< captures before the first step
  double end_seconds = 0;           ///< the last request finished
  std::vector<request_record> requests;  ///< in trace order
  std::vector<step_record> steps;        ///< when recorded
  latency_summary ttft, itl;
  std::vector<double> itl_samples;  ///< when simulation_config::keep_itl_samples
  double ttft_first = 0;            ///< the first submitted request
  double ttft_first_mean = 0;       ///< mean over the first `first_requests`
  std::int64_t output_tokens = 0;
  std::int64_t rejected = 0;        ///< requests that could never run (not in ttft or itl)
  engine::engine_stats engine{};
  serving::scheduler_stats scheduler{};
  double capture_seconds_in_service = 0;  ///< captures inside steps or idle gaps
  std::int64_t max_waiting = 0, max_running = 0;
  std::int64_t max_waiting_for_blocks = 0;  ///< most requests held back by KV memory at once
  double seconds_waiting_for_blocks = 0;    ///< time with at least one request held back by KV memory
  double mean_waiting_for_blocks = 0;       ///< their mean number over that time
  double peak_kv_usage = 0;         ///< live blocks / blocks
  /// Tokens per step of the steps that ran, as the ladder saw them (for fitting).
  std::vector<std::int64_t> step_tokens;
  /// Token rows computed over every step, padding included (a replay computes its bucket; an
  /// eager step its batch, or, data parallel, the batch agreed with the other ranks);
  /// scheduler.computed_tokens of them were real.
  std::int64_t tokens_run = 0;
  /// Data parallel: steps this rank ran on padding only, because another rank had work.
  std::int64_t dummy_steps = 0;
};

namespace detail {

using serving::synthetic_token;

template <class Allocator>
class simulator {
  using buckets = engine::ladder_buckets<rungs::ladder>;
  using engine_type = engine::engine<buckets, any_order, any_timing, Allocator, engine::host_backend>;

 public:
  /// With `routed`, the simulator is one replica of a fleet (planning/fleet.hpp): no request
  /// arrives until route() sends it here, and the fleet advances every replica in lockstep.
  /// With `rank`, it is one data-parallel rank (planning/data_parallel.hpp): its engine agrees
  /// every step and capture with the other ranks through it, from startup on, and it runs by
  /// lockstep() on its own thread.
  simulator(const simulation_config& c, const std::vector<serving::trace_request>& trace, bool routed = false,
            engine::simulated_ranks::handle* rank = nullptr)
      : cfg_(c), trace_(trace),
        // vLLM v1's piecewise graphs cover every step by its token count; without chunked
        // prefill (v0) only decode steps have graphs, and prefill steps (v0 never mixes
        // phases) look for prompt buckets, find none, and run eagerly.
        engine_(buckets(c.ladder, engine::phase::decode), Allocator(allocator_config(c)), backend(c),
                {.order = c.order, .timing = c.timing, .budget = budget(c), .scheduler = c.scheduler,
                 .routing = c.scheduler.chunked_prefill ? engine::step_routing::single : engine::step_routing::by_phase}),
        arrivals_(trace_, routed), routed_(routed) {
    result_.timing = std::string(cfg_.timing.name());
    result_.num_blocks = engine_.blocks().num_blocks();
    result_.requests.resize(trace_.size());
    if (rank) engine_.runner().sync_with(*rank);
    engine_.start();
    result_.startup_seconds = engine_.stats().capture_seconds;
    t_ = result_.startup_seconds;
  }

  simulation_result run() {
    advance(std::numeric_limits<double>::infinity());
    return finish();
  }

  /// Runs every step that starts before `until`. Returns early when nothing is queued and
  /// nothing of this replica's arrives before `until`: the idle gap is taken (and handed to
  /// the engine's idle()) only once the next arrival is known, so a fleet's replica idles
  /// exactly as a replica simulated alone on its share.
  void advance(double until) {
    while (t_ < until) {
      submit_until(t_);
      const std::optional<double> next = arrivals_.next();
      if (engine_.idle_queues() && (!next || *next >= until)) return;
      const engine::engine_step& step = engine_.step(hook_);
      if (!step.ran()) {
        if (!step.plan->preempted.empty()) continue;
        if (!engine_.idle_queues() && engine_.scheduler().running() == 0 && !next)
          throw std::logic_error("simulate: the waiting queue is stuck with nothing running");
        if (!next) continue;
        t_ = idle_until(t_, *next);
        continue;
      }
      t_ = record_step(step, t_, step_seconds(step));
    }
  }

  /// Data parallel: runs this rank to the end of the trace in lockstep with the other ranks
  /// (the engine synced to `sync` at construction). Per iteration, two agreements besides the
  /// engine's own: whether any rank has queued work (if none, every rank idles until the
  /// earliest next arrival of any rank), and, after the step, the step's time, which is the
  /// slowest rank's (a collective waits for it), whether any rank ran or preempted, and the
  /// earliest next arrival. A rank with nothing to run steps too: its engine runs a dummy
  /// batch of the agreed bucket (engine::step). Times travel as the bits of non-negative
  /// doubles (engine::time_bits), so every rank keeps the same clock exactly.
  void lockstep(engine::simulated_ranks::handle& sync) {
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::min();
    auto earliest = [&] {  // the maximum over ranks of -bits is the earliest
      const std::optional<double> next = arrivals_.next();
      return next ? -engine::time_bits(*next) : none;
    };
    auto time_of = [](std::int64_t bits) { return engine::bits_time(bits); };
    for (;;) {
      submit_until(t_);
      std::array<std::int64_t, 2> busy{engine_.idle_queues() ? 0 : 1, earliest()};
      sync.max_each(busy);
      if (busy[0] == 0) {
        if (busy[1] == none) return;
        t_ = idle_until(t_, time_of(-busy[1]));
        continue;
      }
      const engine::engine_step& step = engine_.step(hook_);
      std::array<std::int64_t, 3> after{step.runs.empty() ? -1 : engine::time_bits(step_seconds(step)),
                                        step.plan->preempted.empty() ? 0 : 1, earliest()};
      sync.max_each(after);
      if (after[0] < 0) {  // nothing ran on any rank
        if (after[1] != 0) continue;
        if (after[2] == none)
          throw std::logic_error("simulate: the waiting queues are stuck with nothing running on any rank");
        t_ = idle_until(t_, time_of(-after[2]));
        continue;
      }
      const double seconds = time_of(after[0]);
      if (step.ran()) {
        t_ = record_step(step, t_, seconds);
      } else {
        ++result_.dummy_steps;
        result_.tokens_run += step.runs.front().tokens_run;
        result_.capture_seconds_in_service += step.capture_seconds;
        t_ += seconds;
      }
    }
  }

  /// Sends trace request `index` (a first turn or standalone request) here, at its arrival;
  /// its conversation's later turns follow it. Only in a routed simulator.
  void route(std::size_t index) {
    arrivals_.release(index);
    routed_arrivals_.push_back(trace_[index].arrival);
    for (std::optional<std::size_t> k = index; k; k = arrivals_.next_turn(*k)) mine_.push_back(*k);
  }

  /// Requests sent here and not finished: queued or running, or arrived during the step under
  /// way (they are queued when it ends). A router's measure of load.
  std::size_t outstanding() const {
    return engine_.scheduler().waiting() + engine_.scheduler().running() + routed_arrivals_.size();
  }

  /// The tokens of `prompt` this replica's KV cache would reuse now (0 without prefix caching).
  std::int32_t cached_prefix_tokens(std::span<const kv::token_id> prompt) const {
    return engine_.blocks().cached_prefix_tokens(prompt);
  }

  /// The result, after the last advance(); a routed simulator's requests are its own, in trace
  /// order.
  simulation_result finish() {
    result_.end_seconds = t_;
    finish_summary();
    return std::move(result_);
  }

 private:
  static kv::allocator_config allocator_config(const simulation_config& c) {
    // The simulated server runs rungs' kernels: only their block sizes are servable.
    if (!attention::supported_block_sizes::contains(c.block_size))
      throw std::invalid_argument("simulate: block_size = " + std::to_string(c.block_size) +
                                  " is not supported by the paged-attention kernels; supported: " +
                                  attention::supported_block_sizes::list());
    const std::int64_t block_bytes = kv::bytes_per_block(c.model, c.block_size);
    const std::int64_t n = kv::blocks_for_memory(c.kv_bytes, block_bytes);
    if (n < 1 || n > INT32_MAX - 64)
      throw std::invalid_argument("simulate: the KV memory holds " + std::to_string(n) + " blocks of " +
                                  std::to_string(block_bytes) + " bytes; it must hold at least one");
    if (!(c.watermark >= 0 && c.watermark < 1))
      throw std::invalid_argument("simulate: watermark = " + std::to_string(c.watermark) + " must be in [0, 1)");
    return {.num_blocks = static_cast<std::int32_t>(n), .block_size = c.block_size,
            .max_sequences = c.scheduler.max_num_seqs, .max_model_len = c.max_model_len,
            .watermark_blocks = static_cast<std::int32_t>(std::floor(c.watermark * static_cast<double>(n)))};
  }

  static engine::host_backend backend(const simulation_config& c) {
    c.cost.validate();
    engine::host_backend::options o;
    o.simulate = engine::simulated_capture{
        .bytes = engine::graph_cost{.base = c.cost.graph_bytes, .per_unit = c.cost.graph_bytes_per_token},
        .seconds = c.cost.capture_seconds,
        .seconds_per_unit = c.cost.capture_seconds_per_token};
    return engine::host_backend([](const engine::host_step&) {}, std::move(o));
  }

  static engine::graph_budget budget(const simulation_config& c) {
    if (!c.graph_memory) return {};
    if (*c.graph_memory < 0)
      throw std::invalid_argument("simulate: graph memory = " + std::to_string(*c.graph_memory) + " must not be negative");
    return {.bytes = *c.graph_memory, .prompt_ratio = 0.0,
            .model = engine::graph_cost{.base = c.cost.graph_bytes, .per_unit = c.cost.graph_bytes_per_token}};
  }

  void submit_until(double t) {
    arriving_.clear();
    arrivals_.take(t, arriving_);
    while (!routed_arrivals_.empty() && routed_arrivals_.front() <= t) routed_arrivals_.pop_front();
    for (const std::size_t index : arriving_) {
      const serving::trace_request& r = trace_[index];
      request_record& rec = result_.requests[index];
      rec.trace_index = index;
      rec.conversation = r.conversation;
      rec.turn = r.turn;
      rec.submitted = arrivals_.available_at(index);  // it waited from then on, also while a step was running
      rec.rejected = submit(index, r);
      if (!rec.rejected.empty()) {
        if (cfg_.strict)
          throw std::invalid_argument("simulate: trace request " + std::to_string(index + 1) + " (conversation " +
                                      std::to_string(r.conversation) + ", turn " + std::to_string(r.turn) +
                                      "): " + rec.rejected);
        ++result_.rejected;
        // The conversation goes on without it: its next turn is sent as if it had been answered.
        if (arrivals_.finished(index, t) && r.conversation != 0) engine_.scheduler().end_session(r.conversation);
        continue;
      }
      rec.prompt_tokens = static_cast<std::int32_t>(engine_.scheduler().tokens(index + 1).size());
      submit_order_.push_back(index);
    }
  }

  // Submits trace request `index`; returns why it can never run (empty: submitted). The
  // length is checked before the prompt is built, so a huge row costs no memory.
  std::string submit(std::size_t index, const serving::trace_request& r) {
    const std::int64_t history = r.conversation != 0 ? static_cast<std::int64_t>(engine_.scheduler().conversation_tokens(r.conversation).size()) : 0;
    const std::int64_t longest = history + r.prompt_tokens + r.output_tokens;
    if (longest > cfg_.max_model_len)
      return "needs " + std::to_string(longest) + " tokens (history " + std::to_string(history) + " + prompt " +
             std::to_string(r.prompt_tokens) + " + output " + std::to_string(r.output_tokens) +
             "), more than max_model_len = " + std::to_string(cfg_.max_model_len);
    serving::request q;
    q.id = index + 1;
    q.max_output_tokens = r.output_tokens;
    q.session = r.conversation;
    q.prompt.resize(static_cast<std::size_t>(r.prompt_tokens));
    serving::trace_prompt(r, index, q.prompt);
    try {
      engine_.submit(std::move(q));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return {};
  }

  // Nothing runs until `next`: the engine may capture (the idle timing does).
  double idle_until(double t, double next) {
    if (next > t) {
      const double before = engine_.stats().capture_seconds;
      engine_.idle({.max_captures = std::numeric_limits<std::int64_t>::max(), .seconds = next - t});
      const double spent = engine_.stats().capture_seconds - before;
      result_.capture_seconds_in_service += spent;
      t += spent;  // a capture under way finishes before the next step can start
    }
    return std::max(t, next);
  }

  // What the engine ran in `step` costs: its token rows (a replay's bucket, padding included)
  // over the context of its sequences (none in a dummy run), and the captures made inside it.
  double step_seconds(const engine::engine_step& step) const {
    if (step.runs.size() != 1)
      throw std::logic_error("simulate: a step ran as " + std::to_string(step.runs.size()) +
                             " runner steps; the cost model prices one");
    const engine::engine_run& r = step.runs.front();
    std::int64_t context = 0;
    for (const serving::step_sequence& s : step.plan->sequences) context += s.context + static_cast<std::int64_t>(s.tokens.size());
    return cfg_.cost.step_seconds(r.tokens_run, context, r.run == engine::run_kind::replay,
                                  static_cast<std::int64_t>(step.plan->sequences.size())) +
           step.capture_seconds;
  }

  // The engine ran `step`, taking `seconds`: what the records keep of it.
  double record_step(const engine::engine_step& step, double t, double seconds) {
    const serving::scheduled_step& plan = *step.plan;
    const engine::engine_run& r = step.runs.front();
    result_.capture_seconds_in_service += step.capture_seconds;
    result_.tokens_run += r.tokens_run;
    const bool replay = r.run == engine::run_kind::replay;
    const std::int64_t rung = r.bucket ? engine_.runner().at(*r.bucket).batch() : -1;

    const std::int32_t live = step.kv.live_blocks;
    result_.peak_kv_usage = std::max(result_.peak_kv_usage, static_cast<double>(live) / engine_.blocks().num_blocks());
    result_.max_waiting = std::max<std::int64_t>(result_.max_waiting, static_cast<std::int64_t>(step.waiting));
    result_.max_running = std::max<std::int64_t>(result_.max_running, static_cast<std::int64_t>(step.running));
    if (plan.waiting_for_blocks() && step.waiting > 0) {
      const auto w = static_cast<std::int64_t>(step.waiting);
      result_.max_waiting_for_blocks = std::max(result_.max_waiting_for_blocks, w);
      result_.seconds_waiting_for_blocks += seconds;
      blocked_request_seconds_ += seconds * static_cast<double>(w);
    }
    result_.step_tokens.push_back(plan.tokens);
    if (cfg_.record_steps)
      result_.steps.push_back({.start = t, .seconds = seconds, .tokens = plan.tokens,
                               .seqs = static_cast<std::int32_t>(plan.entries.size()),
                               .running = static_cast<std::int32_t>(step.running),
                               .waiting = static_cast<std::int32_t>(step.waiting),
                               .waiting_for_blocks = plan.waiting_for_blocks() ? static_cast<std::int32_t>(step.waiting) : 0,
                               .live_blocks = live, .rung = rung,
                               .replay = replay, .captured = r.captured.has_value(), .phase = plan.phase});
    const double end = t + seconds;
    // Inter-token latency: every token after a request's first (a preempted request's
    // next token comes after its recompute).
    for (const serving::step_entry& e : plan.entries) {
      if (!e.samples) continue;
      if (auto it = last_token_.find(e.request - 1); it != last_token_.end()) {
        itl_.push_back(end - it->second);
        it->second = end;
      }
    }
    const serving::step_events& ev = *step.events;
    for (serving::request_id id : ev.first_token) {
      result_.requests[id - 1].first_token = end;
      last_token_[id - 1] = end;
    }
    for (const serving::finished_request& f : ev.finished) {
      const std::size_t i = f.id - 1;
      request_record& rec = result_.requests[i];
      rec.finished = end;
      rec.output_tokens = static_cast<std::int32_t>(f.output.size());
      rec.preemptions = f.preemptions;
      result_.output_tokens += rec.output_tokens;
      last_token_.erase(i);
      if (arrivals_.finished(i, end) && f.session != 0) engine_.scheduler().end_session(f.session);
    }
    return end;
  }

  void finish_summary() {
    if (!submit_order_.empty()) result_.ttft_first = result_.requests[submit_order_.front()].ttft();
    const std::size_t n = std::min(cfg_.first_requests, submit_order_.size());
    double sum = 0;
    for (std::size_t k = 0; k < n; ++k) sum += result_.requests[submit_order_[k]].ttft();
    result_.ttft_first_mean = n ? sum / static_cast<double>(n) : 0.0;
    if (routed_) {  // only this replica's requests, in trace order
      std::sort(mine_.begin(), mine_.end());
      std::vector<request_record> own;
      own.reserve(mine_.size());
      for (const std::size_t i : mine_) own.push_back(std::move(result_.requests[i]));
      result_.requests = std::move(own);
    }
    std::vector<double> ttft;
    for (const request_record& r : result_.requests)
      if (r.rejected.empty()) ttft.push_back(r.ttft());
    result_.ttft = summarize(std::move(ttft));
    if (result_.seconds_waiting_for_blocks > 0)
      result_.mean_waiting_for_blocks = blocked_request_seconds_ / result_.seconds_waiting_for_blocks;
    if (cfg_.keep_itl_samples) result_.itl_samples = itl_;
    result_.itl = summarize(std::move(itl_));
    result_.engine = engine_.stats();
    result_.scheduler = engine_.scheduler().stats();
  }

  // The engine's sampling hook: a synthetic token per sequence (nothing was computed).
  struct synthetic_sampler {
    void sample(const serving::scheduled_step& plan, std::span<const std::size_t> entries, std::span<const float>,
                std::span<kv::token_id> out) const {
      for (std::size_t k = 0; k < entries.size(); ++k) {
        const serving::step_entry& e = plan.entries[entries[k]];
        out[k] = synthetic_token(e.request, 0, static_cast<std::uint64_t>(e.first + e.count));
      }
    }
  };

  const simulation_config& cfg_;
  const std::vector<serving::trace_request>& trace_;
  engine_type engine_;
  synthetic_sampler hook_;
  serving::turn_arrivals arrivals_;
  bool routed_ = false;
  double t_ = 0;                          // the replica's clock: the end of its last step or idle gap
  std::deque<double> routed_arrivals_;    // arrival times of routed requests not submitted yet
  std::vector<std::size_t> mine_;         // routed: this replica's requests (trace indices)
  std::vector<std::size_t> arriving_, submit_order_;
  std::unordered_map<std::size_t, double> last_token_;
  std::vector<double> itl_;
  double blocked_request_seconds_ = 0;
  simulation_result result_;
};

}  // namespace detail

/// Runs `trace` under `config`. Throws std::invalid_argument for a configuration or a
/// request that cannot work (naming what and why).
inline simulation_result simulate(const simulation_config& config, const std::vector<serving::trace_request>& trace) {
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  if (config.prefix_caching) return detail::simulator<kv::prefix_caching_allocator<>>(config, trace).run();
  return detail::simulator<kv::free_list_allocator>(config, trace).run();
}

}  // namespace rungs::planning
