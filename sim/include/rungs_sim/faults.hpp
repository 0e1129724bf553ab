// Fault injection in rungs' host CUDA runtime (docs/kernels.md, "Injected faults"): the Nth
// call of a named runtime function fails with a chosen CUDA error, or calls of a named set fail
// at random under a seed, reproducibly. An injected error that is sticky on a GPU (a kernel
// fault: cudaErrorIllegalAddress, cudaErrorLaunchFailure, ...) becomes the device's sticky
// error, so every later call returns it, as after an illegal address on a GPU.
//
// Environment (read at the first runtime call; a bad value ends the process naming it):
//   RUNGS_SIM_FAULTS="cudaGraphInstantiate:2=cudaErrorMemoryAllocation,cudaMalloc:5"
//       call `name`'s Nth call (1-based, counted from the start of the process) fails with the
//       error after '=' (default: the call's usual failure, injectable_calls());
//   RUNGS_SIM_FAULT_SEED=S  RUNGS_SIM_FAULT_RATE=P  [RUNGS_SIM_FAULT_CALLS="cudaMalloc,cudaGraphLaunch=cudaErrorLaunchFailure"]
//       each call of the named set (default: every injectable call) fails with probability P,
//       drawn from S and the call's index in the process (the same schedule on every run).
// Every injected fault is printed to stderr: "rungs-sim: injected fault: <call> call <n> -> <error>".
// Built only with the simulated runtime (RUNGS_CUDA_SIM): it needs CUDA's headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::sim::faults {

/// A runtime call that can be failed, and the error it fails with unless one is named.
struct injectable {
  const char* call;
  cudaError_t error;
};

/// Every injectable call (the runtime calls rungs' engine, CUDA backend and kernels make).
const std::vector<injectable>& injectable_calls();

/// One fault the injector made.
struct injected {
  std::string call;
  std::uint64_t nth = 0;  ///< which call of `call` (1-based, since the process started)
  cudaError_t error = cudaSuccess;
  bool sticky = false;
};

/// Fails the `nth` call of `call` from now on (1: the next) with `error`. Throws
/// std::invalid_argument naming a call that is not injectable, nth = 0, or cudaSuccess.
void fail_nth(std::string_view call, std::uint64_t nth, cudaError_t error);

/// From now on each call in `calls` (empty: every injectable call) fails with probability
/// `rate` (0 to 1) with its usual error, drawn from `seed` and the call's index.
void fail_randomly(std::uint64_t seed, double rate, std::vector<std::string> calls = {});

/// Drops every pending fault and the random schedule; the faults made stay in log().
void clear();

/// The faults made so far, in order.
std::vector<injected> log();

/// Calls of `call` made so far (counted whether or not they failed).
std::uint64_t calls(std::string_view call);

/// True for the errors that are sticky on a GPU (a kernel fault poisons the context).
bool is_sticky(cudaError_t e);

/// What the device holds: allocations, streams, events, graphs and executable graphs made and
/// not yet freed or destroyed. A test takes it before and after a failure to check that what the
/// failed code had made was released (a failed destroy call leaves its object live: injected,
/// it destroys nothing).
struct live_objects {
  std::size_t device_allocations = 0;  ///< cudaMalloc
  std::size_t host_allocations = 0;    ///< cudaMallocHost, cudaHostAlloc
  std::size_t device_bytes = 0;        ///< bytes of the device allocations
  std::size_t streams = 0;
  std::size_t events = 0;
  std::size_t graphs = 0;       ///< cudaGraph_t
  std::size_t graph_execs = 0;  ///< cudaGraphExec_t
  /// Objects of every kind (bytes not counted).
  std::size_t objects() const { return device_allocations + host_allocations + streams + events + graphs + graph_execs; }
  bool operator==(const live_objects&) const = default;
};

/// What the device holds now.
live_objects live();

/// Clears the device's sticky error: a test's stand-in for a new process after a fatal fault
/// (no GPU can do this; tests that inject a sticky fault call it when they are done).
void reset_device();

}  // namespace rungs::sim::faults
