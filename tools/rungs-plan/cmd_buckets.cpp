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
#include <optional>
#include <string>

#include "command.hpp"

namespace rungs::plan {
namespace {

int buckets(args_t args, std::ostream& out, std::ostream&) {
  gaudi::serving_config serving;
  std::optional<gaudi::strategy> strategy;
  std::optional<std::string> file;
  bool json = false;
  struct number_option {
    std::string_view flag;
    rung_t* value;
  };
  const number_option numbers[] = {
      {"--max-num-seqs", &serving.max_num_seqs},
      {"--max-num-prefill-seqs", &serving.max_num_prefill_seqs},
      {"--block-size", &serving.block_size},
      {"--max-model-len", &serving.max_model_len},
      {"--max-num-batched-tokens", &serving.max_num_batched_tokens},
      {"--num-blocks", &serving.num_blocks},
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 == args.size()) throw usage_error(std::string(a) + " needs a value");
      return args[++i];
    };
    if (a == "--prefix-caching") { serving.prefix_caching = true; continue; }
    if (a == "--json") { json = true; continue; }
    if (a == "--file") { file = std::string(value()); continue; }
    if (a == "--strategy") {
      const std::string_view s = value();
      if (s == "linear") strategy = gaudi::strategy::linear;
      else if (s == "exponential") strategy = gaudi::strategy::exponential;
      else if (s == "file") strategy = gaudi::strategy::file;
      else throw usage_error("--strategy '" + std::string(s) + "' is not one of linear, exponential, file");
      continue;
    }
    bool known = false;
    for (const number_option& o : numbers) {
      if (a != o.flag) continue;
      *o.value = parse_positive(o.flag, value());
      known = true;
    }
    if (!known) throw usage_error("buckets: unknown argument '" + std::string(a) + "'");
  }
  if (file) {
    if (strategy && *strategy != gaudi::strategy::file)
      throw usage_error("--file needs --strategy file (got --strategy " + std::string(gaudi::to_string(*strategy)) + ")");
    strategy = gaudi::strategy::file;
  }
  auto getenv = [&](const char* name) -> const char* {
    if (file && std::string_view(name) == "VLLM_BUCKETING_FROM_FILE") return file->c_str();
    return std::getenv(name);
  };
  const gaudi::bucket_config config = gaudi::read_bucket_config(serving, strategy, getenv);
  auto emit = [&](const auto& plan) {
    if (json) gaudi::write_json(out, plan);
    else gaudi::write_log(out, plan);
  };
  switch (config.strategy) {
    case gaudi::strategy::linear: emit(gaudi::linear_buckets(config, serving)); break;
    case gaudi::strategy::exponential: emit(gaudi::exponential_buckets(config, serving)); break;
    case gaudi::strategy::file: emit(gaudi::file_buckets(config, serving)); break;
  }
  return 0;
}

const registration reg{
    {"buckets",
     "buckets [--strategy linear|exponential|file] [--file PATH] [--max-num-seqs N] [--max-num-prefill-seqs N] "
     "[--block-size N] [--max-model-len N] [--max-num-batched-tokens N] [--num-blocks N] [--prefix-caching] [--json]",
     buckets}};
}  // namespace
}  // namespace rungs::plan
