// rungs::nccl::rank_sync: the engine's rank_sync (rungs/engine/rank_sync.hpp) over NCCL, for
// ranks that already hold an NCCL communicator (tensor-parallel GPUs). Host code over the
// CUDA runtime and NCCL (root nccl/, target rungs::nccl in rungs' own build; any C++
// compiler). NOT RUN: it is compiled in CI (the `cuda` step) and has never executed, on a GPU
// or otherwise: no machine rungs is tested on has two GPUs, and rungs' CPU CUDA runtime
// (cuda-sim) has no NCCL. Treat it as a reviewed sketch of the API until a multi-GPU run.
//
// Two entry points:
//   max_each(span)          the rank_sync concept: the values (a rank_frame: padded to 16,
//                           count in front, as rungs::mpi::rank_sync) are copied into a device
//                           buffer, all-reduced (ncclMax over ncclInt64) on the stream, copied
//                           back; the stream is polled against the deadline, and past it the
//                           communicator is aborted (ncclCommAbort) and std::runtime_error
//                           thrown: every rank's NCCL call then fails instead of hanging.
//   enqueue_max(ptr, n)     the all-reduce alone, in place on a caller's device buffer, on the
//                           stream, with no host synchronisation: capturable inside a CUDA
//                           graph (NCCL supports stream capture since 2.9), for a stack that
//                           agrees on device and reads the result from within the graph.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include <rungs/cuda/error.hpp>
#include <rungs/engine/rank_sync.hpp>

namespace rungs::nccl {

/// Agrees values across the ranks of an NCCL communicator (an all-reduce MAX) on `stream`,
/// with a deadline: see the file comment. Not run yet.
class rank_sync {
 public:
  static constexpr std::size_t capacity = 16;  ///< values one max_each carries at most
  /// How long max_each waits by default (as rungs::mpi::rank_sync).
  static constexpr std::chrono::milliseconds default_timeout{std::chrono::seconds(60)};

  /// Uses `comm` and `stream` (kept, not owned) on the current device; allocates the frame's
  /// device and pinned host buffers. Throws std::invalid_argument for a null communicator or
  /// a timeout that is not positive, rungs::cuda_error when an allocation fails.
  rank_sync(ncclComm_t comm, cudaStream_t stream, std::chrono::milliseconds timeout = default_timeout)
      : comm_(comm), stream_(stream), timeout_(timeout) {
    if (comm == nullptr) throw std::invalid_argument("rungs::nccl::rank_sync: the communicator is null");
    if (timeout.count() <= 0)
      throw std::invalid_argument("rungs::nccl::rank_sync: timeout = " + std::to_string(timeout.count()) +
                                  " ms must be positive");
    check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    check(ncclCommCount(comm_, &size_), "ncclCommCount");
    RUNGS_CUDA_CHECK(cudaMalloc(&device_, sizeof(frame::data)));
    if (cudaError_t e = cudaMallocHost(&host_, sizeof(frame)); e != cudaSuccess) {
      cudaFree(device_);
      RUNGS_CUDA_CHECK(e);
    }
  }
  rank_sync(const rank_sync&) = delete;
  rank_sync& operator=(const rank_sync&) = delete;
  ~rank_sync() {
    cudaFreeHost(host_);
    cudaFree(device_);
  }

  int rank() const { return rank_; }             ///< this rank in the communicator
  int size() const { return size_; }             ///< ranks in the communicator
  std::int64_t calls() const { return calls_; }  ///< max_each calls made so far

  /// Replaces each value by its maximum over all ranks (the rank_sync concept). Same rules as
  /// rungs::mpi::rank_sync; past the deadline the communicator is aborted and
  /// std::runtime_error thrown. Not capturable (it synchronises with the host).
  void max_each(std::span<std::int64_t> values) {
    host_->pack(values, "rungs::nccl::rank_sync");
    ++calls_;
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(device_, host_->data.data(), sizeof(frame::data), cudaMemcpyHostToDevice, stream_));
    enqueue_max(device_, host_->data.size());
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(host_->data.data(), device_, sizeof(frame::data), cudaMemcpyDeviceToHost, stream_));
    cudaError_t state = cudaSuccess;
    ncclResult_t async = ncclSuccess;
    const bool done = rungs::engine::poll_until(timeout_, [&] {
      state = cudaStreamQuery(stream_);
      if (state != cudaErrorNotReady) return true;
      check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      return async != ncclSuccess && async != ncclInProgress;
    });
    if (!done || async != ncclSuccess) {
      ncclCommAbort(comm_);
      throw std::runtime_error("rungs::nccl::rank_sync: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                               (done ? std::string(": NCCL failed: ") + ncclGetErrorString(async)
                                     : " waited " + std::to_string(timeout_.count()) + " ms for max_each #" +
                                           std::to_string(calls_) + " and not every rank joined") +
                               "; the communicator is aborted");
    }
    RUNGS_CUDA_CHECK(state);
    host_->unpack(values, "rungs::nccl::rank_sync", calls_);
  }

  /// Enqueues an all-reduce MAX of `n` int64 in place at `device_values` on the stream: no
  /// host synchronisation, so it can be captured inside a CUDA graph and replayed.
  void enqueue_max(std::int64_t* device_values, std::size_t n) {
    check(ncclAllReduce(device_values, device_values, n, ncclInt64, ncclMax, comm_, stream_), "ncclAllReduce");
  }

 private:
  using frame = rungs::engine::rank_frame<capacity>;

  void check(ncclResult_t rc, const char* what) const {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    throw std::runtime_error("rungs::nccl::rank_sync: " + std::string(what) + " failed: " + ncclGetErrorString(rc));
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  std::chrono::milliseconds timeout_;
  std::int64_t* device_ = nullptr;
  frame* host_ = nullptr;  // pinned, so the copies are asynchronous
  int rank_ = 0;
  int size_ = 1;
  std::int64_t calls_ = 0;
};

static_assert(rungs::engine::rank_sync<rank_sync>);

}  // namespace rungs::nccl
