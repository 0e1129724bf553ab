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
//
// With --tiers NAME:TOKENS[:BYTES_PER_S],... (top tier first; instead of --capacity-tokens) and
// --gpu G --model M [--tp N], the cache is a hierarchy of tiers (planning/cache_tiers.hpp): the
// hit rate each tier serves, and the prefill seconds its hits save against their load time,
// from the model's KV bytes per token and the roofline's prefill seconds per token.
#include <rungs/planning/cache_tiers.hpp>
#include <rungs/planning/cost_model.hpp>
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
#include "tier_args.hpp"

namespace rungs::plan {
namespace {
using cli::json;

struct prefix_cache_args {
  std::string trace;
  serving::trace_format format = serving::trace_format::detect;
  std::vector<std::int64_t> capacities;
  std::optional<std::int32_t> block_size;
  bool json = false;
  std::vector<planning::cache_tier> tiers;
  std::optional<std::string> gpu, model, profile;
  std::int64_t tp = 1;
};

std::string percent(double f);

std::string fixed_text(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

int print_tiers(std::ostream& out, const prefix_cache_args& a, const std::vector<serving::trace_request>& trace,
                std::int32_t block) {
  if (!a.gpu) throw usage_error("--tiers prices loads and prefill with the roofline: add --gpu NAME --model NAME");
  if (a.tiers.front().capacity_tokens == 0)
    throw usage_error("--tiers: the top tier '" + a.tiers.front().name + "' needs a capacity, NAME:TOKENS (the study has no "
                      "KV pool to take it from)");
  planning::tiered_study s;
  std::int64_t kv_bytes = 0;
  double prefill = 0;
  try {
    const planning::cost_presets presets;
    const planning::model_spec& m = presets.model(*a.model);
    const planning::cost_model c = planning::roofline_cost(presets.gpu(*a.gpu), m, a.tp, {},
                                                           planning::cost_profile_named(a.profile.value_or("datasheet")));
    kv_bytes = kv::bytes_per_token(planning::kv_geometry(m, a.tp));
    prefill = c.seconds_per_token + *c.compute_seconds_per_context_token;
    s = planning::tiered_prefix_study(trace, a.tiers, block, kv_bytes, prefill);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  if (a.json) {
    json list = json::array();
    for (const planning::tier_result& t : s.tiers)
      list.push_back({{"tier", t.tier.name}, {"capacity_tokens", t.tier.capacity_tokens}, {"hit_rate", t.hit_rate},
                      {"hit_blocks", t.hit_blocks}, {"hit_tokens", t.hit_tokens}, {"bandwidth", t.tier.bandwidth},
                      {"load_seconds", t.load_seconds}, {"prefill_seconds_saved", t.prefill_seconds},
                      {"net_seconds", t.net_seconds()}});
    cli::write_json_line(out, {{"tiers", list}, {"hit_rate", s.hit_rate}, {"looked_up_blocks", s.looked_up_blocks},
                               {"requests", s.requests}, {"too_large", s.too_large}, {"kv_bytes_per_token", kv_bytes},
                               {"prefill_seconds_per_token", prefill}});
    return 0;
  }
  out << "prefix-cache: " << a.trace << ": " << trace.size() << " requests, blocks of " << block << " tokens; "
      << kv_bytes << " KV bytes and " << fixed_text(prefill * 1e6, 2) << " us of prefill per token (" << *a.gpu << ", "
      << *a.model << ", tp " << a.tp << ")\n"
      << "tier          capacity tokens  hit rate   hit tokens  load s  prefill saved s   net s  net per request ms\n";
  for (const planning::tier_result& t : s.tiers) {
    char line[256];
    std::snprintf(line, sizeof line, "%-12s %16lld %8s %12lld %7.1f %16.1f %7.1f %19.2f\n", t.tier.name.c_str(),
                  static_cast<long long>(t.tier.capacity_tokens), percent(t.hit_rate).c_str(),
                  static_cast<long long>(t.hit_tokens), t.load_seconds, t.prefill_seconds, t.net_seconds(),
                  s.requests ? 1e3 * t.net_seconds() / static_cast<double>(s.requests) : 0.0);
    out << line;
  }
  out << "all tiers: hit rate " << percent(s.hit_rate) << " of " << s.looked_up_blocks << " looked-up blocks; "
      << s.too_large << " requests larger than the whole cache\n";
  return 0;
}

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
  CLI::Option* capacities = cli::option(app, "--capacity-tokens N[,N...]", a->capacities, parse_capacities,
                                        "cache sizes in tokens, one replay each (at most 64)");
  CLI::Option* tiers = cli::option(app, "--tiers NAME:TOKENS[:BYTES_PER_S],...", a->tiers, parse_tiers,
                                   "a cache in tiers, top first (e.g. hbm:400000,dram:4000000:64e9,ssd:40000000:7e9): "
                                   "the hit rate each serves and the prefill its hits save against their load; needs "
                                   "--gpu and --model");
  capacities->excludes(tiers);
  tiers->excludes(capacities);
  cli::text(app, "--gpu NAME", a->gpu, "--tiers: the roofline's GPU (prefill seconds per token)");
  cli::text(app, "--model NAME", a->model, "--tiers: the roofline's model (KV bytes per token)");
  cli::option(app, "--tp N", a->tp, [](std::string_view f, std::string_view v) { return cli::integer_in(f, v, 1, 1024); },
              "--tiers: tensor-parallel degree (default 1)");
  cli::text(app, "--cost-profile datasheet|calibrated", a->profile, "--tiers: the roofline's profile (default datasheet)");
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
    if (!a->tiers.empty()) return print_tiers(out, *a, trace, block);
    if (a->gpu || a->model || a->profile || a->tp != 1)
      throw usage_error("--gpu, --model, --tp and --cost-profile price the tiers of --tiers: add --tiers");
    if (a->capacities.empty()) throw usage_error("--capacity-tokens or --tiers is needed");
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

const registration reg{{"prefix-cache", "prefix-cache --trace FILE (--capacity-tokens N[,N...] | --tiers NAME:TOKENS[:BYTES_PER_S],... "
                                        "--gpu NAME --model NAME) [--block-size B] [--json]",
                        "Prefix-cache hit rate of a trace's prompts at each cache size, on rungs' allocator.", define}};

}  // namespace
}  // namespace rungs::plan
