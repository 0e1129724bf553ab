// The runtime's side of fault injection (the public API is rungs_sim/faults.hpp): each
// injectable runtime call opens a call_scope at its entry, which counts the call and says
// whether a fault is due. Only a thread's outermost runtime call counts (cudaMemcpy runs
// cudaMemcpyAsync inside, and is one call).
#pragma once

#include <rungs_sim/faults.hpp>

namespace rungs::sim::faults::detail {

class call_scope {
 public:
  explicit call_scope(const char* api);
  ~call_scope();
  call_scope(const call_scope&) = delete;
  call_scope& operator=(const call_scope&) = delete;

  cudaError_t error = cudaSuccess;  ///< the fault due at this call, or cudaSuccess
  bool sticky = false;              ///< error is one that poisons the device
};

}  // namespace rungs::sim::faults::detail
