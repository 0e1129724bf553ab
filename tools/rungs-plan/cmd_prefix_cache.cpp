// rungs-plan prefix-cache --trace FILE --capacity-tokens N[,N...] [--block-size B] [--json]:
// how much of a trace's prompts a prefix cache of each size finds, replayed through rungs'
// prefix-caching allocator (planning::prefix_cache_study; semantics in docs/planning.md).
//
//   $ rungs-plan prefix-cache --trace mooncake.jsonl --capacity-tokens 1000000,3000000
//   prefix-cache: mooncake.jsonl: 3993 requests, blocks of 512 tokens
//   capacity tokens    blocks  hit rate  hit blocks  looked up  hit tokens  evictions  too large
//           1000000      1953    14.24%  ...
//
// --json prints one list of objects, one per capacity, with capacity_tokens and hit_rate (a
// fraction) first. The block size defaults to 512 for a trace with hash_ids (Mooncake's), 16
// otherwise.
#include <rungs/planning/prefix_study.hpp>
#include <rungs/serving/workload.hpp>

#include <cstdio>
#include <iomanip>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "json_line.hpp"

namespace rungs::plan {
namespace {
using cli::json;

struct prefix_cache_args {
  std::string trace;
  serving::trace_format format = serving::trace_format::detect;
  std::vector<std::int64_t> capacities;
  std::optional<std::int32_t> block_size;
  bool json = false;
};

// At most this many capacities (each is a full replay).
constexpr std::size_t max_capacities = 64;

std::vector<std::int64_t> parse_capacities(std::string_view flag, std::string_view text) {
  cli::check_length(flag, text, max_capacities);
  std::vector<std::int64_t> v;
  for (std::string_view item : cli::split(text)) v.push_back(parse_positive(flag, item));
  return v;
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * f);
  return buf;
}

action define(CLI::App& app) {
  auto a = std::make_shared<prefix_cache_args>();
  cli::text(app, "--trace FILE", a->trace, "a trace: rungs CSV or JSON lines, Azure CSV, Mooncake JSON lines")->required();
  cli::choices<serving::trace_format>(app, "--trace-format FORMAT", a->format,
                                      {{"detect", serving::trace_format::detect},
                                       {"rungs", serving::trace_format::rungs},
                                       {"azure", serving::trace_format::azure},
                                       {"mooncake", serving::trace_format::mooncake}},
                                      "read the trace as this format (default: detect from the header or keys)");
  cli::option(app, "--capacity-tokens N[,N...]", a->capacities, parse_capacities,
              "cache sizes in tokens, one replay each (at most 64)")
      ->required();
  cli::option(app, "--block-size B", a->block_size,
              [](std::string_view f, std::string_view v) { return static_cast<std::int32_t>(cli::integer_in(f, v, 1, 1 << 20)); },
              "KV block size in tokens (default: 512 for a trace with hash_ids, 16 otherwise)");
  cli::flag(app, "--json", a->json, "print a JSON list, one object per capacity");
  return [a](std::ostream& out, std::ostream&) {
    std::vector<serving::trace_request> trace;
    try {
      trace = serving::read_trace(a->trace, a->format);
    } catch (const serving::trace_error& e) {
      throw usage_error(std::string("--trace: ") + e.what());
    }
    const std::int32_t block = a->block_size.value_or(planning::default_study_block_size(trace));
    std::vector<planning::prefix_cache_point> points;
    try {
      points = planning::prefix_cache_study(trace, a->capacities, block);
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
    if (a->json) {
      json list = json::array();
      for (const auto& p : points)
        list.push_back({{"capacity_tokens", p.capacity_tokens}, {"hit_rate", p.hit_rate()}, {"block_size", p.block_size},
                        {"blocks", p.capacity_tokens / p.block_size}, {"hit_blocks", p.hit_blocks},
                        {"looked_up_blocks", p.looked_up_blocks}, {"hit_tokens", p.hit_tokens},
                        {"prompt_tokens", p.prompt_tokens}, {"requests", p.requests}, {"too_large", p.too_large},
                        {"evictions", p.evictions}});
      cli::write_json_line(out, list);
      return 0;
    }
    out << "prefix-cache: " << a->trace << ": " << trace.size() << " requests, blocks of " << block << " tokens\n"
        << std::setw(15) << "capacity tokens" << std::setw(12) << "blocks" << std::setw(10) << "hit rate" << std::setw(14)
        << "hit blocks" << std::setw(14) << "looked up" << std::setw(16) << "hit tokens" << std::setw(12) << "evictions"
        << std::setw(11) << "too large" << "\n";
    for (const auto& p : points)
      out << std::setw(15) << p.capacity_tokens << std::setw(12) << p.capacity_tokens / p.block_size << std::setw(10)
          << percent(p.hit_rate()) << std::setw(14) << p.hit_blocks << std::setw(14) << p.looked_up_blocks << std::setw(16)
          << p.hit_tokens << std::setw(12) << p.evictions << std::setw(11) << p.too_large << "\n";
    return 0;
  };
}

const registration reg{{"prefix-cache", "prefix-cache --trace FILE --capacity-tokens N[,N...] [--block-size B] [--json]",
                        "Prefix-cache hit rate of a trace's prompts at each cache size, on rungs' allocator.", define}};

}  // namespace
}  // namespace rungs::plan
