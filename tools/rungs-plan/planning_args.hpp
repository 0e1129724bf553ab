// The options rungs-plan simulate and fit share: the workload (--trace FILE or the blog's
// --chat N), the KV geometry and scheduler, the ladder and capture timing, the cost model.
// Every bad value is a usage_error naming the flag and the rule.
#pragma once

#include <rungs/kv/capacity.hpp>
#include <rungs/planning/simulate.hpp>
#include <rungs/serving/workload.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {

inline constexpr std::string_view simulation_flags_help =
    "workload: --trace FILE | --chat N [--turns T] [--prompt-tokens P] [--output-tokens O] [--jitter F] [--think S] "
    "[--interval S] [--seed N]; KV: [--kv-memory BYTES] [--block-size N] [--layers N] [--kv-heads N] [--head-dim N] "
    "[--dtype fp16|bf16|fp8|fp32] [--watermark F] [--prefix-caching]; scheduler: [--max-num-seqs N] "
    "[--max-num-batched-tokens N] [--max-model-len N] [--no-chunked-prefill] [--reserve-max-model-len] [--admit-first-chunk]; graphs: "
    "[--ladder LADDER...] [--timing startup|delayed|lazy|idle] [--largest-at-startup] [--eager-uses N] "
    "[--graph-memory BYTES]; cost: [--step-cost WEIGHTS_S,PER_TOKEN_S,PER_CONTEXT_TOKEN_S,EAGER_S] "
    "[--capture-cost S,PER_TOKEN_S] [--graph-cost BYTES,PER_TOKEN_BYTES]";

/// A size in bytes: an integer with an optional K, M, G, KiB, MiB or GiB suffix (powers of 1024).
inline std::int64_t parse_bytes(std::string_view flag, std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "GiB") shift = 30;
  if (digits == 0 || shift < 0)
    throw usage_error(std::string(flag) + " = '" + std::string(text) +
                      "' is not a size (an integer with an optional K, M, G, KiB, MiB or GiB suffix)");
  const long long v = parse_integer(flag, text.substr(0, digits));
  if (v > (INT64_MAX >> shift)) throw usage_error(std::string(flag) + " = '" + std::string(text) + "' is out of range");
  return static_cast<std::int64_t>(v) << shift;
}

inline double parse_real(std::string_view flag, std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    throw usage_error(std::string(flag) + " = '" + std::string(text) + "' is not a number");
  return v;
}

inline double parse_non_negative(std::string_view flag, std::string_view text) {
  const double v = parse_real(flag, text);
  if (v < 0) throw usage_error(std::string(flag) + " = " + std::string(text) + " must not be negative");
  return v;
}

/// "a,b,c" into exactly `n` non-negative numbers.
inline std::vector<double> parse_reals(std::string_view flag, std::string_view text, std::size_t n, std::string_view form) {
  std::vector<double> v;
  for (;;) {
    const std::size_t comma = text.find(',');
    v.push_back(parse_non_negative(flag, text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (v.size() != n)
    throw usage_error(std::string(flag) + " takes " + std::string(form) + " (" + std::to_string(n) + " numbers), got " +
                      std::to_string(v.size()));
  return v;
}

struct simulation_args {
  std::optional<std::string> trace;
  std::optional<serving::chat_workload> chat;
  bool chat_given = false;
  planning::simulation_config config;
  std::string timing = "startup";
  bool largest_at_startup = false;
  std::int64_t eager_uses = 0;
  std::string ladder_text = "capture-sizes 512";
};

/// Consumes args[i] (and its value) when it is one of the shared flags; returns false
/// otherwise. `--ladder` takes the LADDER words up to the next flag.
inline bool parse_simulation_flag(args_t args, std::size_t& i, simulation_args& a) {
  const std::string_view f = args[i];
  auto value = [&]() -> std::string_view {
    if (i + 1 >= args.size()) throw usage_error(std::string(f) + " needs a value");
    return args[++i];
  };
  auto positive = [&]() { return parse_positive(f, value()); };
  auto chat = [&]() -> serving::chat_workload& {
    if (!a.chat) a.chat.emplace();
    return *a.chat;
  };
  auto int32 = [&](long long v) {
    if (v > INT32_MAX) throw usage_error(std::string(f) + " = " + std::to_string(v) + " must be at most 2147483647");
    return static_cast<std::int32_t>(v);
  };
  planning::simulation_config& c = a.config;
  if (f == "--trace") {
    if (a.trace) throw usage_error("--trace given twice");
    a.trace = std::string(value());
  } else if (f == "--chat") {
    chat().conversations = int32(positive());
    a.chat_given = true;
  } else if (f == "--turns") {
    chat().turns = int32(positive());
  } else if (f == "--prompt-tokens") {
    chat().prompt_tokens = int32(positive());
  } else if (f == "--output-tokens") {
    chat().output_tokens = int32(positive());
  } else if (f == "--jitter") {
    const double j = parse_non_negative(f, value());
    if (j >= 1) throw usage_error("--jitter = " + std::string(args[i]) + " must be below 1");
    chat().jitter = j;
  } else if (f == "--think") {
    chat().think = parse_non_negative(f, value());
  } else if (f == "--interval") {
    chat().arrival_interval = parse_non_negative(f, value());
  } else if (f == "--seed") {
    chat().seed = static_cast<std::uint64_t>(parse_integer(f, value()));
  } else if (f == "--kv-memory") {
    c.kv_bytes = parse_bytes(f, value());
    if (c.kv_bytes <= 0) throw usage_error("--kv-memory must be positive");
  } else if (f == "--block-size") {
    const long long b = positive();
    if (b != 8 && b != 16 && b != 32 && b != 64 && b != 128)
      throw usage_error("--block-size = " + std::to_string(b) + " is not one of 8, 16, 32, 64, 128");
    c.block_size = static_cast<std::int32_t>(b);
  } else if (f == "--layers") {
    c.model.layers = positive();
  } else if (f == "--kv-heads") {
    c.model.kv_heads = positive();
  } else if (f == "--head-dim") {
    c.model.head_dim = positive();
  } else if (f == "--dtype") {
    const std::string_view d = value();
    const auto t = kv::parse_kv_dtype(d);
    if (!t) throw usage_error("--dtype = '" + std::string(d) + "' is not one of fp16, bf16, fp8, fp32");
    c.model.bytes_per_element = kv::bytes_per_element(*t);
  } else if (f == "--watermark") {
    c.watermark = parse_non_negative(f, value());
    if (c.watermark >= 1) throw usage_error("--watermark = " + std::string(args[i]) + " must be below 1");
  } else if (f == "--prefix-caching") {
    c.prefix_caching = true;
  } else if (f == "--max-num-seqs") {
    c.scheduler.max_num_seqs = int32(positive());
  } else if (f == "--max-num-batched-tokens") {
    c.scheduler.max_num_batched_tokens = int32(positive());
  } else if (f == "--max-model-len") {
    c.scheduler.max_model_len = int32(positive());
  } else if (f == "--no-chunked-prefill") {
    c.scheduler.chunked_prefill = false;
  } else if (f == "--reserve-max-model-len") {
    c.scheduler.reserve_max_model_len = true;
  } else if (f == "--admit-first-chunk") {
    c.scheduler.admit_whole_prompt = false;
  } else if (f == "--ladder") {
    std::size_t n = i + 1;
    while (n < args.size() && !args[n].starts_with("--")) ++n;
    c.ladder = parse_ladder(args.subspan(i + 1, n - i - 1));
    a.ladder_text.clear();
    for (std::size_t k = i + 1; k < n; ++k) a.ladder_text += (k > i + 1 ? " " : "") + std::string(args[k]);
    i = n - 1;
  } else if (f == "--timing") {
    a.timing = std::string(value());
    if (a.timing != "startup" && a.timing != "delayed" && a.timing != "lazy" && a.timing != "idle" && a.timing != "all")
      throw usage_error("--timing = '" + a.timing + "' is not one of startup, delayed, lazy, idle, all");
  } else if (f == "--largest-at-startup") {
    a.largest_at_startup = true;
  } else if (f == "--eager-uses") {
    a.eager_uses = parse_integer(f, value());
    if (a.eager_uses < 0) throw usage_error("--eager-uses = " + std::to_string(a.eager_uses) + " must not be negative");
  } else if (f == "--graph-memory") {
    c.graph_memory = parse_bytes(f, value());
  } else if (f == "--step-cost") {
    const auto v = parse_reals(f, value(), 4, "WEIGHTS_S,PER_TOKEN_S,PER_CONTEXT_TOKEN_S,EAGER_S");
    c.cost.weights_seconds = v[0];
    c.cost.seconds_per_token = v[1];
    c.cost.seconds_per_context_token = v[2];
    c.cost.eager_overhead_seconds = v[3];
    if (v[0] + v[1] <= 0) throw usage_error("--step-cost: WEIGHTS_S or PER_TOKEN_S must be positive (a step takes time)");
  } else if (f == "--capture-cost") {
    const auto v = parse_reals(f, value(), 2, "S,PER_TOKEN_S");
    c.cost.capture_seconds = v[0];
    c.cost.capture_seconds_per_token = v[1];
  } else if (f == "--graph-cost") {
    const auto v = parse_reals(f, value(), 2, "BYTES,PER_TOKEN_BYTES");
    c.cost.graph_bytes = static_cast<std::int64_t>(v[0]);
    c.cost.graph_bytes_per_token = static_cast<std::int64_t>(v[1]);
  } else {
    return false;
  }
  return true;
}

/// Checks the combination; call after the last flag.
inline void check_simulation_args(const simulation_args& a) {
  if (a.trace && a.chat) throw usage_error("--trace and --chat are alternatives: give one workload");
  if (!a.trace && !a.chat) throw usage_error("a workload is needed: --trace FILE or --chat N");
  if (a.chat && !a.chat_given)
    throw usage_error("--turns, --prompt-tokens, --output-tokens, --jitter, --think, --interval and --seed describe "
                      "--chat's workload: add --chat N");
  if (a.largest_at_startup && a.timing != "delayed" && a.timing != "all")
    throw usage_error("--largest-at-startup applies to --timing delayed");
  if (a.eager_uses != 0 && a.timing != "lazy" && a.timing != "all")
    throw usage_error("--eager-uses applies to --timing lazy");
  if (!a.config.scheduler.chunked_prefill && a.config.scheduler.max_num_batched_tokens < a.config.scheduler.max_model_len)
    throw usage_error("--max-num-batched-tokens = " + std::to_string(a.config.scheduler.max_num_batched_tokens) +
                      " must be at least --max-model-len = " + std::to_string(a.config.scheduler.max_model_len) +
                      " with --no-chunked-prefill");
}

/// The engine's timing policy for a name.
inline planning::any_timing timing_policy(const simulation_args& a, std::string_view name) {
  if (name == "delayed") return engine::delayed{.largest_at_startup = a.largest_at_startup};
  if (name == "lazy") return engine::lazy{.eager_uses = a.eager_uses};
  if (name == "idle") return engine::idle{};
  return engine::startup{};
}

/// The workload's requests.
inline std::vector<serving::trace_request> load_workload(const simulation_args& a) {
  if (a.trace) return serving::read_trace(*a.trace);
  return serving::generate_chat(*a.chat);
}

}  // namespace rungs::plan
