// Rank consistency: the one collective an engine needs so that tensor- or data-parallel
// ranks pad to the same bucket and capture the same graphs at the same step.
//
// Graphs that contain collectives must be captured by every rank, in the same order, at the
// same step; ranks that decide on their own deadlock (vLLM #25906). An engine's capture
// decisions depend only on its static configuration and the buckets it executed, so it is
// enough for the ranks to agree on
//   - each step's batch key (elementwise maximum: every rank pads to the largest batch), and
//   - each capture's outcome and cost (a capture that failed on any rank is dropped on all;
//     the budget is charged the largest cost any rank measured).
// Both are an all-reduce MAX over a few integers: `max_each`. A multi-GPU stack implements
// it with one NCCL/Gloo all-reduce on a small buffer; single_rank does nothing.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rungs::engine {

template <class S>
concept rank_sync = requires(S& s, std::span<std::int64_t> values) {
  { s.max_each(values) };  // replace each value by its maximum over all ranks
};

/// One rank: nothing to agree with.
struct single_rank {
  void max_each(std::span<std::int64_t>) {}
};

/// Several ranks simulated by threads of one process (for tests and the planner): each
/// rank's handle blocks in max_each until every rank has called it, like a collective.
/// A rank that fails calls abort(): every rank waiting in max_each, and every later call,
/// throws instead of waiting for a rank that will never come (what the MPI transport's
/// deadline and MPI_Abort do for processes).
class simulated_ranks {
 public:
  explicit simulated_ranks(int ranks) : ranks_(check(ranks)) {
    for (auto& buffer : contributions_) buffer.resize(static_cast<std::size_t>(ranks));
  }

  int size() const { return ranks_; }

  class handle {
   public:
    void max_each(std::span<std::int64_t> values) { group_->reduce(rank_, values); }
    int rank() const { return rank_; }
    /// This rank stopped (`why`): the others stop too.
    void abort(const std::string& why) { group_->abort(rank_, why); }

   private:
    friend class simulated_ranks;
    handle(simulated_ranks* g, int r) : group_(g), rank_(r) {}
    simulated_ranks* group_;
    int rank_;
  };

  handle rank(int r) {
    if (r < 0 || r >= ranks_)
      throw std::out_of_range("simulated_ranks: rank " + std::to_string(r) + " is outside [0, " +
                              std::to_string(ranks_) + ")");
    return handle(this, r);
  }

 private:
  // A planner run agrees a few times per simulated step, hundreds of thousands of times per
  // trace, so the collective is one barrier, not two: reduction k reads the contributions of
  // buffer k % 2 while a rank already in reduction k + 1 writes buffer (k + 1) % 2, and no rank
  // can write buffer k % 2 again (reduction k + 2) before every rank has arrived at k + 1, that
  // is, has finished reading k. Waiting spins briefly before it sleeps: a sleep and wake per
  // barrier cost 30 s of kernel time on the Azure hour at 2 ranks.
  static constexpr std::uint64_t aborted_bit = std::uint64_t{1} << 63;

  static int check(int ranks) {
    if (ranks <= 0) throw std::invalid_argument("simulated_ranks: ranks = " + std::to_string(ranks) + " must be positive");
    return ranks;
  }

  // Arrives at barrier `phase` and returns once every rank has (or throws if a rank aborted).
  void arrive_and_wait(std::uint64_t phase) {
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == ranks_) {
      arrived_.store(0, std::memory_order_relaxed);  // before the release below: the next barrier starts at 0
      phase_.fetch_add(1, std::memory_order_acq_rel);
      phase_.notify_all();
    } else {
      std::uint64_t now = phase_.load(std::memory_order_acquire);
      for (int spin = 0; now == phase && spin < 256; ++spin) {
        std::this_thread::yield();
        now = phase_.load(std::memory_order_acquire);
      }
      while (now == phase) {
        phase_.wait(phase, std::memory_order_acquire);
        now = phase_.load(std::memory_order_acquire);
      }
    }
    throw_if_aborted();
  }

  void throw_if_aborted() {
    if (!(phase_.load(std::memory_order_acquire) & aborted_bit)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    throw std::runtime_error(aborted_);
  }

  void abort(int r, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!aborted_.empty()) return;
      aborted_ = "simulated_ranks: rank " + std::to_string(r) + " stopped (" + why + ")";
    }
    phase_.fetch_or(aborted_bit, std::memory_order_acq_rel);  // changes the phase: every waiter wakes
    phase_.notify_all();
  }

  void reduce(int r, std::span<std::int64_t> values) {
    // The phase cannot move before this rank arrives, so it names this reduction.
    const std::uint64_t phase = phase_.load(std::memory_order_acquire);
    throw_if_aborted();
    auto& mine = contributions_[phase % 2];
    mine[static_cast<std::size_t>(r)].assign(values.begin(), values.end());
    arrive_and_wait(phase);  // every contribution is in
    bool mismatch = false;
    for (const auto& c : mine) {
      // Different lengths mean the ranks are not in the same collective: their engines
      // diverged, which is exactly what this class exists to catch.
      if (c.size() != values.size()) {
        mismatch = true;
        continue;
      }
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::max(values[i], c[i]);
    }
    if (mismatch) throw std::logic_error("simulated_ranks: ranks called max_each with different lengths");
  }

  int ranks_;
  std::array<std::vector<std::vector<std::int64_t>>, 2> contributions_;  // by phase parity, then rank
  std::atomic<int> arrived_{0};
  std::atomic<std::uint64_t> phase_{0};  // barriers completed; aborted_bit once a rank aborted
  std::mutex mutex_;                     // guards aborted_
  std::string aborted_;                  // why the ranks stopped; empty while they run
};

/// What a transport all-reduces (MAX) for one max_each: the values padded to `Capacity`, with
/// their count n and -n in front. The fixed size keeps every rank in the same collective even
/// when engines diverge and call with different counts; the count's maximum and minimum (the
/// maximum of -n) then tell every rank at once, and every rank throws, so none is left waiting.
template <std::size_t Capacity>
struct rank_frame {
  static constexpr std::size_t capacity = Capacity;      ///< values one frame carries at most
  std::array<std::int64_t, Capacity + 2> data{};          ///< [n, -n, values..., padding]

  /// Throws std::invalid_argument (naming `who`) for more than `capacity` values.
  void pack(std::span<const std::int64_t> values, const char* who) {
    if (values.size() > capacity)
      throw std::invalid_argument(std::string(who) + ": max_each of " + std::to_string(values.size()) +
                                  " values; at most " + std::to_string(capacity) + " fit one collective");
    data.fill(std::numeric_limits<std::int64_t>::min());
    data[0] = static_cast<std::int64_t>(values.size());
    data[1] = -data[0];
    std::copy(values.begin(), values.end(), data.begin() + 2);
  }

  /// After the all-reduce: the agreed values into `values`, or std::logic_error on every rank
  /// when the ranks' counts differed (call `call`, counting from 1).
  void unpack(std::span<std::int64_t> values, const char* who, std::int64_t call) const {
    if (data[0] != -data[1])
      throw std::logic_error(std::string(who) + ": ranks called max_each #" + std::to_string(call) + " with " +
                             std::to_string(-data[1]) + " to " + std::to_string(data[0]) +
                             " values; their engines diverged");
    std::copy(data.begin() + 2, data.begin() + 2 + static_cast<std::ptrdiff_t>(values.size()), values.begin());
  }
};

/// Polls `done()` until it returns true or `timeout` passes (then false): spinning first (an
/// agreement on a quiet link takes microseconds), then sleeping up to 1 ms between polls, so
/// that ranks sharing cores (mpirun --oversubscribe) leave the CPU to the rank they wait for.
template <class Done>
bool poll_until(std::chrono::milliseconds timeout, Done done) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  auto pause = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    if (done()) return true;
    if (clock::now() >= deadline) return false;
    if (polls >= 1000) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

/// A time (any finite double >= 0) as one value of max_each, and back: the bits of
/// non-negative doubles, read as int64, are ordered as the values, so the maximum of the bits
/// is the bits of the maximum, exactly (every rank gets the same double, unrounded), and the
/// maximum of the negated bits is the earliest time. Throws std::invalid_argument otherwise.
inline std::int64_t time_bits(double seconds) {
  if (!(seconds >= 0 && seconds <= std::numeric_limits<double>::max()))
    throw std::invalid_argument("rank agreement: time " + std::to_string(seconds) + " must be finite and >= 0");
  return std::bit_cast<std::int64_t>(seconds + 0.0);  // + 0.0: -0.0 becomes +0.0
}
inline double bits_time(std::int64_t bits) { return std::bit_cast<double>(bits); }

/// Any rank_sync, held by reference and chosen at run time: what a serving driver agrees
/// through (rungs/serving/driver.hpp), whether its ranks are threads (simulated_ranks), MPI
/// processes (rungs::mpi::rank_sync) or none. Empty (default): one rank, nothing to agree.
/// The rank_sync it refers to must outlive it.
class rank_sync_ref {
 public:
  rank_sync_ref() = default;
  template <class S>
    requires(rank_sync<S> && !std::same_as<S, rank_sync_ref>)
  rank_sync_ref(S& s)  // NOLINT: implicit from any rank_sync
      : self_(&s), max_each_([](void* self, std::span<std::int64_t> v) { static_cast<S*>(self)->max_each(v); }) {}

  /// Replaces each value by its maximum over all ranks (nothing to do for one rank).
  void max_each(std::span<std::int64_t> values) const {
    if (self_) max_each_(self_, values);
  }
  /// Whether there are other ranks to agree with.
  explicit operator bool() const { return self_ != nullptr; }

 private:
  void* self_ = nullptr;
  void (*max_each_)(void*, std::span<std::int64_t>) = nullptr;
};

static_assert(rank_sync<single_rank>);
static_assert(rank_sync<simulated_ranks::handle>);
static_assert(rank_sync<rank_sync_ref>);

}  // namespace rungs::engine
