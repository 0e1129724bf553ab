// The CUDA backend: stream capture of the user's forward into one graph per bucket,
// instantiated once and replayed with a single launch.
//
// Static buffers. Every step's inputs (token ids, positions, slot mapping, query starts,
// sequence lengths, block tables) and the forward's plan live in one device buffer sized once
// for the largest bucket, each array at an offset fixed by that size, mirrored by one pinned
// host buffer. A graph records those addresses; a replay rewrites the same addresses, so block
// tables, lengths and the attention plan change every step without recapture (FlashInfer's
// plan/run). A step uploads only what the device copy lacks (upload_tracker, batch.hpp): the
// ranges the persistent staging changed since the version the device holds, plus the plan;
// the whole staged view after another batch used the buffer (a capture's dummy). The graphs of
// each bucket phase (Gaudi's prompt and decode) have buffers of their own, as the runner has a
// staging per phase; eager steps use a third set, grown on demand. Padded tokens carry slot -1 and padded sequences length 0 (batch.hpp), so a
// replay never writes the KV cache for rows that are not real.
//
// Hybrid models (options::groups > 1: kv::hybrid_allocator's attention groups). Each buffer set
// also holds one block table per further group, in the staged table's layout (rows `width`
// apart, the staged batch's row order, entries that left a window as block 0), at offsets
// fixed by the buffer's capacity like every other array, so graphs read them at fixed
// addresses too. The engine hands them over before each step (stage_groups); a step uploads
// only the entries that differ from what the device copy holds (the pinned buffer mirrors it):
// an appended block, an entry that left the window; the whole of a group's tables only after
// the device copy was lost (new buffers, recover()) or the width changed.
//
// Capture. Each capture first runs the forward once eagerly on a batch of padding (warm-up:
// lazy initialisation, autotuning), then captures it on the backend's stream in
// thread-local mode, instantiates and uploads the graph. Its cost is the drop in free device
// memory across capture and instantiation (cudaMemGetInfo; the workspace is allocated once
// beforehand and shared by every graph, so it is not counted again). Any error (OOM, an
// invalidated capture, an exception thrown by the forward) is reported in the
// capture_report; the engine keeps that bucket eager.
//
// Faults (docs/engine.md, "Device faults"). A failed call while the backend is built or set up
// throws rungs::cuda_error naming it, after releasing what was made; one in a step throws, and
// the engine takes the step back (recover() says whether the device can go on); every destroy
// call goes through RUNGS_CUDA_RELEASE: reported, never thrown, never repeated.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <rungs/cuda/error.hpp>
#include <rungs/engine/backend.hpp>
#include <rungs/engine/batch.hpp>
#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

/// What a CUDA forward sees: device pointers into the static buffers, in the step's graph
/// shape. It must enqueue its work on `stream` and allocate nothing (it may be captured).
struct cuda_step {
  batch_view batch;             // device pointers
  const std::byte* plan;        // device copy of the plan written by the plan hook
  float* out;                   // [batch.seqs][row_width]
  std::int64_t row_width;
  std::byte* workspace;         // shared by every graph, sized for the largest bucket
  std::size_t workspace_bytes;
  cudaStream_t stream;
  /// A hybrid model's further attention groups (options::groups > 1): group g >= 1's block
  /// tables start at group_tables + (g - 1) * group_table_stride, in batch.block_tables' layout.
  std::int32_t groups = 1;
  const std::int32_t* group_tables = nullptr;
  std::int64_t group_table_stride = 0;

  /// Group g's block tables ([batch.seqs][batch.width]; group 0's is batch.block_tables).
  const std::int32_t* block_tables(std::int32_t g) const {
    return g == 0 ? batch.block_tables : group_tables + (g - 1) * group_table_stride;
  }
};

using cuda_forward = std::function<void(const cuda_step&)>;

/// The first `rows` output rows of the last run, on the device.
struct device_rows {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t width = 0;
  std::size_t size() const { return static_cast<std::size_t>(rows * width); }
};

/// What one upload copied to the device.
struct upload_stats {
  std::int64_t bytes = 0;
  std::int64_t copies = 0;
};

struct cuda_backend_options {
  /// Workspace bytes a step of `seqs` sequences and `tokens` tokens needs; never less for a
  /// larger step (eager steps within the largest graph shape reuse its workspace unasked).
  std::function<std::int64_t(std::int64_t seqs, std::int64_t tokens)> workspace_bytes{};
  /// Plan bytes for a staged shape, and the host-side planner that fills them each step.
  std::function<std::int64_t(std::int64_t seqs, std::int64_t tokens, std::int64_t width)> plan_bytes{};
  std::function<void(const padded_batch&, std::span<std::byte>)> plan{};
  /// Eager warm-up runs before each capture.
  int warmup_runs = 1;
  /// Changed ranges closer than this are uploaded as one copy (a cudaMemcpyAsync costs more
  /// host time than a few KiB of transfer).
  std::size_t upload_gap_bytes = 4096;
  /// Injected capture failure (tests): an error message for a capture that must fail.
  std::function<std::optional<std::string>(std::size_t index, const bucket&)> fail{};
  /// Attention groups whose block tables the forward reads (kv::hybrid_allocator's
  /// num_groups()): group 0's is the staged batch's; the others come through stage_groups and
  /// reach the forward as cuda_step::block_tables(g).
  std::int32_t groups = 1;
};

class cuda_backend {
 public:
  using options = cuda_backend_options;

  /// Runs `forward` on `stream` (a non-blocking stream of its own when null: capture needs
  /// a stream other than the legacy default stream).
  explicit cuda_backend(cuda_forward forward, options opts = {}, cudaStream_t stream = nullptr)
      : forward_(std::move(forward)), opts_(std::move(opts)), stream_(stream) {
    if (!forward_) throw std::invalid_argument("cuda_backend: the forward function is empty");
    if (opts_.groups < 1)
      throw std::invalid_argument("cuda_backend: options::groups = " + std::to_string(opts_.groups) + " must be at least 1");
    try {
      if (!stream_) {
        RUNGS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        owns_stream_ = true;
      }
      RUNGS_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
    } catch (...) {  // the cuda_error names the call; nothing made so far is kept
      close();
      throw;
    }
  }

  cuda_backend(cuda_backend&& o) noexcept { swap(o); }
  cuda_backend& operator=(cuda_backend&& o) noexcept {
    swap(o);
    return *this;
  }
  cuda_backend(const cuda_backend&) = delete;
  cuda_backend& operator=(const cuda_backend&) = delete;

  ~cuda_backend() { close(); }

  cudaStream_t stream() const { return stream_; }

  /// Sizes the shared workspace for the largest bucket (the graph runner calls it once, when
  /// built). A failed call throws cuda_error naming it; what setup made is released.
  void setup(const backend_setup& s) {
    if (stream_) RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i < graphs_.size(); ++i) release(i);  // a second setup starts over
    free_workspaces();
    free_buffers(eager_);  // sized for the old row width
    last_ = nullptr;
    setup_ = s;
    graphs_.assign(s.slots, nullptr);
    shapes_.assign(s.slots, std::nullopt);
    slot_phase_.assign(s.slots, phase::decode);
    for (buffers& b : static_) free_buffers(b);  // allocated by the first capture in each phase
    std::int64_t ws = opts_.workspace_bytes ? opts_.workspace_bytes(s.seqs, s.tokens) : 0;
    if (ws > 0) RUNGS_CUDA_CHECK(cudaMalloc(&workspace_, static_cast<std::size_t>(ws)));
    workspace_bytes_ = static_cast<std::size_t>(ws);
  }

  capture_report capture(std::size_t slot, const bucket& b, const padded_batch& dummy) {
    auto t0 = std::chrono::steady_clock::now();
    capture_report rep;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool capturing = false;
    try {
      if (opts_.fail)
        if (auto why = opts_.fail(slot, b)) throw std::runtime_error(*why);
      const cuda_step step = upload(graph_buffers(b.ph), dummy);
      for (int i = 0; i < opts_.warmup_runs; ++i) forward_(step);
      RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
      RUNGS_CUDA_CHECK(cudaGetLastError());
      std::size_t free_before = 0, free_after = 0, total = 0;
      RUNGS_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
      RUNGS_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      capturing = true;
      forward_(step);
      capturing = false;
      RUNGS_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      RUNGS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      RUNGS_CUDA_CHECK(cudaGraphUpload(exec, stream_));
      RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
      RUNGS_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
      rep.bytes = static_cast<std::int64_t>(free_before) - static_cast<std::int64_t>(free_after);
      release(slot);
      graphs_.at(slot) = exec;
      shapes_.at(slot) = dummy.shape();
      slot_phase_.at(slot) = b.ph;
      exec = nullptr;
      rep.ok = true;
    } catch (const std::exception& e) {
      rep.error = e.what();
    } catch (...) {  // whatever the forward threw, the capture below must still be ended
      rep.error = "the forward threw a non-standard exception";
    }
    if (capturing) {  // the forward threw mid-capture: end (and drop) the capture
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);  // fails as the capture did; it still ends
      if (partial) RUNGS_CUDA_RELEASE(cudaGraphDestroy(partial));
    }
    // A failed destroy is reported (RUNGS_CUDA_RELEASE) and not repeated: the capture's
    // outcome stands (a graph that could not be destroyed after instantiation is a leak, not
    // a failed capture).
    if (exec) RUNGS_CUDA_RELEASE(cudaGraphExecDestroy(exec));
    if (graph) RUNGS_CUDA_RELEASE(cudaGraphDestroy(graph));
    if (!rep.ok) {
      // Clear a non-sticky error left by the failure so the next call does not inherit it.
      cudaGetLastError();
      cudaStreamSynchronize(stream_);
    }
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  }

  void replay(std::size_t slot, const padded_batch& staged) {
    cudaGraphExec_t exec = graphs_.at(slot);
    if (!exec) throw std::logic_error("cuda_backend: slot " + std::to_string(slot) + " has no graph");
    // A graph's packed layout and grids are those of its capture shape and no other.
    if (shapes_.at(slot) != staged.shape())
      throw std::logic_error("cuda_backend: slot " + std::to_string(slot) + " replayed with a shape it was not captured at");
    buffers& b = static_[static_cast<std::size_t>(slot_phase_[slot])];
    upload(b, staged, std::exchange(pending_, std::nullopt));
    RUNGS_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    last_ = &b;
  }

  void eager(const padded_batch& staged) {
    // Eager steps have buffers of their own, so the graphs' device copies keep following the
    // persistent staging (an eager step between two replays would make the next upload whole).
    buffers& b = grow(eager_, staged);
    cuda_step step = upload(b, staged, std::exchange(pending_, std::nullopt));
    // A batch above every bucket may need more workspace than the largest graph: only eager
    // steps get it, from a separate buffer, so graphs keep their addresses. Within the largest
    // graph shape the shared workspace suffices (workspace_bytes never shrinks as steps grow).
    const bool within = staged.seqs() <= setup_.seqs && staged.tokens() <= setup_.tokens;
    std::int64_t ws = !within && opts_.workspace_bytes ? opts_.workspace_bytes(staged.seqs(), staged.tokens()) : 0;
    if (static_cast<std::size_t>(ws) > workspace_bytes_) {
      if (static_cast<std::size_t>(ws) > eager_workspace_bytes_) {
        RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
        if (eager_workspace_) RUNGS_CUDA_RELEASE(cudaFree(eager_workspace_));
        eager_workspace_ = nullptr;
        eager_workspace_bytes_ = 0;  // until the allocation below succeeds
        RUNGS_CUDA_CHECK(cudaMalloc(&eager_workspace_, static_cast<std::size_t>(ws)));
        eager_workspace_bytes_ = static_cast<std::size_t>(ws);
      }
      step.workspace = eager_workspace_;
      step.workspace_bytes = eager_workspace_bytes_;
    }
    forward_(step);
    RUNGS_CUDA_CHECK(cudaGetLastError());
    last_ = &b;
  }

  /// Destroys the slot's graph (a failure is reported, RUNGS_CUDA_RELEASE; the slot is empty either way).
  void release(std::size_t slot) {
    if (slot < graphs_.size() && graphs_[slot]) {
      RUNGS_CUDA_RELEASE(cudaGraphExecDestroy(graphs_[slot]));
      graphs_[slot] = nullptr;
    }
  }

  /// The next replay's or eager step's tables of every attention group (the engine calls it
  /// before each runner step that has sequences, when its allocator has several groups;
  /// backend.hpp, group_tables). A capture in between runs on padding and leaves them staged.
  /// Throws std::invalid_argument when `t` has another number of groups than options::groups.
  void stage_groups(const group_tables& t) {
    group_table_copy::check_staged("cuda_backend", t, opts_.groups);
    pending_ = t;
  }

  device_rows rows(std::int64_t n) const { return {last_ ? last_->out : nullptr, n, setup_.row_width}; }

  bool has_graph(std::size_t slot) const { return slot < graphs_.size() && graphs_[slot] != nullptr; }

  /// What the last capture, replay or eager step copied to the device: bytes and
  /// cudaMemcpyAsync calls (the persistent staging's changes, the plan; the whole staged view
  /// when the device copy did not hold the batch's previous version).
  upload_stats last_upload() const { return last_upload_; }

  /// After a step threw (engine::step, docs/engine.md "Device faults"): waits for the stream,
  /// clears the error the failure left so the next step does not inherit it, and says whether
  /// the device can go on: false after a sticky error (a kernel fault poisons the context, and
  /// cudaGetLastError cannot clear it).
  /// The failed step may have copied part of its inputs, or none: every device copy of the
  /// persistent staging is forgotten, so the next step uploads its view whole.
  bool recover() {
    for (buffers& b : static_) b.copy.forget(), b.groups.forget();
    eager_.copy.forget();
    eager_.groups.forget();
    pending_.reset();
    cudaStreamSynchronize(stream_);
    cudaGetLastError();
    return cudaPeekAtLastError() == cudaSuccess;
  }

 private:
  // The packed layout of a buffer: the six index arrays (slot_mapping int64, the others
  // int32), then the plan; each 16-byte aligned, at offsets fixed by the buffer's capacity, so
  // every shape within it reads its arrays at the same addresses (a shape's arrays are
  // prefixes; block-table rows are `width` apart): every graph captured over the buffer stays
  // valid while the persistent staging is updated in place.
  struct layout {
    std::size_t token_ids, positions, slot_mapping, query_start, seq_lens, block_tables, group_tables, plan, end;
    std::size_t group_bytes;  // one further group's tables (capacity seqs x width)
    std::size_t offset(upload_tracker::array a) const {
      switch (a) {
        case upload_tracker::array::token_ids: return token_ids;
        case upload_tracker::array::positions: return positions;
        case upload_tracker::array::slot_mapping: return slot_mapping;
        case upload_tracker::array::query_start: return query_start;
        case upload_tracker::array::seq_lens: return seq_lens;
        case upload_tracker::array::block_tables: return block_tables;
      }
      return end;
    }
  };
  static std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }
  layout layout_of(std::int64_t seqs, std::int64_t tokens, std::int64_t width) const {
    auto i32 = [](std::int64_t n) { return align16(static_cast<std::size_t>(n) * sizeof(std::int32_t)); };
    auto i64 = [](std::int64_t n) { return align16(static_cast<std::size_t>(n) * sizeof(std::int64_t)); };
    layout l{};
    l.token_ids = 0;
    l.positions = l.token_ids + i32(tokens);
    l.slot_mapping = l.positions + i32(tokens);
    l.query_start = l.slot_mapping + i64(tokens);
    l.seq_lens = l.query_start + i32(seqs + 1);
    l.block_tables = l.seq_lens + i32(seqs);
    l.group_tables = l.block_tables + i32(seqs * width);
    l.group_bytes = i32(seqs * width);
    l.plan = l.group_tables + static_cast<std::size_t>(opts_.groups - 1) * l.group_bytes;
    l.end = l.plan + align16(static_cast<std::size_t>(plan_size(seqs, tokens, width)));
    return l;
  }
  std::int64_t plan_size(std::int64_t seqs, std::int64_t tokens, std::int64_t width) const {
    return opts_.plan_bytes ? opts_.plan_bytes(seqs, tokens, width) : 0;
  }

  // Device inputs, plan and outputs for shapes up to (seqs, tokens, seqs x width entries), the
  // pinned host copy they are uploaded from (it always equals the device bytes it was
  // uploaded to), and what the device copy holds of which staged batch.
  struct buffers {
    std::int64_t seqs = 0, tokens = 0, width = 0;
    layout at{};
    std::byte* device = nullptr;
    std::byte* pinned = nullptr;
    std::size_t bytes = 0;
    float* out = nullptr;
    upload_tracker copy{};
    // The further groups' tables, mirrored in the pinned buffer (the device copy equals it).
    group_table_copy groups{};
  };

  bool fits(const buffers& b, const padded_batch& s) const {
    return s.seqs() <= b.seqs && s.tokens() <= b.tokens && s.seqs() * s.width() <= b.seqs * b.width &&
           align16(static_cast<std::size_t>(plan_size(s.seqs(), s.tokens(), s.width()))) <= b.at.end - b.at.plan;
  }

  void allocate(buffers& b, std::int64_t seqs, std::int64_t tokens, std::int64_t width) {
    free_buffers(b);
    buffers n{.seqs = seqs, .tokens = tokens, .width = width};
    n.at = layout_of(seqs, tokens, width);
    n.groups = group_table_copy(opts_.groups, seqs);
    n.bytes = std::max<std::size_t>(n.at.end, 16);
    // A failed allocation leaves `b` empty (not sized for buffers it lacks): the next step
    // that needs it tries again.
    try {
      RUNGS_CUDA_CHECK(cudaMalloc(&n.device, n.bytes));
      RUNGS_CUDA_CHECK(cudaMallocHost(&n.pinned, n.bytes));
      RUNGS_CUDA_CHECK(cudaMalloc(&n.out, static_cast<std::size_t>(std::max<std::int64_t>(seqs * setup_.row_width, 1)) * sizeof(float)));
    } catch (...) {
      free_buffers(n);
      throw;
    }
    b = n;
  }

  buffers& grow(buffers& b, const padded_batch& s) {
    if (!fits(b, s)) {
      RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffers may still be in use
      allocate(b, std::max(s.seqs(), b.seqs), std::max(s.tokens(), b.tokens), std::max(s.width(), b.width));
      if (!fits(b, s))
        throw std::logic_error("cuda_backend: plan_bytes(" + std::to_string(s.seqs()) + ", " + std::to_string(s.tokens()) +
                               ", " + std::to_string(s.width()) + ") exceeds plan_bytes of the largest shape; plan "
                               "bytes must not shrink as a shape grows");
    }
    return b;
  }

  // The graphs of a phase's buckets read the phase's buffers, sized for the largest shape.
  buffers& graph_buffers(phase ph) {
    buffers& b = static_[static_cast<std::size_t>(ph)];
    if (!b.device) allocate(b, setup_.seqs, setup_.tokens, setup_.width);
    return b;
  }

  static void free_buffers(buffers& b) {
    if (b.device) RUNGS_CUDA_RELEASE(cudaFree(b.device));
    if (b.pinned) RUNGS_CUDA_RELEASE(cudaFreeHost(b.pinned));
    if (b.out) RUNGS_CUDA_RELEASE(cudaFree(b.out));
    b = buffers{};
  }

  void free_workspaces() {
    if (workspace_) RUNGS_CUDA_RELEASE(cudaFree(workspace_));
    if (eager_workspace_) RUNGS_CUDA_RELEASE(cudaFree(eager_workspace_));
    workspace_ = eager_workspace_ = nullptr;
    workspace_bytes_ = eager_workspace_bytes_ = 0;
  }

  // Gives back everything the backend holds, each handle once (RUNGS_CUDA_RELEASE: a failure
  // is reported and the handle forgotten, never thrown): the destructor, and a constructor
  // that failed part way.
  void close() noexcept {
    // The last step may still read the buffers. A failure here is the last step's (a sticky
    // fault), which that step reported; the releases below go on regardless.
    // A non-sticky failure is consumed here, not left as the thread's last error.
    if (stream_)
      if (const cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess && cudaPeekAtLastError() == e)
        (void)cudaGetLastError();
    for (std::size_t i = 0; i < graphs_.size(); ++i) release(i);
    for (buffers& b : static_) free_buffers(b);
    free_buffers(eager_);
    free_workspaces();
    if (uploaded_) RUNGS_CUDA_RELEASE(cudaEventDestroy(uploaded_));
    uploaded_ = nullptr;
    if (owns_stream_ && stream_) RUNGS_CUDA_RELEASE(cudaStreamDestroy(stream_));
    stream_ = nullptr;
    owns_stream_ = false;
  }

  static const std::byte* host_array(const padded_batch& s, upload_tracker::array a) {
    switch (a) {
      case upload_tracker::array::token_ids: return reinterpret_cast<const std::byte*>(s.token_ids().data());
      case upload_tracker::array::positions: return reinterpret_cast<const std::byte*>(s.positions().data());
      case upload_tracker::array::slot_mapping: return reinterpret_cast<const std::byte*>(s.slot_mapping().data());
      case upload_tracker::array::query_start: return reinterpret_cast<const std::byte*>(s.query_start().data());
      case upload_tracker::array::seq_lens: return reinterpret_cast<const std::byte*>(s.seq_lens().data());
      case upload_tracker::array::block_tables: return reinterpret_cast<const std::byte*>(s.block_tables().data());
    }
    return nullptr;
  }

  // Copies what the device copy of `s` lacks (upload_tracker: the persistent staging's
  // changes, or the whole view) and the step's plan into the pinned buffer at the buffer's
  // fixed offsets, then to the device, ranges closer than upload_gap_bytes as one copy.
  // Returns the forward's view of it.
  cuda_step upload(buffers& b, const padded_batch& s, const std::optional<group_tables>& groups = std::nullopt) {
    if (!fits(b, s)) throw std::logic_error("cuda_backend: a staged batch outgrew its buffers");
    const layout& l = b.at;
    // The pinned buffer is rewritten below: the previous upload from it must be done.
    RUNGS_CUDA_CHECK(cudaEventSynchronize(uploaded_));
    spans_.clear();
    auto add = [&](std::size_t offset, std::size_t n) {
      if (n == 0) return;
      if (!spans_.empty() && offset <= spans_.back().first + spans_.back().second + opts_.upload_gap_bytes)
        spans_.back().second = std::max(spans_.back().second, offset + n - spans_.back().first);
      else
        spans_.emplace_back(offset, n);
    };
    for (const upload_tracker::copy& c : b.copy.plan(s)) {
      const auto size = static_cast<std::size_t>(upload_tracker::element_bytes(c.what));
      const std::size_t from = static_cast<std::size_t>(c.elements.from) * size;
      const std::size_t n = static_cast<std::size_t>(c.elements.to - c.elements.from) * size;
      std::memcpy(b.pinned + l.offset(c.what) + from, host_array(s, c.what) + from, n);
      add(l.offset(c.what) + from, n);
    }
    if (opts_.groups > 1)
      b.groups.write(reinterpret_cast<std::int32_t*>(b.pinned + l.group_tables),
                     static_cast<std::int64_t>(l.group_bytes / sizeof(std::int32_t)), s, groups, "cuda_backend",
                     [&](std::int64_t entry, std::int64_t n) {
                       add(l.group_tables + static_cast<std::size_t>(entry) * sizeof(std::int32_t),
                           static_cast<std::size_t>(n) * sizeof(std::int32_t));
                     });
    const std::size_t plan = align16(static_cast<std::size_t>(plan_size(s.seqs(), s.tokens(), s.width())));
    if (opts_.plan) {
      opts_.plan(s, std::span<std::byte>(b.pinned + l.plan, plan));
      add(l.plan, plan);
    }
    last_upload_ = {};
    for (const auto& [offset, n] : spans_) {
      RUNGS_CUDA_CHECK(cudaMemcpyAsync(b.device + offset, b.pinned + offset, n, cudaMemcpyHostToDevice, stream_));
      last_upload_.bytes += static_cast<std::int64_t>(n);
      ++last_upload_.copies;
    }
    RUNGS_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
    auto at = [&](std::size_t offset) { return reinterpret_cast<const std::int32_t*>(b.device + offset); };
    batch_view v{s.seqs(),         s.tokens(),
                 s.width(),        at(l.token_ids),
                 at(l.positions),  reinterpret_cast<const std::int64_t*>(b.device + l.slot_mapping),
                 at(l.query_start), at(l.seq_lens),
                 at(l.block_tables),
                 s.query()};
    return cuda_step{v,
                     b.device + l.plan,
                     b.out,
                     setup_.row_width,
                     workspace_,
                     workspace_bytes_,
                     stream_,
                     opts_.groups,
                     at(l.group_tables),
                     static_cast<std::int64_t>(l.group_bytes / sizeof(std::int32_t))};
  }

  void swap(cuda_backend& o) noexcept {
    std::swap(forward_, o.forward_);
    std::swap(opts_, o.opts_);
    std::swap(stream_, o.stream_);
    std::swap(owns_stream_, o.owns_stream_);
    std::swap(uploaded_, o.uploaded_);
    std::swap(setup_, o.setup_);
    std::swap(graphs_, o.graphs_);
    std::swap(shapes_, o.shapes_);
    std::swap(static_, o.static_);
    std::swap(eager_, o.eager_);
    std::swap(workspace_, o.workspace_);
    std::swap(workspace_bytes_, o.workspace_bytes_);
    std::swap(eager_workspace_, o.eager_workspace_);
    std::swap(eager_workspace_bytes_, o.eager_workspace_bytes_);
    std::swap(last_upload_, o.last_upload_);
    std::swap(pending_, o.pending_);
    last_ = nullptr;
    o.last_ = nullptr;
  }

  cuda_forward forward_;
  options opts_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t uploaded_ = nullptr;
  backend_setup setup_{};
  std::vector<cudaGraphExec_t> graphs_;
  std::array<buffers, 2> static_;  // per bucket phase: the graphs' buffers (persistent staging per phase)
  buffers eager_;
  std::vector<phase> slot_phase_;    // the phase whose buffers each slot's graph reads
  const buffers* last_ = nullptr;
  std::vector<std::optional<staged_shape>> shapes_;  // the shape each slot's graph was captured at
  std::byte* workspace_ = nullptr;  // shared by every graph
  std::size_t workspace_bytes_ = 0;
  std::byte* eager_workspace_ = nullptr;  // only for eager steps larger than every bucket
  std::size_t eager_workspace_bytes_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> spans_;  // (offset, bytes) of one upload's copies
  upload_stats last_upload_{};
  std::optional<group_tables> pending_;  // stage_groups' tables for the next replay or eager step
};

static_assert(engine_backend<cuda_backend>);

}  // namespace rungs::engine
