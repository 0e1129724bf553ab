// --tiers NAME[:TOKENS][:BYTES_PER_S],...: a prefix cache in tiers, top first, as rungs-plan
// prefix-cache (the study) and simulate (under load) both read it, with one parser.
//
//   hbm:427000,dram:8000000:50e9,ssd:30000000:6e9
//
// The top tier is NAME:TOKENS, or NAME alone (capacity 0: simulate's top tier is the replica's
// own KV pool, whose size it knows; the study needs the capacity); its hits need no load, so it
// has no bandwidth. Every other tier is NAME:TOKENS:BYTES_PER_S, the bandwidth its hits are
// loaded into HBM at. At most 16 tiers.
#pragma once

#include <rungs/planning/cache_tiers.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"

namespace rungs::plan {

/// The --tiers syntax, for help texts.
inline constexpr std::string_view tiers_syntax = "NAME[:TOKENS][:BYTES_PER_S],...";

inline std::vector<planning::cache_tier> parse_tiers(std::string_view flag, std::string_view text) {
  cli::check_length(flag, text, 16);
  std::vector<planning::cache_tier> tiers;
  for (std::string_view item : cli::split(text)) {
    const std::vector<std::string_view> parts = cli::split(item, ':');
    const bool top = tiers.empty();
    if (parts[0].empty() || (top ? parts.size() > 2 : parts.size() != 3))
      throw usage_error(std::string(flag) + ": '" + std::string(item) + "' must be " +
                        (top ? "NAME or NAME:TOKENS (the top tier's hits need no load)" : "NAME:TOKENS:BYTES_PER_S"));
    tiers.push_back({.name = std::string(parts[0]),
                     .capacity_tokens = parts.size() > 1 ? parse_positive(flag, parts[1]) : 0,
                     .bandwidth = top ? 0.0 : cli::number_in(flag, parts[2], 1, 1e15)});
  }
  return tiers;
}

}  // namespace rungs::plan
