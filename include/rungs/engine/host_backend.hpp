// The host backend: the engine on the CPU, where "capture" prepares a step for one bucket's
// shape and "replay" runs that prepared step on the padded batch.
//
// It runs the same engine code as the CUDA backend (lookup, padding, capture decisions,
// budget, statistics), so CI tests every policy through it. A capture runs the forward once
// on a dummy batch of the bucket's shape (every row padding), as CUDA engines warm up before
// capturing; an exception there is a failed capture. Capture cost can be simulated (a cost
// model for bytes and seconds, optionally spent for real) and failures injected per bucket.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <rungs/engine/backend.hpp>
#include <rungs/engine/batch.hpp>
#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/graph_budget.hpp>

namespace rungs::engine {

/// What a host forward sees: the staged batch (padded when replaying), its output rows and
/// the workspace shared by every prepared step.
struct host_step {
  batch_view batch;
  std::span<float> out;             // [batch.seqs][row_width]
  std::int64_t row_width = 0;
  std::span<std::byte> workspace;   // sized once for the largest bucket
  /// Every attention group's block tables of the staged rows, when the engine's allocator has
  /// several (stage_groups; backend.hpp, group_tables); empty otherwise, and in a capture's
  /// warm-up on padding.
  group_tables groups{};
};

using host_forward = std::function<void(const host_step&)>;

/// Simulated capture cost and injected failures.
struct simulated_capture {
  graph_cost bytes{};              // what a capture reports it took
  double seconds = 0;              // seconds per capture ...
  double seconds_per_unit = 0;     // ... plus this per cost unit (bs*seq or bs)
  bool spend = false;              // spin for the simulated time (benchmarks); else only report it
  /// Returns an error message for a capture that must fail, nothing otherwise.
  std::function<std::optional<std::string>(std::size_t index, const bucket&)> fail{};
};

struct host_backend_options {
  std::optional<simulated_capture> simulate{};
  /// Workspace bytes a step of `seqs` sequences and `tokens` tokens needs.
  std::function<std::int64_t(std::int64_t seqs, std::int64_t tokens)> workspace_bytes{};
};

class host_backend {
 public:
  using options = host_backend_options;

  explicit host_backend(host_forward forward, options opts = {})
      : forward_(std::move(forward)), opts_(std::move(opts)) {
    if (!forward_) throw std::invalid_argument("host_backend: the forward function is empty");
  }

  void setup(const backend_setup& s) {
    setup_ = s;
    prepared_.assign(s.slots, std::nullopt);
    slot_phase_.assign(s.slots, phase::decode);
    out_.resize(static_cast<std::size_t>(s.seqs * s.row_width));
    workspace_.resize(static_cast<std::size_t>(workspace_for(s.seqs, s.tokens)));
  }

  capture_report capture(std::size_t slot, const bucket& b, const padded_batch& dummy) {
    auto t0 = std::chrono::steady_clock::now();
    capture_report rep;
    try {
      if (opts_.simulate && opts_.simulate->fail)
        if (auto why = opts_.simulate->fail(slot, b)) throw std::runtime_error(*why);
      run(dummy, device_copies_[static_cast<std::size_t>(b.ph)], {});  // warm-up on padding: must leave every cache untouched
      prepared_.at(slot) = dummy.shape();
      slot_phase_.at(slot) = b.ph;
      rep.ok = true;
    } catch (const std::exception& e) {
      rep.error = e.what();
    }
    double measured = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.seconds = measured;
    if (opts_.simulate) {
      const simulated_capture& sim = *opts_.simulate;
      rep.seconds = sim.seconds + sim.seconds_per_unit * static_cast<double>(b.cost_units());
      if (rep.ok) rep.bytes = sim.bytes.bytes(b);
      if (sim.spend)
        spin_until(t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(rep.seconds)));
    }
    ++captures_;
    return rep;
  }

  void replay(std::size_t slot, const padded_batch& staged) {
    // A graph replays the shape it was captured at and nothing else.
    if (prepared_.at(slot) != staged.shape())
      throw std::logic_error("host_backend: slot " + std::to_string(slot) + " replayed with a shape it was not prepared for");
    run(staged, device_copies_[static_cast<std::size_t>(slot_phase_[slot])], std::exchange(groups_, {}));
    ++replays_;
  }

  void eager(const padded_batch& staged) {
    run(staged, eager_copy_, std::exchange(groups_, {}));
    ++eager_runs_;
  }

  void release(std::size_t slot) { prepared_.at(slot).reset(); }

  /// The next run's group tables (the engine calls it before a runner step when its allocator
  /// has several groups): the forward finds them in host_step::groups.
  void stage_groups(const group_tables& t) { groups_ = t; }

  std::span<const float> rows(std::int64_t n) const {
    return {out_.data(), static_cast<std::size_t>(n * setup_.row_width)};
  }

  bool prepared(std::size_t slot) const { return prepared_.at(slot).has_value(); }
  std::int64_t captures() const { return captures_; }
  std::int64_t replays() const { return replays_; }
  std::int64_t eager_runs() const { return eager_runs_; }
  std::size_t workspace_size() const { return workspace_.size(); }
  /// Bytes a device backend would have copied to the device before the last run: what an
  /// upload_tracker plans over the device copies cuda_backend keeps (one per bucket phase for
  /// the graphs, one for eager steps): the persistent staging's changes when the run follows
  /// the batch's previous version, the whole view otherwise.
  std::int64_t uploaded_bytes() const { return uploaded_bytes_; }

 private:
  std::int64_t workspace_for(std::int64_t seqs, std::int64_t tokens) const {
    return opts_.workspace_bytes ? opts_.workspace_bytes(seqs, tokens) : 0;
  }

  void run(const padded_batch& staged, upload_tracker& device, const group_tables& groups) {
    uploaded_bytes_ = upload_tracker::bytes(device.plan(staged));
    auto need_out = static_cast<std::size_t>(staged.seqs() * setup_.row_width);
    if (out_.size() < need_out) out_.resize(need_out);  // only above the top bucket
    auto need_ws = static_cast<std::size_t>(workspace_for(staged.seqs(), staged.tokens()));
    if (workspace_.size() < need_ws) workspace_.resize(need_ws);
    forward_(host_step{staged.view(), std::span<float>(out_.data(), need_out), setup_.row_width,
                       std::span<std::byte>(workspace_.data(), workspace_.size()), groups});
  }

  static void spin_until(std::chrono::steady_clock::time_point t) {
    while (std::chrono::steady_clock::now() < t) {
    }
  }

  host_forward forward_;
  options opts_;
  backend_setup setup_{};
  std::vector<std::optional<staged_shape>> prepared_;
  std::vector<float> out_;
  std::vector<std::byte> workspace_;
  std::int64_t captures_ = 0, replays_ = 0, eager_runs_ = 0, uploaded_bytes_ = 0;
  // What cuda_backend's device copies of the staged arrays would hold: one per bucket phase
  // (the graphs' buffers), one for eager steps.
  std::array<upload_tracker, 2> device_copies_;
  upload_tracker eager_copy_;
  std::vector<phase> slot_phase_;
  group_tables groups_{};
};

static_assert(engine_backend<host_backend>);

}  // namespace rungs::engine
