// The capture queue: one graph slot per bucket, the capture sequence, and what has happened
// to each slot so far. Capture-timing policies read it to decide what to capture next; only
// the engine changes it.
//
// Every field here is a function of the static configuration and of the sequence of buckets
// the engine has executed (plus capture outcomes and costs, which the engine agrees across
// ranks before recording them). That is what keeps tensor-parallel ranks capturing the same
// graphs, in the same order, at the same step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

enum class graph_state : std::uint8_t {
  pending,   // no graph yet; may be captured
  captured,  // has a graph: steps in this bucket replay it
  failed,    // its capture failed (OOM, invalidated capture, error in forward): eager for good
  refused,   // the graph-memory budget had no room for it (may be retried, see below)
};

constexpr std::string_view to_string(graph_state s) {
  switch (s) {
    case graph_state::pending: return "pending";
    case graph_state::captured: return "captured";
    case graph_state::failed: return "failed";
    case graph_state::refused: return "refused";
  }
  return "?";
}

/// What the engine knows about one bucket's graph.
struct graph_slot {
  graph_state state = graph_state::pending;
  std::uint32_t refused_epoch = 0;  // the queue's epoch when the budget refused it
  std::int64_t uses = 0;            // steps that ran in this bucket (replayed or eager)
  std::int64_t bytes = 0;           // what its capture really cost
  double seconds = 0;               // how long its capture took
  std::int64_t captured_at = -1;    // steps run before its capture (0 = before the first step)
};

class capture_queue {
 public:
  capture_queue(std::span<const bucket> buckets, std::span<const std::size_t> order, std::span<graph_slot> slots)
      : buckets_(buckets), order_(order), slots_(slots) {
    for (std::size_t i = 1; i < buckets_.size(); ++i)
      if (buckets_[i].tokens() > buckets_[largest_].tokens()) largest_ = i;
    refresh();
  }

  std::size_t size() const { return buckets_.size(); }
  const bucket& at(std::size_t i) const { return buckets_[i]; }
  const graph_slot& slot(std::size_t i) const { return slots_[i]; }
  graph_state state(std::size_t i) const { return slots_[i].state; }
  bool captured(std::size_t i) const { return slots_[i].state == graph_state::captured; }
  std::int64_t uses(std::size_t i) const { return slots_[i].uses; }
  /// Bucket indices in capture order.
  std::span<const std::size_t> order() const { return order_; }
  /// Steps the engine has run so far.
  std::int64_t steps() const { return steps_; }

  /// True when bucket `i` may be captured now: it has no graph, its capture never failed,
  /// and the budget has not refused it since the last change of budget rules (a phase
  /// completing opens the pooled leftover to the other phase: Gaudi's spill-over).
  bool pending(std::size_t i) const {
    const graph_slot& s = slots_[i];
    return s.state == graph_state::pending || (s.state == graph_state::refused && s.refused_epoch < epoch_);
  }

  /// The first pending bucket in capture order.
  std::optional<std::size_t> next_pending() const {
    for (std::size_t k = cursor_; k < order_.size(); ++k)
      if (pending(order_[k])) return order_[k];
    return std::nullopt;
  }

  /// The bucket with the most tokens (the first such in ladder order).
  std::optional<std::size_t> largest() const {
    if (buckets_.empty()) return std::nullopt;
    return largest_;
  }

  /// Nothing is pending and nothing can become pending: capturing has stopped for good.
  bool settled() const { return settled_; }

  /// Every bucket of phase `p` has a graph or has failed (true for a phase with no buckets).
  bool phase_complete(phase p) const { return !incomplete_[static_cast<std::size_t>(p)]; }

  std::size_t count(graph_state s) const {
    std::size_t n = 0;
    for (const graph_slot& slot : slots_) n += slot.state == s;
    return n;
  }

  // -- changes, made by the engine only -------------------------------------------------
  void record_step() { ++steps_; }
  void record_use(std::size_t i) { ++slots_[i].uses; }
  void record_captured(std::size_t i, std::int64_t bytes, double seconds) {
    graph_slot& s = slots_[i];
    s.state = graph_state::captured;
    s.bytes = bytes;
    s.seconds = seconds;
    s.captured_at = steps_;
    refresh();
  }
  void record_failed(std::size_t i, double seconds) {
    slots_[i].state = graph_state::failed;
    slots_[i].seconds = seconds;
    refresh();
  }
  void record_refused(std::size_t i) {
    slots_[i].state = graph_state::refused;
    slots_[i].refused_epoch = epoch_;
    refresh();
  }

 private:
  // Recomputes the cached summaries after a change (captures are rare: a scan is fine).
  void refresh() {
    bool incomplete[2] = {false, false};
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      graph_state s = slots_[i].state;
      if (s != graph_state::captured && s != graph_state::failed)
        incomplete[static_cast<std::size_t>(buckets_[i].ph)] = true;
    }
    // A phase that just completed changes what the budget admits: refused buckets get
    // another chance (once) under the new rules.
    for (std::size_t p = 0; p < 2; ++p) {
      if (incomplete_[p] && !incomplete[p]) ++epoch_;
      incomplete_[p] = incomplete[p];
    }
    while (cursor_ < order_.size() && (slots_[order_[cursor_]].state == graph_state::captured ||
                                       slots_[order_[cursor_]].state == graph_state::failed))
      ++cursor_;
    settled_ = !next_pending().has_value();
  }

  std::span<const bucket> buckets_;
  std::span<const std::size_t> order_;
  std::span<graph_slot> slots_;
  std::size_t largest_ = 0;
  std::int64_t steps_ = 0;
  std::uint32_t epoch_ = 1;
  std::size_t cursor_ = 0;  // order_[0, cursor_) are captured or failed: never pending again
  bool incomplete_[2] = {true, true};
  bool settled_ = false;
};

}  // namespace rungs::engine
