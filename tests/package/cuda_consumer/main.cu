// A consumer of the installed rungs package with the cuda component, compiled by nvcc.
#include <rungs/cuda/error.hpp>
#include <rungs/dispatch.hpp>

#include <cstdio>

__global__ void fill(int* out, int value) { out[threadIdx.x] = value; }

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("built against rungs::cuda; no GPU to run on\n");
    return 0;
  }
  int* d = nullptr;
  RUNGS_CUDA_CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  rungs::dispatch<64, 128>("head_dim", 128, [&]<int D>() { fill<<<1, 32>>>(d, D); });
  int h[32];
  RUNGS_CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  RUNGS_CUDA_CHECK(cudaFree(d));
  std::printf("rungs::cuda consumer ran: %d\n", h[31]);
  return h[31] == 128 ? 0 : 1;
}
