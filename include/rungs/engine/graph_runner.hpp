// rungs::engine::graph_runner: pads live batches to a bucket and captures, replays or runs
// each step eagerly, under a capture-order, a capture-timing and a graph-memory policy. It is
// the lower of the engine's two layers, usable alone by a stack that keeps its own scheduler
// and KV manager (docs/engine.md, "The runner alone"); rungs::engine::engine (engine.hpp)
// drives it from rungs' scheduler.
//
//   graph_runner<Buckets, Order, Timing, Backend>
//     Buckets    a bucket_space (a ladder or grid through rungs/engine/ladder_buckets.hpp):
//                one graph slot per bucket (a std::array when its size is static)
//     Order      capture_order: in which order buckets are captured
//     Timing     capture_timing: when they are captured (startup, delayed, lazy, idle)
//     Backend    engine_backend: host_backend (CPU, tests, cost models) or cuda_backend (graphs)
//
// The KV pool's geometry and the output row width are run-time values (run_shape): the model
// shape that fixes the kernels' instantiation belongs to the forward the backend runs
// (reference_forward<Model>, attention_forward<Model>).
//
// Per step: agree on the batch key across ranks, look up the bucket, let the timing policy
// pick at most one capture (checked against the budget), stage the live batch padded to the
// bucket (persistent staging: only what changed since the last step, batch.hpp), replay its
// graph or run eagerly, and hand back the real rows only.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <rungs/engine/backend.hpp>
#include <rungs/engine/batch.hpp>
#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_queue.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/graph_budget.hpp>
#include <rungs/engine/model.hpp>
#include <rungs/engine/observer.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/engine/stats.hpp>

namespace rungs::engine {

/// How the runner stages a batch padded to a bucket.
enum class staging_policy : std::uint8_t {
  persistent,  ///< padded_batch::update: only what changed since the last step of the phase
  full,        ///< padded_batch::stage: every element, every step (the oracle, and the baseline)
  checked,     ///< persistent, then compared with a full restage; a difference throws std::logic_error
};

constexpr std::string_view to_string(staging_policy p) {
  return p == staging_policy::persistent ? "persistent" : p == staging_policy::full ? "full" : "checked";
}

/// Run-time configuration of a graph runner.
template <class Order, class Timing>
struct runner_options {
  Order order{};                   ///< in which order buckets are captured
  Timing timing{};                 ///< when buckets are captured
  graph_budget budget{};           ///< graph memory (unlimited by default)
  std::int64_t max_model_len = 0;  ///< longest sequence; needed when a bucket leaves context open
  run_shape shape{};               ///< KV pool geometry and output row width (model_shape::run)
  staging_policy staging = staging_policy::persistent;  ///< how a bucket's batch is staged
};

/// How much an idle signal may capture. Time is counted from the captures' measured (and
/// rank-agreed) durations, never from a clock, so every rank stops at the same capture.
struct idle_budget {
  std::int64_t max_captures = 1;                             ///< capture attempts at most
  double seconds = std::numeric_limits<double>::infinity();  ///< capture time at most (expected)
};

/// What a runner step did, and its output rows.
template <class Rows>
struct step_result {
  Rows rows;                               ///< outputs of the real sequences only, row-major:
                                           ///< row_width values per sequence, in input order
  run_kind run = run_kind::eager;          ///< replayed a graph, or ran eagerly
  std::optional<std::size_t> bucket{};     ///< the bucket the batch padded to, if any
  std::optional<eager_reason> reason{};    ///< why it ran eagerly
  std::optional<std::size_t> captured{};   ///< the bucket captured during this step, if any
  std::int64_t row_width = 0;              ///< values per row (run_shape::row_width)
  std::int64_t tokens_run = 0;             ///< token rows the backend computed, padding included

  /// Sequence i's output row (for a decoder, the final hidden state of its last new token).
  /// Host rows only: a device backend's rows are copied out by the caller.
  auto row(std::size_t i) const
    requires requires(const Rows& r) { r.subspan(i, i); }
  {
    const auto w = static_cast<std::size_t>(row_width);
    if ((i + 1) * w > rows.size())
      throw std::out_of_range("step_result::row: row " + std::to_string(i) + " of " +
                              std::to_string(w ? rows.size() / w : 0));
    return rows.subspan(i * w, w);
  }
};

namespace detail {
// The checks behind the engine's static_asserts, one per operation, so the first error
// names the policy and what it lacks (CUTLASS-style) instead of a wall of template text.
template <class O>
concept has_before = requires(const O& o, const bucket& a) {
  { o.before(a, a) } -> std::convertible_to<bool>;
};
template <class P>
concept has_name = requires(const P& p) {
  { p.name() } -> std::convertible_to<std::string_view>;
};
template <class T>
concept has_at_startup = requires(const T& t, const capture_queue& q) {
  { t.at_startup(q) } -> std::same_as<std::optional<std::size_t>>;
};
template <class T>
concept has_during_step = requires(const T& t, const capture_queue& q, std::optional<std::size_t> b) {
  { t.during_step(q, b) } -> std::same_as<std::optional<std::size_t>>;
};
template <class T>
concept has_when_idle = requires(const T& t, const capture_queue& q) {
  { t.when_idle(q) } -> std::same_as<std::optional<std::size_t>>;
};
template <class B>
concept is_ladder_policy = requires(const B& b) {  // a ladder itself rather than a bucket space
  b.lookup(std::int64_t{});
};
template <class S>
concept has_size = requires(const S& s) {
  { s.size() } -> std::convertible_to<std::size_t>;
};
template <class S>
concept has_at = requires(const S& s, std::size_t i) {
  { s.at(i) } -> std::convertible_to<bucket>;
};
template <class S>
concept has_find = requires(const S& s, const batch_key& k) {
  { s.find(k) } -> std::same_as<std::optional<std::size_t>>;
};

template <class Buckets, class T>
struct slot_array {
  using type = std::vector<T>;
  static type make(std::size_t n) { return type(n); }
};
template <static_bucket_space Buckets, class T>
struct slot_array<Buckets, T> {
  using type = std::array<T, Buckets::static_size>;
  static type make(std::size_t) { return type{}; }
};
}  // namespace detail

/// Pads live batches to a bucket and captures, replays or runs each step eagerly, under a
/// capture order, a capture timing and a graph-memory budget (see the file comment).
template <class Buckets, class Order, class Timing, class Backend>
class graph_runner {
  static_assert(!detail::is_ladder_policy<Buckets>,
                "rungs::engine: Buckets is a ladder; wrap it as a bucket space: ladder_buckets<Ladder>(ladder, phase)");
  static_assert(detail::has_size<Buckets>, "rungs::engine: the Buckets type lacks `std::size_t size() const` (bucket_space)");
  static_assert(detail::has_at<Buckets>, "rungs::engine: the Buckets type lacks `bucket at(std::size_t) const` (bucket_space)");
  static_assert(detail::has_find<Buckets>,
                "rungs::engine: the Buckets type lacks `std::optional<std::size_t> find(const batch_key&) const` (bucket_space)");
  static_assert(detail::has_before<Order>,
                "rungs::engine: the Order policy lacks `bool before(const bucket&, const bucket&) const` (capture_order)");
  static_assert(detail::has_name<Order>, "rungs::engine: the Order policy lacks `name()` (capture_order)");
  static_assert(detail::has_at_startup<Timing>,
                "rungs::engine: the Timing policy lacks `std::optional<std::size_t> at_startup(const capture_queue&) const` "
                "(capture_timing)");
  static_assert(detail::has_during_step<Timing>,
                "rungs::engine: the Timing policy lacks `std::optional<std::size_t> during_step(const capture_queue&, "
                "std::optional<std::size_t>) const` (capture_timing)");
  static_assert(detail::has_when_idle<Timing>,
                "rungs::engine: the Timing policy lacks `std::optional<std::size_t> when_idle(const capture_queue&) const` "
                "(capture_timing)");
  static_assert(detail::has_name<Timing>, "rungs::engine: the Timing policy lacks `name()` (capture_timing)");
  static_assert(engine_backend<Backend>,
                "rungs::engine: the Backend lacks setup/capture/replay/eager/release/rows (engine_backend)");

 public:
  using options = runner_options<Order, Timing>;                                      ///< its configuration
  using rows_type = decltype(std::declval<const Backend&>().rows(std::int64_t{}));  ///< the backend's output rows
  using result = step_result<rows_type>;                                              ///< what step() returns

  /// Throws std::invalid_argument for a configuration that cannot work (an empty bucket
  /// space, a bucket shape without rows, a KV geometry that is not positive).
  graph_runner(Buckets buckets, Backend backend, options opts)
      : buckets_(std::move(buckets)),
        backend_(std::move(backend)),
        opts_(check_shape(std::move(opts))),
        ledger_(opts_.budget),
        table_(detail::slot_array<Buckets, bucket>::make(buckets_.size())),
        order_(detail::slot_array<Buckets, std::size_t>::make(buckets_.size())),
        slots_(detail::slot_array<Buckets, graph_slot>::make(buckets_.size())),
        queue_(init_queue()) {
    stats_.budget_left = ledger_.left();
  }

  graph_runner(const graph_runner&) = delete;  // the queue views the runner's own arrays
  graph_runner& operator=(const graph_runner&) = delete;

  /// Calls `o` for every capture, step and startup event.
  template <class O>
  void observe(O o) {
    static_assert(engine_observer<O>, "rungs::engine::observe: the observer is not callable with `const engine_event&`");
    observer_ = std::move(o);
  }

  /// Agrees batch keys and capture outcomes with the other ranks through `s` (kept by
  /// reference). Call before start(), on every rank.
  template <class S>
  void sync_with(S& s) {
    static_assert(rank_sync<S>, "rungs::engine::sync_with: the rank sync lacks `max_each(std::span<std::int64_t>)`");
    sync_ = [&s](std::span<std::int64_t> v) { s.max_each(v); };
  }

  /// Runs the timing policy's startup captures (the first step does it if nobody did).
  void start() {
    if (started_) return;
    started_ = true;
    std::int64_t total = startup_count();
    notify({.what = engine_event::kind::startup_begin, .total = total});
    std::int64_t ordinal = 0;
    while (auto b = opts_.timing.at_startup(queue_)) {
      check_pick(*b, "at_startup");
      try_capture(*b, capture_moment::startup, ++ordinal, total);
    }
    notify({.what = engine_event::kind::startup_end, .stats = &stats_});
  }

  /// One step over the live sequences: returns the real rows' outputs.
  result step(std::span<const sequence> seqs, phase ph = phase::decode) {
    if (seqs.empty()) throw std::invalid_argument("a step needs at least one sequence");
    start();
    batch_key key = key_of(ph, seqs, block_size());
    if constexpr (has_phase_of)
      if (keyed_on_batch()) key.ph = buckets_.phase_of(key);
    return run(seqs, agree(key), ph);
  }

  /// A data-parallel rank with no sequence in this step while another rank may have some
  /// (vLLM's execute_dummy_batch): joins the step's agreement with an empty batch and, when
  /// another rank brought sequences, runs the agreed bucket on padding only (every row a
  /// padded one: slot -1, length 0), so that every rank replays the same graph and the
  /// collectives inside it line up. Returns nothing, and runs nothing, when every rank was
  /// empty, or when there is no other rank (no sync_with). Capture timing, statistics (all
  /// rows padding) and the observer see the step as any other.
  std::optional<result> dummy_step(phase ph = phase::decode) {
    if (!sync_) return std::nullopt;
    start();
    const batch_key key = agree(batch_key{.ph = ph});
    if (key.seqs == 0) return std::nullopt;
    return run({}, key, ph);
  }

  /// Whether steps agree with other ranks (sync_with was called).
  bool synced() const { return static_cast<bool>(sync_); }

 private:
  // A step on the agreed key: `seqs` (possibly none, a dummy step) padded to its bucket, staged
  // in the persistent staging of the phase the caller stepped in (the engine keeps one row
  // order per phase; a space keyed on the batch may look the batch up in the other phase).
  result run(std::span<const sequence> seqs, const batch_key& key, phase caller) {
    if (opts_.max_model_len > 0 && key.max_context > opts_.max_model_len)
      throw std::invalid_argument("a sequence of " + std::to_string(key.max_context) + " tokens exceeds max_model_len = " +
                                  std::to_string(opts_.max_model_len));
    std::optional<std::size_t> b = lookup(key);
    if (b) queue_.record_use(*b);
    // Stage the live batch first: it validates the input before anything is captured. A
    // bucket's batch goes to the persistent staging of the caller's phase (a graph reads it); a
    // batch above every bucket only runs eagerly, in its own shape.
    padded_batch* ran = &eager_;
    if (b) {
      const graph_shape& s = table_[*b].shape;
      ran = &staged_[static_cast<std::size_t>(caller)];
      stage_persistent(*ran, seqs, s.seqs, s.tokens, width_of(s), s.query);
    } else {
      eager_.stage(seqs, key.seqs, key.tokens, blocks_for(key.max_context, block_size()), block_size(),
                   opts_.shape.num_blocks);
    }
    result r;
    r.bucket = b;
    if (!queue_.settled()) r.captured = capture_during_step(b);
    if (b && queue_.captured(*b)) {
      backend_.replay(*b, *ran);
      ++stats_.replays;
      stats_.real_rows += ran->real_seqs();
      stats_.padded_rows += ran->seqs() - ran->real_seqs();
      stats_.real_tokens += ran->real_tokens();
      stats_.padded_tokens += ran->tokens() - ran->real_tokens();
      r.run = run_kind::replay;
    } else {
      if (b) {  // eager in the live shape: padding buys nothing without a graph
        eager_.stage(seqs, key.seqs, key.tokens, blocks_for(key.max_context, block_size()), block_size(),
                     opts_.shape.num_blocks);
        ran = &eager_;
      }
      backend_.eager(eager_);
      r.reason = eager_why(b);
      ++stats_.eager[static_cast<std::size_t>(*r.reason)];
      r.run = run_kind::eager;
    }
    ++stats_.steps;
    queue_.record_step();
    r.rows = backend_.rows(static_cast<std::int64_t>(seqs.size()));
    r.row_width = opts_.shape.row_width;
    r.tokens_run = ran->tokens();
    if (observer_) {
      engine_event e{.what = engine_event::kind::step, .step = stats_.steps - 1, .index = b, .run = r.run,
                     .reason = r.reason, .real_rows = ran->real_seqs(), .rows = ran->seqs()};
      if (b) e.where = table_[*b];
      observer_(e);
    }
    return r;
  }

 public:
  /// The caller is idle: captures what the timing policy's when_idle picks, within `budget`.
  /// Returns the number of capture attempts (kept or failed; budget refusals cost nothing).
  std::int64_t idle(idle_budget budget = {}) {
    start();
    std::int64_t attempts = 0;
    double spent = 0;
    while (attempts < budget.max_captures && !queue_.settled()) {
      auto b = opts_.timing.when_idle(queue_);
      if (!b) break;
      check_pick(*b, "when_idle");
      if (spent + expected_seconds() > budget.seconds) break;
      auto before = stats_.capture_seconds;
      if (try_capture(*b, capture_moment::idle, 0, 0) == capture_outcome::refused) continue;
      spent += stats_.capture_seconds - before;
      ++attempts;
    }
    return attempts;
  }

  const engine_stats& stats() const { return stats_; }   ///< captures, replays, eager steps, padding
  const capture_queue& queue() const { return queue_; }  ///< each bucket's graph state
  const graph_ledger& ledger() const { return ledger_; } ///< graph memory used and left
  const Buckets& buckets() const { return buckets_; }    ///< the bucket space
  const options& config() const { return opts_; }        ///< the configuration it was built with
  Backend& backend() { return backend_; }                ///< the backend (its forward, its buffers)
  /// Tokens per KV block.
  std::int64_t block_size() const { return opts_.shape.block_size; }
  /// Bucket `i` as the engine sees it.
  const bucket& at(std::size_t i) const { return table_[i]; }
  /// The persistent staging of the steps made in a phase (step's `ph`): what the last replay
  /// of such a step read.
  const padded_batch& staged(phase ph) const { return staged_[static_cast<std::size_t>(ph)]; }

 private:
  using bucket_table = typename detail::slot_array<Buckets, bucket>::type;
  using order_table = typename detail::slot_array<Buckets, std::size_t>::type;
  using slot_table = typename detail::slot_array<Buckets, graph_slot>::type;
  // A space keyed on the batch itself (vLLM's uniform-decode key) picks the phase. A space
  // chosen at run time (any_buckets) has phase_of and says whether the space it holds is.
  static constexpr bool has_phase_of = requires(const Buckets& s, const batch_key& k) {
    { s.phase_of(k) } -> std::same_as<phase>;
  };
  bool keyed_on_batch() const {
    if constexpr (!has_phase_of) return false;
    else if constexpr (requires { { buckets_.keyed_on_batch() } -> std::same_as<bool>; }) return buckets_.keyed_on_batch();
    else return true;
  }

  static options check_shape(options o) {
    const run_shape& s = o.shape;
    if (s.block_size <= 0 || s.num_blocks <= 0 || s.row_width < 0)
      throw std::invalid_argument("graph_runner: run_shape{block_size = " + std::to_string(s.block_size) +
                                  ", num_blocks = " + std::to_string(s.num_blocks) + ", row_width = " +
                                  std::to_string(s.row_width) +
                                  "}: block_size and num_blocks must be positive, row_width not negative");
    return o;
  }

  capture_queue init_queue() {
    std::size_t n = buckets_.size();
    if (n == 0) throw std::invalid_argument("engine: the bucket space is empty");
    if (table_.size() != n)
      throw std::logic_error("engine: static_size " + std::to_string(table_.size()) + " != size() " + std::to_string(n));
    backend_setup setup{.slots = n, .row_width = opts_.shape.row_width};
    for (std::size_t i = 0; i < n; ++i) {
      table_[i] = buckets_.at(i);
      const graph_shape& s = table_[i].shape;
      if (s.seqs <= 0 || s.tokens < s.seqs || s.context < 0)
        throw std::invalid_argument("engine: bucket " + std::to_string(i) + " has graph shape seqs = " +
                                    std::to_string(s.seqs) + ", tokens = " + std::to_string(s.tokens) +
                                    "; it needs seqs > 0 and tokens >= seqs");
      if (s.context == 0 && opts_.max_model_len <= 0)
        throw std::invalid_argument("engine: bucket " + std::to_string(i) +
                                    " leaves the sequence length open; set runner_options::max_model_len");
      setup.seqs = std::max(setup.seqs, s.seqs);
      setup.tokens = std::max(setup.tokens, s.tokens);
      setup.width = std::max(setup.width, width_of(s));
    }
    std::vector<std::size_t> seq = capture_sequence(opts_.order, buckets_);
    std::copy(seq.begin(), seq.end(), order_.begin());
    backend_.setup(setup);
    for (padded_batch& p : staged_) p.reserve(setup.seqs, setup.tokens, setup.width);
    return capture_queue(std::span<const bucket>(table_.data(), n), std::span<const std::size_t>(order_.data(), n),
                         std::span<graph_slot>(slots_.data(), n));
  }

  // Block-table width of a graph: its longest sequence, never beyond max_model_len (a
  // bucket bounding the batch's total blocks bounds no single sequence more tightly).
  std::int64_t width_of(const graph_shape& s) const {
    std::int64_t len = s.context > 0 ? s.context : opts_.max_model_len;
    if (opts_.max_model_len > 0) len = std::min(len, opts_.max_model_len);
    return blocks_for(len, block_size());
  }

  // Predicts how many captures startup will make (for progress): runs the timing policy on
  // a copy of the queue, assuming every capture succeeds.
  std::int64_t startup_count() const {
    std::vector<graph_slot> copy(slots_.begin(), slots_.end());
    capture_queue q(std::span<const bucket>(table_.data(), table_.size()),
                    std::span<const std::size_t>(order_.data(), order_.size()), copy);
    std::int64_t n = 0;
    while (auto b = opts_.timing.at_startup(q)) {
      if (*b >= copy.size() || !q.pending(*b)) break;
      q.record_captured(*b, 0, 0);
      ++n;
    }
    return n;
  }

  void check_pick(std::size_t b, const char* what) const {
    if (b >= table_.size() || !queue_.pending(b))
      throw std::logic_error(std::string("engine: the Timing policy's ") + what + " picked bucket " + std::to_string(b) +
                             ", which is not pending");
  }

  // One all-reduce MAX over the key. The phase travels as two values: in a space keyed on
  // the batch itself (dispatch_buckets: decode = uniform decode, prompt = mixed) a mixed
  // graph serves any batch, so ranks that disagree agree on mixed, as vLLM's data-parallel
  // ranks pad to a common mode; in any other space (Gaudi's prompt and decode buckets) the
  // phases are different forwards, and every rank sees the disagreement (through the phase's
  // maximum and minimum) and throws, so none is left waiting in the next collective.
  batch_key agree(batch_key k) {
    if (!sync_) return k;
    const auto ph = static_cast<std::int64_t>(k.ph);
    std::array<std::int64_t, 9> v{ph,           -ph,          k.seqs,   k.tokens,          k.max_query,
                                  k.max_context, k.max_prefix, k.blocks, k.has_lora ? 1 : 0};
    sync_(v);
    const std::int64_t most = v[0], least = -v[1];
    phase agreed = k.ph;
    if (most != least) {
      if (!keyed_on_batch())
        throw std::logic_error("engine: ranks stepped in different phases (prompt and decode) over a bucket space "
                               "whose phases are different graphs; a multi-rank stack must align phases");
      agreed = phase::prompt;
    }
    return {agreed, v[2], v[3], v[4], v[5], v[6], v[7], v[8] != 0};
  }

  std::optional<std::size_t> lookup(const batch_key& key) const {
    std::optional<std::size_t> b = buckets_.find(key);
    if (!b) return b;
    if (*b >= table_.size())
      throw std::logic_error("engine: the bucket space returned index " + std::to_string(*b) + " of " +
                             std::to_string(table_.size()));
    const bucket& t = table_[*b];
    std::int64_t context = t.shape.context > 0 ? t.shape.context : opts_.max_model_len;
    if (t.ph != key.ph || t.shape.seqs < key.seqs || t.shape.tokens < key.tokens || context < key.max_context)
      throw std::logic_error("engine: the bucket space padded a batch of " + std::to_string(key.seqs) + " sequences, " +
                             std::to_string(key.tokens) + " tokens, length " + std::to_string(key.max_context) +
                             " to a bucket that does not cover it");
    return b;
  }

  void stage_persistent(padded_batch& p, std::span<const sequence> seqs, std::int64_t n, std::int64_t tokens,
                        std::int64_t width, std::int64_t query) {
    if (opts_.staging == staging_policy::full) return p.stage(seqs, n, tokens, width, block_size(), opts_.shape.num_blocks, query);
    p.update(seqs, n, tokens, width, block_size(), opts_.shape.num_blocks, query);
    if (opts_.staging != staging_policy::checked) return;
    oracle_.stage(seqs, n, tokens, width, block_size(), opts_.shape.num_blocks, query);
    auto check = [&](const char* what, auto got, auto want) {
      for (std::size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i])
          throw std::logic_error(std::string("graph_runner: the persistent staging differs from a full restage: ") + what +
                                 "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", restaged " +
                                 std::to_string(want[i]));
    };
    if (p.shape() != oracle_.shape() || p.real_seqs() != oracle_.real_seqs() || p.real_tokens() != oracle_.real_tokens())
      throw std::logic_error("graph_runner: the persistent staging's shape differs from a full restage's");
    check("token_ids", p.token_ids(), oracle_.token_ids());
    check("positions", p.positions(), oracle_.positions());
    check("slot_mapping", p.slot_mapping(), oracle_.slot_mapping());
    check("query_start", p.query_start(), oracle_.query_start());
    check("seq_lens", p.seq_lens(), oracle_.seq_lens());
    check("block_tables", p.block_tables(), oracle_.block_tables());
  }

  eager_reason eager_why(std::optional<std::size_t> b) const {
    if (!b) return eager_reason::above_top;
    switch (queue_.state(*b)) {
      case graph_state::failed: return eager_reason::failed;
      case graph_state::refused: return eager_reason::refused;
      default: return eager_reason::not_captured;
    }
  }

  std::optional<std::size_t> capture_during_step(std::optional<std::size_t> b) {
    // A refusal costs nothing, so the policy may pick again; a capture (kept or failed)
    // ends the step's capturing: at most one per step.
    while (auto c = opts_.timing.during_step(queue_, b)) {
      check_pick(*c, "during_step");
      capture_outcome o = try_capture(*c, capture_moment::step, 0, 0);
      if (o == capture_outcome::captured) return c;
      if (o != capture_outcome::refused) return std::nullopt;
    }
    return std::nullopt;
  }

  double expected_seconds() const {
    std::int64_t n = stats_.captures + stats_.capture_failures;
    return n ? stats_.capture_seconds / static_cast<double>(n) : 0.0;
  }

  capture_outcome try_capture(std::size_t b, capture_moment when, std::int64_t ordinal, std::int64_t total) {
    const bucket& bk = table_[b];
    bool other_complete = queue_.phase_complete(bk.ph == phase::prompt ? phase::decode : phase::prompt);
    engine_event e{.what = engine_event::kind::capture, .step = stats_.steps, .when = when, .ordinal = ordinal,
                   .total = total, .estimate = ledger_.estimate(bk), .index = b, .where = bk};
    if (!ledger_.admits(bk, e.estimate, other_complete)) {
      ++stats_.budget_refusals;
      queue_.record_refused(b);
      e.outcome = capture_outcome::refused;
      e.budget_left = ledger_.left();
      notify(e);
      return e.outcome;
    }
    const graph_shape& s = bk.shape;
    dummy_.stage({}, s.seqs, s.tokens, width_of(s), block_size(), 0, s.query);  // every row padding: slot -1
    capture_report rep = backend_.capture(b, bk, dummy_);
    // Agree on the outcome: a capture that failed anywhere is dropped everywhere, and the
    // budget is charged the largest cost any rank measured.
    // Seconds travel through the rank sync as int64 nanoseconds: a time that is not finite,
    // negative or past 2^63 ns (a simulated cost of 1e308 s) is an error, never an
    // out-of-range conversion.
    const std::optional<std::int64_t> ns = checked_trunc(rep.seconds * 1e9);
    if (!ns || *ns < 0) {
      if (rep.ok) backend_.release(b);
      throw std::invalid_argument("engine: the capture of bucket index " + std::to_string(b) + " reported " +
                                  std::to_string(rep.seconds) +
                                  " seconds; a capture time must be finite, non-negative and below 2^63 ns");
    }
    std::array<std::int64_t, 3> v{rep.ok ? 0 : 1, rep.bytes, *ns};
    if (sync_) sync_(v);
    bool failed = v[0] != 0;
    e.bytes = v[1];
    e.seconds = static_cast<double>(v[2]) * 1e-9;
    stats_.capture_seconds += e.seconds;
    if (failed) {
      if (rep.ok) backend_.release(b);
      ++stats_.capture_failures;
      queue_.record_failed(b, e.seconds);
      e.outcome = capture_outcome::failed;
      e.error = rep.ok ? std::string_view("failed on another rank") : std::string_view(rep.error);
    } else if (ledger_.measured(bk, e.bytes); !ledger_.admits(bk, e.bytes, other_complete)) {
      backend_.release(b);
      ++stats_.budget_refusals;
      queue_.record_refused(b);
      e.outcome = capture_outcome::released;
    } else {
      ledger_.charge(bk, e.bytes);
      ++stats_.captures;
      stats_.capture_bytes += e.bytes;
      queue_.record_captured(b, e.bytes, e.seconds);
      e.outcome = capture_outcome::captured;
    }
    stats_.budget_left = e.budget_left = ledger_.left();
    notify(e);
    if (e.outcome == capture_outcome::captured && stats_.captures == 1 && ledger_.budget().limited()) forecast();
    return e.outcome;
  }

  // After the first graph (the largest, under largest-first): what the rest would need.
  void forecast() {
    if (!observer_) return;
    engine_event f{.what = engine_event::kind::forecast, .step = stats_.steps, .budget_left = ledger_.left()};
    for (std::size_t i = 0; i < table_.size(); ++i)
      if (queue_.state(i) == graph_state::pending) {
        // Estimates saturate at INT64_MAX (more than any budget); so does their sum.
        f.estimate = checked_add(f.estimate, ledger_.estimate(table_[i])).value_or(std::numeric_limits<std::int64_t>::max());
        ++f.total;
      }
    observer_(f);
  }

  void notify(const engine_event& e) {
    if (observer_) observer_(e);
  }

  Buckets buckets_;
  Backend backend_;
  options opts_;
  graph_ledger ledger_;
  bucket_table table_;
  order_table order_;
  slot_table slots_;
  std::array<padded_batch, 2> staged_;  // per phase, persistent; before queue_: init_queue() sizes them
  padded_batch eager_, dummy_, oracle_;
  capture_queue queue_;
  engine_stats stats_;
  std::function<void(const engine_event&)> observer_;
  std::function<void(std::span<std::int64_t>)> sync_;
  bool started_ = false;
};

}  // namespace rungs::engine
