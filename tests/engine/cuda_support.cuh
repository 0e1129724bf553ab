// Support for the engine's GPU tests: skip (exit 77) without a GPU, and copy device rows back.
#pragma once

#include <rungs/cuda/error.cuh>
#include <rungs/engine/cuda_backend.cuh>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace rungs_test {

// Runs before Catch's main: ctest reads exit status 77 as "skipped".
inline const int gpu_count = [] {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("no GPU visible: skipped");
    std::exit(77);
  }
  return n;
}();

inline std::vector<float> host_rows(const rungs::engine::device_rows& r, cudaStream_t stream) {
  std::vector<float> h(r.size());
  RUNGS_CUDA_CHECK(cudaMemcpyAsync(h.data(), r.data, h.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

}  // namespace rungs_test
