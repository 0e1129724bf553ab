// A consumer of the installed rungs package's CUDA-runtime headers, compiled by the C++
// compiler (not nvcc): the engine's CUDA backend and RUNGS_CUDA_CHECK need no device code.
#include <rungs/cuda/error.hpp>
#include <rungs/engine/cuda_backend.hpp>

#include <cstdio>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("built against rungs::cuda_runtime; no GPU to run on\n");
    return 0;
  }
  RUNGS_CUDA_CHECK(cudaSetDevice(0));
  std::printf("rungs::cuda_runtime consumer ran on %d device(s)\n", devices);
  return 0;
}
