// rungs::mpi::rank_sync: the engine's rank_sync (rungs/engine/rank_sync.hpp) over MPI, for
// ranks in separate processes or on separate hosts. Optional component rungs::mpi
// (find_package(rungs COMPONENTS mpi)); it needs <mpi.h> and MPI's C library, nothing else of
// rungs does.
//
// One max_each is one MPI_Iallreduce(MAX) of a fixed 18 int64 (144 bytes): the values, padded
// to `capacity`, with their count n and -n in front. The fixed size keeps every rank in the
// same collective even when engines diverge and call with different counts; the count's
// maximum and minimum (max of -n) then tell every rank at once, and every rank throws.
//
// A rank that exits, crashes or stalls must never leave the others waiting for ever: the
// request is polled against a deadline, and past it the rank prints which collective it
// waited for and calls MPI_Abort, which ends every rank of the communicator (mpirun reports
// the abort). A clean exit is not noticed by the others before the deadline (nothing is
// sent); a crash usually ends the job sooner, through mpirun.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include <rungs/engine/rank_sync.hpp>

namespace rungs::mpi {

/// Agrees values across the ranks of an MPI communicator (an all-reduce MAX), with a
/// deadline: see the file comment.
class rank_sync {
 public:
  /// Values one max_each carries at most (the engine sends 9 per step and 3 per capture).
  static constexpr std::size_t capacity = 16;
  /// How long max_each waits for the other ranks by default. Generous: a rank may be
  /// capturing a graph (up to about a second) or running a long prefill step in between.
  static constexpr std::chrono::milliseconds default_timeout{std::chrono::seconds(60)};
  /// The error code MPI_Abort reports when the deadline passes.
  static constexpr int timeout_abort_code = 75;

  /// Uses `comm` (kept, not duplicated) after MPI_Init. Throws std::logic_error before
  /// MPI_Init or after MPI_Finalize, std::invalid_argument for a timeout that is not positive.
  explicit rank_sync(MPI_Comm comm = MPI_COMM_WORLD, std::chrono::milliseconds timeout = default_timeout)
      : comm_(comm), timeout_(timeout) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) throw std::logic_error("rungs::mpi::rank_sync: MPI is not initialised (call MPI_Init first)");
    if (timeout.count() <= 0)
      throw std::invalid_argument("rungs::mpi::rank_sync: timeout = " + std::to_string(timeout.count()) +
                                  " ms must be positive");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  int rank() const { return rank_; }                           ///< this rank in the communicator
  int size() const { return size_; }                           ///< ranks in the communicator
  std::chrono::milliseconds timeout() const { return timeout_; }  ///< the deadline per max_each
  std::int64_t calls() const { return calls_; }                ///< max_each calls made so far

  /// Replaces each value by its maximum over all ranks. Every rank must call it, in the same
  /// order, with the same number of values; a different count throws std::logic_error on
  /// every rank. More than `capacity` values throw std::invalid_argument (before any
  /// communication). Past the deadline: a message on stderr, then MPI_Abort.
  void max_each(std::span<std::int64_t> values) {
    if (values.size() > capacity)
      throw std::invalid_argument("rungs::mpi::rank_sync: max_each of " + std::to_string(values.size()) +
                                  " values; at most " + std::to_string(capacity) + " fit one collective");
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::min();
    std::array<std::int64_t, capacity + 2> buf;
    buf.fill(none);
    const auto n = static_cast<std::int64_t>(values.size());
    buf[0] = n;
    buf[1] = -n;
    std::copy(values.begin(), values.end(), buf.begin() + 2);
    ++calls_;
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_INT64_T, MPI_MAX, comm_, &req),
          "MPI_Iallreduce");
    wait(req, values.size());
    if (buf[0] != -buf[1])
      throw std::logic_error("rungs::mpi::rank_sync: ranks called max_each #" + std::to_string(calls_) + " with " +
                             std::to_string(-buf[1]) + " to " + std::to_string(buf[0]) +
                             " values; their engines diverged");
    std::copy(buf.begin() + 2, buf.begin() + 2 + n, values.begin());
  }

 private:
  // Polls the request: spinning first (an agreement on a quiet loopback takes microseconds),
  // then sleeping up to 1 ms between polls so that ranks sharing cores (mpirun
  // --oversubscribe) leave the CPU to the rank they wait for.
  void wait(MPI_Request& req, std::size_t n) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout_;
    auto pause = std::chrono::microseconds(1);
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (clock::now() >= deadline) abort_after_timeout(n);
      if (polls >= 1000) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
  }

  [[noreturn]] void abort_after_timeout(std::size_t n) const {
    std::fprintf(stderr,
                 "rungs::mpi::rank_sync: rank %d of %d waited %lld ms for max_each #%lld (%zu values) and not every "
                 "rank joined: a rank exited, crashed or stalled; aborting all ranks (MPI_Abort %d)\n",
                 rank_, size_, static_cast<long long>(timeout_.count()), static_cast<long long>(calls_), n,
                 timeout_abort_code);
    std::fflush(stderr);
    MPI_Abort(comm_, timeout_abort_code);
    std::abort();  // MPI_Abort does not return; should an implementation do so, stop here
  }

  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error("rungs::mpi::rank_sync: " + std::string(what) + " failed on rank " +
                             std::to_string(rank_) + ": " + std::string(text, static_cast<std::size_t>(len)));
  }

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
  std::int64_t calls_ = 0;
};

static_assert(rungs::engine::rank_sync<rank_sync>);

}  // namespace rungs::mpi
