// A user's CUDA test, written as for a GPU: shared-memory block sums added up with atomicAdd,
// checked against the host, and a device printf. Built PTX-only and linked against rungs::sim, it
// runs on the CPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::printf("%s failed: %s\n", #call, cudaGetErrorString(err_));                     \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

// Each block sums its 128 values in shared memory, then adds its sum to *total. With
// `overrun`, the last thread also writes one element past the end of `in` (a planted bug).
__global__ void block_sum(int* in, int n, int* total, bool overrun) {
  __shared__ int partial[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
  if (blockIdx.x == 0 && threadIdx.x == 0) printf("block_sum: %d blocks of %d threads\n", gridDim.x, blockDim.x);
  if (overrun && i == n - 1) in[n] = 0;
}

int main(int argc, char** argv) {
  bool overrun = argc > 1 && std::strcmp(argv[1], "--planted-bug") == 0;
  const int n = 1000;
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[i] = i + 1;
  int *in = nullptr, *total = nullptr;
  CHECK(cudaMalloc(&in, n * sizeof(int)));
  CHECK(cudaMalloc(&total, sizeof(int)));
  CHECK(cudaMemcpy(in, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(total, 0, sizeof(int)));
  block_sum<<<(n + 127) / 128, 128>>>(in, n, total, overrun);
  CHECK(cudaGetLastError());
  int sum = 0;
  CHECK(cudaMemcpy(&sum, total, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(total));
  std::printf("sum of 1..%d on the device: %d (expected %d)\n", n, sum, n * (n + 1) / 2);
  return sum == n * (n + 1) / 2 ? 0 : 1;
}
