// simulate: replays a workload through the serving scheduler, the KV block allocator and the
// engine's capture policies, with the cost model standing in for the GPU.
//
// Everything that decides is the real code, run through the library's one serving loop:
// rungs::serving::driver (arrivals, idling, rank agreement) around an engine::any_engine,
// whose scheduler (admission, chunked prefill, preemption, chat sessions) owns a rungs::kv
// allocator sized from the model's KV geometry, and whose graph runner (bucket lookup,
// capture order, capture timing, graph budget) runs the host backend with simulated capture
// cost and no forward: a cost-model backend, whose rows carry nothing. Only time is modelled:
// the driver's clock is cost_model_clock, which advances each step by cost_model::step_seconds
// (plus any capture the engine made inside it); captures at startup delay the server's start,
// and idle gaps between arrivals are handed to the engine's idle() (the idle timing captures
// there). A day of traffic runs in seconds because nothing executes.
//
// Time 0 is the server process starting (a cold start): requests that arrive while startup
// captures run wait for them, which is the trade-off between capture timings.
//
// A cache in tiers (simulation_config::tiers): the pool is the top tier (HBM) and the tiers
// below it a planning::tier_store attached to the allocator (kv::prefix_tier): blocks the
// pool evicts are demoted, an admission's lookup continues below the pool's hits, and the
// blocks it finds there are promoted and count as cached; their load (tokens x KV bytes per
// token / the tier's bandwidth) is added to the seconds of the step that admits the request,
// so its TTFT, and every other request's in that step, includes it (the load is not
// overlapped with compute).
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/engine/any_engine.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/kv/capacity.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/planning/cache_tiers.hpp>
#include <rungs/planning/cost_model.hpp>
#include <rungs/serving/clock.hpp>
#include <rungs/serving/driver.hpp>
#include <rungs/serving/scheduler.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
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
  /// A hybrid model's layers by attention kind (their sum is model.layers), served by
  /// kv::hybrid_allocator: one pool whose block holds block_size tokens of one group's layers,
  /// sized for the largest group (every page the same size, as vLLM's). Empty: every layer
  /// full attention.
  std::vector<kv::layer_group> layer_groups{};
  std::int32_t block_size = 16;            ///< tokens per KV block: one of the kernels' 8, 16, 32, 64, 128
  std::int64_t kv_bytes = std::int64_t{7} << 30;
  double watermark = 0.01;                 ///< share of blocks admission keeps free (vLLM v0's 1%)
  bool prefix_caching = false;
  /// A prefix cache in tiers, top first (planning/cache_tiers.hpp): tiers[0] is HBM, the
  /// pool itself (its capacity_tokens 0, or exactly the pool's tokens), the others below it
  /// with their capacities and load bandwidths. Needs prefix_caching and one attention group.
  /// Empty: the pool is the only tier (nothing is reported per tier).
  std::vector<cache_tier> tiers{};
  /// Longest request (history, prompt and output), the allocator's max_model_len.
  std::int32_t max_model_len = 8192;
  serving::scheduler_options scheduler{};
  /// The 1-D ladder of capture sizes (tokens per step), unless `gaudi` names Gaudi's grids.
  rungs::ladder ladder{CaptureSizes::vllm(512)};
  /// vLLM V1's dispatch key over `ladder` (engine::dispatch_buckets): steps where every
  /// sequence decodes one token replay uniform-decode graphs (up to max_num_seqs sequences),
  /// the others the ladder's token-count graphs.
  bool dispatch = false;
  /// Gaudi's prompt and decode grids instead of `ladder`: gaudi_linear (2-D [bs, seq]),
  /// gaudi_exponential or gaudi_file (3-D, from `bucket_file`), derived from the scheduler and
  /// KV settings and the VLLM_*_BUCKET_* variables read through `getenv` (the process
  /// environment when empty), as vLLM-Gaudi builds them (engine::make_buckets). None: `ladder`.
  std::optional<engine::bucket_kind> gaudi{};
  std::string bucket_file{};  ///< gaudi_file: the buckets (VLLM_BUCKETING_FROM_FILE's format)
  engine::env_reader getenv{};
  /// Share of graph memory for prompt graphs under Gaudi's grids (VLLM_GRAPH_PROMPT_RATIO).
  double prompt_graph_ratio = 0.3;
  any_timing timing{};
  /// The capture order; none: the engine's default (largest-first over a 1-D ladder, Gaudi's
  /// prompt min-tokens and decode max-bs over its grids).
  std::optional<any_order> order{};
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

/// One request, as the simulation saw it (the driver's record). Times in seconds from the
/// server's start; prompt_tokens include the conversation's history.
using serving::request_record;

/// One step (the driver's record).
using serving::step_record;

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

/// What simulate reports: the driver's result (requests, steps, queue and KV peaks, tokens,
/// captures in service, dummy steps) and the latency summaries.
struct simulation_result : serving::serve_result {
  std::string timing;
  std::int32_t num_blocks = 0;
  latency_summary ttft, itl;        ///< itl_samples are kept with simulation_config::keep_itl_samples
  double ttft_first = 0;            ///< the first submitted request
  double ttft_first_mean = 0;       ///< mean over the first `first_requests`
  /// Tokens per step of the steps that ran, as the ladder saw them (for fitting).
  std::vector<std::int64_t> step_tokens;
  /// Hybrid models (simulation_config::layer_groups): the KV bytes the pool's live blocks
  /// held, and what the same sequences would hold with every layer full attention (the
  /// full-attention group's live blocks x all layers), at their peaks over the steps and
  /// summed over the steps (kv_saved = 1 - hybrid sum / all-full sum). Zero otherwise.
  std::int64_t peak_kv_bytes = 0, peak_all_full_kv_bytes = 0;
  double kv_saved = 0;
  /// With simulation_config::tiers: each tier's hits, top first, over every admission (a
  /// preempted request's readmission looks up again), and the blocks they looked up.
  std::vector<simulated_tier> tiers;
  std::int64_t tier_looked_up_blocks = 0;
};

/// A step's seconds under a cost model, without its captures (the clock adds them): each
/// runner step is one forward over its token rows (a replay's bucket, padding included) and
/// the KV context of its sequences (none in a dummy run). A step of two runner steps (Gaudi's
/// prompt and decode buckets with mixed batches) is two forwards.
struct cost_model_pricing {
  cost_model cost{};
  /// A cache in tiers: the loads of the blocks promoted while the step was planned (its
  /// admissions) add to its seconds. None: one tier.
  tier_store* loads = nullptr;

  double operator()(const engine::engine_step& step) const {
    double s = loads ? loads->take_load_seconds() : 0.0;
    if (step.runs.size() == 1) return s + run_seconds(step.runs.front(), step, [](const serving::step_entry&) { return true; });
    for (const engine::engine_run& r : step.runs)  // by phase: prefill entries, then decodes
      s += run_seconds(r, step, [&r](const serving::step_entry& e) { return e.decode == (r.ph == engine::phase::decode); });
    return s;
  }

 private:
  template <class Pick>
  double run_seconds(const engine::engine_run& r, const engine::engine_step& step, Pick pick) const {
    std::int64_t context = 0, sequences = 0;
    if (r.seqs > 0)
      for (std::size_t i = 0; i < step.plan->entries.size(); ++i)
        if (pick(step.plan->entries[i])) {
          const serving::step_sequence& s = step.plan->sequences[i];
          context += s.context + static_cast<std::int64_t>(s.tokens.size());
          ++sequences;
        }
    return cost.step_seconds(r.tokens_run, context, r.run == engine::run_kind::replay, sequences);
  }
};

/// The simulator's clock: time 0 is the server starting, each step costs what the cost model
/// says.
using cost_model_clock = serving::modelled_clock<cost_model_pricing>;

namespace detail {

using serving::synthetic_token;

// TTFT of the first request that ran and mean over the first `n` (by submission; ties: trace
// order) of `requests` into `r`.
inline void summarize_first(const std::vector<request_record>& requests, std::size_t n, simulation_result& r) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].rejected.empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].submitted < requests[b].submitted; });
  if (!order.empty()) r.ttft_first = requests[order.front()].ttft();
  n = std::min(n, order.size());
  double sum = 0;
  for (std::size_t k = 0; k < n; ++k) sum += requests[order[k]].ttft();
  r.ttft_first_mean = n ? sum / static_cast<double>(n) : 0.0;
}

// One replica: an engine on a cost-model backend, driven by serving::driver on the cost-model
// clock.
class simulator {
  using engine_type = engine::any_engine<engine::host_backend>;
  using driver_type = serving::driver<engine_type, cost_model_clock>;

 public:
  /// With `routed`, the simulator is one replica of a fleet (planning/fleet.hpp): no request
  /// arrives until route() sends it here, and the fleet advances every replica in lockstep.
  /// With `rank`, it is one data-parallel rank (planning/data_parallel.hpp): its engine and its
  /// loop agree every step and capture with the other ranks through it, from startup on.
  simulator(const simulation_config& c, const std::vector<serving::trace_request>& trace, bool routed = false,
            engine::rank_sync_ref rank = {})
      : cfg_(c),
        engine_(engine_config(c), backend(c)),
        tiers_(attach_tiers(c, trace, engine_)),
        driver_(engine_, trace,
                cost_model_clock(cost_model_pricing{c.cost, tiers_.get()}, serving::time_origin::server_start),
                {.ranks = rank, .routed = routed, .keep_steps = c.record_steps, .strict = c.strict, .who = "simulate"}) {}

  /// Runs to the end of the trace.
  simulation_result run() {
    advance(std::numeric_limits<double>::infinity());
    return finish();
  }

  /// Runs every step that starts before `until` (serving::driver::run_until).
  void advance(double until) { driver_.run_until(until, hook_, tokens_); }

  /// Sends trace request `index` (a first turn or standalone request) here (serving::driver::route).
  void route(std::size_t index) { driver_.route(index); }

  /// Requests sent here and not finished (serving::driver::outstanding).
  std::size_t outstanding() const { return driver_.outstanding(); }

  /// The tokens of `prompt` this replica's KV cache would reuse now (0 without prefix caching).
  std::int32_t cached_prefix_tokens(std::span<const kv::token_id> prompt) const {
    return engine_.cached_prefix_tokens(prompt);
  }

  /// The result, after the last advance(); a routed simulator's requests are its own, in trace
  /// order.
  simulation_result finish() {
    simulation_result r;
    static_cast<serving::serve_result&>(r) = driver_.finish();
    r.timing = std::string(cfg_.timing.name());
    r.num_blocks = engine_.num_blocks();
    r.step_tokens = std::move(tokens_.tokens);
    r.peak_kv_bytes = peak_kv_bytes_;
    r.peak_all_full_kv_bytes = peak_all_full_kv_bytes_;
    r.kv_saved = all_full_bytes_sum_ > 0 ? 1.0 - kv_bytes_sum_ / all_full_bytes_sum_ : 0.0;
    if (tiers_) {
      r.tiers = tiers_->results();
      r.tier_looked_up_blocks = tiers_->looked_up_blocks();
    }
    summarize_latencies(r);
    return r;
  }

  /// The engine configuration `c` describes.
  static engine::engine_config engine_config(const simulation_config& c) {
    // vLLM v1's piecewise graphs cover every step by its token count; without chunked
    // prefill (v0) only decode steps of a 1-D ladder have graphs, and prefill steps (v0 never
    // mixes phases) look for prompt buckets, find none, and run eagerly. Gaudi's grids have
    // both phases: its prefill chunks and decodes run in their own buckets (by phase).
    const bool by_phase = c.gaudi || !c.scheduler.chunked_prefill;
    return {.buckets = buckets(c), .order = c.order, .timing = c.timing, .budget = budget(c),
            .allocator = c.prefix_caching ? engine::allocator_kind::prefix_caching : engine::allocator_kind::free_list,
            .kv = allocator_config(c), .groups = attention_groups(c), .scheduler = c.scheduler,
            .routing = by_phase ? engine::step_routing::by_phase : engine::step_routing::single};
  }

  /// The bucket space `c` describes: Gaudi's grids, or its ladder as explicit rungs (the same
  /// rungs and lookup), with the dispatch key if asked.
  static engine::bucket_config buckets(const simulation_config& c) {
    if (c.gaudi) {
      if (!engine::is_gaudi(*c.gaudi))
        throw std::invalid_argument("simulate: gaudi = " + std::string(engine::to_string(*c.gaudi)) +
                                    " is not one of Gaudi's grids (gaudi-linear, gaudi-exponential, gaudi-file)");
      if (c.dispatch)
        throw std::invalid_argument("simulate: dispatch keys graphs over a 1-D ladder; Gaudi's grids have their own");
      return {.kind = *c.gaudi, .bucket_file = c.bucket_file, .getenv = c.getenv};
    }
    if (!c.bucket_file.empty())
      throw std::invalid_argument("simulate: bucket_file '" + c.bucket_file + "' applies to gaudi = gaudi-file");
    engine::bucket_config b{.kind = engine::bucket_kind::explicit_rungs, .dispatch = c.dispatch};
    b.rungs.assign(c.ladder.rungs().begin(), c.ladder.rungs().end());
    return b;
  }

 private:
  static kv::allocator_config allocator_config(const simulation_config& c) {
    // The simulated server runs rungs' kernels: only their block sizes are servable.
    if (!attention::supported_block_sizes::contains(c.block_size))
      throw std::invalid_argument("simulate: block_size = " + std::to_string(c.block_size) +
                                  " is not supported by the paged-attention kernels; supported: " +
                                  attention::supported_block_sizes::list());
    const std::int64_t block_bytes = page_bytes(c);
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

  // A hybrid model's groups, checked against the model: their layers sum to model.layers, and
  // one is full attention (the all-full figure counts its blocks).
  static std::vector<kv::attention_group> attention_groups(const simulation_config& c) {
    std::vector<kv::attention_group> groups;
    if (c.layer_groups.empty()) return groups;
    std::int64_t layers = 0;
    bool full = false;
    for (const kv::layer_group& g : c.layer_groups) {
      layers += g.layers;
      full = full || g.attention.kind == kv::attention_kind::full;
      groups.push_back(g.attention);
    }
    if (layers != c.model.layers)
      throw std::invalid_argument("simulate: the layer groups hold " + std::to_string(layers) + " layers; model.layers = " +
                                  std::to_string(c.model.layers) + " must be their sum");
    if (!full)
      throw std::invalid_argument("simulate: the layer groups have no full-attention group; the saving is measured "
                                  "against its blocks");
    if (groups.front().kind != kv::attention_kind::full)  // group 0 is the staged table: the full one
      std::stable_partition(groups.begin(), groups.end(), [](const kv::attention_group& a) { return a.kind == kv::attention_kind::full; });
    return groups;
  }

  // Bytes of one pool block: block_size tokens of every layer, or of the largest group's
  // layers for a hybrid model (one page size for every group).
  static std::int64_t page_bytes(const simulation_config& c) {
    kv::kv_shape page = c.model;
    if (!c.layer_groups.empty()) {
      page.layers = 0;
      for (const kv::layer_group& g : c.layer_groups) page.layers = std::max(page.layers, g.layers);
    }
    return kv::bytes_per_block(page, c.block_size);
  }

  // Per step, as the step ran: the pool's live blocks and the full-attention group's (read by
  // the sampling hook, which runs after planning), into the hybrid figures.
  void measure_hybrid(const step_record& r) {
    if (cfg_.layer_groups.empty() || hook_.full_blocks < 0) return;
    kv::kv_shape layer = cfg_.model;
    layer.layers = 1;
    const std::int64_t hybrid = std::int64_t{r.kv.live_blocks} * page_bytes(cfg_);
    const std::int64_t full = std::int64_t{hook_.full_blocks} * cfg_.model.layers * kv::bytes_per_block(layer, cfg_.block_size);
    hook_.full_blocks = -1;
    peak_kv_bytes_ = std::max(peak_kv_bytes_, hybrid);
    peak_all_full_kv_bytes_ = std::max(peak_all_full_kv_bytes_, full);
    kv_bytes_sum_ += static_cast<double>(hybrid);
    all_full_bytes_sum_ += static_cast<double>(full);
  }

  // The most distinct full blocks `trace` can write: each request's history, prompt and
  // output (a recomputation writes the same contents). Bounds a tier_store's memory.
  static std::int64_t written_blocks(const std::vector<serving::trace_request>& trace, std::int32_t block_size) {
    std::unordered_map<serving::session_id, std::int64_t> history;
    std::int64_t blocks = 0;
    for (const serving::trace_request& r : trace) {
      std::int64_t tokens = std::int64_t{r.prompt_tokens} + r.output_tokens;
      if (r.conversation != 0) tokens = history[r.conversation] += tokens;
      blocks += tokens / block_size;
    }
    return blocks;
  }

  // simulation_config::tiers below the pool of `e`'s allocator, attached to it; none without.
  static std::unique_ptr<tier_store> attach_tiers(const simulation_config& c, const std::vector<serving::trace_request>& trace,
                                                  engine_type& e) {
    if (c.tiers.empty()) return nullptr;
    if (!c.prefix_caching)
      throw std::invalid_argument("simulate: a cache in tiers keeps the blocks the prefix cache evicts: turn prefix_caching on");
    if (!c.layer_groups.empty())
      throw std::invalid_argument("simulate: a cache in tiers keeps whole prefix chains; a hybrid model's groups are not "
                                  "supported");
    const std::int32_t blocks = e.num_blocks();
    auto store = std::make_unique<tier_store>(c.tiers, std::int64_t{blocks} * c.block_size, c.block_size,
                                              page_bytes(c) / c.block_size, written_blocks(trace, c.block_size));
    e.visit([&store](auto& en) {
      if constexpr (requires { en.blocks().set_lower_tier(store.get()); }) en.blocks().set_lower_tier(store.get());
      else throw std::logic_error("simulate: the engine's allocator takes no lower tier");
    });
    return store;
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
    // A 1-D ladder's graphs are all decode-phase; Gaudi splits the budget between its phases.
    return {.bytes = *c.graph_memory, .prompt_ratio = c.gaudi ? c.prompt_graph_ratio : 0.0,
            .model = engine::graph_cost{.base = c.cost.graph_bytes, .per_unit = c.cost.graph_bytes_per_token}};
  }

  void summarize_latencies(simulation_result& r) const {
    summarize_first(r.requests, cfg_.first_requests, r);
    std::vector<double> ttft;  // in trace order
    for (const request_record& q : r.requests)
      if (q.rejected.empty()) ttft.push_back(q.ttft());
    r.ttft = summarize(std::move(ttft));
    // An hour of traffic has millions of gaps: copied only when they are to be kept.
    r.itl = cfg_.keep_itl_samples ? summarize(r.itl_samples) : summarize(std::move(r.itl_samples));
    if (!cfg_.keep_itl_samples) r.itl_samples = {};
  }

  // The engine's sampling hook: a synthetic token per sequence (nothing was computed).
  // With a hybrid model it also notes the full-attention group's live blocks as the step runs.
  struct synthetic_sampler {
    const engine_type* engine = nullptr;
    std::int32_t full_blocks = -1;  // the step's, until measure_hybrid takes it
    void sample(const serving::scheduled_step& plan, std::span<const std::size_t> entries, std::span<const float>,
                std::span<kv::token_id> out) {
      for (std::size_t k = 0; k < entries.size(); ++k) {
        const serving::step_entry& e = plan.entries[entries[k]];
        out[k] = synthetic_token(e.request, 0, static_cast<std::uint64_t>(e.first + e.count));
      }
      engine->visit([this](const auto& e) {
        if constexpr (requires { e.blocks().live_blocks(0); }) full_blocks = e.blocks().live_blocks(0);  // group 0: full
      });
    }
  };
  // The driver's observer: the tokens of every step (what fit fits a ladder to), and the
  // hybrid figures.
  struct step_tokens {
    simulator* sim = nullptr;
    std::vector<std::int64_t> tokens;
    void stepped(const step_record& r, std::size_t) {
      tokens.push_back(r.tokens);
      sim->measure_hybrid(r);
    }
  };

  const simulation_config& cfg_;
  engine_type engine_;
  synthetic_sampler hook_{&engine_};
  step_tokens tokens_{this, {}};
  std::unique_ptr<tier_store> tiers_;  // the tiers below the pool; before driver_, whose clock prices their loads
  driver_type driver_;
  std::int64_t peak_kv_bytes_ = 0, peak_all_full_kv_bytes_ = 0;
  double kv_bytes_sum_ = 0, all_full_bytes_sum_ = 0;
};

}  // namespace detail

/// Runs `trace` under `config`. Throws std::invalid_argument for a configuration or a
/// request that cannot work (naming what and why).
inline simulation_result simulate(const simulation_config& config, const std::vector<serving::trace_request>& trace) {
  if (trace.empty()) throw std::invalid_argument("simulate: the trace has no requests");
  return detail::simulator(config, trace).run();
}

}  // namespace rungs::planning
