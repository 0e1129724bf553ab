// The demo's command line. Every flag is one row of a table (name, value, help, parser), so
// --help and the parser cannot drift apart. A bad value throws usage_error naming the flag and
// the rule it breaks; main prints it as one line and exits with status 2.
#pragma once

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace demo {

class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class backend_kind { automatic, host, cuda };
enum class ladder_kind { gaudi_linear, gaudi_exponential, gaudi_file, vllm, sglang, trtllm };
enum class order_kind { automatic, largest_first, max_bs, min_tokens, ladder, by_phase };
enum class timing_kind { startup, delayed, lazy, idle };
enum class allocator_kind { prefix_caching, free_list };
enum class clock_kind { wall, virtual_time };

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
  std::optional<std::int32_t> max_capture_size;
  order_kind order = order_kind::automatic;
  timing_kind timing = timing_kind::startup;
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

namespace detail {

inline std::string text(std::string_view s) { return std::string(s); }

inline long long integer(std::string_view flag, std::string_view v) {
  long long x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw usage_error(text(flag) + " = '" + text(v) + "' is not an integer");
  return x;
}

inline std::int32_t count(std::string_view flag, std::string_view v, long long min = 1) {
  const long long x = integer(flag, v);
  if (x < min)
    throw usage_error(text(flag) + " = " + std::to_string(x) + (min == 1 ? " must be positive" : " must be at least " + std::to_string(min)));
  if (x > 2147483647) throw usage_error(text(flag) + " = " + std::to_string(x) + " is too large");
  return static_cast<std::int32_t>(x);
}

inline double real(std::string_view flag, std::string_view v, double min, double max) {
  double x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x))
    throw usage_error(text(flag) + " = '" + text(v) + "' is not a number");
  if (x < min || x > max) {
    std::ostringstream os;
    os << flag << " = " << v << " must lie in [" << min << ", " << max << "]";
    throw usage_error(os.str());
  }
  return x;
}

/// Bytes: an integer, or a number with B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB.
inline std::int64_t bytes(std::string_view flag, std::string_view v) {
  std::size_t split = 0;
  while (split < v.size() && (std::isdigit(static_cast<unsigned char>(v[split])) || v[split] == '.')) ++split;
  const std::string_view number = v.substr(0, split), unit = v.substr(split);
  double x = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), x);
  double scale = 0;
  for (auto [name, s] : {std::pair<std::string_view, double>{"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0},
                         {"GiB", 1073741824.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}})
    if (unit == name) scale = s;
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || scale == 0)
    throw usage_error(text(flag) + " = '" + text(v) + "' is not a size (bytes, or a number with B, KiB, MiB, GiB, KB, MB, GB)");
  const double b = std::floor(x * scale);
  if (b <= 0) throw usage_error(text(flag) + " = '" + text(v) + "' must be positive");
  if (b > 9.0e18) throw usage_error(text(flag) + " = '" + text(v) + "' is too large");
  return static_cast<std::int64_t>(b);
}

template <class E>
E choice(std::string_view flag, std::string_view v, std::initializer_list<std::pair<std::string_view, E>> names) {
  std::string known;
  for (const auto& [name, value] : names) {
    if (v == name) return value;
    known += (known.empty() ? "" : ", ") + text(name);
  }
  throw usage_error(text(flag) + " = '" + text(v) + "' is not one of " + known);
}

}  // namespace detail

struct flag {
  std::string_view name, value, help;
  std::function<void(demo_options&, std::string_view)> set;  // value flags
  std::function<void(demo_options&)> on{};                   // switches
};

inline const std::vector<flag>& flags() {
  using namespace detail;
  static const std::vector<flag> table = {
      {"--backend", "auto|host|cuda", "where the model runs (auto: cuda when this build has it and a GPU is visible)",
       [](demo_options& o, std::string_view v) {
         o.backend = choice<backend_kind>("--backend", v, {{"auto", backend_kind::automatic}, {"host", backend_kind::host},
                                                          {"cuda", backend_kind::cuda}});
       }},
      {"--seed", "N", "weights and prompts (default 1); the same seed gives the same tokens on the host backend",
       [](demo_options& o, std::string_view v) { o.seed = static_cast<std::uint64_t>(integer("--seed", v)); }},
      // workload
      {"--chats", "N", "chat sessions, all started at once by default (host 16, cuda 14: the paged-KV blog's)",
       [](demo_options& o, std::string_view v) { o.chats = count("--chats", v); }},
      {"--turns", "N", "turns per chat, each appended to the same conversation (host 6, cuda 10)",
       [](demo_options& o, std::string_view v) { o.turns = count("--turns", v); }},
      {"--input-tokens", "N", "new prompt tokens per turn, mean (host 32, cuda 150)",
       [](demo_options& o, std::string_view v) { o.input_tokens = count("--input-tokens", v); }},
      {"--output-tokens", "N", "output tokens per turn, mean (host 64, cuda 350)",
       [](demo_options& o, std::string_view v) { o.output_tokens = count("--output-tokens", v); }},
      {"--jitter", "F", "lengths drawn uniformly from mean x [1-F, 1+F] (default 0.25; 0: exact)",
       [](demo_options& o, std::string_view v) { o.jitter = real("--jitter", v, 0, 0.95); }},
      {"--think", "SECONDS", "pause between an answer and the chat's next turn (default 0)",
       [](demo_options& o, std::string_view v) { o.think = real("--think", v, 0, 1e6); }},
      {"--arrival-interval", "SECONDS", "seconds between the first turns of consecutive chats (0: all at once)",
       [](demo_options& o, std::string_view v) { o.arrival_interval = real("--arrival-interval", v, 0, 1e6); }},
      {"--trace", "FILE", "requests from a trace (CSV or JSON lines, see docs/demo.md) instead of the chats",
       [](demo_options& o, std::string_view v) { o.trace = v; }},
      // memory
      {"--memory", "SIZE", "memory for weights, graphs and KV cache, e.g. 8MiB (host 6MiB; cuda 0.9 x free)",
       [](demo_options& o, std::string_view v) { o.memory = bytes("--memory", v); }},
      {"--kv-blocks", "N", "KV blocks in the pool (host: what --memory holds; cuda: the blog's 3584)",
       [](demo_options& o, std::string_view v) { o.kv_blocks = count("--kv-blocks", v); }},
      {"--graph-memory", "F", "share of memory after weights kept for graphs (VLLM_GRAPH_RESERVED_MEM, 0.1)",
       [](demo_options& o, std::string_view v) { o.graph_memory = real("--graph-memory", v, 0, 0.9); }},
      {"--prompt-graph-ratio", "F", "share of graph memory for prompt graphs (VLLM_GRAPH_PROMPT_RATIO, 0.3)",
       [](demo_options& o, std::string_view v) { o.prompt_graph_ratio = real("--prompt-graph-ratio", v, 0, 1); }},
      {"--watermark", "F", "share of KV blocks admission keeps free (default 0.01, vLLM v0's)",
       [](demo_options& o, std::string_view v) { o.watermark = real("--watermark", v, 0, 0.5); }},
      {"--max-model-len", "N", "longest conversation in tokens (default: the workload's longest, rounded up)",
       [](demo_options& o, std::string_view v) { o.max_model_len = count("--max-model-len", v); }},
      // scheduler
      {"--max-num-seqs", "N", "running requests at most (host 16, cuda 64)",
       [](demo_options& o, std::string_view v) { o.max_num_seqs = count("--max-num-seqs", v); }},
      {"--max-num-batched-tokens", "N", "tokens computed per step at most (default max(2048, max-model-len))",
       [](demo_options& o, std::string_view v) { o.max_num_batched_tokens = count("--max-num-batched-tokens", v); }},
      {"--chunked-prefill", "", "mixed prefill and decode steps (vLLM v1; default with a 1-D ladder)", nullptr,
       [](demo_options& o) { o.chunked_prefill = true; }},
      {"--no-chunked-prefill", "", "separate prefill and decode steps (vLLM v0, Gaudi; default with Gaudi buckets)",
       nullptr, [](demo_options& o) { o.chunked_prefill = false; }},
      // engine policies
      {"--ladder", "KIND", "gaudi-linear (host default) | gaudi-exponential | gaudi-file | vllm (cuda default) | sglang | trtllm",
       [](demo_options& o, std::string_view v) {
         o.ladder = choice<ladder_kind>("--ladder", v,
                                        {{"gaudi-linear", ladder_kind::gaudi_linear},
                                         {"gaudi-exponential", ladder_kind::gaudi_exponential},
                                         {"gaudi-file", ladder_kind::gaudi_file},
                                         {"vllm", ladder_kind::vllm},
                                         {"sglang", ladder_kind::sglang},
                                         {"trtllm", ladder_kind::trtllm}});
       }},
      {"--bucket-file", "PATH", "buckets of --ladder gaudi-file (VLLM_BUCKETING_FROM_FILE's format)",
       [](demo_options& o, std::string_view v) { o.bucket_file = v; }},
      {"--max-capture-size", "N", "top rung of a 1-D ladder, in tokens (default: min(2 x max-num-seqs, 512))",
       [](demo_options& o, std::string_view v) { o.max_capture_size = count("--max-capture-size", v); }},
      {"--capture-order", "KIND", "auto (Gaudi buckets: by-phase; 1-D ladders: largest-first) | largest-first | max-bs | min-tokens | ladder | by-phase",
       [](demo_options& o, std::string_view v) {
         o.order = choice<order_kind>("--capture-order", v,
                                      {{"auto", order_kind::automatic},
                                       {"largest-first", order_kind::largest_first},
                                       {"max-bs", order_kind::max_bs},
                                       {"min-tokens", order_kind::min_tokens},
                                       {"ladder", order_kind::ladder},
                                       {"by-phase", order_kind::by_phase}});
       }},
      {"--capture-timing", "KIND", "startup (default) | delayed | lazy | idle",
       [](demo_options& o, std::string_view v) {
         o.timing = choice<timing_kind>("--capture-timing", v,
                                        {{"startup", timing_kind::startup},
                                         {"delayed", timing_kind::delayed},
                                         {"lazy", timing_kind::lazy},
                                         {"idle", timing_kind::idle}});
       }},
      {"--largest-at-startup", "", "delayed timing: capture the largest bucket before the first step", nullptr,
       [](demo_options& o) { o.largest_at_startup = true; }},
      {"--eager-uses", "N", "lazy timing: eager runs in a bucket before it is captured",
       [](demo_options& o, std::string_view v) { o.eager_uses = count("--eager-uses", v, 0); }},
      {"--allocator", "KIND", "prefix-caching (default) | free-list",
       [](demo_options& o, std::string_view v) {
         o.allocator = choice<allocator_kind>("--allocator", v, {{"prefix-caching", allocator_kind::prefix_caching},
                                                                {"free-list", allocator_kind::free_list}});
       }},
      {"--clock", "wall|virtual", "serving time: wall (default) | virtual: each step and capture takes a modeled time, so a run does not depend on the machine's speed (host backend)",
       [](demo_options& o, std::string_view v) {
         o.clock = choice<clock_kind>("--clock", v, {{"wall", clock_kind::wall}, {"virtual", clock_kind::virtual_time}});
       }},
      // output
      {"--status-every", "SECONDS", "serving time between status lines (default 0.5)",
       [](demo_options& o, std::string_view v) { o.status_every = real("--status-every", v, 0.001, 1e6); }},
      {"--json", "FILE", "write the per-step series, every turn and the report as JSON",
       [](demo_options& o, std::string_view v) { o.json = v; }},
      {"--plot", "FILE.png", "draw KV usage, running and waiting over time (python3 with matplotlib)",
       [](demo_options& o, std::string_view v) { o.plot = v; }},
      {"--verify", "N", "recompute N chats with a plain unbatched loop and compare tokens (host: 2)",
       [](demo_options& o, std::string_view v) { o.verify = count("--verify", v, 0); }},
      {"--help", "", "this text", nullptr, [](demo_options& o) { o.help = true; }},
  };
  return table;
}

/// Parses argv (without the program name). Accepts "--flag value" and "--flag=value".
inline demo_options parse_options(const std::vector<std::string_view>& args) {
  demo_options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i], value;
    bool inline_value = false;
    if (const std::size_t eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      inline_value = true;
    }
    const flag* f = nullptr;
    for (const flag& candidate : flags())
      if (candidate.name == a) f = &candidate;
    if (f == nullptr) throw usage_error("unknown option '" + std::string(args[i]) + "' (see --help)");
    if (f->on) {
      if (inline_value) throw usage_error(std::string(a) + " takes no value");
      f->on(o);
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) throw usage_error(std::string(a) + " needs a value (" + std::string(f->value) + ")");
      value = args[++i];
    }
    f->set(o, value);
  }
  return o;
}

inline void print_usage(std::ostream& os, std::string_view program) {
  os << "usage: " << program << " [options]\n\n"
     << "Serves chat sessions with continuous batching through rungs: a scheduler with a waiting queue,\n"
     << "paged KV blocks, an engine that pads batches to buckets and replays captured graphs, and a\n"
     << "small decoder with random weights. docs/demo.md explains every line of the output.\n\n";
  for (const flag& f : flags()) {
    std::string left = "  " + std::string(f.name) + (f.value.empty() ? "" : " " + std::string(f.value));
    os << left << std::string(left.size() < 34 ? 34 - left.size() : 1, ' ') << f.help << "\n";
  }
}

}  // namespace demo
