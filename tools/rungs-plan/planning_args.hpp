// The options rungs-plan simulate and fit share: the workload (--trace FILE or the blog's
// --chat N), the KV geometry and scheduler, the ladder and capture timing, the cost model.
// Every bad value is a usage_error naming the flag and the rule; `rungs-plan simulate --help`
// lists them by group.
#pragma once

#include <rungs/kv/capacity.hpp>
#include <rungs/planning/cost_model.hpp>
#include <rungs/planning/router.hpp>
#include <rungs/planning/simulate.hpp>
#include <rungs/serving/workload.hpp>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "command.hpp"
#include "ladder_args.hpp"
#include "layer_pattern.hpp"

namespace rungs::plan {

/// "a,b,c" into exactly `n` non-negative numbers of at most `max`.
inline std::vector<double> parse_reals(std::string_view flag, std::string_view text, std::size_t n, std::string_view form,
                                       double max) {
  std::vector<double> v;
  for (std::string_view item : cli::split(text)) v.push_back(cli::number_in(flag, item, 0, max));
  if (v.size() != n)
    throw usage_error(std::string(flag) + " takes " + std::string(form) + " (" + std::to_string(n) + " numbers), got " +
                      std::to_string(v.size()));
  return v;
}

/// Most requests a generated workload (--chat N x --turns T) may have.
inline constexpr std::int64_t max_simulated_requests = 1'000'000;

struct simulation_args {
  std::optional<std::string> trace;
  std::optional<serving::chat_workload> chat;
  bool chat_given = false;
  planning::simulation_config config;
  std::string timing = "startup";
  bool largest_at_startup = false;
  std::int64_t eager_uses = 0;
  std::vector<std::string> ladder_words;  // as given to --ladder
  bool batched_tokens_given = false;
  std::string ladder_text = "capture-sizes 512";
  serving::trace_format trace_format = serving::trace_format::detect;
  // The roofline (--gpu, --model, --tp, --cost-presets) and whether --kv-memory was given.
  std::optional<std::string> gpu, model, cost_presets, cost_profile;
  std::int64_t tp = 1;
  bool kv_memory_given = false;
};

/// For synopses: Gaudi's grids as --ladder words (simulate and fit).
inline constexpr std::string_view gaudi_synopsis = "gaudi-linear | gaudi-exponential | gaudi-file PATH";

/// --ladder gaudi-linear, gaudi-exponential or gaudi-file PATH into `c` (true), or false for a
/// 1-D LADDER.
inline bool parse_gaudi(const std::vector<std::string>& words, planning::simulation_config& c) {
  if (words.empty() || !words.front().starts_with("gaudi-")) return false;
  const engine::bucket_kind kind =
      cli::parsed("--ladder", words.front(), engine::parse_bucket_kind, "gaudi-linear, gaudi-exponential, gaudi-file");
  if (!engine::is_gaudi(kind))
    throw usage_error("--ladder = '" + words.front() + "' is not one of gaudi-linear, gaudi-exponential, gaudi-file");
  const std::size_t arity = kind == engine::bucket_kind::gaudi_file ? 2 : 1;
  if (words.size() != arity)
    throw usage_error("--ladder " + words.front() + (arity == 2 ? " takes PATH (1 word), got " : " takes no words, got ") +
                      std::to_string(words.size() - 1));
  c.gaudi = kind;
  if (arity == 2) c.bucket_file = words[1];
  return true;
}

/// Adds the options simulate and fit share, bound to `a` (which must outlive the parse).
/// fit has a --graph-memory of its own (the budget it fits to): it passes `graph_memory` false.
inline void add_simulation_options(CLI::App& app, simulation_args& a, bool graph_memory = true) {
  auto chat = [&a]() -> serving::chat_workload& {
    if (!a.chat) a.chat.emplace();
    return *a.chat;
  };
  planning::simulation_config& c = a.config;
  // workload
  cli::text(app, "--trace FILE", a.trace, "requests from a trace (CSV or JSON lines; see docs/planning.md)")
      ->group("Workload");
  cli::choices<serving::trace_format>(app, "--trace-format detect|rungs|azure|mooncake", a.trace_format,
                                      {{"detect", serving::trace_format::detect},
                                       {"rungs", serving::trace_format::rungs},
                                       {"azure", serving::trace_format::azure},
                                       {"mooncake", serving::trace_format::mooncake}},
                                      "read --trace as this format (default: detected from the header or keys)")
      ->group("Workload");
  cli::flag(app, "--strict", c.strict,
            "a request that can never run (longer than --max-model-len, or more KV blocks than the pool) is an "
            "error; by default it is counted as rejected and the simulation goes on")
      ->group("Workload");
  cli::on(app, "--chat N", [&a, chat](auto f, auto v) { chat().conversations = cli::count(f, v); a.chat_given = true; },
          "the paged-KV blog's chats: N conversations")->group("Workload");
  cli::on(app, "--turns T", [chat](auto f, auto v) { chat().turns = cli::count(f, v); }, "turns per chat")
      ->group("Workload");
  cli::on(app, "--prompt-tokens P", [chat](auto f, auto v) { chat().prompt_tokens = cli::count(f, v); },
          "new prompt tokens per turn, mean")->group("Workload");
  cli::on(app, "--output-tokens O", [chat](auto f, auto v) { chat().output_tokens = cli::count(f, v); },
          "output tokens per turn, mean")->group("Workload");
  cli::on(app, "--jitter F", [chat](auto f, auto v) {
        const double j = cli::number_in(f, v, 0, 1);
        if (j >= 1) throw usage_error(std::string(f) + " = " + std::string(v) + " must be below 1");
        chat().jitter = j;
      }, "lengths drawn from mean x [1-F, 1+F]")->group("Workload");
  cli::on(app, "--think S", [chat](auto f, auto v) { chat().think = cli::number_in(f, v, 0, 1e9); },
          "seconds between an answer and the next turn")->group("Workload");
  cli::on(app, "--interval S", [chat](auto f, auto v) { chat().arrival_interval = cli::number_in(f, v, 0, 1e9); },
          "seconds between the chats' first turns")->group("Workload");
  cli::on(app, "--seed N", [chat](auto f, auto v) { chat().seed = static_cast<std::uint64_t>(cli::non_negative(f, v)); },
          "the workload's random seed")->group("Workload");
  // KV cache
  cli::option(app, "--kv-memory SIZE", c.kv_bytes, cli::positive_size,
              "the KV cache's budget (" + std::string(cli::size_syntax) + "; with --gpu and --model: vLLM's, 90% of "
              "the GPU's memory less the weights)")
      ->group("KV cache")
      ->each([&a](const std::string&) { a.kv_memory_given = true; });
  cli::option(app, "--block-size N", c.block_size, [](std::string_view f, std::string_view v) {
        const std::int64_t b = cli::positive(f, v);
        if (b != 8 && b != 16 && b != 32 && b != 64 && b != 128)
          throw usage_error(std::string(f) + " = " + std::to_string(b) + " is not one of 8, 16, 32, 64, 128");
        return static_cast<std::int32_t>(b);
      }, "tokens per KV block: 8, 16, 32, 64 or 128")->group("KV cache");
  cli::option(app, "--layers N|PATTERN|PRESET", c.model.layers, [&c](std::string_view f, std::string_view v) {
        cli::layer_pattern p = cli::parse_layers(f, v);  // rungs-plan kv's spelling and presets
        c.layer_groups = std::move(p.groups);
        return p.layers;
      }, "the model's layers: " + std::string(cli::layers_forms) + "; a pattern runs the hybrid allocator")->group("KV cache");
  cli::option(app, "--kv-heads N", c.model.kv_heads, cli::positive, "KV heads per layer")->group("KV cache");
  cli::option(app, "--head-dim N", c.model.head_dim, cli::positive, "elements per head")->group("KV cache");
  cli::option(app, "--dtype fp16|bf16|fp8|fp8_e4m3|fp8_e5m2|fp32", c.model.bytes_per_element, [](std::string_view f, std::string_view v) {
        const auto t = rungs::parse_dtype(v);
        if (!t) throw usage_error(std::string(f) + " = '" + std::string(v) + "' is not one of " + std::string(rungs::dtype_names));
        return rungs::bytes_per_element(*t);
      }, "the KV cache's element type")->group("KV cache");
  cli::option(app, "--watermark F", c.watermark, [](std::string_view f, std::string_view v) {
        const double w = cli::number_in(f, v, 0, 1);
        if (w >= 1) throw usage_error(std::string(f) + " = " + std::string(v) + " must be below 1");
        return w;
      }, "share of KV blocks admission keeps free")->group("KV cache");
  cli::flag(app, "--prefix-caching", c.prefix_caching, "reuse cached prompt blocks")->group("KV cache");
  // scheduler
  cli::option(app, "--max-num-seqs N", c.scheduler.max_num_seqs, cli::count, "running requests at most")->group("Scheduler");
  cli::on(app, "--max-num-batched-tokens N", [&a](auto f, auto v) {
        a.config.scheduler.max_num_batched_tokens = cli::count(f, v);
        a.batched_tokens_given = true;
      }, "tokens computed per step at most (default 2048; without chunked prefill max(2048, max-model-len))")
      ->group("Scheduler");
  cli::option(app, "--max-model-len N", c.max_model_len, cli::count, "longest request in tokens")
      ->group("Scheduler");
  app.add_flag_callback("--no-chunked-prefill", [&c] { c.scheduler.chunked_prefill = false; },
                        "separate prefill steps (vLLM v0, Gaudi)")->group("Scheduler");
  cli::flag(app, "--reserve-max-model-len", c.scheduler.reserve_max_model_len,
            "each request reserves max_model_len tokens of KV")->group("Scheduler");
  app.add_flag_callback("--admit-first-chunk", [&c] { c.scheduler.admit_whole_prompt = false; },
                        "admit a request once its first chunk fits (vLLM v1)")->group("Scheduler");
  // graphs
  cli::words(app, "--ladder LADDER", a.ladder_words,
             std::string(ladder_synopsis.substr(9)) + " | " + std::string(gaudi_synopsis) +
                 " (Gaudi's prompt and decode grids, from the scheduler and KV settings and the VLLM_*_BUCKET_* "
                 "variables; docs/planning.md)")
      ->group("Graphs");
  cli::flag(app, "--dispatch", c.dispatch,
            "key graphs on (tokens, uniform decode) as vLLM V1 does: steps where every sequence decodes one token "
            "replay uniform-decode graphs (up to --max-num-seqs), other steps the ladder's; 1-D ladders only")
      ->group("Graphs");
  cli::option(app, "--timing,--capture-timing startup|delayed|lazy|idle|all", a.timing,
              [](std::string_view f, std::string_view v) {
                if (v != "all") (void)cli::parsed(f, v, engine::parse_timing, std::string(engine::timing_names) + ", all");
                return std::string(v);
              }, "when graphs are captured (all: the four side by side; --capture-timing: the demo's name)")
      ->group("Graphs");
  cli::option(app, "--order,--capture-order largest-first|max-bs|min-tokens|ladder|by-phase", c.order,
              [](std::string_view f, std::string_view v) { return cli::parsed(f, v, engine::parse_order, engine::order_names); },
              "the capture order (default largest-first, by-phase over Gaudi's grids; min-tokens and ladder: smallest "
              "first; --capture-order: the demo's name)")
      ->group("Graphs");
  cli::flag(app, "--largest-at-startup", a.largest_at_startup, "delayed timing: capture the largest rung at startup")
      ->group("Graphs");
  cli::option(app, "--eager-uses N", a.eager_uses, cli::non_negative, "lazy timing: eager runs before a capture")
      ->group("Graphs");
  if (graph_memory) cli::option(app, "--graph-memory BYTES", c.graph_memory, cli::size, "graph memory budget")->group("Graphs");
  // cost model
  cli::on(app, "--step-cost WEIGHTS_S,PER_TOKEN_S,PER_CONTEXT_TOKEN_S,EAGER_S", [&c](auto f, auto v) {
        const auto w = parse_reals(f, v, 4, "WEIGHTS_S,PER_TOKEN_S,PER_CONTEXT_TOKEN_S,EAGER_S", 1e6);
        c.cost.weights_seconds = w[0];
        c.cost.seconds_per_token = w[1];
        c.cost.seconds_per_context_token = w[2];
        c.cost.eager_overhead_seconds = w[3];
        if (w[0] + w[1] <= 0) throw usage_error("--step-cost: WEIGHTS_S or PER_TOKEN_S must be positive (a step takes time)");
      }, "a step's seconds: weights + tokens + context tokens, plus eager overhead")->group("Cost model");
  cli::on(app, "--capture-cost S,PER_TOKEN_S", [&c](auto f, auto v) {
        const auto w = parse_reals(f, v, 2, "S,PER_TOKEN_S", 1e6);
        c.cost.capture_seconds = w[0];
        c.cost.capture_seconds_per_token = w[1];
      }, "a capture's seconds")->group("Cost model");
  cli::on(app, "--graph-cost BYTES,PER_TOKEN_BYTES", [&c](auto f, auto v) {
        const std::vector<std::string_view> parts = cli::split(v);
        if (parts.size() != 2)
          throw usage_error(std::string(f) + " takes BYTES,PER_TOKEN_BYTES (2 numbers), got " + std::to_string(parts.size()));
        c.cost.graph_bytes = cli::size(f, parts[0]);
        c.cost.graph_bytes_per_token = cli::size(f, parts[1]);
      }, "a graph's memory: BYTES + PER_TOKEN_BYTES x rung")->group("Cost model");
  // The roofline from presets (docs/planning.md, "The cost model").
  CLI::Option* gpu = cli::text(app, "--gpu NAME", a.gpu, "the roofline's GPU: h100-sxm, h200, a100-80gb, l40s, or one "
                                                            "from --cost-presets")->group("Cost model");
  CLI::Option* model = cli::text(app, "--model NAME", a.model, "the roofline's model: llama-3-8b, llama-3-70b, mistral-7b, "
                                                                "qwen2.5-7b, qwen2.5-72b, or one from --cost-presets; sets "
                                                                "the KV geometry")->group("Cost model");
  cli::option(app, "--tp N", a.tp, [](std::string_view f, std::string_view v) { return cli::integer_in(f, v, 1, 1024); },
              "tensor-parallel degree of each replica (default 1)")->group("Cost model");
  cli::text(app, "--cost-presets FILE", a.cost_presets, "more GPUs and models, or overrides ('gpu NAME key=value...', "
                                                         "'model NAME key=value...' lines)")->group("Cost model");
  cli::text(app, "--cost-profile datasheet|calibrated", a.cost_profile,
            "the roofline's profile: datasheet (default: datasheet efficiencies, no overheads) or calibrated (fitted "
            "to published serving measurements: kernel efficiencies, CPU time per step and per sequence, tensor "
            "parallelism's all-reduces; docs/planning.md, \"Fidelity\")")->group("Cost model");
  gpu->needs(model);
  model->needs(gpu);
  for (const char* other : {"--step-cost"}) gpu->excludes(app.get_option(other));
  for (const char* other : {"--layers", "--kv-heads", "--head-dim", "--dtype"}) model->excludes(app.get_option(other));
}

/// --router and --max-imbalance (simulate --replicas and plan-fleet).
struct router_args {
  planning::router_options options;
  bool router_given = false, imbalance_given = false;
};

/// Adds --router and --max-imbalance, bound to `r` (which must outlive the parse).
inline void add_router_options(CLI::App& app, router_args& r) {
  cli::choices<planning::router>(app, "--router round-robin|least-loaded|prefix-affinity", r.options.kind,
                                 {{"round-robin", planning::router::round_robin},
                                  {"least-loaded", planning::router::least_loaded},
                                  {"prefix-affinity", planning::router::prefix_affinity}},
                                 "how requests are sent to replicas (default round-robin; prefix-affinity needs "
                                 "--prefix-caching; see docs/planning.md)")
      ->group("Fleet")
      ->each([&r](const std::string&) { r.router_given = true; });
  cli::option(app, "--max-imbalance N", r.options.max_imbalance, cli::non_negative,
              "prefix-affinity: a replica with more than N outstanding requests above the least-loaded one's is "
              "overloaded and skipped (default 4)")
      ->group("Fleet")
      ->each([&r](const std::string&) { r.imbalance_given = true; });
}

/// Checks --router and --max-imbalance against the simulation's flags.
inline void check_router_args(const router_args& r, const simulation_args& a) {
  if (r.options.kind == planning::router::prefix_affinity && !a.config.prefix_caching)
    throw usage_error("--router prefix-affinity routes by the replicas' prefix caches: add --prefix-caching");
  if (r.imbalance_given && r.options.kind != planning::router::prefix_affinity)
    throw usage_error("--max-imbalance applies to --router prefix-affinity");
}

/// Checks the combination; call after the last flag.
inline void check_simulation_args(simulation_args& a) {
  if (a.trace_format != serving::trace_format::detect && !a.trace) throw usage_error("--trace-format applies to --trace FILE");
  if (a.tp != 1 && !a.gpu) throw usage_error("--tp applies to the roofline: add --gpu NAME --model NAME");
  if (a.cost_presets && !a.gpu) throw usage_error("--cost-presets applies to the roofline: add --gpu NAME --model NAME");
  if (a.cost_profile && !a.gpu) throw usage_error("--cost-profile applies to the roofline: add --gpu NAME --model NAME");
  if (a.gpu) {
    planning::cost_presets presets;
    if (a.cost_presets) {
      std::ifstream in(*a.cost_presets, std::ios::binary);
      if (!in) throw usage_error("--cost-presets " + *a.cost_presets + ": cannot open");
      std::ostringstream text;
      text << in.rdbuf();
      try {
        planning::read_cost_presets(text.str(), *a.cost_presets, presets);
      } catch (const std::invalid_argument& e) {
        throw usage_error(std::string("--cost-presets: ") + e.what());
      }
    }
    const planning::cost_profile* profile = nullptr;
    try {
      profile = &planning::cost_profile_named(a.cost_profile.value_or("datasheet"));
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--cost-profile: ") + e.what());
    }
    try {
      const planning::gpu_spec& g = presets.gpu(*a.gpu);
      const planning::model_spec& m = presets.model(*a.model);
      a.config.cost = planning::roofline_cost(g, m, a.tp, a.config.cost, *profile);
      a.config.model = planning::kv_geometry(m, a.tp);
      if (!a.kv_memory_given)
        a.config.kv_bytes = kv::kv_memory({.total_bytes = g.memory_bytes, .weights_bytes = planning::weight_bytes(m, a.tp)});
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--gpu/--model: ") + e.what());
    }
  }
  if (!a.ladder_words.empty()) {
    if (!parse_gaudi(a.ladder_words, a.config)) a.config.ladder = parse_ladder(a.ladder_words);
    a.ladder_text.clear();
    for (const std::string& w : a.ladder_words) a.ladder_text += (a.ladder_text.empty() ? "" : " ") + w;
  }
  if (a.config.dispatch && a.config.gaudi)
    throw usage_error("--dispatch applies to 1-D ladders only; --ladder " + a.ladder_text + " has Gaudi's own grids");
  if (a.trace && a.chat) throw usage_error("--trace and --chat are alternatives: give one workload");
  if (!a.trace && !a.chat) throw usage_error("a workload is needed: --trace FILE or --chat N");
  if (a.chat && a.chat_given) {
    // The workload is generated before the simulator checks it: bound it here.
    const serving::chat_workload& w = *a.chat;
    const std::int64_t requests = std::int64_t{w.conversations} * w.turns;
    if (requests > max_simulated_requests)
      throw usage_error("--chat " + std::to_string(w.conversations) + " x --turns " + std::to_string(w.turns) + " = " +
                        std::to_string(requests) + " requests; at most " + std::to_string(max_simulated_requests) +
                        " are simulated");
    for (auto [flag, tokens] : {std::pair<const char*, std::int32_t>{"--prompt-tokens", w.prompt_tokens},
                                {"--output-tokens", w.output_tokens}})
      if (static_cast<double>(tokens) * (1 - w.jitter) > a.config.max_model_len)
        throw usage_error(std::string(flag) + " = " + std::to_string(tokens) + " is longer than --max-model-len = " +
                          std::to_string(a.config.max_model_len) + ": no turn could run");
  }
  if (!a.config.scheduler.chunked_prefill && !a.batched_tokens_given)  // as the demo: a whole prompt fits a step
    a.config.scheduler.max_num_batched_tokens = std::max(a.config.scheduler.max_num_batched_tokens,
                                                         a.config.max_model_len);
  if (!a.config.gaudi)
    check_graph_memory("--graph-cost", a.config.cost.graph_bytes, a.config.cost.graph_bytes_per_token, a.config.ladder);
  if (a.chat && !a.chat_given)
    throw usage_error("--turns, --prompt-tokens, --output-tokens, --jitter, --think, --interval and --seed describe "
                      "--chat's workload: add --chat N");
  if (a.largest_at_startup && a.timing != "delayed" && a.timing != "all")
    throw usage_error("--largest-at-startup applies to --timing delayed");
  if (a.eager_uses != 0 && a.timing != "lazy" && a.timing != "all")
    throw usage_error("--eager-uses applies to --timing lazy");
  if (!a.config.scheduler.chunked_prefill && a.config.scheduler.max_num_batched_tokens < a.config.max_model_len)
    throw usage_error("--max-num-batched-tokens = " + std::to_string(a.config.scheduler.max_num_batched_tokens) +
                      " must be at least --max-model-len = " + std::to_string(a.config.max_model_len) +
                      " with --no-chunked-prefill");
}

/// The workload and configuration in words: the first line of simulate's and plan-fleet's reports.
inline std::string describe(const simulation_args& a, std::size_t requests, std::int32_t num_blocks) {
  const planning::simulation_config& c = a.config;
  std::ostringstream os;
  const std::string order =
      c.order ? c.order->name() : c.gaudi ? engine::any_order(engine::by_phase<>{}).name() : std::string("largest-first");
  os << requests << " requests; " << num_blocks << " KV blocks of " << c.block_size << " tokens; ladder "
     << a.ladder_text << " ("
     << (c.gaudi ? std::string("Gaudi's prompt and decode grids") : std::to_string(c.ladder.size()) + " rungs")
     << (c.dispatch ? ", dispatch key" : "") << ", captured " << order << "); max_num_seqs " << c.scheduler.max_num_seqs << ", "
     << (c.scheduler.chunked_prefill ? "chunked prefill of " + std::to_string(c.scheduler.max_num_batched_tokens) + " tokens"
                                     : std::string("separate prefill steps"))
     << (c.scheduler.reserve_max_model_len ? ", each request reserving max_model_len" : "")
     << (c.scheduler.admit_whole_prompt ? "" : ", admission on the first chunk")
     << (c.prefix_caching ? ", prefix caching" : "");
  if (!c.layer_groups.empty()) {  // a hybrid model: its groups, as --layers spells them
    os << "; layers";
    for (const kv::layer_group& g : c.layer_groups) os << " " << cli::describe(g);
  }
  return os.str();
}

/// The engine's timing policy for a name.
inline planning::any_timing timing_policy(const simulation_args& a, std::string_view name) {
  planning::any_timing t = engine::parse_timing(name);  // checked when --timing was read
  if (std::holds_alternative<engine::delayed>(t.policy())) return engine::delayed{.largest_at_startup = a.largest_at_startup};
  if (std::holds_alternative<engine::lazy>(t.policy())) return engine::lazy{.eager_uses = a.eager_uses};
  return t;
}

/// The workload's requests.
inline std::vector<serving::trace_request> load_workload(const simulation_args& a) {
  if (a.trace) return serving::read_trace(*a.trace, a.trace_format);
  return serving::generate_chat(*a.chat);
}

}  // namespace rungs::plan
