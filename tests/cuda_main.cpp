// The Catch2 main of rungs' CUDA tests, compiled by the host compiler. Without a GPU (no
// device, or no driver at all, as on CI) it exits 77, which ctest reports as "skipped"
// (SKIP_RETURN_CODE), so a CPU-only machine builds and lists the GPU tests without failing
// them. Any other CUDA error is a failure, and with RUNGS_REQUIRE_GPU set (scripts/gpu-check
// sets it) so are no device and no driver: on a GPU machine nothing may pass for "skipped".
// Catch2's implementation and session are catch_impl.cpp's, shared with the host tests' main.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int rungs_catch_run(int argc, char** argv);  // catch_impl.cpp

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  const bool required = std::getenv("RUNGS_REQUIRE_GPU") != nullptr;
  const bool no_device = status == cudaErrorNoDevice || (status == cudaSuccess && devices == 0);
  // No driver installed at all (CI's build machines) reads the same as one too old.
  const bool no_driver = status == cudaErrorInsufficientDriver;
  if ((no_device || no_driver) && !required) {
    std::printf("skipped: no usable CUDA device (%s)\n", no_device ? "none visible" : cudaGetErrorString(status));
    return 77;
  }
  if (status != cudaSuccess || devices == 0) {
    std::printf("CUDA cannot start: %s (%s)%s\n", cudaGetErrorName(status),
                devices == 0 && status == cudaSuccess ? "0 devices" : cudaGetErrorString(status),
                required ? "; RUNGS_REQUIRE_GPU is set, so this is a failure" : "");
    return 1;
  }
  return rungs_catch_run(argc, argv);
}
