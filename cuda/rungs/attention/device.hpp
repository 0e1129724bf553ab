// The planner's view of a GPU, read from the CUDA runtime: host C++ (any compiler, against
// cuda_runtime.h), so that code which plans but launches nothing (an engine's scheduler, a
// test harness) needs no nvcc. paged_attention.cuh includes it.
#pragma once

#include <rungs/attention/plan.hpp>
#include <rungs/cuda/error.hpp>

#include <cuda_runtime.h>

namespace rungs::attention {

/// The planner's view of a GPU (the current one when device < 0): its SM count and compute
/// capability. A failed runtime call throws rungs::cuda_error naming it.
inline device_info query_device(int device = -1) {
  if (device < 0) RUNGS_CUDA_CHECK(cudaGetDevice(&device));
  device_info info;
  RUNGS_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
  int major = 0, minor = 0;
  RUNGS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RUNGS_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  info.sm = major * 10 + minor;
  return info;
}

}  // namespace rungs::attention
