// Timing helpers shared by the GPU benchmarks (benchmarks/*_bench.cu): device buffers, random
// bf16 fills, CUDA-event medians, the copy ceiling and decode runs captured in a CUDA graph.
#pragma once

#include <rungs/cuda/error.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace rungs_bench {

__global__ void fill_random(__nv_bfloat16* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;  // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    p[i] = __float2bfloat16(static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
  }
}

// Random fp8 bytes (E4M3 or E5M2) that are never NaN or infinite: bit 3 cleared keeps the
// exponent field below all-ones (E5M2) and the E4M3 pattern S.1111.111 out.
__global__ void fill_random_bytes(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    p[i] = static_cast<std::uint8_t>((x >> 32) & 0xf7u);
  }
}

__global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

template <class T>
struct device_array {
  T* p = nullptr;
  explicit device_array(std::size_t n) {
    if (n) RUNGS_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  }
  ~device_array() {
    if (p) cudaFree(p);
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
};

struct timer {
  cudaEvent_t start{}, stop{};
  cudaStream_t stream{};
  explicit timer(cudaStream_t s = nullptr) : stream(s) {
    RUNGS_CUDA_CHECK(cudaEventCreate(&start));
    RUNGS_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  // Median milliseconds of `runs` timed calls of f (work on `stream`) after `warmup` untimed ones.
  template <class F>
  double median_ms(F&& f, int warmup, int runs) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      RUNGS_CUDA_CHECK(cudaEventRecord(start, stream));
      f();
      RUNGS_CUDA_CHECK(cudaEventRecord(stop, stream));
      RUNGS_CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      RUNGS_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
    return ms[static_cast<std::size_t>(runs / 2)];
  }
};

double copy_ceiling_gbs(int runs, double& memcpy_gbs, double& kernel_gbs) {
  const std::size_t bytes = std::size_t{2} << 30;
  device_array<uint4> a(bytes / 16), b(bytes / 16);
  RUNGS_CUDA_CHECK(cudaMemset(a.p, 1, bytes));
  timer t;
  const double ms_memcpy = t.median_ms([&] { RUNGS_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); }, 3, runs);
  int sms = 0;
  RUNGS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double ms_kernel = t.median_ms([&] { copy16<<<sms * 8, 512>>>(a.p, b.p, bytes / 16); }, 3, runs);
  RUNGS_CUDA_CHECK(cudaGetLastError());
  memcpy_gbs = 2.0 * bytes / (ms_memcpy * 1e6);
  kernel_gbs = 2.0 * bytes / (ms_kernel * 1e6);
  return std::max(memcpy_gbs, kernel_gbs);
}

// -1 when a CUDA device is usable; else the exit status after saying why (a '#' line): 0, or 1
// when RUNGS_REQUIRE_GPU is set (scripts/gpu-check), so that a GPU machine never skips.
inline int no_gpu_status(const char* bench) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) return -1;
  std::printf("# %s: no usable CUDA device (%s); nothing measured\n", bench,
              status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  return std::getenv("RUNGS_REQUIRE_GPU") ? 1 : 0;
}

// The copy ceiling measured with `runs` timed copies, printed as the benchmark's first line
// beside the device's name, SMs and L2; returns it (GB/s, bytes read + written).
inline double print_copy_ceiling(int runs, cudaDeviceProp& prop) {
  RUNGS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  double memcpy_gbs = 0, kernel_gbs = 0;
  const double ceiling = copy_ceiling_gbs(runs, memcpy_gbs, kernel_gbs);
  std::printf("# %s, %d SMs, L2 %.0f MB; copy ceiling %.0f GB/s (cudaMemcpy D2D %.0f, copy kernel %.0f; read + written)\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6, ceiling, memcpy_gbs, kernel_gbs);
  return ceiling;
}

// A non-blocking stream and a graph of `reps` decode runs captured on it.
struct captured_runs {
  cudaStream_t stream{};
  cudaGraphExec_t exec{};
  int reps = 1;
  captured_runs() { RUNGS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~captured_runs() {
    if (exec) cudaGraphExecDestroy(exec);
    cudaStreamDestroy(stream);
  }
  captured_runs(const captured_runs&) = delete;
  captured_runs& operator=(const captured_runs&) = delete;

  template <class F>
  void capture(F&& run, int n) {
    reps = n;
    cudaGraph_t graph{};
    RUNGS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; ++i) run();
    RUNGS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    RUNGS_CUDA_CHECK(e);
  }
  void replay() { RUNGS_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }
};

}  // namespace rungs_bench
