// The host CUDA runtime's own rules (label cuda-sim): what a CUDA program observes through the
// runtime API when it runs on rungs' simulated device. Kernels here are tiny and hand-checked;
// the attention and engine tests exercise the runtime at scale.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void add_scalar(int* data, int n, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += value;
}

__global__ void write_past_end(int* data, int n) { data[n + threadIdx.x] = 1; }

std::vector<int> download(const int* device, int n) {
  std::vector<int> host(static_cast<std::size_t>(n));
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

}  // namespace

TEST_CASE("the simulated device: one H100-like device with 132 SMs") {
  int count = 0, device = -1, sms = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  CHECK(device == 0);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  CHECK(sms == 132);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.multiProcessorCount == 132);
  CHECK(prop.major == 9);
  CHECK(std::string(prop.name).find("rungs-sim") == 0);
  CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaSuccess);  // reading it resets it
}

TEST_CASE("allocations: 256-byte aligned, filled with 0xff, counted in cudaMemGetInfo") {
  std::size_t free0 = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free0, &total) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 1000) == cudaSuccess);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
  std::size_t free1 = 0;
  REQUIRE(cudaMemGetInfo(&free1, &total) == cudaSuccess);
  CHECK(free0 - free1 == 1000);
  CHECK(download(p, 250) == std::vector<int>(250, -1));
  CHECK(cudaFree(p + 1) == cudaErrorInvalidValue);  // not the start of an allocation
  CHECK(cudaFree(p) == cudaSuccess);
  CHECK(cudaFree(p) == cudaErrorInvalidValue);  // twice
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
}

TEST_CASE("copies and memsets must stay inside one live allocation") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * sizeof(int)) == cudaSuccess);
  std::vector<int> host(65, 7);
  CHECK(cudaMemcpy(p, host.data(), 65 * sizeof(int), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), p + 1, 64 * sizeof(int), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemset(p + 60, 0, 5 * sizeof(int)) == cudaErrorInvalidValue);
  REQUIRE(cudaMemset(p, 0, 64 * sizeof(int)) == cudaSuccess);
  CHECK(download(p, 64) == std::vector<int>(64, 0));
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a launch runs the kernel's PTX; bad configurations are refused") {
  constexpr int n = 100;
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, n * sizeof(int)) == cudaSuccess);
  add_scalar<<<4, 32>>>(p, n, 5);  // 128 threads, 28 masked off
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(download(p, n) == std::vector<int>(n, 5));
  add_scalar<<<1, 2048>>>(p, n, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  add_scalar<<<1, 32, 64 * 1024>>>(p, n, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(download(p, n) == std::vector<int>(n, 5));
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("stream capture records work; the graph replays it, with the captured arguments") {
  constexpr int n = 40;
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  std::vector<int> ones(n, 1);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(cudaMemcpyAsync(p, ones.data(), n * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  int value = 10;
  add_scalar<<<2, 32, 0, s>>>(p, n, value);
  value = 1000;  // the graph keeps the value at the launch
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  CHECK(download(p, n) == std::vector<int>(n, -1));  // nothing ran during capture

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, n) == std::vector<int>(n, 11));
  std::fill(ones.begin(), ones.end(), 2);  // a replay copies the host buffer as it is now
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, n) == std::vector<int>(n, 12));

  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("synchronising or allocating during capture fails and invalidates the capture") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64) == cudaSuccess);
  for (int which = 0; which < 4; ++which) {
    INFO("call " << which);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    int* q = nullptr;
    const cudaError_t e = which == 0   ? cudaStreamSynchronize(s)
                          : which == 1 ? cudaDeviceSynchronize()
                          : which == 2 ? cudaMalloc(&q, 64)
                                       : cudaMemcpy(p, p, 64, cudaMemcpyDeviceToDevice);
    CHECK(e == cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status{};
    REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusInvalidated);
    CHECK(cudaMemsetAsync(p, 0, 64, s) == cudaErrorStreamCaptureInvalidated);
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
  }
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("error names and strings are CUDA's") {
  CHECK(std::string(cudaGetErrorName(cudaErrorInvalidValue)) == "cudaErrorInvalidValue");
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)) == "invalid argument");
  CHECK(std::string(cudaGetErrorString(cudaSuccess)) == "no error");
  CHECK(std::string(cudaGetErrorName(cudaErrorStreamCaptureUnsupported)) == "cudaErrorStreamCaptureUnsupported");
}

// Run alone (ctest runs it as its own test): the fault is sticky for the rest of the process.
TEST_CASE("a kernel fault is reported by the executor and is sticky", "[.fault]") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 16 * sizeof(int)) == cudaSuccess);
  write_past_end<<<1, 4>>>(p, 15);  // threads 1..3 write past the allocation
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaMemset(p, 0, 4) == cudaErrorLaunchFailure);  // sticky
}
