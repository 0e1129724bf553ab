// The demo's command line, on CLI11 (tools/cli/command_line.hpp, shared with rungs-plan): one
// line per flag (name, value, help, parser) in define_options, so --help and the parser cannot
// drift apart. A bad value throws usage_error naming the flag and the rule it breaks; main
// prints it as one line and exits with status 2.
#pragma once

#include <rungs/engine/any_buckets.hpp>
#include <rungs/engine/any_engine.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "command_line.hpp"
#include "layer_pattern.hpp"

namespace demo {

using usage_error = rungs::cli::usage_error;

enum class backend_kind { automatic, host, cuda };
using ladder_kind = rungs::engine::bucket_kind;  // --ladder names the engine's bucket space
using rungs::engine::is_gaudi;
using rungs::engine::allocator_kind;
enum class clock_kind { wall, virtual_time };
/// An attention kernel of the CUDA backend (--decode-kernel, --prefill-kernel): the planner's
/// choice, or forced (rungs::attention::plan_options::kernel).
enum class kernel_choice { automatic, simt, tensor_cores };
using decode_kernel_kind = kernel_choice;

/// Every setting. Unset optionals take the backend's default (see resolve_defaults in main).
struct demo_options {
  backend_kind backend = backend_kind::automatic;
  std::uint64_t seed = 1;
  // workload: the paged-KV blog's chats, or a trace file
  std::optional<std::int32_t> chats, turns, input_tokens, output_tokens;
  double jitter = 0.25;
  double think = 0;
  double arrival_interval = 0;
  std::string trace;
  // memory and KV cache
  std::optional<std::int64_t> memory;  ///< bytes for weights, KV cache and graphs
  std::optional<std::int32_t> kv_blocks;
  std::optional<rungs::cli::layer_pattern> layers;  ///< --layers: a hybrid model's attention groups
  double graph_memory = 0.1;          ///< share of usable memory reserved for graphs (VLLM_GRAPH_RESERVED_MEM)
  double prompt_graph_ratio = 0.3;    ///< share of graph memory for prompt graphs (VLLM_GRAPH_PROMPT_RATIO)
  double watermark = 0.01;            ///< share of blocks admission keeps free (vLLM v0's 1%)
  std::optional<std::int32_t> max_model_len;
  // scheduler
  std::optional<std::int32_t> max_num_seqs, max_num_batched_tokens;
  std::optional<bool> chunked_prefill;
  // engine policies
  std::optional<ladder_kind> ladder;
  std::string bucket_file;
  std::vector<std::int64_t> rungs;  ///< --ladder explicit
  std::optional<std::int32_t> max_capture_size;
  bool dispatch = false;  ///< vLLM V1's (tokens, uniform decode) key over the 1-D ladder
  decode_kernel_kind decode_kernel = decode_kernel_kind::automatic;  ///< --backend cuda with --dispatch
  kernel_choice prefill_kernel = kernel_choice::automatic;           ///< --backend cuda with --dispatch
  std::optional<rungs::dtype> kv_cache_dtype;  ///< --kv-cache-dtype; empty (auto): the model's dtype
  std::optional<rungs::engine::any_order> order;  ///< none (auto): the engine's default
  rungs::engine::any_timing timing{};              ///< its parameters from the two flags below
  bool largest_at_startup = false;
  std::int64_t eager_uses = 0;
  allocator_kind allocator = allocator_kind::prefix_caching;
  clock_kind clock = clock_kind::wall;
  // output
  double status_every = 0.5;
  std::string json, plot;
  std::optional<std::int32_t> verify;  ///< chats to check against the plain reference loop
  bool help = false;
};

inline constexpr std::string_view demo_description =
    "Serves chat sessions with continuous batching through rungs: a scheduler with a waiting queue,\n"
    "paged KV blocks, an engine that pads batches to buckets and replays captured graphs, and a\n"
    "small decoder with random weights. docs/demo.md explains every line of the output.";

/// Adds every flag to `app`, bound to `o` (which must outlive the parse).
inline void define_options(CLI::App& app, demo_options& o) {
  using namespace rungs::cli;
  const auto real = [](double min, double max) {
    return [min, max](std::string_view f, std::string_view v) { return number_in(f, v, min, max); };
  };
  choices<backend_kind>(app, "--backend auto|host|cuda", o.backend,
                        {{"auto", backend_kind::automatic}, {"host", backend_kind::host}, {"cuda", backend_kind::cuda}},
                        "where the model runs (auto: cuda when this build has it and a GPU is visible)");
  option(app, "--seed N", o.seed, [](std::string_view f, std::string_view v) { return static_cast<std::uint64_t>(non_negative(f, v)); },
         "weights and prompts (default 1); the same seed gives the same tokens on the host backend");
  // workload
  option(app, "--chats N", o.chats, count, "chat sessions, all started at once by default (host 16, cuda 14: the paged-KV blog's)");
  option(app, "--turns N", o.turns, count, "turns per chat, each appended to the same conversation (host 6, cuda 10)");
  option(app, "--input-tokens N", o.input_tokens, count, "new prompt tokens per turn, mean (host 32, cuda 150)");
  option(app, "--output-tokens N", o.output_tokens, count, "output tokens per turn, mean (host 64, cuda 350)");
  option(app, "--jitter F", o.jitter, real(0, 0.95), "lengths drawn uniformly from mean x [1-F, 1+F] (default 0.25; 0: exact)");
  option(app, "--think SECONDS", o.think, real(0, 1e6), "pause between an answer and the chat's next turn (default 0)");
  option(app, "--arrival-interval SECONDS", o.arrival_interval, real(0, 1e6),
         "seconds between the first turns of consecutive chats (0: all at once)");
  text(app, "--trace FILE", o.trace, "requests from a trace (CSV or JSON lines, see docs/demo.md) instead of the chats");
  // memory
  option(app, "--memory SIZE", o.memory, positive_size,
         "memory for weights, graphs and KV cache, e.g. 8MiB (host 6MiB; cuda 0.9 x free); " + std::string(size_syntax));
  option(app, "--kv-blocks N", o.kv_blocks, count, "KV blocks in the pool (host: what --memory holds; cuda: the blog's 3584)");
  option(app, "--layers N|PATTERN|PRESET", o.layers, rungs::cli::parse_layers,
         "the model's attention per layer, as rungs-plan kv spells it (host: 2 layers, e.g. full:1,sliding16:1, gpt-oss "
         "style; cuda: 8, e.g. full:4,sliding128:4; cuda-sim: 1 to 4); a pattern serves a hybrid model from one pool "
         "(kv::hybrid_allocator)");
  option(app, "--graph-memory F", o.graph_memory, real(0, 0.9),
         "share of memory after weights kept for graphs (VLLM_GRAPH_RESERVED_MEM, 0.1)");
  option(app, "--prompt-graph-ratio F", o.prompt_graph_ratio, real(0, 1),
         "share of graph memory for prompt graphs (VLLM_GRAPH_PROMPT_RATIO, 0.3)");
  option(app, "--watermark F", o.watermark, real(0, 0.5), "share of KV blocks admission keeps free (default 0.01, vLLM v0's)");
  option(app, "--kv-cache-dtype TYPE", o.kv_cache_dtype,
         [](std::string_view f, std::string_view v) -> std::optional<rungs::dtype> {
           if (v == "auto") return std::nullopt;
           if (const std::optional<rungs::dtype> t = rungs::parse_dtype(v)) return t;
           throw usage_error(std::string(f) + " = '" + std::string(v) + "' is not one of auto, " +
                             std::string(rungs::dtype_names));
         },
         "KV cache element type (vLLM's --kv-cache-dtype; fp8 is fp8_e4m3, scale 1): auto (default: the model's, host "
         "fp32, cuda bf16) | host: fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2 | cuda: bf16, fp8, fp8_e4m3, fp8_e5m2");
  option(app, "--max-model-len N", o.max_model_len, count, "longest conversation in tokens (default: the workload's longest, rounded up)");
  // scheduler
  option(app, "--max-num-seqs N", o.max_num_seqs, count, "running requests at most (host 16, cuda 64)");
  option(app, "--max-num-batched-tokens N", o.max_num_batched_tokens, count,
         "tokens computed per step at most (default max(2048, max-model-len))");
  app.add_flag_callback("--chunked-prefill", [&o] { o.chunked_prefill = true; },
                        "mixed prefill and decode steps (vLLM v1; default with a 1-D ladder)");
  app.add_flag_callback("--no-chunked-prefill", [&o] { o.chunked_prefill = false; },
                        "separate prefill and decode steps (vLLM v0, Gaudi; default with Gaudi buckets)");
  // engine policies
  choices<ladder_kind>(app, "--ladder KIND", o.ladder,
                       {{"gaudi-linear", ladder_kind::gaudi_linear}, {"gaudi-exponential", ladder_kind::gaudi_exponential},
                        {"gaudi-file", ladder_kind::gaudi_file}, {"vllm", ladder_kind::vllm},
                        {"sglang", ladder_kind::sglang}, {"trtllm", ladder_kind::trtllm},
                        {"explicit", ladder_kind::explicit_rungs}},
                       "gaudi-linear (host default) | gaudi-exponential | gaudi-file | vllm (cuda default) | sglang | trtllm "
                       "| explicit (--rungs, or a 1-D --bucket-file as rungs-plan fit writes)");
  text(app, "--bucket-file PATH", o.bucket_file,
       "buckets of --ladder gaudi-file (VLLM_BUCKETING_FROM_FILE's format) or, 1-D, of --ladder explicit");
  option(app, "--rungs R1,R2,...", o.rungs, [](std::string_view f, std::string_view v) {
    std::vector<std::int64_t> r;
    for (std::string_view item : split(v)) r.push_back(positive(f, item));
    return r;
  }, "the rungs of --ladder explicit, in tokens per step (rungs-plan fit --explicit prints them)");
  option(app, "--max-capture-size N", o.max_capture_size, count, "top rung of the vllm, sglang and trtllm ladders, in tokens (default: min(2 x max-num-seqs, 512))");
  app.add_flag("--dispatch", o.dispatch,
               "key graphs on (tokens, uniform decode) as vLLM V1 does: steps where every sequence decodes one "
               "token replay full decode graphs (cuda: the decode kernel), other steps the ladder's token-count "
               "graphs; 1-D ladders only");
  const std::vector<std::pair<std::string_view, kernel_choice>> kernels = {
      {"auto", kernel_choice::automatic}, {"simt", kernel_choice::simt}, {"tensor-cores", kernel_choice::tensor_cores}};
  choices<kernel_choice>(app, "--decode-kernel auto|simt|tensor-cores", o.decode_kernel, kernels,
                         "cuda backend, --dispatch: the attention kernel of uniform-decode graphs: auto (default; the "
                         "planner's: tensor cores at GQA groups of 4 and more) | simt | tensor-cores");
  choices<kernel_choice>(app, "--prefill-kernel auto|simt|tensor-cores", o.prefill_kernel, kernels,
                         "cuda backend, --dispatch: the attention kernel of every other step (prefill, mixed): auto "
                         "(default; the planner's: tensor cores at head dims 64 and 128) | simt | "
                         "tensor-cores");
  // The policies' names are the library's (engine::parse_order, parse_timing); --order and
  // --timing are rungs-plan's names for the same flags.
  option(app, "--capture-order,--order KIND", o.order,
         [](std::string_view f, std::string_view v) -> std::optional<rungs::engine::any_order> {
           if (v == "auto") return std::nullopt;
           return parsed(f, v, rungs::engine::parse_order, "auto, " + std::string(rungs::engine::order_names));
         },
         "auto (Gaudi buckets: by-phase; 1-D ladders: largest-first) | largest-first | max-bs | min-tokens | ladder | by-phase");
  option(app, "--capture-timing,--timing KIND", o.timing,
         [](std::string_view f, std::string_view v) { return parsed(f, v, rungs::engine::parse_timing, rungs::engine::timing_names); },
         "startup (default) | delayed | lazy | idle");
  flag(app, "--largest-at-startup", o.largest_at_startup, "delayed timing: capture the largest bucket before the first step");
  option(app, "--eager-uses N", o.eager_uses, non_negative, "lazy timing: eager runs in a bucket before it is captured");
  choices<allocator_kind>(app, "--allocator KIND", o.allocator,
                          {{"prefix-caching", allocator_kind::prefix_caching}, {"free-list", allocator_kind::free_list}},
                          "prefix-caching (default) | free-list");
  choices<clock_kind>(app, "--clock wall|virtual", o.clock, {{"wall", clock_kind::wall}, {"virtual", clock_kind::virtual_time}},
                      "serving time: wall (default) | virtual: each step and capture takes a modeled time, so a run does "
                      "not depend on the machine's speed (host backend)");
  // output
  option(app, "--status-every SECONDS", o.status_every, real(0.001, 1e6), "serving time between status lines (default 0.5)");
  text(app, "--json FILE", o.json, "write the per-step series, every turn and the report as JSON");
  text(app, "--plot FILE.png", o.plot, "draw KV usage, running and waiting over time (python3 with matplotlib)");
  option(app, "--verify N", o.verify, [](std::string_view f, std::string_view v) {
    return static_cast<std::int32_t>(integer_in(f, v, 0, 2147483647));
  }, "recompute N chats with a plain unbatched loop of the backend's model and compare tokens (host: 2, cuda: 0)");
}

/// Calls f(app) with the demo's parser bound to `o` (a CLI::App is neither copied nor moved).
template <class F>
auto with_parser(std::string_view program, demo_options& o, F f) {
  CLI::App app{std::string(demo_description), std::string(program)};
  define_options(app, o);
  // As before CLI11: a flag given twice takes its last value, so a command line can override
  // an earlier one (scripts and the tests append to a base list).
  for (CLI::Option* opt : app.get_options()) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return f(app);
}

/// Parses argv (without the program name). Accepts "--flag value" and "--flag=value".
inline demo_options parse_options(const std::vector<std::string_view>& args) {
  demo_options o;
  o.help = !with_parser("serve_demo", o, [&](CLI::App& app) {
    if (!rungs::cli::parse(app, args, {.unknown = "unknown option '{}' (see --help)"})) return false;
    // A flag that does nothing in the chosen configuration is an error, not silently ignored.
    if (app.count("--eager-uses") && !std::holds_alternative<rungs::engine::lazy>(o.timing.policy()))
      throw usage_error("--eager-uses applies to --capture-timing lazy only");
    if (o.largest_at_startup && !std::holds_alternative<rungs::engine::delayed>(o.timing.policy()))
      throw usage_error("--largest-at-startup applies to --capture-timing delayed only");
    if (!o.bucket_file.empty() && o.ladder != ladder_kind::gaudi_file && o.ladder != ladder_kind::explicit_rungs)
      throw usage_error("--bucket-file applies to --ladder gaudi-file and explicit only");
    if (!o.rungs.empty() && o.ladder != ladder_kind::explicit_rungs)
      throw usage_error("--rungs applies to --ladder explicit only");
    if (app.count("--decode-kernel") && !o.dispatch)
      throw usage_error("--decode-kernel applies to --dispatch runs only (their uniform-decode graphs run the decode kernel)");
    if (app.count("--prefill-kernel") && !o.dispatch)
      throw usage_error("--prefill-kernel applies to --dispatch runs only (as --decode-kernel: the run names both kernels)");
    if (o.dispatch && o.ladder && is_gaudi(*o.ladder))
      throw usage_error("--dispatch applies to 1-D ladders only (--ladder vllm, sglang, trtllm or explicit)");
    if (o.max_capture_size && o.ladder && !rungs::engine::is_capture_size_preset(*o.ladder))
      throw usage_error("--max-capture-size applies to --ladder vllm, sglang and trtllm only");
    if (o.ladder == ladder_kind::explicit_rungs && o.rungs.empty() == o.bucket_file.empty())
      throw usage_error("--ladder explicit needs one of --rungs R1,R2,... and --bucket-file PATH");
    return true;
  });
  return o;
}

inline void print_usage(std::ostream& os, std::string_view program) {
  demo_options o;
  os << with_parser(program, o, [](CLI::App& app) { return app.help(); });
}

}  // namespace demo
