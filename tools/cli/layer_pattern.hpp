// A model's layers on the command line, as rungs-plan kv, rungs-plan simulate and the serving
// demo take them (--layers): a count (every layer full attention), a pattern KIND:LAYERS,...
// with KIND full, slidingW or chunkedC (full:12,sliding128:12), or a preset from a published
// config.json (its layer_types and sliding_window). One parser for every program.
#pragma once

#include <rungs/kv/capacity.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"

namespace rungs::cli {

/// A model's layers: a count (all full attention), or groups by attention kind.
struct layer_pattern {
  std::int64_t layers = 0;
  std::vector<kv::layer_group> groups;  ///< empty for a plain count
};

/// Layer patterns of published configs: gpt-oss alternates 128-token sliding windows and full
/// attention (8 KV heads of 64); Gemma 3 27B has five 1024-token local layers to each global
/// one (16 KV heads of 128).
struct layer_preset {
  std::string_view name, pattern;
};
inline constexpr layer_preset layer_presets[] = {{"gpt-oss-20b", "full:12,sliding128:12"},
                                                 {"gpt-oss-120b", "full:18,sliding128:18"},
                                                 {"gemma-3-27b", "full:10,sliding1024:52"}};

inline constexpr std::string_view layers_forms =
    "a layer count, a pattern of KIND:LAYERS with KIND full, slidingW or chunkedC (full:12,sliding128:12), "
    "or a preset (gpt-oss-20b, gpt-oss-120b, gemma-3-27b)";

/// "sliding128" -> {sliding_window, 128}; throws usage_error naming the item.
inline kv::attention_group parse_attention_kind(std::string_view flag, std::string_view item, std::string_view kind) {
  const auto span_of = [&](std::string_view prefix) {
    return static_cast<std::int32_t>(integer_in(std::string(flag) + " " + std::string(prefix) + " span",
                                                kind.substr(prefix.size()), 1, INT32_MAX));
  };
  if (kind == "full") return {};
  if (kind.starts_with("sliding") && kind.size() > 7) return {kv::attention_kind::sliding_window, span_of("sliding")};
  if (kind.starts_with("chunked") && kind.size() > 7) return {kv::attention_kind::chunked_local, span_of("chunked")};
  throw usage_error(std::string(flag) + ": '" + std::string(item) + "' is not KIND:LAYERS with KIND full, slidingW or chunkedC");
}

/// --layers' value (see the file comment); throws usage_error naming the flag and the rule.
inline layer_pattern parse_layers(std::string_view flag, std::string_view text) {
  const std::string what(flag);
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) return {positive(flag, text), {}};
  for (const layer_preset& p : layer_presets)
    if (text == p.name) return parse_layers(flag, p.pattern);
  if (text.find(':') == std::string_view::npos)
    throw usage_error(what + " = '" + std::string(text) + "' is not " + std::string(layers_forms));
  check_length(what, text, 16);
  layer_pattern out;
  for (const std::string_view item : split(text)) {
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw usage_error(what + ": '" + std::string(item) + "' is not KIND:LAYERS with KIND full, slidingW or chunkedC");
    const kv::attention_group a = parse_attention_kind(flag, item, item.substr(0, colon));
    for (const kv::layer_group& g : out.groups)
      if (g.attention == a) throw usage_error(what + ": '" + std::string(item.substr(0, colon)) + "' is given twice");
    const std::int64_t n = positive(what + " " + std::string(item.substr(0, colon)) + " layers", item.substr(colon + 1));
    out.groups.push_back({a, n});
    out.layers += n;
  }
  return out;
}

/// A group as the pattern writes it: full:12, sliding128:12, chunked8192:36.
inline std::string describe(const kv::layer_group& g) {
  const kv::attention_group& a = g.attention;
  const std::string kind = a.kind == kv::attention_kind::full ? "full"
                           : a.kind == kv::attention_kind::sliding_window ? "sliding" + std::to_string(a.span)
                                                                           : "chunked" + std::to_string(a.span);
  return kind + ":" + std::to_string(g.layers);
}

}  // namespace rungs::cli
