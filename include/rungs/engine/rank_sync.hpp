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
#include <barrier>
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
class simulated_ranks {
 public:
  explicit simulated_ranks(int ranks)
      : ranks_(check(ranks)), contributions_(static_cast<std::size_t>(ranks)), barrier_(ranks) {}

  int size() const { return ranks_; }

  class handle {
   public:
    void max_each(std::span<std::int64_t> values) { group_->reduce(rank_, values); }
    int rank() const { return rank_; }

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
  static int check(int ranks) {
    if (ranks <= 0) throw std::invalid_argument("simulated_ranks: ranks = " + std::to_string(ranks) + " must be positive");
    return ranks;
  }

  void reduce(int r, std::span<std::int64_t> values) {
    contributions_[static_cast<std::size_t>(r)].assign(values.begin(), values.end());
    barrier_.arrive_and_wait();  // every contribution is in
    bool mismatch = false;
    for (const auto& c : contributions_) {
      // Different lengths mean the ranks are not in the same collective: their engines
      // diverged, which is exactly what this class exists to catch.
      if (c.size() != values.size()) {
        mismatch = true;
        continue;
      }
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::max(values[i], c[i]);
    }
    barrier_.arrive_and_wait();  // every rank has read before anyone writes again
    if (mismatch) throw std::logic_error("simulated_ranks: ranks called max_each with different lengths");
  }

  int ranks_;
  std::vector<std::vector<std::int64_t>> contributions_;
  std::barrier<> barrier_;
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

static_assert(rank_sync<single_rank>);
static_assert(rank_sync<simulated_ranks::handle>);

}  // namespace rungs::engine
