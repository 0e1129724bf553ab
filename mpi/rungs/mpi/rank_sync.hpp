// rungs::mpi::rank_sync: the engine's rank_sync (rungs/engine/rank_sync.hpp) over MPI, for
// ranks in separate processes or on separate hosts. Optional component rungs::mpi
// (find_package(rungs COMPONENTS mpi)); it needs <mpi.h> and MPI's C library, nothing else of
// rungs does.
//
// One max_each is one MPI_Iallreduce(MAX) of a rank_frame (rungs/engine/rank_sync.hpp): 18
// int64, the values padded to 16 with their count in front, so that ranks calling with
// different counts all throw instead of mixing up buffers.
//
// A rank that exits, crashes or stalls must never leave the others waiting for ever: the
// request is polled against a deadline, and past it the rank prints which collective it
// waited for and calls MPI_Abort, which ends every rank of the communicator (mpirun reports
// the abort). A clean exit is not noticed by the others before the deadline (nothing is
// sent); a crash usually ends the job sooner, through mpirun.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>

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
    rungs::engine::rank_frame<capacity> frame;
    frame.pack(values, "rungs::mpi::rank_sync");
    ++calls_;
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, frame.data.data(), static_cast<int>(frame.data.size()), MPI_INT64_T, MPI_MAX,
                         comm_, &req),
          "MPI_Iallreduce");
    const bool done = rungs::engine::poll_until(timeout_, [&] {
      int flag = 0;
      check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      return flag != 0;
    });
    if (!done) abort_after_timeout(values.size());
    frame.unpack(values, "rungs::mpi::rank_sync", calls_);
  }

 private:
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
