// From the command line to an engine type: each policy the user names is a type (or a value of
// one), and the demo instantiates engine<Model, Buckets, Order, Timing, Allocator, Backend> for
// the combination chosen, as a stack that fixes its policies at compile time would write it
// once. Each with_* function turns one run-time choice into a compile-time one and calls the
// next with it.
#pragma once

#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/engine/phased_buckets.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/bucket_file.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/gaudi_buckets.hpp>
#include <rungs/ladder/gaudi_config.hpp>
#include <rungs/ladder/ladder.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "options.hpp"
#include "serve.hpp"

namespace demo {

namespace gaudi = rungs::gaudi;

/// The bucket space the user chose, built and ready to hand to an engine.
struct bucket_choice {
  using linear_space = decltype(eng::gaudi_buckets(std::declval<const gaudi::bucket_plan<2>&>()));
  using grid3_space = decltype(eng::gaudi_buckets(std::declval<const gaudi::bucket_plan<3>&>()));
  using ladder_space = eng::ladder_buckets<rungs::ladder>;
  std::variant<linear_space, grid3_space, ladder_space, eng::dispatch_buckets> space;
  step_routing routing = step_routing::by_phase;
};

/// Settings the bucket spaces are built from.
struct bucket_settings {
  ladder_kind ladder = ladder_kind::gaudi_linear;
  gaudi::serving_config serving{};
  std::string bucket_file;
  std::vector<rungs::rung_t> rungs;  ///< ladder_kind::explicit_rungs (or read from bucket_file)
  std::int32_t max_capture_size = 0;
  bool dispatch = false;             ///< vLLM V1's (tokens, uniform decode) key over the 1-D ladder
  std::int64_t max_num_seqs = 0;     ///< the scheduler's: the widest uniform-decode graph
};

/// The demo's own defaults for Gaudi's VLLM_*_BUCKET_* variables, used where the environment
/// sets none: sequence buckets every quarter of max_model_len (block-aligned), so the host
/// model captures a few dozen graphs rather than hundreds. Any VLLM_* variable overrides them.
inline std::map<std::string, std::string> demo_bucket_defaults(const bucket_settings& s) {
  const std::int64_t block = s.serving.block_size, len = s.serving.max_model_len;
  const std::int64_t step = std::max<std::int64_t>(block, rungs::blocks_for(len / 4, block) * block);
  std::map<std::string, std::string> d;
  if (s.ladder == ladder_kind::gaudi_linear) {
    for (const char* phase : {"PROMPT", "DECODE"}) {
      const std::string p = std::string("VLLM_") + phase + "_SEQ_BUCKET_";
      d[p + "MIN"] = std::to_string(step);
      d[p + "STEP"] = std::to_string(step);
      d[p + "MAX"] = std::to_string(len);
    }
  }
  return d;
}

/// Builds the bucket space and writes its configuration as the Gaudi logs print it (or the
/// capture sizes, for a 1-D ladder). Throws rungs::ladder_error (an invalid_argument) for a
/// bad configuration.
inline bucket_choice make_buckets(const bucket_settings& s, std::ostream& log) {
  if (s.dispatch && is_gaudi(s.ladder))
    throw std::invalid_argument("--dispatch applies to 1-D ladders only (--ladder vllm, sglang, trtllm or explicit)");
  if (s.ladder == ladder_kind::explicit_rungs || s.ladder == ladder_kind::vllm || s.ladder == ladder_kind::sglang ||
      s.ladder == ladder_kind::trtllm) {
    const auto max = static_cast<rungs::rung_t>(s.max_capture_size);
    const rungs::ladder l = [&]() -> rungs::ladder {
      if (s.ladder == ladder_kind::vllm) return rungs::ladder{rungs::CaptureSizes::vllm(max)};
      if (s.ladder == ladder_kind::sglang) return rungs::ladder{rungs::CaptureSizes::sglang(max)};
      if (s.ladder == ladder_kind::trtllm) return rungs::ladder{rungs::CaptureSizes::trtllm(max)};
      rungs::Explicit<> e{s.rungs};
      if (e.values.empty())
        for (const rungs::bucket<1>& b : rungs::read_bucket_file<1>(s.bucket_file)) e.values.push_back(b[0]);
      return rungs::ladder{e};
    }();
    log << "CUDA graph capture sizes ("
        << (s.ladder == ladder_kind::vllm ? "vllm" : s.ladder == ladder_kind::sglang ? "sglang" : s.ladder == ladder_kind::trtllm ? "trtllm" : "explicit")
        << ", tokens per step, " << l.size() << " rungs): [";
    for (std::size_t i = 0; i < l.size(); ++i) log << (i ? ", " : "") << l[i];
    log << "]; steps of more tokens run eagerly\n";
    if (s.dispatch) {
      eng::dispatch_buckets d(l, {.max_num_seqs = s.max_num_seqs});
      log << "Dispatch key (tokens, uniform decode), vLLM V1's: " << d.decode_graphs()
          << " uniform-decode graphs (one new token per sequence, up to " << s.max_num_seqs << " sequences) and "
          << d.mixed_graphs() << " token-count graphs\n";
      return {std::move(d), step_routing::single};
    }
    return {bucket_choice::ladder_space(l, eng::phase::decode), step_routing::single};
  }
  const std::map<std::string, std::string> defaults = demo_bucket_defaults(s);
  auto getenv = [&](const char* name) -> std::optional<std::string> {
    if (std::string_view(name) == "VLLM_BUCKETING_FROM_FILE" && s.ladder == ladder_kind::gaudi_file) return s.bucket_file;
    if (const char* v = std::getenv(name)) return std::string(v);
    if (auto it = defaults.find(name); it != defaults.end()) return it->second;
    return std::nullopt;
  };
  if (s.ladder == ladder_kind::gaudi_linear) {
    const gaudi::bucket_plan<2> plan =
        gaudi::linear_buckets(gaudi::read_bucket_config(s.serving, gaudi::strategy::linear, getenv), s.serving);
    gaudi::write_log(log, plan);
    return {eng::gaudi_buckets(plan), step_routing::by_phase};
  }
  const gaudi::strategy st = s.ladder == ladder_kind::gaudi_file ? gaudi::strategy::file : gaudi::strategy::exponential;
  const gaudi::bucket_config config = gaudi::read_bucket_config(s.serving, st, getenv);
  const gaudi::bucket_plan<3> plan =
      st == gaudi::strategy::file ? gaudi::file_buckets(config, s.serving) : gaudi::exponential_buckets(config, s.serving);
  gaudi::write_log(log, plan);
  return {eng::gaudi_buckets(plan), step_routing::by_phase};
}

/// The capture order chosen on the command line. `auto` is Gaudi's pair (prompt min_tokens,
/// decode max_bs) for phased buckets and largest-first (every CUDA engine's) for a 1-D ladder.
inline eng::any_order order_for(order_kind k, step_routing routing) {
  if (k == order_kind::automatic) k = routing == step_routing::by_phase ? order_kind::by_phase : order_kind::largest_first;
  switch (k) {
    case order_kind::largest_first: return eng::largest_first{};
    case order_kind::max_bs: return eng::max_bs{};
    case order_kind::min_tokens: return eng::min_tokens{};
    case order_kind::ladder: return eng::ladder_order{};
    default: return eng::by_phase<>{};
  }
}

/// The capture timing chosen on the command line.
inline eng::any_timing timing_for(const demo_options& o) {
  switch (o.timing) {
    case timing_kind::delayed: return eng::delayed{.largest_at_startup = o.largest_at_startup};
    case timing_kind::lazy: return eng::lazy{.eager_uses = o.eager_uses};
    case timing_kind::idle: return eng::idle{};
    default: return eng::startup{};
  }
}

template <class F>
decltype(auto) with_allocator(allocator_kind k, F&& f) {
  if (k == allocator_kind::free_list) return f(std::type_identity<rungs::kv::free_list_allocator>{});
  return f(std::type_identity<rungs::kv::prefix_caching_allocator<>>{});
}

/// Calls f(space, routing, order, timing, std::type_identity<Allocator>): the bucket space and
/// the allocator as types (3 x 2 engine instantiations per backend), the order and the timing
/// as run-time values (eng::any_order, eng::any_timing: one type each).
template <class F>
decltype(auto) with_policies(bucket_choice buckets, const demo_options& o, F&& f) {
  return std::visit(
      [&](auto& space) -> decltype(auto) {
        return with_allocator(o.allocator, [&](auto alloc) -> decltype(auto) {
          return f(std::move(space), buckets.routing, order_for(o.order, buckets.routing), timing_for(o), alloc);
        });
      },
      buckets.space);
}

inline std::string_view name_of(allocator_kind k) { return k == allocator_kind::free_list ? "free-list" : "prefix-caching"; }

}  // namespace demo
