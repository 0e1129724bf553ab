// rungs-plan kv: KV-cache capacity from a model's shape and a memory budget.
//
//   rungs-plan kv --layers 32 --kv-heads 8 --head-dim 128 --dtype fp16 --block-size 16
//                 --kv-memory 7GiB --tokens-per-request 5000 --max-model-len 8192
//
// prints one figure per line as `name: value` (integers; bytes in bytes), documented in
// docs/kv-blocks.md. The budget is either --kv-memory (the KV cache's own share) or
// --free-memory with the Gaudi rule (--memory-utilization, default 0.9; --graph-reserved,
// default 0.1: VLLM_GRAPH_RESERVED_MEM). --layers also takes a hybrid model's layer pattern
// (full:12,sliding128:12,chunked8192:36) or a preset (gpt-oss-20b, gpt-oss-120b, gemma-3-27b);
// the figures per request then add what the windowed layers save over all-full attention.
#include <rungs/kv/capacity.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "layer_pattern.hpp"

namespace rungs::plan {
namespace {

using cli::layer_pattern;
using cli::layers_forms;
using cli::parse_layers;
using cli::describe;

struct kv_args {
  std::optional<rungs::dtype> dtype;
  layer_pattern layers;
  std::int64_t kv_heads = 0, head_dim = 0, block_size = 0;
  std::optional<std::int64_t> kv_memory, free_memory, tokens, max_len;
  std::optional<double> utilization, graph_reserved;
};

rungs::dtype parse_dtype(std::string_view flag, std::string_view text) {
  const std::optional<rungs::dtype> d = rungs::parse_dtype(text);
  if (!d) throw usage_error(std::string(flag) + " = '" + std::string(text) + "' is not one of " + std::string(rungs::dtype_names));
  return *d;
}

// The hybrid figures for requests of `tokens` tokens: the bytes they hold over every layer
// group against all-full attention, the share saved, and how many fit the budget. `at` names
// the case: "_per_request" (--tokens-per-request) or "_at_max_model_len".
void print_hybrid(std::ostream& out, const kv_args& a, const kv::kv_shape& layer, std::int64_t kv_bytes,
                  std::int64_t tokens, std::string_view at) {
  const std::int64_t hybrid = kv::bytes_per_request(a.layers.groups, layer, tokens, a.block_size);
  const kv::layer_group all_full[] = {{{}, a.layers.layers}};
  const std::int64_t full = kv::bytes_per_request(all_full, layer, tokens, a.block_size);
  const std::string_view count_at = at == "_per_request" ? "" : at;
  char saved[32];
  std::snprintf(saved, sizeof saved, "%.1f", 100.0 * static_cast<double>(full - hybrid) / static_cast<double>(full));
  out << "hybrid_bytes" << at << ": " << hybrid << "\n"
      << "all_full_bytes" << at << ": " << full << "\n"
      << "memory_saved_percent" << count_at << ": " << saved << "\n"
      << "hybrid_concurrent_requests" << count_at << ": " << kv_bytes / hybrid << "\n";
}

// Every argument is checked before anything is printed: an error leaves stdout empty.
int run_kv(const kv_args& a, std::ostream& out) {
  if (a.kv_memory.has_value() == a.free_memory.has_value())
    throw usage_error("kv: give exactly one of --kv-memory and --free-memory");
  if (!a.free_memory && (a.utilization || a.graph_reserved))
    throw usage_error("kv: --memory-utilization and --graph-reserved need --free-memory");
  const kv::kv_shape shape{.layers = a.layers.layers, .kv_heads = a.kv_heads, .head_dim = a.head_dim,
                           .bytes_per_element = rungs::bytes_per_element(*a.dtype)};
  kv::kv_shape layer = shape;
  layer.layers = 1;
  std::int64_t kv_bytes = 0;
  if (a.kv_memory) {
    kv_bytes = *a.kv_memory;
  } else {
    kv::gaudi_memory m{.free_bytes = *a.free_memory};
    if (a.utilization) m.gpu_memory_utilization = *a.utilization;
    if (a.graph_reserved) m.graph_reserved_mem = *a.graph_reserved;
    kv_bytes = kv::kv_memory(m);
  }
  const std::int64_t block_size = a.block_size;
  const std::int64_t token_bytes = kv::bytes_per_token(shape);
  const std::int64_t block_bytes = kv::bytes_per_block(shape, block_size);
  const std::int64_t num_blocks = kv::blocks_for_memory(kv_bytes, block_bytes);
  if (!a.layers.groups.empty()) {
    out << "layer_groups:";
    for (const kv::layer_group& g : a.layers.groups) out << " " << describe(g);
    out << "\n";
  }
  out << "bytes_per_token: " << token_bytes << "\n"
      << "block_size: " << block_size << "\n"
      << "bytes_per_block: " << block_bytes << "\n"
      << "kv_memory_bytes: " << kv_bytes << "\n"
      << "num_blocks: " << num_blocks << "\n"
      << "token_capacity: " << num_blocks * block_size << "\n";
  if (a.tokens) {
    const std::int64_t each = kv::blocks_per_request(*a.tokens, block_size);
    out << "tokens_per_request: " << *a.tokens << "\n"
        << "blocks_per_request: " << each << "\n"
        << "concurrent_requests: " << kv::concurrent_requests(num_blocks, each) << "\n";
    if (!a.layers.groups.empty()) print_hybrid(out, a, layer, kv_bytes, *a.tokens, "_per_request");
  }
  if (a.max_len) {
    const std::int64_t each = kv::blocks_per_request(*a.max_len, block_size);
    out << "max_model_len: " << *a.max_len << "\n"
        << "blocks_per_max_model_len: " << each << "\n"
        << "concurrent_requests_at_max_model_len: " << kv::concurrent_requests(num_blocks, each) << "\n"
        << "naive_concurrent_requests: " << kv::naive_concurrent_requests(kv_bytes, *a.max_len, token_bytes) << "\n";
    if (!a.layers.groups.empty()) print_hybrid(out, a, layer, kv_bytes, *a.max_len, "_at_max_model_len");
  }
  return 0;
}

action define(CLI::App& app) {
  auto a = std::make_shared<kv_args>();
  cli::option(app, "--layers L|PATTERN|PRESET", a->layers, parse_layers,
              "the model's layers: " + std::string(layers_forms))->required();
  cli::option(app, "--kv-heads H", a->kv_heads, parse_positive, "KV heads per layer")->required();
  cli::option(app, "--head-dim D", a->head_dim, parse_positive, "elements per head")->required();
  cli::option(app, "--dtype fp16|bf16|fp8|fp8_e4m3|fp8_e5m2|fp32", a->dtype, parse_dtype, "the KV cache's element type")->required();
  cli::option(app, "--block-size B", a->block_size, parse_positive, "tokens per KV block")->required();
  cli::option(app, "--kv-memory SIZE", a->kv_memory, cli::positive_size,
              "the KV cache's budget (" + std::string(cli::size_syntax) + ")");
  cli::option(app, "--free-memory SIZE", a->free_memory, cli::positive_size,
              "free device memory, split by the Gaudi rule");
  cli::option(app, "--memory-utilization F", a->utilization, cli::number,
              "with --free-memory: the share vLLM may use (default 0.9)");
  cli::option(app, "--graph-reserved F", a->graph_reserved, cli::number,
              "with --free-memory: the share kept for graphs (VLLM_GRAPH_RESERVED_MEM, default 0.1)");
  cli::option(app, "--tokens-per-request T", a->tokens, parse_positive, "also: requests of T tokens that fit");
  cli::option(app, "--max-model-len M", a->max_len, parse_positive, "also: requests of M tokens that fit");
  return [a](std::ostream& out, std::ostream&) { return run_kv(*a, out); };
}

const registration reg{
    {"kv",
     "kv --layers L|PATTERN|PRESET --kv-heads H --head-dim D --dtype fp16|bf16|fp8|fp8_e4m3|fp8_e5m2|fp32 --block-size B "
     "(--kv-memory SIZE | --free-memory SIZE [--memory-utilization F] [--graph-reserved F]) "
     "[--tokens-per-request T] [--max-model-len M]",
     "KV-cache capacity from a model's shape and a memory budget.", define,
     {.unknown = "kv: unknown option '{}' (try 'rungs-plan --help')",
      .needs_value = "kv: {} needs a value",
      .required = "kv: {} is required",
      .twice = "kv: {} given twice"}}};

}  // namespace
}  // namespace rungs::plan
