// The host backend: the engine on the CPU, where "capture" prepares a step for one bucket's
// shape and "replay" runs that prepared step on the padded batch.
//
// It runs the same engine code as the CUDA backend (lookup, padding, capture decisions,
// budget, statistics), so CI tests every policy through it. A capture runs the forward once
// on a dummy batch of the bucket's shape (every row padding), as CUDA engines warm up before
// capturing; an exception there is a failed capture. Capture cost can be simulated (a cost
// model for bytes and seconds, optionally spent for real) and failures injected per bucket.
#pragma once

#include <algorithm>
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
  /// Attention groups whose block tables the forward reads (kv::hybrid_allocator's
  /// num_groups(); cuda_backend_options::groups): group 0's is the staged batch's, the others
  /// come through stage_groups and are counted in uploaded_bytes() as a device copy would take
  /// them; stage_groups with another count throws. 0: as many as stage_groups hands over,
  /// counted from the first staged step on (whose count then includes the groups' whole
  /// capacity, which cuda_backend, told at construction, uploads at the captures).
  std::int32_t groups = 0;
};

class host_backend {
 public:
  using options = host_backend_options;

  explicit host_backend(host_forward forward, options opts = {})
      : forward_(std::move(forward)), opts_(std::move(opts)) {
    if (!forward_) throw std::invalid_argument("host_backend: the forward function is empty");
    if (opts_.groups < 0)
      throw std::invalid_argument("host_backend: options::groups = " + std::to_string(opts_.groups) +
                                  " must be at least 1, or 0 for the count stage_groups hands over");
  }

  void setup(const backend_setup& s) {
    setup_ = s;
    prepared_.assign(s.slots, std::nullopt);
    slot_phase_.assign(s.slots, phase::decode);
    out_.resize(static_cast<std::size_t>(s.seqs * s.row_width));
    for (device_copy& d : device_copies_) d = device_copy{.seqs = s.seqs, .tokens = s.tokens, .width = s.width};
    eager_copy_ = device_copy{};
    workspace_.resize(static_cast<std::size_t>(workspace_for(s.seqs, s.tokens)));
  }

  capture_report capture(std::size_t slot, const bucket& b, const padded_batch& dummy) {
    auto t0 = std::chrono::steady_clock::now();
    capture_report rep;
    try {
      if (opts_.simulate && opts_.simulate->fail)
        if (auto why = opts_.simulate->fail(slot, b)) throw std::runtime_error(*why);
      run(dummy, device_copies_[static_cast<std::size_t>(b.ph)], std::nullopt);  // warm-up on padding: must leave every cache untouched
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
    run(staged, device_copies_[static_cast<std::size_t>(slot_phase_[slot])], std::exchange(groups_, std::nullopt));
    ++replays_;
  }

  void eager(const padded_batch& staged) {
    run(staged, eager_copy_, std::exchange(groups_, std::nullopt));
    ++eager_runs_;
  }

  void release(std::size_t slot) { prepared_.at(slot).reset(); }

  /// The next run's group tables (the engine calls it before a runner step when its allocator
  /// has several groups): the forward finds them in host_step::groups.
  /// Throws std::invalid_argument when `t` has another number of groups than options::groups.
  void stage_groups(const group_tables& t) {
    if (opts_.groups > 0) group_table_copy::check_staged("host_backend", t, opts_.groups);
    staged_groups_ = t.groups;
    groups_ = t;
  }

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
  /// the batch's previous version, the whole view otherwise; and with options::groups > 1,
  /// the further groups' table entries that differ from the copy's (group_table_copy: the whole
  /// capacity the first time; see options::groups). Unlike cuda_backend::last_upload(), no plan and no merging of
  /// nearby ranges.
  std::int64_t uploaded_bytes() const { return uploaded_bytes_; }

 private:
  std::int64_t workspace_for(std::int64_t seqs, std::int64_t tokens) const {
    return opts_.workspace_bytes ? opts_.workspace_bytes(seqs, tokens) : 0;
  }

  // What cuda_backend keeps of a device copy: the staged arrays' state, and the further
  // groups' tables, mirrored here in the capacity of cuda_backend's buffers: the largest graph
  // shape for a phase's graphs, grown to each larger step for eager steps (new buffers: their
  // tables unknown, so written whole). A group's tables take seqs x width entries, rounded up
  // to cuda_backend's 16-byte alignment.
  struct device_copy {
    std::int64_t seqs = 0, tokens = 0, width = 0;  // capacity
    upload_tracker arrays{};
    group_table_copy groups{};
    std::vector<std::int32_t> mirror{};
    std::int64_t stride() const { return (seqs * width + 3) / 4 * 4; }
  };

  void run(const padded_batch& staged, device_copy& device, const std::optional<group_tables>& groups) {
    uploaded_bytes_ = upload_tracker::bytes(device.arrays.plan(staged));
    const std::int32_t count = opts_.groups > 0 ? opts_.groups : staged_groups_;
    if (count > 1) {
      const bool fits = staged.seqs() <= device.seqs && staged.tokens() <= device.tokens &&
                        staged.seqs() * staged.width() <= device.seqs * device.width;
      if (!fits) {
        device.seqs = std::max(device.seqs, staged.seqs());
        device.tokens = std::max(device.tokens, staged.tokens());
        device.width = std::max(device.width, staged.width());
      }
      if (!fits || device.groups.groups() != count) {
        device.groups = group_table_copy(count, device.seqs);
        device.mirror.assign(static_cast<std::size_t>((count - 1) * device.stride()), 0);
      }
      device.groups.write(device.mirror.data(), device.stride(), staged, groups, "host_backend",
                          [&](std::int64_t, std::int64_t n) { uploaded_bytes_ += n * std::int64_t{sizeof(std::int32_t)}; });
    }
    auto need_out = static_cast<std::size_t>(staged.seqs() * setup_.row_width);
    if (out_.size() < need_out) out_.resize(need_out);  // only above the top bucket
    auto need_ws = static_cast<std::size_t>(workspace_for(staged.seqs(), staged.tokens()));
    if (workspace_.size() < need_ws) workspace_.resize(need_ws);
    forward_(host_step{staged.view(), std::span<float>(out_.data(), need_out), setup_.row_width,
                       std::span<std::byte>(workspace_.data(), workspace_.size()), groups.value_or(group_tables{})});
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
  std::array<device_copy, 2> device_copies_;
  device_copy eager_copy_;
  std::vector<phase> slot_phase_;
  std::optional<group_tables> groups_{};
  std::int32_t staged_groups_ = 1;  // options::groups = 0: the count stage_groups last handed over
};

static_assert(engine_backend<host_backend>);

}  // namespace rungs::engine
