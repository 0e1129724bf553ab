// Graph-memory budget: how much device memory graphs may take, split between prompt and
// decode graphs with spill-over, after Gaudi's VLLM_GRAPH_RESERVED_MEM and
// VLLM_GRAPH_PROMPT_RATIO (reference/gaudi-bucketing.md).
//
//   usable memory  x reserved_fraction  = graph memory (the rest is the KV cache)
//   graph memory   x prompt_ratio       = prompt share (the rest is the decode share)
//
// The KV cache's side of the same split is rungs::kv::kv_memory(gaudi_memory).
//
// A capture is admitted when its estimate fits its phase's share, or, once the other phase
// has a graph for every bucket (or gave up on it), the pooled leftover of both shares. The
// estimate comes from what earlier captures of the phase really cost (Gaudi's "average per
// token") or, before any was measured, from a cost model. Upstream estimated the first graph
// of a pass at 0 bytes and could overshoot; here a capture whose measured cost breaks the
// budget is released again, so graphs never hold more than the budget.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>

#include <rungs/engine/bucket_space.hpp>
#include <rungs/kv/capacity.hpp>

namespace rungs::engine {

/// A linear cost model: bytes = base + per_unit * bucket.cost_units() (bs*seq for prompt
/// graphs, bs for decode graphs and 1-D ladders).
struct graph_cost {
  std::int64_t base = 0;
  std::int64_t per_unit = 0;
  constexpr std::int64_t bytes(const bucket& b) const { return base + per_unit * b.cost_units(); }
  friend constexpr bool operator==(const graph_cost&, const graph_cost&) = default;
};

struct graph_budget {
  static constexpr std::int64_t unlimited = -1;

  std::int64_t bytes = unlimited;  // graph memory for all phases
  double prompt_ratio = 0.3;       // share of `bytes` for prompt graphs
  /// Estimate for a phase's graphs before one of them was measured. Without it the first
  /// capture of a phase is admitted on trust and released if its real cost does not fit.
  std::optional<graph_cost> model{};

  friend bool operator==(const graph_budget&, const graph_budget&) = default;

  /// Gaudi's graph memory: usable memory (free x gpu_memory_utilization) x
  /// graph_reserved_mem, the complement of rungs::kv::kv_memory(m), which sizes the KV cache
  /// from the same figures. Throws naming the field that is out of range.
  static graph_budget gaudi(const rungs::kv::gaudi_memory& m, double prompt_ratio = 0.3,
                            std::optional<graph_cost> model = {}) {
    const std::int64_t kv = rungs::kv::kv_memory(m);  // validates m
    const auto usable =
        static_cast<std::int64_t>(std::floor(static_cast<double>(m.free_bytes) * m.gpu_memory_utilization));
    graph_budget b{.bytes = usable - kv, .prompt_ratio = prompt_ratio, .model = model};
    b.validate();
    return b;
  }

  bool limited() const { return bytes != unlimited; }
  std::int64_t share(phase p) const {
    if (!limited()) return unlimited;
    auto prompt = static_cast<std::int64_t>(std::floor(static_cast<double>(bytes) * prompt_ratio));
    return p == phase::prompt ? prompt : bytes - prompt;
  }

  void validate() const {
    if (bytes < 0 && bytes != unlimited)
      throw std::invalid_argument("graph budget: bytes = " + std::to_string(bytes) +
                                  " must be non-negative (or graph_budget::unlimited)");
    if (!(prompt_ratio >= 0.0 && prompt_ratio <= 1.0))
      throw std::invalid_argument("graph budget: prompt_ratio = " + std::to_string(prompt_ratio) +
                                  " must lie in [0, 1]");
    if (model && (model->base < 0 || model->per_unit < 0))
      throw std::invalid_argument("graph budget: cost model " + std::to_string(model->base) + ":" +
                                  std::to_string(model->per_unit) + " must not be negative");
  }
};

/// The engine's account of graph memory: what is used per phase, and estimates from what
/// captures really cost.
class graph_ledger {
 public:
  explicit graph_ledger(graph_budget b = {}) : budget_(std::move(b)) { budget_.validate(); }

  const graph_budget& budget() const { return budget_; }
  std::int64_t used(phase p) const { return phase_[index(p)].used; }
  std::int64_t used() const { return phase_[0].used + phase_[1].used; }
  /// Graph memory left, or graph_budget::unlimited.
  std::int64_t left() const { return budget_.limited() ? budget_.bytes - used() : graph_budget::unlimited; }

  /// Bytes bucket `b`'s graph is expected to take. With a cost model: the model, scaled by
  /// how far this phase's measured captures were from it (exact when the model is). Without:
  /// the phase's measured bytes per cost unit, as Gaudi estimates. Before any measurement:
  /// the model, or 0 (the capture is then checked against its measured cost).
  std::int64_t estimate(const bucket& b) const {
    const account& a = phase_[index(b.ph)];
    double e = 0;
    if (budget_.model) {
      e = static_cast<double>(std::max<std::int64_t>(0, budget_.model->bytes(b)));
      if (a.modelled > 0) e *= static_cast<double>(a.measured) / a.modelled;
    } else if (a.units > 0) {
      e = static_cast<double>(a.measured) / static_cast<double>(a.units) * static_cast<double>(b.cost_units());
    }
    return static_cast<std::int64_t>(std::ceil(e));
  }

  /// Whether `bytes` more for bucket `b` stays within the budget: within its phase's share,
  /// or within the pooled leftover once the other phase is complete.
  bool admits(const bucket& b, std::int64_t bytes, bool other_phase_complete) const {
    if (!budget_.limited()) return true;
    bytes = std::max<std::int64_t>(bytes, 0);
    if (used(b.ph) + bytes <= budget_.share(b.ph)) return true;
    return other_phase_complete && used() + bytes <= budget_.bytes;
  }

  /// Learns from a capture's measured cost (kept or released). A negative measurement (the
  /// capture freed warm-up memory, as in vLLM's logs) counts as 0.
  void measured(const bucket& b, std::int64_t bytes) {
    account& a = phase_[index(b.ph)];
    a.measured += std::max<std::int64_t>(bytes, 0);
    a.units += b.cost_units();
    if (budget_.model) a.modelled += static_cast<double>(std::max<std::int64_t>(0, budget_.model->bytes(b)));
  }

  /// Charges a kept graph's cost to its phase.
  void charge(const bucket& b, std::int64_t bytes) { phase_[index(b.ph)].used += std::max<std::int64_t>(bytes, 0); }

 private:
  struct account {
    std::int64_t used = 0;      // kept graphs
    std::int64_t measured = 0;  // every measured capture
    std::int64_t units = 0;     //   their cost units
    double modelled = 0;        //   what the model predicted for them
  };
  static std::size_t index(phase p) { return static_cast<std::size_t>(p); }

  graph_budget budget_;
  account phase_[2];
};

}  // namespace rungs::engine
