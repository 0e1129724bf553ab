// Gaudi bucketing configuration: the serving parameters, the per-phase, per-dimension
// ranges and the VLLM_* environment variables that override them.
//
// Variables (each overrides one default):
//   VLLM_{PROMPT|DECODE}_{BS|SEQ|BLOCK}_BUCKET_{MIN|STEP|MAX|LIMIT}   integers
//     (the linear strategy's decode dimension is SEQ, in tokens; the exponential one's is
//      BLOCK, in KV blocks; LIMIT applies to the exponential strategy only)
//   VLLM_EXPONENTIAL_BUCKETING   true (default) or false: exponential or linear strategy
//   VLLM_BUCKETING_FROM_FILE     a bucket file (see bucket_file.hpp); selects the file strategy
// The defaults, and the configurations that reproduce the logs of the two Gaudi documents,
// are in docs/ladders.md. The environment lookup is a parameter (any callable from a
// variable name to a C string or nullptr), so tests and tools need not touch the process
// environment.
#pragma once

#include <rungs/blocks.hpp>
#include <rungs/ladder/rung.hpp>

#include <bit>
#include <charconv>
#include <initializer_list>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace rungs::gaudi {

enum class strategy { linear, exponential, file };

constexpr std::string_view to_string(strategy s) noexcept {
  switch (s) {
    case strategy::linear: return "linear";
    case strategy::exponential: return "exponential";
    case strategy::file: return "file";
  }
  return "?";
}

/// What the serving engine is configured with (vLLM's flags).
struct serving_config {
  rung_t max_num_seqs = 256;
  rung_t max_num_prefill_seqs = 0;    ///< 0: min(max_num_seqs, 64)
  rung_t block_size = 128;            ///< tokens per KV block
  rung_t max_model_len = 2048;
  rung_t max_num_batched_tokens = 0;  ///< the token budget; 0: none (no budget filter)
  rung_t num_blocks = 0;              ///< KV blocks in the pool; 0: max_num_seqs * ceil(max_model_len / block_size)
  bool prefix_caching = false;

  void validate() const {
    detail::require_positive("serving config", "max_num_seqs", max_num_seqs);
    detail::require_positive("serving config", "block_size", block_size);
    detail::require_positive("serving config", "max_model_len", max_model_len);
    for (auto [name, v] : {std::pair<std::string_view, rung_t>{"max_num_prefill_seqs", max_num_prefill_seqs},
                           {"max_num_batched_tokens", max_num_batched_tokens},
                           {"num_blocks", num_blocks}}) {
      if (v < 0) detail::reject("serving config", name, v, "must not be negative (0 selects the default)");
      if (v > max_rung) detail::reject("serving config", name, v, "exceeds the largest supported 2147483647");
    }
  }
  rung_t prefill_seqs() const noexcept {
    return max_num_prefill_seqs > 0 ? max_num_prefill_seqs : (max_num_seqs < 64 ? max_num_seqs : 64);
  }
  rung_t kv_blocks() const noexcept {
    if (num_blocks > 0) return num_blocks;
    const std::int64_t b = std::int64_t{max_num_seqs} * blocks_for(max_model_len, block_size);
    return b < max_rung ? static_cast<rung_t>(b) : max_rung;
  }
};

/// One dimension's range: (min, step, max) for the linear strategy, plus limit for the
/// exponential one.
struct bucket_range {
  rung_t min = 0;
  rung_t step = 0;
  rung_t max = 0;
  rung_t limit = 0;
  friend bool operator==(const bucket_range&, const bucket_range&) = default;
};

struct bucket_config {
  gaudi::strategy strategy = strategy::exponential;
  bucket_range prompt_bs, prompt_seq;
  bucket_range decode_bs;
  bucket_range decode_seq;  ///< linear: context length in tokens; exponential: KV blocks
  std::string file;         ///< the bucket file (strategy::file)
  friend bool operator==(const bucket_config&, const bucket_config&) = default;
};

/// ceil(log2(n)) + 1: the limit Gaudi's exponential strategy uses for a maximum n.
constexpr rung_t log2_limit(rung_t n) noexcept {
  return n <= 1 ? 1 : static_cast<rung_t>(std::bit_width(static_cast<std::uint64_t>(n - 1))) + 1;
}

/// The defaults of a strategy (for strategy::file, the ranges are those of exponential and
/// unused).
inline bucket_config default_bucket_config(strategy s, const serving_config& serving) {
  serving.validate();
  const rung_t bs = serving.block_size;
  auto up_to = [](rung_t a, rung_t max) { return a < max ? a : max; };  // a min never above its max
  bucket_config c;
  c.strategy = s;
  if (s == strategy::linear) {
    // The hpu_model_runner defaults that produced the linear document's log.
    const rung_t prefill = serving.prefill_seqs();
    c.prompt_bs = {1, 32, prefill, 0};
    c.prompt_seq = {up_to(bs, 1024), bs, 1024, 0};
    c.decode_bs = {1, 128, serving.max_num_seqs, 0};
    c.decode_seq = {up_to(bs, 2048), bs, 2048, 0};
  } else {
    const rung_t prefill = serving.prefill_seqs(), len = serving.max_model_len;
    const rung_t seqs = serving.max_num_seqs, blocks = serving.kv_blocks();
    c.prompt_bs = {1, 1, prefill, log2_limit(prefill)};
    c.prompt_seq = {up_to(bs, len), bs, len, log2_limit(len)};
    c.decode_bs = {1, 1, seqs, log2_limit(seqs)};
    c.decode_seq = {up_to(bs, blocks), bs, blocks, log2_limit(blocks)};
  }
  return c;
}

namespace detail {

inline std::optional<std::string> env_value(const char* v) {
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}
inline std::optional<std::string> env_value(const std::optional<std::string>& v) { return v; }
inline std::optional<std::string> env_value(std::string_view v) { return std::string(v); }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline rung_t parse_env_integer(const std::string& name, const std::string& text) {
  std::string_view t = trim(text);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  rung_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) throw ladder_error(name + " = \"" + text + "\" is out of range");
  if (t.empty() || ec != std::errc() || end != t.data() + t.size())
    throw ladder_error(name + " = \"" + text + "\" is not an integer");
  return v;
}

inline bool parse_env_bool(const std::string& name, const std::string& text) {
  std::string t(trim(text));
  for (char& ch : t) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  if (t == "true" || t == "1") return true;
  if (t == "false" || t == "0") return false;
  throw ladder_error(name + " = \"" + text + "\" is not a boolean (true, false, 1 or 0)");
}

}  // namespace detail

/// Variable name for one parameter: env_name("prompt", "bs", "min") == "VLLM_PROMPT_BS_BUCKET_MIN".
inline std::string env_name(std::string_view phase, std::string_view dim, std::string_view param) {
  std::string s = "VLLM_";
  for (std::string_view part : {phase, std::string_view("_"), dim, std::string_view("_BUCKET_"), param})
    for (char ch : part) s += static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  return s;
}

/// The configuration the environment selects: strategy (unless `forced`), then the
/// strategy's defaults, each overridden by its variable when set. `getenv` maps a variable
/// name (const char*) to const char* (nullptr when unset) or std::optional<std::string>.
template <class Getenv>
bucket_config read_bucket_config(const serving_config& serving, std::optional<strategy> forced, Getenv&& getenv) {
  auto get = [&](const std::string& name) { return detail::env_value(getenv(name.c_str())); };
  const std::optional<std::string> file = get("VLLM_BUCKETING_FROM_FILE");
  strategy s = strategy::exponential;
  if (forced) {
    s = *forced;
  } else if (file && !file->empty()) {
    s = strategy::file;
  } else if (const auto e = get("VLLM_EXPONENTIAL_BUCKETING")) {
    s = detail::parse_env_bool("VLLM_EXPONENTIAL_BUCKETING", *e) ? strategy::exponential : strategy::linear;
  }
  bucket_config c = default_bucket_config(s, serving);
  if (s == strategy::file) {
    if (!file || file->empty())
      throw ladder_error("the file strategy needs VLLM_BUCKETING_FROM_FILE to name a bucket file");
    c.file = *file;
    return c;
  }
  auto read = [&](bucket_range& r, std::string_view phase, std::string_view dim) {
    struct field { std::string_view name; rung_t* value; };
    const field fields[] = {{"min", &r.min}, {"step", &r.step}, {"max", &r.max}, {"limit", &r.limit}};
    for (const field& f : fields) {
      if (f.name == "limit" && s == strategy::linear) continue;  // linear ranges have no limit
      const std::string name = env_name(phase, dim, f.name);
      if (const auto v = get(name)) *f.value = detail::parse_env_integer(name, *v);
    }
  };
  read(c.prompt_bs, "prompt", "bs");
  read(c.prompt_seq, "prompt", "seq");
  read(c.decode_bs, "decode", "bs");
  read(c.decode_seq, "decode", s == strategy::linear ? "seq" : "block");
  return c;
}

/// read_bucket_config() with the process environment.
inline bucket_config read_bucket_config(const serving_config& serving, std::optional<strategy> forced = {}) {
  return read_bucket_config(serving, forced, [](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace rungs::gaudi
