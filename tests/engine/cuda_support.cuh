// Support for the engine's GPU tests: copy device rows back. (Skipping without a GPU is
// tests/cuda_main.cpp's job, as for every CUDA test.)
#pragma once

#include <rungs/cuda/error.hpp>
#include <rungs/engine/cuda_backend.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace rungs_test {

inline std::vector<float> host_rows(const rungs::engine::device_rows& r, cudaStream_t stream) {
  std::vector<float> h(r.size());
  RUNGS_CUDA_CHECK(cudaMemcpyAsync(h.data(), r.data, h.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

}  // namespace rungs_test
