// The run-time façade over rungs::engine::engine: any_engine<Backend> is built from one
// engine_config (what command-line flags or a configuration file fill) and picks its policies
// at run time, beside the compile-time engine<Buckets, Order, Timing, Allocator, Backend> for
// a stack that fixes them in code.
//
// The documented set it chooses from:
//
//   policy         choices                                               held as
//   buckets        bucket_kind: vllm, sglang, trtllm, explicit (+ dispatch),  any_buckets (a value)
//                  gaudi-linear, gaudi-exponential, gaudi-file
//   capture order  largest_first, max_bs, min_tokens, ladder_order, by_phase<>  any_order (a value)
//   capture timing startup, delayed, lazy, idle                           any_timing (a value)
//   allocator      allocator_kind: prefix_caching (prefix_caching_allocator<>),  a type: one engine
//                  free_list (free_list_allocator); with attention groups    instantiation each
//                  (a hybrid model) hybrid_allocator<> or
//                  hybrid_allocator<no_prefix_cache, free_stack>
//
// So any_engine<Backend> instantiates the engine four times per backend (once per allocator:
// the allocator's operations run per token, and the scheduler is a template over it); buckets,
// order and timing are values of one type each, consulted once per step or capture.
//
// Each fact is configured once: the KV pool, block size and max_model_len in `kv`, the
// sequence and token budgets in `scheduler`; Gaudi's bucket grids and the dispatch key's
// widest decode graph derive from those (serving_config_of).
#pragma once

#include <rungs/engine/any_buckets.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/graph_budget.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/hybrid_allocator.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/gaudi_config.hpp>
#include <rungs/model_shape.hpp>
#include <rungs/serving/scheduler.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace rungs::engine {

/// The KV block allocators an engine_config can name.
enum class allocator_kind : std::uint8_t {
  prefix_caching,  ///< kv::prefix_caching_allocator<>: blocks shared by prompts with a common prefix
  free_list,       ///< kv::free_list_allocator: no prefix cache
};

/// Its name in flags and configuration files: prefix-caching, free-list.
constexpr std::string_view to_string(allocator_kind k) {
  return k == allocator_kind::free_list ? "free-list" : "prefix-caching";
}

/// The kind named `name` (to_string's names). Throws std::invalid_argument naming it and the
/// choices.
inline allocator_kind parse_allocator_kind(std::string_view name) {
  if (name == "prefix-caching") return allocator_kind::prefix_caching;
  if (name == "free-list") return allocator_kind::free_list;
  throw std::invalid_argument("allocator kind '" + std::string(name) + "' is not one of prefix-caching, free-list");
}

/// Everything any_engine is built from, besides the backend.
struct engine_config {
  /// The model the backend's forward runs (engine_options::model); none for a cost model.
  std::optional<model_shape> model{};
  bucket_config buckets{};  ///< which bucket space
  /// The capture order; none: by_phase<> over Gaudi's grids, largest_first otherwise.
  std::optional<any_order> order{};
  any_timing timing{};      ///< when buckets are captured (default startup)
  graph_budget budget{};    ///< graph memory (unlimited by default)
  allocator_kind allocator = allocator_kind::prefix_caching;  ///< which KV block allocator
  kv::allocator_config kv{};               ///< the KV pool: blocks, block size, max_model_len, watermark
  /// A hybrid model's attention groups (kv::hybrid_allocator over `kv`'s pool, with or without
  /// its prefix cache as `allocator` says; a block holds block_size tokens of one group's
  /// layers; group 0's table is the staged one); empty: one group, `kv.sliding_window`'s.
  std::vector<kv::attention_group> groups{};
  serving::scheduler_options scheduler{};  ///< admission and step budgets
  /// How a scheduler step reaches the runner; none: by_phase over Gaudi's grids, single
  /// otherwise (then routing by_phase over a 1-D ladder runs prefill steps eagerly, as vLLM
  /// v0 did: its prompt steps have no graphs).
  std::optional<step_routing> routing{};
};

/// The facts Gaudi's bucket grids derive from, as `c` configures them (each once: sequences
/// and token budget from the scheduler, block size, pool and max_model_len from the KV
/// allocator, prefix caching from the allocator's kind).
inline gaudi::serving_config serving_config_of(const engine_config& c) {
  return {.max_num_seqs = c.scheduler.max_num_seqs,
          .block_size = c.kv.block_size,
          .max_model_len = c.kv.max_model_len,
          .max_num_batched_tokens = c.scheduler.max_num_batched_tokens,
          .num_blocks = c.kv.num_blocks,
          .prefix_caching = c.allocator == allocator_kind::prefix_caching};
}

/// An engine whose policies are chosen at run time from an engine_config (see the file
/// comment). It forwards the engine's operations to the instantiation it holds; visit()
/// reaches that engine itself.
template <class Backend>
class any_engine {
 public:
  /// The instantiation for `Allocator`.
  template <class Allocator>
  using engine_type = engine<any_buckets, any_order, any_timing, Allocator, Backend>;
  /// Every instantiation's graph runner (it does not depend on the allocator).
  using runner_type = graph_runner<any_buckets, any_order, any_timing, Backend>;
  using rows_type = typename runner_type::rows_type;  ///< the backend's output rows

  /// Builds the engine `c` names over `backend`. When `log` is given, the bucket space's
  /// configuration is written to it (make_buckets). Throws std::invalid_argument naming the
  /// bad value and the rule it breaks.
  any_engine(const engine_config& c, Backend backend, std::ostream* log = nullptr)
      : kind_(c.allocator), e_(make(c, [&backend](const any_buckets&) { return std::move(backend); }, log)) {}

  /// Builds the engine `c` names over the backend `make_backend(space)` returns, called once
  /// the bucket space is built: for a backend that prepares something per graph shape (a
  /// CUDA forward's attention plans). Throws as the constructor above.
  template <class MakeBackend>
    requires(!std::is_same_v<std::remove_cvref_t<MakeBackend>, Backend> &&
             std::is_invocable_r_v<Backend, MakeBackend&, const any_buckets&>)
  any_engine(const engine_config& c, MakeBackend make_backend, std::ostream* log = nullptr)
      : kind_(c.allocator), e_(make(c, make_backend, log)) {}

  /// Runs the timing policy's startup captures (engine::start).
  void start() { visit([](auto& e) { e.start(); }); }
  /// Queues a request (engine::submit).
  void submit(serving::request r) { visit([&r](auto& e) { e.submit(std::move(r)); }); }
  /// One step (engine::step).
  template <class Hook>
  const engine_step& step(Hook& hook) {
    return visit([&hook](auto& e) -> const engine_step& { return e.step(hook); });
  }
  /// Nothing to run: lets the timing policy capture (engine::idle).
  std::int64_t idle(idle_budget budget = {}) {
    return visit([&budget](auto& e) { return e.idle(budget); });
  }
  /// Nothing waiting and nothing running.
  bool idle_queues() const { return visit([](const auto& e) { return e.idle_queues(); }); }
  /// The runner's statistics.
  const engine_stats& stats() const { return runner().stats(); }
  /// The graph runner: observe(), sync_with(), at(), buckets().
  runner_type& runner() { return visit([](auto& e) -> runner_type& { return e.runner(); }); }
  /// The graph runner: at(), ledger(), queue(), buckets().
  const runner_type& runner() const { return visit([](const auto& e) -> const runner_type& { return e.runner(); }); }
  /// Which allocator it was built with.
  allocator_kind allocator() const { return kind_; }

  /// Running requests (scheduler::running).
  std::size_t running() const { return visit([](const auto& e) { return e.scheduler().running(); }); }
  /// Waiting requests (scheduler::waiting).
  std::size_t waiting() const { return visit([](const auto& e) { return e.scheduler().waiting(); }); }
  /// The scheduler's counters.
  const serving::scheduler_stats& scheduler_stats() const {
    return visit([](const auto& e) -> const serving::scheduler_stats& { return e.scheduler().stats(); });
  }
  /// A submitted request's tokens: history and prompt (scheduler::tokens).
  std::span<const serving::token_id> tokens(serving::request_id id) const {
    return visit([id](const auto& e) { return e.scheduler().tokens(id); });
  }
  /// A conversation's tokens so far (scheduler::conversation_tokens).
  std::span<const serving::token_id> conversation_tokens(serving::session_id s) const {
    return visit([s](const auto& e) { return e.scheduler().conversation_tokens(s); });
  }
  /// Ends a conversation: its history and cached blocks are released (scheduler::end_session).
  void end_session(serving::session_id s) { visit([s](auto& e) { e.scheduler().end_session(s); }); }
  /// The KV pool now.
  kv::kv_metrics kv_metrics() const { return visit([](const auto& e) { return e.blocks().metrics(); }); }
  /// KV blocks in the pool.
  std::int32_t num_blocks() const { return visit([](const auto& e) { return e.blocks().num_blocks(); }); }
  /// The tokens of `prompt` the KV cache would reuse now (0 without prefix caching).
  std::int32_t cached_prefix_tokens(std::span<const kv::token_id> prompt) const {
    return visit([prompt](const auto& e) { return e.blocks().cached_prefix_tokens(prompt); });
  }

  /// Calls f(engine) with the engine it holds (an engine_type<Allocator>), e.g. for the
  /// scheduler's or the allocator's other operations.
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), e_);
  }
  /// Calls f(engine) with the engine it holds, const.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), e_);
  }

 private:
  // Built in place (engines are not moved): make() returns the variant as a prvalue.
  using variant = std::variant<engine_type<kv::prefix_caching_allocator<>>, engine_type<kv::free_list_allocator>,
                               engine_type<kv::hybrid_allocator<>>,
                               engine_type<kv::hybrid_allocator<kv::no_prefix_cache, kv::free_stack>>>;

  template <class MakeBackend>
  static variant make(const engine_config& c, MakeBackend&& make_backend, std::ostream* log) {
    c.scheduler.validate();
    const bool cached = c.allocator == allocator_kind::prefix_caching;
    if (!c.groups.empty()) {
      if (c.kv.sliding_window != 0)
        throw std::invalid_argument("engine config: kv.sliding_window = " + std::to_string(c.kv.sliding_window) +
                                    " applies to one group; with attention groups each group states its window");
      if (cached) return make_as<kv::hybrid_allocator<>>(c, make_backend, log);
      return make_as<kv::hybrid_allocator<kv::no_prefix_cache, kv::free_stack>>(c, make_backend, log);
    }
    if (cached) return make_as<kv::prefix_caching_allocator<>>(c, make_backend, log);
    return make_as<kv::free_list_allocator>(c, make_backend, log);
  }

  template <class Allocator>
  static Allocator allocator_of(const engine_config& c) {
    if constexpr (std::is_constructible_v<Allocator, kv::hybrid_config>)
      return Allocator(kv::hybrid_config{.num_blocks = c.kv.num_blocks, .block_size = c.kv.block_size,
                                         .max_sequences = c.kv.max_sequences, .max_model_len = c.kv.max_model_len,
                                         .watermark_blocks = c.kv.watermark_blocks, .groups = c.groups});
    else
      return Allocator(c.kv);
  }

  template <class Allocator, class MakeBackend>
  static variant make_as(const engine_config& c, MakeBackend&& make_backend, std::ostream* log) {
    Allocator blocks = allocator_of<Allocator>(c);  // validates the pool before the buckets derive from it
    any_buckets space = make_buckets(c.buckets, serving_config_of(c), log);
    const bool gaudi = space.gaudi();
    const step_routing routing = c.routing.value_or(gaudi ? step_routing::by_phase : step_routing::single);
    if (gaudi && routing == step_routing::single)
      throw std::invalid_argument("engine config: routing single over Gaudi's " + std::string(to_string(c.buckets.kind)) +
                                  " buckets would look prefill chunks up in decode buckets; Gaudi's prompt and decode "
                                  "grids need routing by_phase");
    any_order order = c.order ? *c.order : gaudi ? any_order(by_phase<>{}) : any_order(largest_first{});
    Backend backend = make_backend(std::as_const(space));
    return variant(std::in_place_type<engine_type<Allocator>>, std::move(space), std::move(blocks), std::move(backend),
                   typename engine_type<Allocator>::options{.order = std::move(order), .timing = c.timing,
                                                            .budget = c.budget, .scheduler = c.scheduler,
                                                            .routing = routing, .model = c.model});
  }

  allocator_kind kind_;
  variant e_;
};

}  // namespace rungs::engine
