// rungs-plan kv: KV-cache capacity from a model's shape and a memory budget.
//
//   rungs-plan kv --layers 32 --kv-heads 8 --head-dim 128 --dtype fp16 --block-size 16
//                 --kv-memory 7GiB --tokens-per-request 5000 --max-model-len 8192
//
// prints one figure per line as `name: value` (integers; bytes in bytes), documented in
// docs/kv-blocks.md. The budget is either --kv-memory (the KV cache's own share) or
// --free-memory with the Gaudi rule (--memory-utilization, default 0.9; --graph-reserved,
// default 0.1: VLLM_GRAPH_RESERVED_MEM).
#include <rungs/kv/capacity.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "command.hpp"

namespace rungs::plan {
namespace {

constexpr std::string_view size_units = "bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";

/// "7GiB", "7GB", "79.16GiB", "7516192768": bytes, rounded to the nearest byte.
long long parse_size(std::string_view what, std::string_view text) {
  const auto bad = [&] {
    return usage_error(std::string(what) + " = '" + std::string(text) + "' is not a size (" +
                       std::string(size_units) + ")");
  };
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number,
                                         std::chars_format::fixed);
  if (ec != std::errc() || text.empty() || text[0] == '-' || text[0] == '+') throw bad();
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  static const std::map<std::string_view, double> scale = {
      {"", 1.0},       {"B", 1.0},          {"KB", 1e3},          {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},        {"KiB", 1024.0},      {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto it = scale.find(unit);
  if (it == scale.end()) throw bad();
  const double bytes = std::round(number * it->second);
  if (bytes <= 0) throw usage_error(std::string(what) + " = '" + std::string(text) + "' must be positive");
  if (bytes > 9.0e18) throw usage_error(std::string(what) + " = '" + std::string(text) + "' is out of range");
  return static_cast<long long>(bytes);
}

double parse_fraction(std::string_view what, std::string_view text) {
  double v = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw usage_error(std::string(what) + " = '" + std::string(text) + "' is not a number");
  return v;
}

int kv_command(args_t args, std::ostream& out, std::ostream&) {
  static constexpr std::string_view known[] = {
      "--layers",     "--kv-heads",           "--head-dim",         "--dtype",
      "--block-size", "--kv-memory",          "--free-memory",      "--memory-utilization",
      "--graph-reserved", "--tokens-per-request", "--max-model-len"};
  std::map<std::string_view, std::string_view> opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i], value;
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw usage_error("kv: " + std::string(name) + " needs a value");
    }
    if (std::find(std::begin(known), std::end(known), name) == std::end(known))
      throw usage_error("kv: unknown option '" + std::string(name) + "' (try 'rungs-plan --help')");
    if (!opt.emplace(name, value).second)
      throw usage_error("kv: " + std::string(name) + " given twice");
  }
  const auto required = [&](std::string_view name) {
    const auto it = opt.find(name);
    if (it == opt.end()) throw usage_error("kv: " + std::string(name) + " is required");
    return it->second;
  };
  const auto optional = [&](std::string_view name) -> std::optional<std::string_view> {
    const auto it = opt.find(name);
    if (it == opt.end()) return std::nullopt;
    return it->second;
  };

  const std::string_view dtype_text = required("--dtype");
  const std::optional<kv::kv_dtype> dtype = kv::parse_kv_dtype(dtype_text);
  if (!dtype)
    throw usage_error("--dtype = '" + std::string(dtype_text) + "' is not one of fp16, bf16, fp8, fp32");
  const kv::kv_shape shape{.layers = parse_positive("--layers", required("--layers")),
                           .kv_heads = parse_positive("--kv-heads", required("--kv-heads")),
                           .head_dim = parse_positive("--head-dim", required("--head-dim")),
                           .bytes_per_element = kv::bytes_per_element(*dtype)};
  const long long block_size = parse_positive("--block-size", required("--block-size"));

  const auto kv_text = optional("--kv-memory");
  const auto free_text = optional("--free-memory");
  if (kv_text.has_value() == free_text.has_value())
    throw usage_error("kv: give exactly one of --kv-memory and --free-memory");
  if (!free_text && (opt.count("--memory-utilization") || opt.count("--graph-reserved")))
    throw usage_error("kv: --memory-utilization and --graph-reserved need --free-memory");
  long long kv_bytes = 0;
  if (kv_text) {
    kv_bytes = parse_size("--kv-memory", *kv_text);
  } else {
    kv::gaudi_memory m{.free_bytes = parse_size("--free-memory", *free_text)};
    if (const auto u = optional("--memory-utilization"))
      m.gpu_memory_utilization = parse_fraction("--memory-utilization", *u);
    if (const auto g = optional("--graph-reserved"))
      m.graph_reserved_mem = parse_fraction("--graph-reserved", *g);
    kv_bytes = kv::kv_memory(m);
  }

  // Every argument is checked before anything is printed: an error leaves stdout empty.
  const auto positive = [&](std::string_view name) -> std::optional<long long> {
    if (const auto v = optional(name)) return parse_positive(name, *v);
    return std::nullopt;
  };
  const std::optional<long long> tokens = positive("--tokens-per-request");
  const std::optional<long long> max_len = positive("--max-model-len");
  const std::int64_t token_bytes = kv::bytes_per_token(shape);
  const std::int64_t block_bytes = kv::bytes_per_block(shape, block_size);
  const std::int64_t num_blocks = kv::blocks_for_memory(kv_bytes, block_bytes);
  out << "bytes_per_token: " << token_bytes << "\n"
      << "block_size: " << block_size << "\n"
      << "bytes_per_block: " << block_bytes << "\n"
      << "kv_memory_bytes: " << kv_bytes << "\n"
      << "num_blocks: " << num_blocks << "\n"
      << "token_capacity: " << num_blocks * block_size << "\n";
  if (tokens) {
    const std::int64_t each = kv::blocks_per_request(*tokens, block_size);
    out << "tokens_per_request: " << *tokens << "\n"
        << "blocks_per_request: " << each << "\n"
        << "concurrent_requests: " << kv::concurrent_requests(num_blocks, each) << "\n";
  }
  if (max_len) {
    const std::int64_t each = kv::blocks_per_request(*max_len, block_size);
    out << "max_model_len: " << *max_len << "\n"
        << "blocks_per_max_model_len: " << each << "\n"
        << "concurrent_requests_at_max_model_len: " << kv::concurrent_requests(num_blocks, each)
        << "\n"
        << "naive_concurrent_requests: "
        << kv::naive_concurrent_requests(kv_bytes, *max_len, token_bytes) << "\n";
  }
  return 0;
}

const registration reg{
    {"kv",
     "kv --layers L --kv-heads H --head-dim D --dtype fp16|bf16|fp8|fp32 --block-size B "
     "(--kv-memory SIZE | --free-memory SIZE [--memory-utilization F] [--graph-reserved F]) "
     "[--tokens-per-request T] [--max-model-len M]",
     kv_command}};

}  // namespace
}  // namespace rungs::plan
