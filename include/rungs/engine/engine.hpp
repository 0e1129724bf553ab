// rungs::engine::engine: the serving loop, once. It owns the scheduler (which owns the KV
// block allocator, as vLLM v1's scheduler owns its KV cache manager) and a graph runner, and
// one step() admits, schedules (chunked prefill, mixed batches), allocates KV blocks, routes
// the step's sequences to the runner by phase, pads, runs, samples through a hook, commits
// and so frees finished requests and preempts when blocks run out. Each sequence keeps its
// row of the runner's persistent staging from step to step (batch_rows), so the sampling
// hook sees rows in that order, mapped to plan entries by `entries`. The serving demo,
// rungs-plan simulate (a cost-model backend) and the tests all run this loop.
//
//   engine<Buckets, Order, Timing, Allocator, Backend>
//     Buckets, Order, Timing, Backend   as graph_runner's (graph_runner.hpp)
//     Allocator                         a rungs::kv block allocator, moved in
//
// The runner's KV geometry comes from the allocator (block size, block count, max_model_len,
// which the scheduler reads from it too) and the row width from the model: each is configured
// once (the model's block size is checked against the allocator's, which derives it).
//
// Routing. A scheduler step holds prefill chunks and decodes. With a phased bucket space
// (Gaudi's prompt and decode buckets) the prefill entries run as one runner step in the
// prompt buckets and the decodes as another in the decode buckets (step_routing::by_phase);
// with a 1-D ladder (vLLM's capture sizes) the whole step is one runner step in one phase
// (step_routing::single), as vLLM v1 pads mixed batches by their token count.
#pragma once

#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/step_fault.hpp>
#include <rungs/kv/allocator.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/serving/scheduler.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rungs::engine {

/// How a scheduler step reaches the runner.
enum class step_routing : std::uint8_t {
  by_phase,  ///< prefill entries in the prompt buckets, decode entries in the decode buckets
  single,    ///< the whole step in one phase (engine_options::single_phase)
};

/// Run-time configuration of an engine.
template <class Order, class Timing>
struct engine_options {
  Order order{};                               ///< in which order buckets are captured
  Timing timing{};                             ///< when buckets are captured
  graph_budget budget{};                       ///< graph memory (unlimited by default)
  serving::scheduler_options scheduler{};      ///< admission and step budgets
  step_routing routing = step_routing::by_phase;  ///< how a scheduler step reaches the runner
  phase single_phase = phase::decode;          ///< the phase of step_routing::single
  /// The model the backend's forward runs: its row width sizes the output rows, and its block
  /// size must be the allocator's. None for a cost model (rows carry nothing).
  std::optional<model_shape> model{};
  /// How the runner stages a step's batch (graph_runner's staging_policy): persistent rows
  /// rewritten where they changed, or every element every step.
  staging_policy staging = staging_policy::persistent;
};

/// One runner step inside an engine step. A run of 0 sequences is a dummy: this rank had
/// nothing in the phase while another rank did (synced ranks: graph_runner::dummy_step).
struct engine_run {
  phase ph = phase::decode;                  ///< the bucket phase it looked up
  std::int64_t seqs = 0;                     ///< sequences it ran (0: a dummy run, padding only)
  std::int64_t decodes = 0;                  ///< of which decoding (the others prefill a chunk)
  std::int64_t tokens = 0;                   ///< new tokens it ran
  std::optional<std::size_t> bucket{};       ///< the bucket it padded to, if any
  run_kind run = run_kind::eager;            ///< replayed a graph, or ran eagerly
  std::optional<eager_reason> reason{};      ///< why it ran eagerly
  std::optional<std::size_t> captured{};     ///< a graph captured (and kept) during it
  std::int64_t tokens_run = 0;               ///< token rows computed, padding included
};

/// What one engine step did.
struct engine_step {
  const serving::scheduled_step* plan = nullptr;  ///< the scheduler's plan (empty: nothing ran)
  const serving::step_events* events = nullptr;   ///< null when nothing ran
  std::vector<engine_run> runs;                   ///< in execution order
  std::size_t running = 0;                        ///< running requests after planning
  std::size_t waiting = 0;                        ///< waiting requests after planning
  kv::kv_metrics kv{};                            ///< the KV pool after planning, as the step ran
  double capture_seconds = 0;                     ///< captures made inside the step
  /// The step failed on the device and was taken back: its requests are requeued (they are
  /// also in plan->preempted) and ran() is false; the next step retries them.
  std::optional<step_fault> fault{};

  bool ran() const { return events != nullptr; }  ///< false: the plan was empty, nothing ran
};

/// The hook an engine step samples through: `sample(plan, entries, rows, out)` writes one
/// token per entry; entries[k] indexes plan.entries and rows holds row k of each (the
/// runner's rows of that runner step). Optional: `copy_blocks(span<const kv::block_copy>)`,
/// the allocator's copy-on-write pairs, called before the step runs.
template <class H, class Rows>
concept step_sampler = requires(H& h, const serving::scheduled_step& plan, std::span<const std::size_t> entries,
                                const Rows& rows, std::span<serving::token_id> out) {
  h.sample(plan, entries, rows, out);
};

/// The serving loop: a scheduler (owning the KV allocator) and a graph runner, stepped
/// together (see the file comment).
template <class Buckets, class Order, class Timing, class Allocator, class Backend>
class engine {
  static_assert(kv::detail::allocator_has_shape<Allocator>,
                "rungs::engine: the Allocator policy lacks `block_size() const`, `num_blocks() const` or `max_model_len() const` (block_allocator)");
  static_assert(kv::check_block_allocator<Allocator>());

 public:
  using runner_type = graph_runner<Buckets, Order, Timing, Backend>;  ///< the lower layer
  using options = engine_options<Order, Timing>;                      ///< its configuration
  using rows_type = typename runner_type::rows_type;                  ///< the backend's output rows

  /// The allocator is moved in (an lvalue does not compile: a copy would diverge silently).
  /// Throws std::invalid_argument for a configuration that cannot work.
  engine(Buckets buckets, Allocator&& blocks, Backend backend, options opts)
      : routing_(opts.routing),
        single_phase_(opts.single_phase),
        scheduler_(checked(std::move(blocks), opts.model), opts.scheduler),
        runner_(std::move(buckets), std::move(backend),
                {.order = std::move(opts.order),
                 .timing = std::move(opts.timing),
                 .budget = opts.budget,
                 .max_model_len = scheduler_.max_model_len(),
                 .shape = {.block_size = scheduler_.blocks().block_size(),
                           .num_blocks = scheduler_.blocks().num_blocks(),
                           .row_width = opts.model ? opts.model->row_width() : 0},
                 .staging = opts.staging}) {}

  /// Runs the timing policy's startup captures (the first step does it if nobody did).
  void start() { runner_.start(); }

  /// Queues a request (serving::scheduler::submit).
  void submit(serving::request r) { scheduler_.submit(std::move(r)); }

  /// One step: plan, run (one or two runner steps), sample through `hook`, commit. When the
  /// plan is empty nothing runs (result.ran() is false): nothing is queued, the head of the
  /// queue does not fit yet, or the only runnable request was preempted (plan->preempted).
  /// Data parallel (the runner synced with other ranks, each with its own scheduler): every
  /// rank must call step() in the same iterations, and a rank with nothing in a phase runs a
  /// dummy step there (graph_runner::dummy_step; an engine_run of 0 sequences), so its
  /// agreement matches the ranks that run; ran() is still false when its own plan is empty.
  template <class Hook>
  const engine_step& step(Hook& hook) {
    static_assert(step_sampler<Hook, rows_type>,
                  "rungs::engine::engine::step: the hook lacks `sample(const scheduled_step&, span<const size_t> "
                  "entries, const rows_type& rows, span<token_id> out)`");
    if (stopped_) throw engine_fault(*stopped_);
    std::vector<engine_run> runs = std::move(step_.runs);  // its storage, reused
    runs.clear();
    step_ = engine_step{};
    step_.runs = std::move(runs);
    const serving::scheduled_step& plan = scheduler_.schedule();
    step_.plan = &plan;
    if (plan.empty()) {
      if (runner_.synced()) {  // dummy runs only
        const double captured_before = runner_.stats().capture_seconds;
        run_groups(plan, hook);
        step_.capture_seconds = runner_.stats().capture_seconds - captured_before;
      }
      return step_;
    }
    step_.running = scheduler_.running();
    step_.waiting = scheduler_.waiting();
    Allocator& blocks = scheduler_.blocks();
    if (!blocks.copies().empty()) {  // copy-on-write before the step's KV writes
      if constexpr (requires { hook.copy_blocks(blocks.copies()); }) hook.copy_blocks(blocks.copies());
      else throw std::logic_error("engine: the allocator asks for block copies and the hook has no copy_blocks");
      blocks.clear_copies();
    }
    step_.kv = blocks.metrics();
    const double captured_before = runner_.stats().capture_seconds;
    tokens_.assign(plan.entries.size(), 0);
    try {
      run_groups(plan, hook);
    } catch (const std::exception& e) {
      take_back(e);
      return step_;
    }
    sampled_.clear();
    for (std::size_t i = 0; i < plan.entries.size(); ++i)
      if (plan.entries[i].samples) sampled_.push_back(tokens_[i]);
    step_.capture_seconds = runner_.stats().capture_seconds - captured_before;
    step_.events = &scheduler_.commit(sampled_);
    failed_in_a_row_ = 0;
    return step_;
  }

  /// Nothing to run: lets the timing policy capture (runner's idle()).
  std::int64_t idle(idle_budget budget = {}) { return runner_.idle(budget); }

  /// Nothing waiting and nothing running.
  bool idle_queues() const { return scheduler_.idle(); }

  serving::scheduler<Allocator>& scheduler() { return scheduler_; }              ///< requests, queues, sessions
  const serving::scheduler<Allocator>& scheduler() const { return scheduler_; }  ///< requests, queues, sessions
  Allocator& blocks() { return scheduler_.blocks(); }                            ///< the KV allocator
  const Allocator& blocks() const { return scheduler_.blocks(); }                ///< the KV allocator
  runner_type& runner() { return runner_; }              ///< graphs: observe(), sync_with(), at(), ledger()
  const runner_type& runner() const { return runner_; }  ///< graphs: at(), ledger(), queue()
  const engine_stats& stats() const { return runner_.stats(); }  ///< the runner's statistics

 private:
  static Allocator&& checked(Allocator&& blocks, const std::optional<model_shape>& m) {
    if (m) {
      validate(*m);
      if (static_cast<std::int64_t>(blocks.block_size()) != m->block_size)
        throw std::invalid_argument("engine: the allocator's block_size = " + std::to_string(blocks.block_size()) +
                                    " must equal the model's block_size = " + std::to_string(m->block_size));
    }
    return std::move(blocks);
  }

  // A runner step threw (docs/engine.md, "Device faults"). The scheduler takes the step back,
  // so host state is that of a step that never ran (no block held for it, no token
  // committed). A backend with recover() says whether its device can go on: if so the step
  // is a failed one, retried by the next; if not (a sticky fault), or after
  // kMaxFailedSteps failures in a row, or in a data-parallel engine (a retry on one rank
  // would leave the ranks' steps disagreeing), the engine stops: engine_fault names the step
  // and its requests, and every later step() throws it again. A backend without recover()
  // cannot tell: the exception goes on as it came. Non-standard exceptions are not caught.
  static constexpr int kMaxFailedSteps = 8;
  void take_back(const std::exception& e) {
    step_fault f{.step = scheduler_.stats().steps, .requests = {}, .error = e.what(), .fatal = true};
    f.requests = scheduler_.abort_step();
    step_.events = nullptr;
    if constexpr (requires(Backend& b) { { b.recover() } -> std::convertible_to<bool>; }) {
      f.fatal = runner_.synced() || !runner_.backend().recover() || ++failed_in_a_row_ >= kMaxFailedSteps;
      if (f.fatal) {
        if (failed_in_a_row_ >= kMaxFailedSteps) f.error += "; " + std::to_string(kMaxFailedSteps) + " steps failed in a row";
        stopped_ = f;
        throw engine_fault(std::move(f));
      }
      step_.fault = std::move(f);
    } else {
      throw;
    }
  }

  template <class Hook>
  void run_groups(const serving::scheduled_step& plan, Hook& hook) {
    if (routing_ == step_routing::single) {
      run_group(plan, hook, single_phase_, [](const serving::step_entry&) { return true; });
    } else {
      run_group(plan, hook, phase::prompt, [](const serving::step_entry& e) { return !e.decode; });
      run_group(plan, hook, phase::decode, [](const serving::step_entry& e) { return e.decode; });
    }
  }

  template <class Hook, class Pick>
  void run_group(const serving::scheduled_step& plan, Hook& hook, phase ph, Pick pick) {
    // The phase's sequences in the rows they held last step (batch_rows), so the runner's
    // persistent staging rewrites only what changed; index_ maps each row back to its entry.
    picked_entries_.clear();
    keys_.clear();
    std::int64_t tokens = 0, decodes = 0;
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
      if (!pick(plan.entries[i])) continue;
      decodes += plan.entries[i].decode ? 1 : 0;
      picked_entries_.push_back(i);
      keys_.push_back(plan.entries[i].seq);
      tokens += static_cast<std::int64_t>(plan.sequences[i].tokens.size());
    }
    const std::span<const std::uint32_t> order = rows_[static_cast<std::size_t>(ph)].arrange(keys_);
    seqs_.clear();
    index_.clear();
    for (const std::uint32_t k : order) {
      const std::size_t i = picked_entries_[k];
      const serving::step_sequence& s = plan.sequences[i];
      seqs_.push_back(sequence{.tokens = s.tokens, .context = s.context, .block_table = s.block_table,
                               .prefill = !plan.entries[i].decode, .id = row_id(plan.entries[i].seq)});
      index_.push_back(i);
    }
    if (seqs_.empty()) {
      if (auto d = runner_.dummy_step(ph))
        step_.runs.push_back({.ph = ph, .bucket = d->bucket, .run = d->run, .reason = d->reason,
                              .captured = d->captured, .tokens_run = d->tokens_run});
      return;
    }
    if constexpr (stages_groups) stage_groups(plan);
    auto r = runner_.step(seqs_, ph);
    picked_.resize(seqs_.size());
    hook.sample(plan, std::span<const std::size_t>(index_), r.rows, std::span<serving::token_id>(picked_));
    for (std::size_t k = 0; k < index_.size(); ++k) tokens_[index_[k]] = picked_[k];
    step_.runs.push_back({.ph = ph, .seqs = static_cast<std::int64_t>(seqs_.size()), .decodes = decodes, .tokens = tokens,
                          .bucket = r.bucket, .run = r.run, .reason = r.reason, .captured = r.captured,
                          .tokens_run = r.tokens_run});
  }

  // A multi-group allocator (kv::hybrid_allocator) and a backend that reads every group's
  // tables (backend.hpp, group_tables): each runner step hands it the tables of its rows.
  static constexpr bool stages_groups = requires(const Allocator& a, Backend& b, const group_tables& t) {
    { a.num_groups() } -> std::convertible_to<std::int32_t>;
    a.block_table(kv::sequence_id{}, std::int32_t{});
    b.stage_groups(t);
  };
  void stage_groups(const serving::scheduled_step& plan) {
    const Allocator& blocks = scheduler_.blocks();
    const std::int32_t groups = blocks.num_groups();
    group_spans_.clear();
    for (std::int32_t g = 0; g < groups; ++g)
      for (const std::size_t i : index_) group_spans_.push_back(blocks.block_table(plan.entries[i].seq, g).value());
    runner_.backend().stage_groups(
        group_tables{.groups = groups, .rows = static_cast<std::int64_t>(index_.size()), .tables = group_spans_});
  }

  step_routing routing_;
  phase single_phase_;
  serving::scheduler<Allocator> scheduler_;
  runner_type runner_;
  engine_step step_;
  std::array<batch_rows, 2> rows_;  // per phase: the row each sequence holds in the runner's staging
  // Per-step scratch, reused.
  std::vector<sequence> seqs_;
  std::vector<std::size_t> index_, picked_entries_;
  std::vector<kv::sequence_id> keys_;
  std::vector<serving::token_id> tokens_, picked_, sampled_;
  std::vector<std::span<const kv::block_id>> group_spans_;  // stage_groups' [group][row]
  int failed_in_a_row_ = 0;
  std::optional<step_fault> stopped_{};  // set by a fatal device fault: the engine runs no more
};

}  // namespace rungs::engine
