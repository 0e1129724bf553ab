// The host CUDA runtime's own rules (label cuda-sim): what a CUDA program observes through the
// runtime API when it runs on rungs' simulated device. Kernels here are tiny and hand-checked;
// the attention and engine tests exercise the runtime at scale.
// Device assert is compiled out under NDEBUG, which CMake's Release build defines.
#undef NDEBUG
#include <cassert>

#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <rungs_sim/faults.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

__global__ void add_scalar(int* data, int n, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += value;
}

__global__ void write_past_end(int* data, int n) { data[n + threadIdx.x] = 1; }
// Block `bad` writes n ints further on (past the allocation); the others their own squares.
__global__ void squares_but_one_block(int* data, unsigned bad, int n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  data[i + (blockIdx.x == bad ? n : 0)] = static_cast<int>(i * i);
}

// An inclusive scan per warp with __shfl_up_sync and a full mask, as NVIDIA's shfl_scan sample
// does; launched with 120 threads, the last warp is partial (lanes 24..31 absent).
__global__ void warp_scan(int* data) {
  int v = data[threadIdx.x];
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int i = 1; i < 32; i *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, v, i);
    if (lane >= i) v += up;
  }
  data[threadIdx.x] = v;
}

__global__ void with_shared(int* data) {
  __shared__ int tile[64];
  tile[threadIdx.x] = data[threadIdx.x];
  __syncthreads();
  data[threadIdx.x] = tile[63 - threadIdx.x];
}

// A 128-bit register (inline PTX) is a declaration the executor does not parse: this kernel is
// refused at its launch (and only it: the module's other kernels run).
__global__ void with_b128(int* data) {
  asm volatile("{ .reg .b128 wide; }");
  data[threadIdx.x] = 1;
}

// Device printf: every thread prints; the output comes in block, then thread order.
__global__ void with_printf(const int* data, float scale) {
  printf("block %d thread %d: %d %.2f %s\n", blockIdx.x, threadIdx.x, data[threadIdx.x], scale * threadIdx.x,
         threadIdx.x % 2 ? "odd" : "even");
}

// Device assert: fails in block 1, thread 2 of a <<<2, 3>>> launch over data[i] = i.
__global__ void with_assert(const int* data) { assert(data[blockIdx.x * blockDim.x + threadIdx.x] != 5); }

// Module variables: a __constant__ table the host fills, a __device__ array with an
// initializer, and one the kernels write.
__constant__ float coeffs[4];
__device__ int initialised[3] = {4, 5, 6};
__device__ int written[8];

__global__ void scale_by_coeffs(const float* in, float* out, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) out[i] = in[i] * coeffs[i % 4];
}
__global__ void write_index_twice() { written[threadIdx.x] = 2 * static_cast<int>(threadIdx.x); }

// Reverses n ints through dynamic shared memory (64 KiB at n = 16384: past the 48 KiB default).
__global__ void reverse_through_shared(int* data, int n) {
  extern __shared__ int buffer[];
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) buffer[i] = data[i];
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) data[i] = buffer[n - 1 - i];
}

// What `run` writes to stdout (file descriptor 1), as a string.
template <class F>
std::string stdout_of(F&& run) {
  std::fflush(stdout);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = dup(1);
  dup2(fileno(capture), 1);
  run();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::string text;
  std::rewind(capture);
  for (int c = std::fgetc(capture); c != EOF; c = std::fgetc(capture)) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

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

TEST_CASE("partial warps follow CUDA's rule: a full mask names the non-exited lanes only") {
  constexpr int n = 120;
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = i;
  REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  warp_scan<<<1, n>>>(p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto out = download(p, n);
  for (int i = 0; i < n; ++i) {
    const int first = i / 32 * 32;  // sum of first..i
    CHECK(out[static_cast<std::size_t>(i)] == (first + i) * (i - first + 1) / 2);
  }
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("device attributes of the simulated H100 that NVIDIA's helpers read") {
  int v = -1;
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 0) == cudaSuccess);
  CHECK(v == cudaComputeModeDefault);
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0) == cudaSuccess);
  CHECK(v == 1980000);  // kHz, the H100 SXM5's boost clock
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrIntegrated, 0) == cudaSuccess);
  CHECK(v == 0);
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerMultiProcessor, 0) == cudaSuccess);
  CHECK(v == 2048);
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0) == cudaSuccess);
  CHECK(v == 228 * 1024);
  CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, 0) == cudaErrorNotSupported);
  cudaGetLastError();
}

namespace {
struct callback_seen {
  cudaStream_t stream = nullptr;
  cudaError_t status = cudaErrorUnknown;
  int calls = 0;
  int first = -1;  // the data's first element when the callback ran
  const int* data = nullptr;
};
void CUDART_CB record_callback(cudaStream_t stream, cudaError_t status, void* user) {
  auto* seen = static_cast<callback_seen*>(user);
  seen->stream = stream;
  seen->status = status;
  ++seen->calls;
  int first = 0;
  std::memcpy(&first, seen->data, sizeof first);  // managed memory: the host may read it
  seen->first = first;
}
}  // namespace

TEST_CASE("what NVIDIA's samples ask of the device: host mapping, copy overlap, stream callbacks, cache hints; "
          "cooperative launches and memory pools refused by name") {
  int v = -1;
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, 0) == cudaSuccess);
  CHECK(v == 1);
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrGpuOverlap, 0) == cudaSuccess);
  CHECK(v == 1);
  REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrAsyncEngineCount, 0) == cudaSuccess);
  CHECK(v == 2);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.canMapHostMemory == 1);
  CHECK(prop.asyncEngineCount == 2);

  // A callback runs after the stream's earlier work, and is told the device's state.
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMallocManaged(&p, 32 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 32 * sizeof(int), s) == cudaSuccess);
  add_scalar<<<1, 32, 0, s>>>(p, 32, 9);
  callback_seen seen;
  seen.data = p;
  REQUIRE(cudaStreamAddCallback(s, record_callback, &seen, 0) == cudaSuccess);
  CHECK(seen.calls == 1);
  CHECK(seen.stream == s);
  CHECK(seen.status == cudaSuccess);
  CHECK(seen.first == 9);
  CHECK(cudaStreamAddCallback(s, record_callback, &seen, 1) == cudaErrorInvalidValue);  // flags must be 0
  CHECK(cudaStreamAddCallback(s, nullptr, &seen, 0) == cudaErrorInvalidValue);
  CHECK(seen.calls == 1);
  // On a capturing stream: refused, and the capture is invalidated.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaStreamAddCallback(s, record_callback, &seen, 0) == cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(seen.calls == 1);
  cudaGetLastError();

  // Cache preferences: hints, kept and reported; values outside cudaFuncCache refused.
  REQUIRE(cudaFuncSetCacheConfig(reinterpret_cast<const void*>(add_scalar), cudaFuncCachePreferShared) == cudaSuccess);
  CHECK(cudaFuncSetCacheConfig(reinterpret_cast<const void*>(&v), cudaFuncCachePreferL1) == cudaErrorInvalidDeviceFunction);
  REQUIRE(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1) == cudaSuccess);
  cudaFuncCache cache = cudaFuncCachePreferNone;
  REQUIRE(cudaDeviceGetCacheConfig(&cache) == cudaSuccess);
  CHECK(cache == cudaFuncCachePreferL1);
  CHECK(cudaDeviceSetCacheConfig(static_cast<cudaFuncCache>(7)) == cudaErrorInvalidValue);
  REQUIRE(cudaDeviceGetCacheConfig(&cache) == cudaSuccess);
  CHECK(cache == cudaFuncCachePreferL1);  // unchanged by the refused call
  REQUIRE(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone) == cudaSuccess);

  int version = 0;
  REQUIRE(cudaRuntimeGetVersion(&version) == cudaSuccess);
  CHECK(version == CUDART_VERSION);
  REQUIRE(cudaDriverGetVersion(&version) == cudaSuccess);
  CHECK(version == CUDART_VERSION);

  // A 1D copy node, and graph memory nodes refused by name.
  cudaGraph_t g = nullptr;
  REQUIRE(cudaGraphCreate(&g, 0) == cudaSuccess);
  std::vector<int> host(32, 4);
  cudaGraphNode_t copy = nullptr;
  REQUIRE(cudaGraphAddMemcpyNode1D(&copy, g, nullptr, 0, p, host.data(), 32 * sizeof(int), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  CHECK(cudaGraphAddMemcpyNode1D(&copy, g, nullptr, 0, p, host.data(), 33 * sizeof(int), cudaMemcpyHostToDevice) ==
        cudaErrorInvalidValue);  // past the allocation: refused before any node is added
  cudaGetLastError();
  std::size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(g, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 1);
  cudaMemAllocNodeParams alloc{};
  CHECK(cudaGraphAddMemAllocNode(&copy, g, nullptr, 0, &alloc) == cudaErrorNotSupported);
  CHECK(cudaGraphAddMemFreeNode(&copy, g, nullptr, 0, p) == cudaErrorNotSupported);
  cudaGetLastError();
  cudaGraphExec_t ge = nullptr;
  REQUIRE(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(ge, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 32) == std::vector<int>(32, 4));
  REQUIRE(cudaGraphExecDestroy(ge) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(g) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 32 * sizeof(int)) == cudaSuccess);
  add_scalar<<<1, 32, 0, s>>>(p, 32, 9);

  // Refused by name, not missing at link time: a grid-wide barrier could never complete with
  // blocks run one at a time, and pools are not simulated (cudaDevAttrMemoryPoolsSupported 0).
  int n = 32, value = 1;
  void* args[] = {&p, &n, &value};
  CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(add_scalar), dim3(1), dim3(32), args, 0, s) ==
        cudaErrorNotSupported);
  cudaMemPool_t pool = nullptr;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaErrorNotSupported);
  std::uint64_t threshold = 0;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) == cudaErrorNotSupported);
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) == cudaErrorNotSupported);
  cudaGetLastError();
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 32) == std::vector<int>(32, 9));  // the refused launch ran nothing
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

// CUDA's math library and intrinsics as nvcc inlines them (software sequences over ex2, lg2,
// fma, copysign, cvt.rmi, ...; half and bfloat16 through their headers' inline PTX).
__global__ void math_functions(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float v = x[i];
  float* r = y + 20 * i;
  r[0] = expf(v), r[1] = logf(fabsf(v) + 1.f), r[2] = tanhf(v), r[3] = erff(v), r[4] = sinf(v), r[5] = cosf(v);
  r[6] = powf(fabsf(v), 1.5f), r[7] = log1pf(fabsf(v)), r[8] = expm1f(v), r[9] = erfcf(v) + atan2f(v, 1.f);
  r[10] = copysignf(2.f, v), r[11] = rintf(v), r[12] = floorf(v), r[13] = isnan(v) + 2.f * isinf(v / 0.f);
  r[14] = __expf(v), r[15] = __logf(fabsf(v) + 1.f), r[16] = __fdividef(v, 3.f), r[17] = __saturatef(v);
  r[18] = __half2float(hexp2(__float2half(v))) - exp2f(__half2float(__float2half(v)));
  const __nv_bfloat16 b = __float2bfloat16(v);
  r[19] = __bfloat162float(__hmul(b, b)) - __bfloat162float(b) * __bfloat162float(b);
}

TEST_CASE("CUDA's math library and intrinsics run as nvcc inlines them, within their documented errors") {
  constexpr int n = 64;
  std::vector<float> x(n), y(20 * n, std::nanf(""));
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i - 32) * 0.173f;
  float *dx = nullptr, *dy = nullptr;
  REQUIRE(cudaMalloc(&dx, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&dy, 20 * n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  math_functions<<<2, 32>>>(dx, dy, n);
  REQUIRE(cudaMemcpy(y.data(), dy, 20 * n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < n; ++i) {
    const double v = x[static_cast<std::size_t>(i)];
    // The host's double-precision libm; each result's error against it relative to max(1, |ref|):
    // the library functions within 4 ulp of float (CUDA's tables: 1-4 ulp), the intrinsics
    // within their 2^-21 scale, half's exp2 within half's rounding, bf16's product exact to bf16.
    const double ref[18] = {std::exp(v), std::log(std::fabs(v) + 1), std::tanh(v), std::erf(v), std::sin(v), std::cos(v),
                            std::pow(std::fabs(v), 1.5), std::log1p(std::fabs(v)), std::expm1(v), std::erfc(v) + std::atan2(v, 1.0),
                            std::copysign(2.0, v), std::rint(v), std::floor(v), 2.0 /* v / 0 is an infinity of v's sign, or NaN at 0 */,
                            std::exp(v), std::log(std::fabs(v) + 1), v / 3, v < 0 ? 0.0 : (v > 1 ? 1.0 : v)};
    for (int j = 0; j < 18; ++j) {
      INFO("x = " << v << ", function " << j);
      const double got = y[static_cast<std::size_t>(20 * i + j)];
      if (j == 13) {
        CHECK(got == (v == 0 ? 0.0 : 2.0));  // isnan(v) = 0; isinf(v / 0) unless 0 / 0, which is NaN
        continue;
      }
      const double tolerance = j < 10 ? 4 * 0x1p-24 : j < 14 ? 0.0 : 0x1p-21;
      CHECK(std::fabs(got - ref[j]) <= tolerance * std::fmax(1.0, std::fabs(ref[j])));
    }
    CHECK(std::fabs(y[static_cast<std::size_t>(20 * i + 18)]) <= 0x1p-10 * std::fmax(1.0, std::exp2(v)));
    // bf16's product rounds the exact product of two bf16 values once, as the host's conversion does.
    const float pb = __bfloat162float(__float2bfloat16(static_cast<float>(v)));
    CHECK(y[static_cast<std::size_t>(20 * i + 19)] == __bfloat162float(__float2bfloat16(pb * pb)) - pb * pb);
  }
  REQUIRE(cudaFree(dx) == cudaSuccess);
  REQUIRE(cudaFree(dy) == cudaSuccess);
}

TEST_CASE("cudaFuncGetAttributes and the occupancy calls, modelled on the H100's per-SM limits") {
  cudaFuncAttributes a{};
  REQUIRE(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(with_shared)) == cudaSuccess);
  CHECK(a.sharedSizeBytes == 64 * sizeof(int));
  CHECK(a.maxThreadsPerBlock == 1024);
  CHECK(a.maxDynamicSharedSizeBytes == 48 * 1024 - 256);
  int blocks = 0;
  // threads: 2048 per SM; shared: 228 KiB per SM, each block's static + dynamic + 1 KiB reserved.
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_scalar, 256, 0) == cudaSuccess);
  CHECK(blocks == 8);
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_scalar, 1024, 0) == cudaSuccess);
  CHECK(blocks == 2);
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_scalar, 32, 0) == cudaSuccess);
  CHECK(blocks == 32);  // the 32-blocks-per-SM limit
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_shared, 64, 48 * 1024) == cudaSuccess);
  CHECK(blocks == 4);  // 233472 / (256 + 49152 + 1024) = 4.6
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_scalar, 1025, 0) == cudaErrorInvalidValue);
  cudaGetLastError();
  std::size_t dynamic = 0;
  REQUIRE(cudaOccupancyAvailableDynamicSMemPerBlock(&dynamic, with_shared, 4, 64) == cudaSuccess);
  CHECK(dynamic == 228 * 1024 / 4 - 256 - 1024);
  int min_grid = 0, block = 0;  // the template in cuda_runtime.h, over the calls above
  REQUIRE(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, add_scalar) == cudaSuccess);
  CHECK(block == 1024);
  CHECK(min_grid == 2 * 132);
}

TEST_CASE("events carry no time: cudaEventElapsedTime is refused, not made up") {
  cudaEvent_t a = nullptr, b = nullptr;
  REQUIRE(cudaEventCreate(&a) == cudaSuccess);
  REQUIRE(cudaEventCreate(&b) == cudaSuccess);
  REQUIRE(cudaEventRecord(a, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(b, 0) == cudaSuccess);
  float ms = -1.0f;
  CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorNotSupported);
  CHECK(ms == -1.0f);
  CHECK(cudaGetLastError() == cudaErrorNotSupported);
  REQUIRE(cudaEventDestroy(a) == cudaSuccess);
  REQUIRE(cudaEventDestroy(b) == cudaSuccess);
}

TEST_CASE("cudaLaunchKernelEx: a launch with a config; attributes that change semantics are refused") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 64 * sizeof(int)) == cudaSuccess);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(2);
  config.blockDim = dim3(32);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;  // permits overlap: holds in issue order
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  REQUIRE(cudaLaunchKernelEx(&config, add_scalar, p, 64, 5) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (const int v : download(p, 64)) CHECK(v == 5);
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  CHECK(cudaLaunchKernelEx(&config, add_scalar, p, 64, 5) == cudaErrorNotSupported);
  CHECK(cudaGetLastError() == cudaErrorNotSupported);
  REQUIRE(cudaFree(p) == cudaSuccess);
}

// Run alone: a refused launch is sticky for the rest of the process, as a fault is.
TEST_CASE("a kernel the executor cannot parse is refused at its launch, loudly and stickily", "[.refused]") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 4 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 4 * sizeof(int)) == cudaSuccess);
  add_scalar<<<1, 4>>>(p, 4, 1);  // the module's other kernels run
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  with_b128<<<1, 4>>>(p);
  CHECK(cudaDeviceSynchronize() == cudaErrorNoKernelImageForDevice);  // sticky: not only the launch's own error
  CHECK(cudaMemset(p, 0, 4) == cudaErrorNoKernelImageForDevice);
}

TEST_CASE("device printf writes to stdout in block, then thread order") {
  int* p = nullptr;
  const int host[3] = {10, 11, 12};
  REQUIRE(cudaMalloc(&p, sizeof host) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
  const std::string out = stdout_of([&] {
    with_printf<<<2, 3>>>(p, 0.5f);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
  });
  CHECK(out ==
        "block 0 thread 0: 10 0.00 even\n"
        "block 0 thread 1: 11 0.50 odd\n"
        "block 0 thread 2: 12 1.00 even\n"
        "block 1 thread 0: 10 0.00 even\n"
        "block 1 thread 1: 11 0.50 odd\n"
        "block 1 thread 2: 12 1.00 even\n");
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("cudaMemcpy2D: rows of width bytes between pitched buffers; bad pitches and rows are refused before copying") {
  // A 3 x 5 int matrix (host pitch 20 bytes) into a device buffer of pitch 32 bytes (8 ints).
  std::vector<int> host(15);
  for (int i = 0; i < 15; ++i) host[static_cast<std::size_t>(i)] = i;
  int* d = nullptr;
  REQUIRE(cudaMalloc(&d, 3 * 32) == cudaSuccess);  // filled with 0xff: -1 in the padding
  REQUIRE(cudaMemcpy2D(d, 32, host.data(), 20, 20, 3, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(download(d, 24) == std::vector<int>{0, 1, 2, 3, 4, -1, -1, -1, 5, 6, 7, 8, 9, -1, -1, -1,
                                            10, 11, 12, 13, 14, -1, -1, -1});
  // Columns 1..3 back into a host buffer of pitch 16 bytes (4 ints), asynchronously.
  std::vector<int> back(12, 0);
  REQUIRE(cudaMemcpy2DAsync(back.data(), 16, d + 1, 32, 12, 3, cudaMemcpyDeviceToHost, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(back == std::vector<int>{1, 2, 3, 0, 6, 7, 8, 0, 11, 12, 13, 0});
  CHECK(cudaMemcpy2D(d, 16, host.data(), 20, 20, 3, cudaMemcpyHostToDevice) == cudaErrorInvalidPitchValue);
  // The fourth row would end past the allocation: refused, and the first three rows untouched.
  std::vector<int> zeros(32, 0);
  CHECK(cudaMemcpy2D(d, 32, zeros.data(), 32, 20, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(download(d, 1)[0] == 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFree(d) == cudaSuccess);
}

TEST_CASE("cudaMallocAsync and cudaFreeAsync: stream-ordered memory; refused on a capturing stream") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMallocAsync(reinterpret_cast<void**>(&p), 64 * sizeof(int), s) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 64 * sizeof(int), s) == cudaSuccess);
  add_scalar<<<1, 64, 0, s>>>(p, 64, 3);
  std::vector<int> host(64);
  REQUIRE(cudaMemcpyAsync(host.data(), p, 64 * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaFreeAsync(p, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(host == std::vector<int>(64, 3));
  CHECK(cudaFreeAsync(p, s) == cudaErrorInvalidValue);  // already freed
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), 64, s) == cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("cudaGraphExecUpdate: new kernel arguments into an instantiated graph; a changed graph is refused") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 64 * sizeof(int)) == cudaSuccess);
  const auto capture = [&](auto&& work) {
    cudaGraph_t g = nullptr;
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    work();
    REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
    return g;
  };
  cudaGraph_t first = capture([&] { add_scalar<<<1, 64, 0, s>>>(p, 64, 1); });
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, first, 0) == cudaSuccess);
  cudaGraph_t second = capture([&] { add_scalar<<<2, 32, 0, s>>>(p, 64, 10); });
  cudaGraphExecUpdateResultInfo info{};
  REQUIRE(cudaGraphExecUpdate(exec, second, &info) == cudaSuccess);
  CHECK(info.result == cudaGraphExecUpdateSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 64) == std::vector<int>(64, 10));  // the new arguments and grid

  cudaGraph_t other_kernel = capture([&] { with_shared<<<1, 64, 0, s>>>(p); });
  CHECK(cudaGraphExecUpdate(exec, other_kernel, &info) == cudaErrorGraphExecUpdateFailure);
  CHECK(info.result == cudaGraphExecUpdateErrorFunctionChanged);
  cudaGraph_t two_nodes = capture([&] {
    add_scalar<<<1, 64, 0, s>>>(p, 64, 1);
    add_scalar<<<1, 64, 0, s>>>(p, 64, 1);
  });
  CHECK(cudaGraphExecUpdate(exec, two_nodes, &info) == cudaErrorGraphExecUpdateFailure);
  CHECK(info.result == cudaGraphExecUpdateErrorTopologyChanged);
  cudaGraph_t a_memset = capture([&] { REQUIRE(cudaMemsetAsync(p, 0, 4, s) == cudaSuccess); });
  CHECK(cudaGraphExecUpdate(exec, a_memset, &info) == cudaErrorGraphExecUpdateFailure);
  CHECK(info.result == cudaGraphExecUpdateErrorNodeTypeChanged);
  CHECK(cudaGetLastError() == cudaErrorGraphExecUpdateFailure);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);  // still the updated graph
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 64) == std::vector<int>(64, 20));
  for (cudaGraph_t g : {first, second, other_kernel, two_nodes, a_memset}) REQUIRE(cudaGraphDestroy(g) == cudaSuccess);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE(
    "kernel node handles: cudaGraphGetNodes, cudaGraphNodeGetType, cudaGraphKernelNodeGetParams, "
    "cudaGraphKernelNodeSetParams, cudaGraphExecKernelNodeSetParams") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 64 * sizeof(int)) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 64 * sizeof(int), s) == cudaSuccess);
  add_scalar<<<1, 64, 0, s>>>(p, 64, 1);
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  std::size_t count = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  CHECK(count == 2);
  cudaGraphNode_t nodes[3] = {};
  count = 3;
  REQUIRE(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess);
  CHECK(count == 2);
  CHECK(nodes[2] == nullptr);
  cudaKernelNodeParams params{};
  CHECK(cudaGraphKernelNodeGetParams(nodes[0], &params) == cudaErrorInvalidValue);  // the memset
  REQUIRE(cudaGraphKernelNodeGetParams(nodes[1], &params) == cudaSuccess);
  CHECK(params.func == reinterpret_cast<void*>(add_scalar));
  CHECK(params.gridDim.x == 1);
  CHECK(params.blockDim.x == 64);
  CHECK(*static_cast<int*>(params.kernelParams[2]) == 1);

  int n = 64, value = 7;
  void* args[] = {&p, &n, &value};
  params.kernelParams = args;
  params.gridDim = dim3(2);
  params.blockDim = dim3(32);
  REQUIRE(cudaGraphExecKernelNodeSetParams(exec, nodes[1], &params) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 64) == std::vector<int>(64, 7));
  params.func = reinterpret_cast<void*>(with_shared);
  CHECK(cudaGraphExecKernelNodeSetParams(exec, nodes[1], &params) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  // The graph's own node: new arguments, carried into the instantiated graph by
  // cudaGraphExecUpdate; a new kernel is taken by the graph but refused by the update.
  cudaGraphNodeType type{};
  REQUIRE(cudaGraphNodeGetType(nodes[0], &type) == cudaSuccess);
  CHECK(type == cudaGraphNodeTypeMemset);
  REQUIRE(cudaGraphNodeGetType(nodes[1], &type) == cudaSuccess);
  CHECK(type == cudaGraphNodeTypeKernel);
  params.func = reinterpret_cast<void*>(add_scalar);
  value = 5;
  params.gridDim = dim3(4);
  params.blockDim = dim3(16);
  CHECK(cudaGraphKernelNodeSetParams(nodes[0], &params) == cudaErrorInvalidValue);  // the memset
  cudaGetLastError();
  REQUIRE(cudaGraphKernelNodeSetParams(nodes[1], &params) == cudaSuccess);
  value = 6;  // the node copied the arguments' bytes: later changes to them do not reach it
  cudaKernelNodeParams read{};
  REQUIRE(cudaGraphKernelNodeGetParams(nodes[1], &read) == cudaSuccess);
  CHECK(read.gridDim.x == 4);
  CHECK(read.blockDim.x == 16);
  CHECK(*static_cast<int*>(read.kernelParams[2]) == 5);
  cudaGraphExecUpdateResultInfo info{};
  REQUIRE(cudaGraphExecUpdate(exec, graph, &info) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(download(p, 64) == std::vector<int>(64, 5));  // the memset, then 4 x 16 threads add 5
  params.gridDim = dim3(1);
  params.blockDim = dim3(2048);  // past the 1024 threads of a block: refused, the node unchanged
  CHECK(cudaGraphKernelNodeSetParams(nodes[1], &params) == cudaErrorInvalidConfiguration);
  cudaGetLastError();
  REQUIRE(cudaGraphKernelNodeGetParams(nodes[1], &read) == cudaSuccess);
  CHECK(read.blockDim.x == 16);
  params.blockDim = dim3(32);
  params.func = &value;  // not a kernel
  CHECK(cudaGraphKernelNodeSetParams(nodes[1], &params) == cudaErrorInvalidDeviceFunction);
  cudaGetLastError();

  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphKernelNodeGetParams(nodes[1], &params) == cudaErrorInvalidValue);  // outlived its graph
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

// Run alone: a failed assert is sticky for the rest of the process, as a fault is.
TEST_CASE("a failed device assert names the assertion and thread and is a sticky cudaErrorAssert", "[.assert]") {
  int* p = nullptr;
  const int host[6] = {0, 1, 2, 3, 4, 5};
  REQUIRE(cudaMalloc(&p, sizeof host) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
  with_assert<<<2, 3>>>(p);
  CHECK(cudaDeviceSynchronize() == cudaErrorAssert);
  CHECK(cudaMemset(p, 0, 4) == cudaErrorAssert);  // sticky
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

// Run under RUNGS_SIM_THREADS=1 and =4 (tests cuda_sim_runtime_test.threads*): the same results,
// and the same finding naming the one bad block, whatever the number of threads.
TEST_CASE("blocks on several threads: results, and a fault in one block of many", "[.threads]") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * 32 * sizeof(int)) == cudaSuccess);
  squares_but_one_block<<<64, 32>>>(p, 64, 0);  // no bad block
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<int> got(64 * 32);
  REQUIRE(cudaMemcpy(got.data(), p, got.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 64 * 32; ++i) CHECK(got[i] == i * i);
  squares_but_one_block<<<64, 32>>>(p, 37, 100000);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaMemset(p, 0, 4) == cudaErrorLaunchFailure);  // sticky
}

TEST_CASE("__constant__ and __device__ variables: the symbol calls reach the kernels' own storage") {
  const std::vector<float> c = {0.5f, 2.0f, -1.0f, 4.0f};
  REQUIRE(cudaMemcpyToSymbol(coeffs, c.data(), sizeof(float) * 4) == cudaSuccess);
  const float third = 3.0f;
  REQUIRE(cudaMemcpyToSymbol(coeffs, &third, sizeof(float), 2 * sizeof(float)) == cudaSuccess);  // coeffs[2] only
  float *in = nullptr, *out = nullptr;
  REQUIRE(cudaMalloc(&in, 8 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&out, 8 * sizeof(float)) == cudaSuccess);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(cudaMemcpy(in, x.data(), 8 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  scale_by_coeffs<<<1, 8>>>(in, out, 8);
  std::vector<float> y(8);
  REQUIRE(cudaMemcpy(y.data(), out, 8 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(y == std::vector<float>{0.5f, 4.0f, 9.0f, 16.0f, 2.5f, 12.0f, 21.0f, 32.0f});

  // The initializer, read back; a kernel's writes, read back (to host and into device memory).
  int init[3] = {};
  REQUIRE(cudaMemcpyFromSymbol(init, initialised, sizeof init) == cudaSuccess);
  CHECK((init[0] == 4 && init[1] == 5 && init[2] == 6));
  write_index_twice<<<1, 8>>>();
  int back[8] = {};
  REQUIRE(cudaMemcpyFromSymbol(back, written, sizeof back) == cudaSuccess);
  for (int i = 0; i < 8; ++i) CHECK(back[i] == 2 * i);
  int* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, 4 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemcpyFromSymbol(dev, written, 4 * sizeof(int), 4 * sizeof(int), cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(download(dev, 4) == std::vector<int>{8, 10, 12, 14});

  std::size_t size = 0;
  REQUIRE(cudaGetSymbolSize(&size, coeffs) == cudaSuccess);
  CHECK(size == 16);

  // Bad ranges, directions and symbols are refused, naming the rule; nothing is copied.
  CHECK(cudaMemcpyToSymbol(coeffs, c.data(), 5 * sizeof(float)) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyToSymbol(coeffs, c.data(), 2 * sizeof(float), 3 * sizeof(float)) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyToSymbol(coeffs, c.data(), 4, 0, cudaMemcpyDeviceToHost) == cudaErrorInvalidMemcpyDirection);
  static int not_a_symbol = 0;
  CHECK(cudaMemcpyToSymbol(not_a_symbol, c.data(), 4) == cudaErrorInvalidSymbol);
  CHECK(cudaMemcpyFromSymbol(back, written, 4, 0, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection);
  REQUIRE(cudaMemcpyFromSymbol(y.data(), coeffs, sizeof(float) * 4) == cudaSuccess);
  CHECK(y[2] == 3.0f);

  // Its address is device memory: to cudaMemcpy, to kernels, to cudaPointerGetAttributes; not
  // something to free.
  int* address = nullptr;
  REQUIRE(cudaGetSymbolAddress(reinterpret_cast<void**>(&address), written) == cudaSuccess);
  add_scalar<<<1, 8>>>(address, 8, 100);
  CHECK(download(address, 8) == std::vector<int>{100, 102, 104, 106, 108, 110, 112, 114});
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, address + 3) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeDevice);
  CHECK(cudaFree(address) == cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaFree(in) == cudaSuccess);
  REQUIRE(cudaFree(out) == cudaSuccess);
  REQUIRE(cudaFree(dev) == cudaSuccess);
}

TEST_CASE("symbol copies on a stream are captured; a replay copies the host buffer as it is then") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  float *in = nullptr, *out = nullptr;
  REQUIRE(cudaMalloc(&in, 4 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&out, 4 * sizeof(float)) == cudaSuccess);
  const std::vector<float> ones(4, 1.0f);
  REQUIRE(cudaMemcpy(in, ones.data(), 4 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<float> c = {1, 2, 3, 4};
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemcpyToSymbolAsync(coeffs, c.data(), 4 * sizeof(float), 0, cudaMemcpyHostToDevice, s) == cudaSuccess);
  scale_by_coeffs<<<1, 4, 0, s>>>(in, out, 4);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  c = {10, 20, 30, 40};
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  std::vector<float> y(4);
  REQUIRE(cudaMemcpyAsync(y.data(), out, 4 * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(y == std::vector<float>{10, 20, 30, 40});
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaFree(in) == cudaSuccess);
  REQUIRE(cudaFree(out) == cudaSuccess);
}

TEST_CASE("cudaFuncSetAttribute: more dynamic shared memory than the 48 KiB default, within the opt-in limit") {
  constexpr int n = 16384;  // 64 KiB of ints
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess);
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = i * 7 - 3;
  REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  reverse_through_shared<<<1, 256, n * sizeof(int)>>>(p, n);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);  // past the default: refused at the launch
  REQUIRE(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, n * sizeof(int)) ==
          cudaSuccess);
  cudaFuncAttributes attr{};
  REQUIRE(cudaFuncGetAttributes(&attr, reverse_through_shared) == cudaSuccess);
  CHECK(attr.maxDynamicSharedSizeBytes == n * static_cast<int>(sizeof(int)));
  reverse_through_shared<<<1, 256, n * sizeof(int)>>>(p, n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<int> want(host.rbegin(), host.rend());
  CHECK(download(p, n) == want);
  reverse_through_shared<<<1, 256, n * sizeof(int) + 4>>>(p, n);  // past the new limit
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  CHECK(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 300000) ==
        cudaErrorInvalidValue);  // past the 227 KiB opt-in limit
  CHECK(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, -1) ==
        cudaErrorInvalidValue);
  CHECK(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributePreferredSharedMemoryCarveout, 50) == cudaSuccess);
  REQUIRE(cudaFuncGetAttributes(&attr, reverse_through_shared) == cudaSuccess);
  CHECK(attr.preferredShmemCarveout == 50);
  CHECK(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributePreferredSharedMemoryCarveout, 101) ==
        cudaErrorInvalidValue);
  CHECK(cudaFuncSetAttribute(reverse_through_shared, cudaFuncAttributeRequiredClusterWidth, 2) == cudaErrorNotSupported);
  CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&host), cudaFuncAttributeMaxDynamicSharedMemorySize, 0) ==
        cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
}

namespace {
struct host_call {
  const std::vector<int>* seen = nullptr;
  int first = 0, calls = 0;
};
void record_first(void* user) {
  auto* h = static_cast<host_call*>(user);
  h->first = (*h->seen)[0];
  ++h->calls;
}
}  // namespace

TEST_CASE("waits, queries and host functions on streams; on a capturing stream a host function is a node") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 4 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 4 * sizeof(int), s) == cudaSuccess);
  add_scalar<<<1, 4, 0, s>>>(p, 4, 9);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(nullptr, e, 0) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(nullptr, e, 7) == cudaErrorInvalidValue);
  CHECK(cudaStreamQuery(s) == cudaSuccess);

  // A host function runs after the stream's earlier work: it sees the copy that precedes it.
  std::vector<int> host(4, -5);
  host_call h{&host};
  REQUIRE(cudaMemcpyAsync(host.data(), p, 4 * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaLaunchHostFunc(s, record_first, &h) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK((h.calls == 1 && h.first == 9));
  CHECK(cudaLaunchHostFunc(s, nullptr, &h) == cudaErrorInvalidValue);

  for (int which = 0; which < 2; ++which) {
    INFO("call " << which);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    // A wait on an event recorded outside the capture would make the graph depend on work
    // outside it: refused (isolation); a query is an unsafe call during capture.
    const cudaError_t r = which == 0 ? cudaStreamWaitEvent(s, e, 0) : cudaStreamQuery(s);
    CHECK(r == (which == 0 ? cudaErrorStreamCaptureIsolation : cudaErrorStreamCaptureUnsupported));
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
  }
  // A host function on a capturing stream is a host node: it runs with each replay, in order.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  add_scalar<<<1, 4, 0, s>>>(p, 4, 1);
  REQUIRE(cudaMemcpyAsync(host.data(), p, 4 * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaLaunchHostFunc(s, record_first, &h) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  CHECK(h.calls == 1);  // not run at capture
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK((h.calls == 3 && h.first == 11));
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  cudaGetLastError();
  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("cudaMemset2D: rows of width bytes at a pitch; bad pitches and rows are refused before setting") {
  unsigned char* p = nullptr;
  REQUIRE(cudaMalloc(&p, 24) == cudaSuccess);
  REQUIRE(cudaMemset(p, 1, 24) == cudaSuccess);
  REQUIRE(cudaMemset2D(p, 8, 7, 5, 3) == cudaSuccess);
  std::vector<unsigned char> host(24);
  REQUIRE(cudaMemcpy(host.data(), p, 24, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 24; ++i) CHECK(host[static_cast<std::size_t>(i)] == (i % 8 < 5 ? 7 : 1));
  CHECK(cudaMemset2D(p, 4, 0, 5, 2) == cudaErrorInvalidPitchValue);
  CHECK(cudaMemset2D(p, 8, 0, 5, 4) == cudaErrorInvalidValue);  // row 3 starts past the 24 bytes
  REQUIRE(cudaMemcpy(host.data(), p, 24, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host[0] == 7);  // nothing was set by the refused calls
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("cudaThreadExchangeStreamCaptureMode: a relaxed thread may allocate during another capture") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeGlobal);  // the previous mode comes back
  int* q = nullptr;
  CHECK(cudaMalloc(&q, 64) == cudaSuccess);
  CHECK(cudaFree(q) == cudaSuccess);
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeRelaxed);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);  // the capture was not invalidated
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  cudaStreamCaptureMode bad = static_cast<cudaStreamCaptureMode>(9);
  CHECK(cudaThreadExchangeStreamCaptureMode(&bad) == cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("device limits are kept and reported; pointer attributes say what a pointer is") {
  std::size_t v = 0;
  REQUIRE(cudaDeviceGetLimit(&v, cudaLimitStackSize) == cudaSuccess);
  CHECK(v == 1024);
  REQUIRE(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 2 << 20) == cudaSuccess);
  REQUIRE(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize) == cudaSuccess);
  CHECK(v == 2u << 20);
  CHECK(cudaDeviceSetLimit(static_cast<cudaLimit>(99), 1) == cudaErrorNotSupported);

  int *dev = nullptr, *pinned = nullptr, stack = 0;
  REQUIRE(cudaMalloc(&dev, 16) == cudaSuccess);
  REQUIRE(cudaMallocHost(&pinned, 16) == cudaSuccess);
  cudaPointerAttributes a{};
  REQUIRE(cudaPointerGetAttributes(&a, dev + 2) == cudaSuccess);
  CHECK((a.type == cudaMemoryTypeDevice && a.devicePointer == dev + 2 && a.hostPointer == nullptr));
  REQUIRE(cudaPointerGetAttributes(&a, pinned) == cudaSuccess);
  CHECK((a.type == cudaMemoryTypeHost && a.hostPointer == pinned));
  REQUIRE(cudaPointerGetAttributes(&a, &stack) == cudaSuccess);
  CHECK((a.type == cudaMemoryTypeUnregistered && a.devicePointer == nullptr));
  cudaGetLastError();
  REQUIRE(cudaFree(dev) == cudaSuccess);
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
}

TEST_CASE("the calls a user's code makes are injectable too: a failed symbol copy copies nothing") {
  namespace faults = rungs::sim::faults;
  const float before[4] = {1, 1, 1, 1}, after[4] = {2, 2, 2, 2};
  REQUIRE(cudaMemcpyToSymbol(coeffs, before, sizeof before) == cudaSuccess);
  faults::fail_nth("cudaMemcpyToSymbol", 1, cudaErrorInvalidValue);
  CHECK(cudaMemcpyToSymbol(coeffs, after, sizeof after) == cudaErrorInvalidValue);
  float back[4] = {};
  REQUIRE(cudaMemcpyFromSymbol(back, coeffs, sizeof back) == cudaSuccess);
  CHECK(back[0] == 1.0f);
  faults::fail_nth("cudaStreamWaitEvent", 1, cudaErrorInvalidResourceHandle);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(nullptr, e, 0) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamWaitEvent(nullptr, e, 0) == cudaSuccess);
  faults::clear();
  cudaGetLastError();
  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
}

TEST_CASE("multi-stream capture: a fork and a join through events; unjoined work, isolation and merges are refused") {
  cudaStream_t s1 = nullptr, s2 = nullptr, s3 = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t fork = nullptr, join = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
  int *p = nullptr, *q = nullptr;
  REQUIRE(cudaMalloc(&p, 8 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMalloc(&q, 8 * sizeof(int)) == cudaSuccess);
  cudaStreamCaptureStatus status{};

  // s1 forks s2, each works, s2 joins back, s1 works after the join.
  REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 8 * sizeof(int), s1) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s1) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s2, fork, 0) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(s2, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  add_scalar<<<1, 8, 0, s2>>>(p, 8, 5);
  REQUIRE(cudaMemsetAsync(q, 0, 8 * sizeof(int), s1) == cudaSuccess);
  add_scalar<<<1, 8, 0, s1>>>(q, 8, 2);
  REQUIRE(cudaEventRecord(join, s2) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s1, join, 0) == cudaSuccess);
  add_scalar<<<1, 8, 0, s1>>>(p, 8, 1);
  CHECK(cudaStreamEndCapture(s2, nullptr) == cudaErrorInvalidValue);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s1, &graph) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(s2, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  CHECK(download(p, 8) == std::vector<int>(8, -1));  // nothing ran during capture
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s1) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s1) == cudaSuccess);
  CHECK(download(p, 8) == std::vector<int>(8, 6));
  CHECK(download(q, 8) == std::vector<int>(8, 2));
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);

  // Work on the forked stream after the event the origin waited on: unjoined.
  for (const bool record_before_last_work : {false, true}) {
    INFO("join recorded before the last work: " << record_before_last_work);
    REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    REQUIRE(cudaEventRecord(fork, s1) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(s2, fork, 0) == cudaSuccess);
    add_scalar<<<1, 8, 0, s2>>>(p, 8, 5);
    if (record_before_last_work) {
      REQUIRE(cudaEventRecord(join, s2) == cudaSuccess);
      add_scalar<<<1, 8, 0, s2>>>(p, 8, 5);
      REQUIRE(cudaStreamWaitEvent(s1, join, 0) == cudaSuccess);
    }
    graph = reinterpret_cast<cudaGraph_t>(1);
    CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureUnjoined);
    CHECK(graph == nullptr);
    REQUIRE(cudaStreamIsCapturing(s2, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
  }

  // Ending at the forked stream is unmatched and invalidates the capture.
  REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s1) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s2, fork, 0) == cudaSuccess);
  CHECK(cudaStreamEndCapture(s2, &graph) == cudaErrorStreamCaptureUnmatched);
  CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated);

  // Two captures joined by a wait: a merge, both invalidated.
  REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s3, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, s1) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s3, fork, 0) == cudaErrorStreamCaptureMerge);
  CHECK(cudaStreamEndCapture(s3, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated);

  cudaGetLastError();
  REQUIRE(cudaEventDestroy(fork) == cudaSuccess);
  REQUIRE(cudaEventDestroy(join) == cudaSuccess);
  for (cudaStream_t s : {s1, s2, s3}) REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaFree(q) == cudaSuccess);
}

namespace {
void count_call(void* user) { ++*static_cast<int*>(user); }
}  // namespace

TEST_CASE("graphs built node by node: memset, 2D memcpy, kernel and host nodes; a clone; bad nodes refused") {
  int* a = nullptr;  // 2 rows of 3 ints at a pitch of 16 bytes
  int* b = nullptr;
  REQUIRE(cudaMalloc(&a, 32) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, 32) == cudaSuccess);
  REQUIRE(cudaMemset(a, 0, 32) == cudaSuccess);
  REQUIRE(cudaMemset(b, 0, 32) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaGraphCreate(&graph, 0) == cudaSuccess);

  cudaMemsetParams set{};
  set.dst = a;
  set.pitch = 16;
  set.value = 7;
  set.elementSize = 4;
  set.width = 3;
  set.height = 2;
  cudaGraphNode_t set_node = nullptr, copy_node = nullptr, kernel_node = nullptr, host_node = nullptr;
  REQUIRE(cudaGraphAddMemsetNode(&set_node, graph, nullptr, 0, &set) == cudaSuccess);

  cudaMemcpy3DParms copy{};
  copy.srcPtr = make_cudaPitchedPtr(a, 16, 3, 2);
  copy.dstPtr = make_cudaPitchedPtr(b, 16, 3, 2);
  copy.extent = make_cudaExtent(3 * sizeof(int), 2, 1);
  copy.kind = cudaMemcpyDeviceToDevice;
  REQUIRE(cudaGraphAddMemcpyNode(&copy_node, graph, &set_node, 1, &copy) == cudaSuccess);

  int n = 8, value = 100;
  void* args[] = {&b, &n, &value};
  cudaKernelNodeParams k{};
  k.func = reinterpret_cast<void*>(add_scalar);
  k.gridDim = dim3(1);
  k.blockDim = dim3(8);
  k.kernelParams = args;
  REQUIRE(cudaGraphAddKernelNode(&kernel_node, graph, &copy_node, 1, &k) == cudaSuccess);
  int calls = 0;
  cudaHostNodeParams hp{count_call, &calls};
  REQUIRE(cudaGraphAddHostNode(&host_node, graph, &kernel_node, 1, &hp) == cudaSuccess);
  std::size_t count = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  CHECK(count == 4);
  CHECK(download(b, 8) == std::vector<int>(8, 0));  // building runs nothing

  cudaGraph_t clone = nullptr;
  REQUIRE(cudaGraphClone(&clone, graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, clone, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // Rows of 3 sevens at a pitch of 4 ints, copied, then 100 added to all 8.
  CHECK(download(a, 8) == std::vector<int>{7, 7, 7, 0, 7, 7, 7, 0});
  CHECK(download(b, 8) == std::vector<int>{107, 107, 107, 100, 107, 107, 107, 100});
  CHECK(calls == 1);

  // Bad nodes are refused, naming the rule; the graph is unchanged.
  cudaGraph_t other = nullptr;
  REQUIRE(cudaGraphCreate(&other, 0) == cudaSuccess);
  cudaGraphNode_t bad = nullptr;
  CHECK(cudaGraphAddHostNode(&bad, other, &kernel_node, 1, &hp) == cudaErrorInvalidValue);  // another graph's node
  set.elementSize = 3;
  CHECK(cudaGraphAddMemsetNode(&bad, graph, nullptr, 0, &set) == cudaErrorInvalidValue);
  set.elementSize = 4;
  set.pitch = 8;
  CHECK(cudaGraphAddMemsetNode(&bad, graph, nullptr, 0, &set) == cudaErrorInvalidPitchValue);
  copy.extent = make_cudaExtent(12, 2, 2);
  CHECK(cudaGraphAddMemcpyNode(&bad, graph, nullptr, 0, &copy) == cudaErrorNotSupported);
  copy.extent = make_cudaExtent(12, 3, 1);  // a third row past the 32 bytes
  CHECK(cudaGraphAddMemcpyNode(&bad, graph, nullptr, 0, &copy) == cudaErrorInvalidValue);
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  CHECK(count == 4);
  cudaGetLastError();
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  for (cudaGraph_t g : {graph, clone, other}) REQUIRE(cudaGraphDestroy(g) == cudaSuccess);
  REQUIRE(cudaFree(a) == cudaSuccess);
  REQUIRE(cudaFree(b) == cudaSuccess);
}

TEST_CASE("managed memory: host and kernels share it; prefetch, advice and attachment are checked hints") {
  int attr = 0;
  REQUIRE(cudaDeviceGetAttribute(&attr, cudaDevAttrManagedMemory, 0) == cudaSuccess);
  CHECK(attr == 1);
  int* m = nullptr;
  REQUIRE(cudaMallocManaged(&m, 16 * sizeof(int)) == cudaSuccess);
  for (int i = 0; i < 16; ++i) m[i] = i;  // the host writes it directly
  cudaMemLocation device{cudaMemLocationTypeDevice, 0}, host{cudaMemLocationTypeHost, 0};
  REQUIRE(cudaMemPrefetchAsync(m, 16 * sizeof(int), device, 0, nullptr) == cudaSuccess);
  add_scalar<<<1, 16>>>(m, 16, 3);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (int i = 0; i < 16; ++i) CHECK(m[i] == i + 3);  // and reads the kernel's result
  REQUIRE(cudaMemAdvise(m, 8 * sizeof(int), cudaMemAdviseSetPreferredLocation, host) == cudaSuccess);
  REQUIRE(cudaStreamAttachMemAsync(nullptr, m, 0, cudaMemAttachSingle) == cudaSuccess);
  cudaPointerAttributes a{};
  REQUIRE(cudaPointerGetAttributes(&a, m + 1) == cudaSuccess);
  CHECK((a.type == cudaMemoryTypeManaged && a.hostPointer == m + 1));

  int* plain = nullptr;
  REQUIRE(cudaMalloc(&plain, 64) == cudaSuccess);
  CHECK(cudaMemPrefetchAsync(plain, 64, device, 0, nullptr) == cudaErrorInvalidValue);  // not managed
  CHECK(cudaMemPrefetchAsync(m, 17 * sizeof(int), device, 0, nullptr) == cudaErrorInvalidValue);  // past its end
  CHECK(cudaMemPrefetchAsync(m, 4, cudaMemLocation{cudaMemLocationTypeDevice, 1}, 0, nullptr) == cudaErrorInvalidDevice);
  CHECK(cudaMemAdvise(m, 4, static_cast<cudaMemoryAdvise>(9), device) == cudaErrorInvalidValue);
  CHECK(cudaMallocManaged(&m, 4, 7) == cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaFree(m) == cudaSuccess);
  REQUIRE(cudaFree(plain) == cudaSuccess);
}

TEST_CASE("cudaDeviceReset releases everything, clears a sticky fault and re-initialises __device__ variables") {
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 4 * sizeof(int)) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  const int changed[3] = {-1, -2, -3};
  REQUIRE(cudaMemcpyToSymbol(initialised, changed, sizeof changed) == cudaSuccess);
  REQUIRE(cudaDeviceSetLimit(cudaLimitStackSize, 4096) == cudaSuccess);
  write_past_end<<<1, 1>>>(p, 4);  // a kernel fault: sticky until the reset
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaMalloc(&p, 4) == cudaErrorLaunchFailure);

  REQUIRE(cudaDeviceReset() == cudaSuccess);
  const rungs::sim::faults::live_objects live = rungs::sim::faults::live();
  CHECK((live.device_allocations == 0 && live.device_bytes == 0 && live.streams == 0));
  CHECK(cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);  // gone with the reset
  CHECK(cudaFree(p) == cudaErrorInvalidValue);
  int back[3] = {};
  REQUIRE(cudaMemcpyFromSymbol(back, initialised, sizeof back) == cudaSuccess);
  CHECK((back[0] == 4 && back[1] == 5 && back[2] == 6));
  std::size_t stack = 0;
  REQUIRE(cudaDeviceGetLimit(&stack, cudaLimitStackSize) == cudaSuccess);
  CHECK(stack == 1024);
  REQUIRE(cudaMalloc(&p, 4 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0, 4 * sizeof(int)) == cudaSuccess);
  add_scalar<<<1, 4>>>(p, 4, 2);
  CHECK(download(p, 4) == std::vector<int>(4, 2));
  cudaGetLastError();
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("cudaHostRegister: the caller's memory, page-locked and mapped; device flags kept") {
  std::vector<int> mine(64, 1);
  REQUIRE(cudaHostRegister(mine.data(), mine.size() * sizeof(int), cudaHostRegisterMapped) == cudaSuccess);
  int* device = nullptr;
  REQUIRE(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), mine.data(), 0) == cudaSuccess);
  add_scalar<<<1, 64>>>(device, 64, 4);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(mine == std::vector<int>(64, 5));
  CHECK(cudaHostRegister(mine.data() + 8, 8, 0) == cudaErrorHostMemoryAlreadyRegistered);  // overlaps
  CHECK(cudaFreeHost(mine.data()) == cudaErrorInvalidValue);  // still the caller's
  CHECK(cudaHostRegister(mine.data(), 4, cudaHostRegisterIoMemory) == cudaErrorInvalidValue);
  REQUIRE(cudaHostUnregister(mine.data()) == cudaSuccess);
  CHECK(cudaHostUnregister(mine.data()) == cudaErrorHostMemoryNotRegistered);
  int on_stack = 0;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), &on_stack, 0) == cudaErrorInvalidValue);

  REQUIRE(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) == cudaSuccess);
  unsigned flags = 0;
  REQUIRE(cudaGetDeviceFlags(&flags) == cudaSuccess);
  CHECK(flags == (cudaDeviceScheduleBlockingSync | cudaDeviceMapHost));
  CHECK(cudaSetDeviceFlags(0x100) == cudaErrorInvalidValue);
  REQUIRE(cudaSetDeviceFlags(cudaDeviceScheduleAuto) == cudaSuccess);
  cudaGetLastError();
}

// Run with RUNGS_SIM_EVENT_TIME=host (test cuda_sim_runtime_test.event_time): the host time
// between two records, monotonic and never negative; untimed or unrecorded events are refused.
TEST_CASE("RUNGS_SIM_EVENT_TIME=host: cudaEventElapsedTime gives the simulator's host time", "[.event_time]") {
  cudaEvent_t a = nullptr, b = nullptr, c = nullptr, untimed = nullptr, never = nullptr;
  for (cudaEvent_t* e : {&a, &b, &c, &never}) REQUIRE(cudaEventCreate(e) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  int* p = nullptr;
  REQUIRE(cudaMalloc(&p, 64 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaEventRecord(a, 0) == cudaSuccess);
  add_scalar<<<1, 64>>>(p, 64, 1);
  REQUIRE(cudaEventRecord(b, 0) == cudaSuccess);
  add_scalar<<<1, 64>>>(p, 64, 1);
  REQUIRE(cudaEventRecord(c, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, 0) == cudaSuccess);
  float ab = -1.0f, ac = -1.0f, ms = -1.0f;
  REQUIRE(cudaEventElapsedTime(&ab, a, b) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&ac, a, c) == cudaSuccess);
  CHECK(ab >= 0.0f);
  CHECK(ac >= ab);
  CHECK(cudaEventElapsedTime(&ms, a, untimed) == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventElapsedTime(&ms, a, never) == cudaErrorInvalidResourceHandle);
  CHECK(cudaProfilerStart() == cudaSuccess);
  CHECK(cudaProfilerStop() == cudaSuccess);
  cudaGetLastError();
  for (cudaEvent_t e : {a, b, c, untimed, never}) REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
}

// shfl_scan's block scan (NVIDIA's cuda-samples, integral image) in small: each of 3 warps scans
// its values and its last lane stores the warp's sum in sums[warp]; warp 0 then reads sums[lane]
// for all 32 lanes, 29 of them never written, scans them and stores them back; warp w > 0 adds
// sums[w + added] (added -1: the scan, which depends on written words only). `sums` is each
// kernel's own __shared__ array (one in this function would be module-scope .shared in the PTX,
// counted in every kernel's static shared memory).
__device__ void block_scan_of_warp_sums(const unsigned* in, unsigned* out, int added, unsigned* sums) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned v = in[threadIdx.x];
  for (unsigned i = 1; i < 32; i *= 2) {
    const unsigned n = __shfl_up_sync(0xffffffffu, v, i);
    if (lane >= i) v += n;
  }
  if (lane == 31) sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    unsigned sum = sums[lane];
    for (unsigned i = 1; i < 32; i *= 2) {
      const unsigned n = __shfl_up_sync(0xffffffffu, sum, i);
      if (lane >= i) sum += n;
    }
    sums[lane] = sum;
  }
  __syncthreads();
  if (warp > 0) v += sums[static_cast<int>(warp) + added];
  out[threadIdx.x] = v;
}

// The scan: right on a GPU whatever the unwritten words hold, a read of never-written shared
// memory (byte 12: lane 3 reads sums[3]) that no output depends on.
__global__ void block_scan_reading_unwritten(const unsigned* in, unsigned* out) {
  __shared__ unsigned sums[32];
  block_scan_of_warp_sums(in, out, -1, sums);
}

// The same scan with a planted bug: warp w > 0 adds sums[w + 1] instead of sums[w - 1], so warp 2
// adds sums[3], which warp 0 stored back from its scan of the 29 unwritten words: the garbage
// reaches the output. Run by cuda_sim_runtime_test.undefined_use (the default, report: a finding
// at the global store naming the read of byte 12; the launch fails, sticky).
__global__ void block_scan_using_unwritten(const unsigned* in, unsigned* out) {
  __shared__ unsigned sums[32];
  block_scan_of_warp_sums(in, out, 1, sums);
}

TEST_CASE("a read of never-written shared memory whose value reaches the output: reported at the use", "[.undefined_use]") {
  constexpr int kThreads = 96;
  unsigned *d_in = nullptr, *d_out = nullptr;
  REQUIRE(cudaMalloc(&d_in, kThreads * sizeof(unsigned)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_out, kThreads * sizeof(unsigned)) == cudaSuccess);
  REQUIRE(cudaMemset(d_in, 0, kThreads * sizeof(unsigned)) == cudaSuccess);
  block_scan_using_unwritten<<<1, kThreads>>>(d_in, d_out);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);  // sticky: nothing else runs in this process
}

// Run by cuda_sim_runtime_test.uninitialized_shared (the default, report: the undefined words
// reach no output, so the scan runs and is exact), .uninitialized_shared_load
// (RUNGS_SIM_UNINITIALIZED_SHARED=load: the read is a finding and the launch fails, sticky) and
// .uninitialized_shared_allowed (allow: the scan runs and is exact).
TEST_CASE("a harmless read of never-written shared memory: reported only by RUNGS_SIM_UNINITIALIZED_SHARED=load",
          "[.uninitialized_shared]") {
  const char* mode = std::getenv("RUNGS_SIM_UNINITIALIZED_SHARED");
  const bool allowed = mode == nullptr || std::string(mode) != "load";
  constexpr int kThreads = 96;
  std::mt19937 rng(std::random_device{}());
  std::vector<unsigned> in(kThreads), want(kThreads);
  for (unsigned& x : in) x = rng() % 1000;
  unsigned running = 0;
  for (int i = 0; i < kThreads; ++i) want[i] = running += in[i];
  unsigned *d_in = nullptr, *d_out = nullptr;
  REQUIRE(cudaMalloc(&d_in, kThreads * sizeof(unsigned)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_out, kThreads * sizeof(unsigned)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_in, in.data(), kThreads * sizeof(unsigned), cudaMemcpyHostToDevice) == cudaSuccess);
  block_scan_reading_unwritten<<<1, kThreads>>>(d_in, d_out);
  const cudaError_t e = cudaDeviceSynchronize();
  if (!allowed) {
    CHECK(e == cudaErrorLaunchFailure);  // sticky: nothing else runs in this process
    return;
  }
  REQUIRE(e == cudaSuccess);
  std::vector<unsigned> got(kThreads);
  REQUIRE(cudaMemcpy(got.data(), d_out, kThreads * sizeof(unsigned), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got == want);
  REQUIRE(cudaFree(d_in) == cudaSuccess);
  REQUIRE(cudaFree(d_out) == cudaSuccess);
}
