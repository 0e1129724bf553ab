// rungs-plan buckets: Gaudi's prompt and decode buckets for a serving configuration, as
// vLLM on Gaudi logs them at startup (without the "INFO <time> <file>]" prefix), or as JSON.
//
//   rungs-plan buckets [--strategy linear|exponential|file] [--file PATH]
//       [--max-num-seqs N] [--max-num-prefill-seqs N] [--block-size N] [--max-model-len N]
//       [--max-num-batched-tokens N] [--num-blocks N] [--prefix-caching] [--json]
//
// The VLLM_* bucketing variables override the defaults (see docs/ladders.md); without
// --strategy the environment picks it as vLLM does (VLLM_BUCKETING_FROM_FILE, then
// VLLM_EXPONENTIAL_BUCKETING, default exponential). --file PATH selects the file strategy
// with that file instead of VLLM_BUCKETING_FROM_FILE.
#include <rungs/ladder/gaudi_buckets.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "command.hpp"

namespace rungs::plan {
namespace {

struct buckets_args {
  gaudi::serving_config serving;
  std::optional<gaudi::strategy> strategy;
  std::optional<std::string> file;
  bool json = false;
};

gaudi::strategy parse_strategy(std::string_view flag, std::string_view s) {
  if (s == "linear") return gaudi::strategy::linear;
  if (s == "exponential") return gaudi::strategy::exponential;
  if (s == "file") return gaudi::strategy::file;
  throw usage_error(std::string(flag) + " '" + std::string(s) + "' is not one of linear, exponential, file");
}

int run_buckets(const buckets_args& a, std::ostream& out) {
  std::optional<gaudi::strategy> strategy = a.strategy;
  if (a.file) {
    if (strategy && *strategy != gaudi::strategy::file)
      throw usage_error("--file needs --strategy file (got --strategy " + std::string(gaudi::to_string(*strategy)) + ")");
    strategy = gaudi::strategy::file;
  }
  auto getenv = [&](const char* name) -> const char* {
    if (a.file && std::string_view(name) == "VLLM_BUCKETING_FROM_FILE") return a.file->c_str();
    return std::getenv(name);
  };
  const gaudi::bucket_config config = gaudi::read_bucket_config(a.serving, strategy, getenv);
  auto emit = [&](const auto& plan) {
    if (a.json) gaudi::write_json(out, plan);
    else gaudi::write_log(out, plan);
  };
  switch (config.strategy) {
    case gaudi::strategy::linear: emit(gaudi::linear_buckets(config, a.serving)); break;
    case gaudi::strategy::exponential: emit(gaudi::exponential_buckets(config, a.serving)); break;
    case gaudi::strategy::file: emit(gaudi::file_buckets(config, a.serving)); break;
  }
  return 0;
}

action define(CLI::App& app) {
  auto a = std::make_shared<buckets_args>();
  gaudi::serving_config& s = a->serving;
  cli::option(app, "--strategy linear|exponential|file", a->strategy, parse_strategy,
              "the bucketing strategy (default: from VLLM_BUCKETING_FROM_FILE and VLLM_EXPONENTIAL_BUCKETING)");
  cli::text(app, "--file PATH", a->file, "a bucket file (selects the file strategy)");
  cli::option(app, "--max-num-seqs N", s.max_num_seqs, parse_positive, "running requests at most");
  cli::option(app, "--max-num-prefill-seqs N", s.max_num_prefill_seqs, parse_positive, "requests in a prompt step at most");
  cli::option(app, "--block-size N", s.block_size, parse_positive, "tokens per KV block");
  cli::option(app, "--max-model-len N", s.max_model_len, parse_positive, "longest request in tokens");
  cli::option(app, "--max-num-batched-tokens N", s.max_num_batched_tokens, parse_positive, "tokens per step at most");
  cli::option(app, "--num-blocks N", s.num_blocks, parse_positive, "KV blocks in the pool");
  cli::flag(app, "--prefix-caching", s.prefix_caching, "prompt buckets with cached context blocks");
  cli::flag(app, "--json", a->json, "print the buckets as JSON");
  return [a](std::ostream& out, std::ostream&) { return run_buckets(*a, out); };
}

const registration reg{
    {"buckets",
     "buckets [--strategy linear|exponential|file] [--file PATH] [--max-num-seqs N] [--max-num-prefill-seqs N] "
     "[--block-size N] [--max-model-len N] [--max-num-batched-tokens N] [--num-blocks N] [--prefix-caching] [--json]",
     "Gaudi's prompt and decode buckets for a serving configuration, as vLLM on Gaudi logs them.", define,
     {.unknown = "buckets: unknown argument '{}'"}}};
}  // namespace
}  // namespace rungs::plan
