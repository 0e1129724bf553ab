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
//
// Arithmetic: a modelled cost that does not fit int64 is an error naming the model and the
// bucket (std::invalid_argument); an admission whose sum would not fit int64 is refused (it
// exceeds every budget); an estimate beyond int64 reads as INT64_MAX ("more than any budget
// holds"); the kept graphs of an unlimited budget summing past int64 are an error. Nothing
// wraps around.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include <rungs/checked.hpp>
#include <rungs/engine/bucket_space.hpp>
#include <rungs/kv/capacity.hpp>

namespace rungs::engine {

/// A linear cost model: bytes = base + per_unit * bucket.cost_units() (bs*seq for prompt
/// graphs, bs for decode graphs and 1-D ladders).
struct graph_cost {
  std::int64_t base = 0;
  std::int64_t per_unit = 0;
  /// Throws std::invalid_argument naming the model and the bucket when the bytes do not fit
  /// int64.
  std::int64_t bytes(const bucket& b) const {
    const std::optional<std::int64_t> units = checked_mul(per_unit, b.cost_units());
    if (const std::optional<std::int64_t> v = units ? checked_add(base, *units) : std::nullopt) return *v;
    throw std::invalid_argument("graph cost: base " + std::to_string(base) + " + per_unit " + std::to_string(per_unit) +
                                " x " + std::to_string(b.cost_units()) + " cost units of bucket " + text_of(b) +
                                " exceeds 2^63 - 1 bytes");
  }
  friend constexpr bool operator==(const graph_cost&, const graph_cost&) = default;

 private:
  static std::string text_of(const bucket& b) {
    std::ostringstream os;
    os << b;
    return os.str();
  }
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
    const std::int64_t usable =
        floor_share(m.free_bytes, static_cast<double>(m.free_bytes) * m.gpu_memory_utilization);
    graph_budget b{.bytes = usable - kv, .prompt_ratio = prompt_ratio, .model = model};
    b.validate();
    return b;
  }

  bool limited() const { return bytes != unlimited; }
  std::int64_t share(phase p) const {
    if (!limited()) return unlimited;
    const std::int64_t prompt = floor_share(bytes, static_cast<double>(bytes) * prompt_ratio);
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
  /// An estimate beyond int64 is INT64_MAX: more than any budget holds.
  std::int64_t estimate(const bucket& b) const {
    const account& a = phase_[index(b.ph)];
    double e = 0;
    if (budget_.model) {
      e = static_cast<double>(std::max<std::int64_t>(0, budget_.model->bytes(b)));
      if (a.modelled > 0) e *= a.measured / a.modelled;
    } else if (a.units > 0) {
      e = a.measured / a.units * static_cast<double>(b.cost_units());
    }
    return checked_trunc(std::ceil(e)).value_or(std::numeric_limits<std::int64_t>::max());
  }

  /// Whether `bytes` more for bucket `b` stays within the budget: within its phase's share,
  /// or within the pooled leftover once the other phase is complete. A sum past int64 is
  /// beyond every budget.
  bool admits(const bucket& b, std::int64_t bytes, bool other_phase_complete) const {
    if (!budget_.limited()) return true;
    bytes = std::max<std::int64_t>(bytes, 0);
    const std::optional<std::int64_t> phase_total = checked_add(used(b.ph), bytes);
    if (phase_total && *phase_total <= budget_.share(b.ph)) return true;
    const std::optional<std::int64_t> total = checked_add(used(), bytes);
    return other_phase_complete && total && *total <= budget_.bytes;
  }

  /// Learns from a capture's measured cost (kept or released). A negative measurement (the
  /// capture freed warm-up memory, as in vLLM's logs) counts as 0.
  void measured(const bucket& b, std::int64_t bytes) {
    account& a = phase_[index(b.ph)];
    a.measured += static_cast<double>(std::max<std::int64_t>(bytes, 0));
    a.units += static_cast<double>(b.cost_units());
    if (budget_.model) a.modelled += static_cast<double>(std::max<std::int64_t>(0, budget_.model->bytes(b)));
  }

  /// Charges a kept graph's cost to its phase. Throws std::invalid_argument when the kept
  /// graphs' bytes would not fit int64 (only an unlimited budget gets there).
  void charge(const bucket& b, std::int64_t bytes) {
    bytes = std::max<std::int64_t>(bytes, 0);
    account& a = phase_[index(b.ph)];
    const std::optional<std::int64_t> phase_total = checked_add(a.used, bytes);
    if (!phase_total || !checked_add(used(), bytes))
      throw std::invalid_argument("graph memory: " + std::to_string(used()) + " bytes of kept graphs + " +
                                  std::to_string(bytes) + " exceeds 2^63 - 1 bytes");
    a.used = *phase_total;
  }

 private:
  struct account {
    std::int64_t used = 0;  // kept graphs
    // Only ratios are taken of these (an estimate), so doubles: they cannot overflow.
    double measured = 0;  // every measured capture
    double units = 0;     //   their cost units
    double modelled = 0;  //   what the model predicted for them
  };
  static std::size_t index(phase p) { return static_cast<std::size_t>(p); }

  graph_budget budget_;
  account phase_[2];
};

}  // namespace rungs::engine
