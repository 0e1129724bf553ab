// The options of disaggregated prefill and decode (rungs/planning/disaggregated.hpp) that
// rungs-plan simulate and plan-fleet share: the KV link and the decode pool's router. The
// prefill pool is routed by --router (and --max-imbalance).
#pragma once

#include <rungs/planning/disaggregated.hpp>

#include <cctype>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "command.hpp"
#include "planning_args.hpp"

namespace rungs::plan {

struct disaggregate_args {
  planning::disaggregation plan;  ///< pool sizes set by --disaggregate (simulate) or the search
  bool given = false;             ///< a link or decode-router flag was given
};

/// "P:D": two replica counts in [1, 4096].
inline std::pair<std::int32_t, std::int32_t> parse_split(std::string_view flag, std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    throw usage_error(std::string(flag) + " = '" + std::string(text) +
                      "' is not P:D (prefill replicas, a colon, decode replicas; e.g. 1:3)");
  return {static_cast<std::int32_t>(cli::integer_in(std::string(flag) + " P", text.substr(0, colon), 1, 4096)),
          static_cast<std::int32_t>(cli::integer_in(std::string(flag) + " D", text.substr(colon + 1), 1, 4096))};
}

/// Adds --kv-link, --kv-link-latency and --decode-router, bound to `a`.
inline void add_disaggregate_options(CLI::App& app, disaggregate_args& a) {
  cli::on(app, "--kv-link NAME|BYTES_PER_S",
          [&a](std::string_view f, std::string_view v) {
            a.given = true;
            if (const std::optional<planning::kv_link> l = planning::kv_link_preset(v)) {
              a.plan.link.bytes_per_second = l->bytes_per_second;
              return;
            }
            if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v.front())) || v.front() == '.'))
              throw usage_error(std::string(f) + " = '" + std::string(v) + "' is not one of " +
                                std::string(planning::kv_link_presets) + " nor a number of bytes per second");
            a.plan.link.bytes_per_second = cli::number_in(f, v, 1, 1e15);
          },
          "disaggregated: the link a request's KV crosses to its decode replica, one way, per GPU: "
          "infiniband-400g (default, 50e9 bytes/s), nvlink (450e9), pcie5 (63e9), pcie4 (31.5e9), or bytes/s")
      ->group("Disaggregated");
  cli::on(app, "--kv-link-latency SECONDS",
          [&a](std::string_view f, std::string_view v) {
            a.given = true;
            a.plan.link.latency_seconds = cli::number_in(f, v, 0, 3600);
          },
          "disaggregated: seconds before a transfer's first byte arrives (default 10e-6, an assumption)")
      ->group("Disaggregated");
  cli::on(app, "--decode-router round-robin|least-loaded",
          [&a](std::string_view f, std::string_view v) {
            a.given = true;
            a.plan.decode_router.kind = cli::choice<planning::router>(
                f, v, {{"round-robin", planning::router::round_robin}, {"least-loaded", planning::router::least_loaded}});
          },
          "disaggregated: how requests are sent to decode replicas once their KV arrives (default round-robin); "
          "--router routes the prefill pool")
      ->group("Disaggregated");
}

/// "50 GB/s + 10 us": the link as the reports print it.
inline std::string link_text(const planning::kv_link& l) {
  std::ostringstream os;
  os << l.bytes_per_second / 1e9 << " GB/s + " << l.latency_seconds * 1e6 << " us";
  return os.str();
}

}  // namespace rungs::plan
