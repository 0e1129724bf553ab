// From the command line to an engine configuration: the policies the user names become the
// values of a rungs::engine::engine_config (bucket space, capture order and timing, allocator),
// from which rungs::engine::any_engine picks the engine's instantiation (run.hpp,
// serve_engine). What is left here is the demo's own: its defaults for Gaudi's VLLM_*
// variables and the mapping of its flags to policy values.
#pragma once

#include <rungs/engine/any_buckets.hpp>
#include <rungs/engine/capture_order.hpp>
#include <rungs/engine/capture_timing.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "options.hpp"
#include "serve.hpp"

namespace demo {

/// Gaudi's VLLM_*_BUCKET_* variables as the demo reads them: the environment, else the demo's
/// own defaults for the linear strategy (sequence buckets every quarter of max_model_len,
/// block-aligned, so the host model captures a few dozen graphs rather than hundreds).
inline eng::env_reader bucket_environment(ladder_kind ladder, std::int64_t block, std::int64_t max_model_len) {
  const std::int64_t step = std::max<std::int64_t>(block, rungs::blocks_for(max_model_len / 4, block) * block);
  std::map<std::string, std::string> d;
  if (ladder == ladder_kind::gaudi_linear) {
    for (const char* phase : {"PROMPT", "DECODE"}) {
      const std::string p = std::string("VLLM_") + phase + "_SEQ_BUCKET_";
      d[p + "MIN"] = std::to_string(step);
      d[p + "STEP"] = std::to_string(step);
      d[p + "MAX"] = std::to_string(max_model_len);
    }
  }
  return [d = std::move(d)](const char* name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name)) return std::string(v);
    if (auto it = d.find(name); it != d.end()) return it->second;
    return std::nullopt;
  };
}

/// The capture timing chosen on the command line, with its parameters.
inline eng::any_timing timing_for(const demo_options& o) {
  if (std::holds_alternative<eng::delayed>(o.timing.policy())) return eng::delayed{.largest_at_startup = o.largest_at_startup};
  if (std::holds_alternative<eng::lazy>(o.timing.policy())) return eng::lazy{.eager_uses = o.eager_uses};
  return o.timing;
}

}  // namespace demo
