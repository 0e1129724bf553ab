// Fault injection in the host CUDA runtime (sim/include/rungs_sim/faults.hpp; label cuda-sim):
// the Nth call fails with the chosen error and no other does, a failed end of capture still
// ends the capture, a sticky fault poisons every later call, and a seeded random schedule is
// the same on every run.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>
#include <rungs_sim/faults.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace faults = rungs::sim::faults;

namespace {

__global__ void add_one(int* data) { data[threadIdx.x] += 1; }

// Leaves the device clean for the next test case, whatever this one injected.
struct clean_device {
  ~clean_device() {
    faults::clear();
    faults::reset_device();
  }
};

// A non-blocking stream and a zeroed buffer of 32 ints on the device.
struct stream_and_buffer {
  cudaStream_t s = nullptr;
  int* d = nullptr;
  stream_and_buffer() {
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaMalloc(&d, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMemset(d, 0, 32 * sizeof(int)) == cudaSuccess);
  }
  ~stream_and_buffer() {
    CHECK(cudaStreamDestroy(s) == cudaSuccess);
    CHECK(cudaFree(d) == cudaSuccess);
  }
};

}  // namespace

TEST_CASE("the nth call of a function fails with the chosen error, and only that call") {
  clean_device guard;
  const std::size_t made = faults::log().size();
  faults::fail_nth("cudaMalloc", 2, cudaErrorMemoryAllocation);
  const std::uint64_t before = faults::calls("cudaMalloc");
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK(cudaMalloc(&a, 64) == cudaSuccess);
  CHECK(cudaMalloc(&b, 64) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);  // sets the last error, as CUDA's calls do
  CHECK(cudaGetLastError() == cudaSuccess);                // and is not sticky
  CHECK(cudaMalloc(&c, 64) == cudaSuccess);
  CHECK(faults::calls("cudaMalloc") == before + 3);
  const std::vector<faults::injected> log = faults::log();
  REQUIRE(log.size() == made + 1);
  CHECK(log.back().call == "cudaMalloc");
  CHECK(log.back().nth == before + 2);
  CHECK(log.back().error == cudaErrorMemoryAllocation);
  CHECK_FALSE(log.back().sticky);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
}

TEST_CASE("a call made inside another runtime call is not counted again") {
  clean_device guard;
  int* d = nullptr;
  int h[4] = {1, 2, 3, 4};
  REQUIRE(cudaMalloc(&d, sizeof h) == cudaSuccess);
  const std::uint64_t sync = faults::calls("cudaMemcpy"), async = faults::calls("cudaMemcpyAsync");
  CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess);  // runs cudaMemcpyAsync inside
  CHECK(faults::calls("cudaMemcpy") == sync + 1);
  CHECK(faults::calls("cudaMemcpyAsync") == async);
  CHECK(cudaFree(d) == cudaSuccess);
}

TEST_CASE("a failed end of capture still ends the capture, with no graph") {
  clean_device guard;
  stream_and_buffer sb;
  auto [s, d] = std::pair(sb.s, sb.d);
  faults::fail_nth("cudaStreamEndCapture", 1, cudaErrorStreamCaptureInvalidated);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  add_one<<<1, 32, 0, s>>>(d);
  cudaGraph_t g = reinterpret_cast<cudaGraph_t>(&g);  // not null: the call must clear it
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
  CHECK(g == nullptr);
  cudaStreamCaptureStatus status{};
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  CHECK(cudaGetLastError() == cudaErrorStreamCaptureInvalidated);
  CHECK(cudaMemsetAsync(d, 0, 32 * sizeof(int), s) == cudaSuccess);  // the stream works again
}

TEST_CASE("instantiation, upload and graph launch fail with their errors and run nothing") {
  clean_device guard;
  stream_and_buffer sb;
  auto [s, d] = std::pair(sb.s, sb.d);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  add_one<<<1, 32, 0, s>>>(d);
  cudaGraph_t g = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  cudaGraphExec_t x = nullptr;
  faults::fail_nth("cudaGraphInstantiate", 1, cudaErrorMemoryAllocation);
  CHECK(cudaGraphInstantiate(&x, g, 0) == cudaErrorMemoryAllocation);
  REQUIRE(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
  faults::fail_nth("cudaGraphUpload", 1, cudaErrorMemoryAllocation);
  CHECK(cudaGraphUpload(x, s) == cudaErrorMemoryAllocation);
  faults::fail_nth("cudaGraphLaunch", 1, cudaErrorLaunchOutOfResources);
  CHECK(cudaGraphLaunch(x, s) == cudaErrorLaunchOutOfResources);
  CHECK(cudaGraphLaunch(x, s) == cudaSuccess);
  int h[32];
  REQUIRE(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(h[0] == 1);  // one replay ran, the failed one did not
  CHECK(h[31] == 1);
  CHECK(cudaGraphExecDestroy(x) == cudaSuccess);
  CHECK(cudaGraphDestroy(g) == cudaSuccess);
}

TEST_CASE("a sticky fault at a launch is a kernel fault: the launch returns, every later call fails") {
  clean_device guard;
  int* d = nullptr;
  REQUIRE(cudaMalloc(&d, 32 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(d, 0, 32 * sizeof(int)) == cudaSuccess);
  faults::fail_nth("cudaLaunchKernel", 1, cudaErrorIllegalAddress);
  add_one<<<1, 32>>>(d);
  CHECK(cudaPeekAtLastError() == cudaErrorIllegalAddress);
  CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 16) == cudaErrorIllegalAddress);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);  // sticky: never cleared
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  CHECK(faults::log().back().sticky);
  faults::reset_device();
  int h[32];
  REQUIRE(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(h[0] == 0);  // the faulted kernel ran nothing
  CHECK(cudaFree(d) == cudaSuccess);
}

TEST_CASE("a failed destroy call destroys nothing; live() counts what the device holds") {
  clean_device guard;
  const faults::live_objects before = faults::live();
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  void *d = nullptr, *h = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaMalloc(&d, 100) == cudaSuccess);
  REQUIRE(cudaMallocHost(&h, 10) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(d, 0, 100, s) == cudaSuccess);
  cudaGraph_t g = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  cudaGraphExec_t x = nullptr;
  REQUIRE(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
  faults::live_objects made = before;
  made.device_allocations += 1;
  made.host_allocations += 1;
  made.device_bytes += 100;
  made.streams += 1;
  made.events += 1;
  made.graphs += 1;
  made.graph_execs += 1;
  CHECK(faults::live() == made);
  CHECK(faults::live().objects() == before.objects() + 6);
  // Each destroy call fails once with its usual error (a bad handle) and leaves the object live;
  // the second call destroys it.
  const std::vector<std::pair<const char*, std::function<cudaError_t()>>> destroys = {
      {"cudaGraphExecDestroy", [&] { return cudaGraphExecDestroy(x); }},
      {"cudaGraphDestroy", [&] { return cudaGraphDestroy(g); }},
      {"cudaEventDestroy", [&] { return cudaEventDestroy(e); }},
      {"cudaStreamDestroy", [&] { return cudaStreamDestroy(s); }},
      {"cudaFreeHost", [&] { return cudaFreeHost(h); }},
      {"cudaFree", [&] { return cudaFree(d); }}};
  std::size_t objects = made.objects();
  for (const auto& [call, destroy] : destroys) {
    INFO(call);
    faults::fail_nth(call, 1, cudaErrorInvalidResourceHandle);
    CHECK(destroy() == cudaErrorInvalidResourceHandle);
    CHECK(faults::live().objects() == objects);
    CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
    CHECK(destroy() == cudaSuccess);
    CHECK(faults::live().objects() == --objects);
  }
  CHECK(faults::live() == before);
}

TEST_CASE("device and error queries fail on purpose") {
  clean_device guard;
  int n = -1, device = -1, sms = -1;
  cudaDeviceProp prop{};
  faults::fail_nth("cudaGetDeviceCount", 1, cudaErrorInitializationError);
  CHECK(cudaGetDeviceCount(&n) == cudaErrorInitializationError);
  CHECK(n == -1);
  faults::fail_nth("cudaGetDevice", 1, cudaErrorInitializationError);
  CHECK(cudaGetDevice(&device) == cudaErrorInitializationError);
  faults::fail_nth("cudaDeviceGetAttribute", 1, cudaErrorInitializationError);
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaErrorInitializationError);
  CHECK(sms == -1);
  faults::fail_nth("cudaGetDeviceProperties", 1, cudaErrorInitializationError);
  CHECK(cudaGetDeviceProperties(&prop, 0) == cudaErrorInitializationError);
  CHECK(cudaGetLastError() == cudaErrorInitializationError);  // the last failure, cleared
  CHECK(cudaGetDeviceCount(&n) == cudaSuccess);
  CHECK(n == 1);
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  CHECK(sms == 132);
  // An injected error query reports a launch error that did not happen: cudaPeekAtLastError
  // leaves it, cudaGetLastError returns and clears it.
  REQUIRE(cudaGetLastError() == cudaSuccess);
  faults::fail_nth("cudaPeekAtLastError", 1, cudaErrorLaunchOutOfResources);
  CHECK(cudaPeekAtLastError() == cudaErrorLaunchOutOfResources);
  CHECK(cudaPeekAtLastError() == cudaErrorLaunchOutOfResources);
  CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  faults::fail_nth("cudaGetLastError", 1, cudaErrorLaunchOutOfResources);
  CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(faults::log().back().call == "cudaGetLastError");
}

TEST_CASE("a seeded random schedule fails the same calls on every run, within its set") {
  clean_device guard;
  auto run = [](std::uint64_t seed, double rate) {
    faults::clear();
    const std::size_t from = faults::log().size();
    const std::uint64_t first = faults::calls("cudaMemsetAsync");
    faults::fail_randomly(seed, rate, {"cudaMemsetAsync"});
    int* d = nullptr;
    REQUIRE(cudaMalloc(&d, 64) == cudaSuccess);  // not in the set: never fails
    std::vector<std::uint64_t> failed;
    for (int i = 0; i < 200; ++i)
      if (cudaMemsetAsync(d, 0, 64, nullptr) != cudaSuccess) failed.push_back(faults::calls("cudaMemsetAsync") - first);
    faults::clear();
    REQUIRE(cudaFree(d) == cudaSuccess);
    CHECK(faults::log().size() - from == failed.size());
    return failed;
  };
  // The draw depends on the seed and the call's index among all injectable calls, so the same
  // program under the same seed fails the same calls; count checked against rate 0.25 of 200.
  const auto a = run(7, 0.25);
  CHECK(a.size() > 20);
  CHECK(a.size() < 80);
  CHECK(run(7, 0).empty());
  CHECK(run(7, 1).size() == 200);
  CHECK_THROWS_WITH(faults::fail_randomly(1, 1.5), Catch::Contains("rate = 1.5"));
  CHECK_THROWS_WITH(faults::fail_randomly(1, 0.5, {"cudaFrobnicate"}), Catch::Contains("'cudaFrobnicate' is not an injectable call"));
  CHECK_THROWS_WITH(faults::fail_nth("cudaMalloc", 0, cudaErrorMemoryAllocation), Catch::Contains("nth = 0"));
}

// Run by ctest with RUNGS_SIM_FAULTS="cudaMalloc:2=cudaErrorInvalidValue,cudaMemsetAsync:1"
// (cuda_sim_faults_test.env): the environment's schedule, counted from the start of the process.
TEST_CASE("the environment's schedule", "[.env]") {
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, 64) == cudaSuccess);
  CHECK(cudaMalloc(&b, 64) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(a, 0, 64, nullptr) == cudaErrorInvalidValue);  // the call's usual error
  CHECK(cudaMemsetAsync(a, 0, 64, nullptr) == cudaSuccess);
  CHECK(faults::log().size() == 2);
  CHECK(cudaFree(a) == cudaSuccess);
}
