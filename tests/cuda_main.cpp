// The Catch2 main of rungs' CUDA tests, compiled by the host compiler. Without a GPU (no
// device, or no driver at all, as on CI) it exits 77, which ctest reports as "skipped"
// (SKIP_RETURN_CODE), so a CPU-only machine builds and lists the GPU tests without failing
// them. Any other CUDA error (a driver too old for this toolkit, a broken CUDA_VISIBLE_DEVICES)
// is a failure: on a GPU machine it must not pass for "skipped".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaErrorNoDevice || (status == cudaSuccess && devices == 0)) {
    std::printf("skipped: no CUDA device visible\n");
    return 77;
  }
  if (status == cudaErrorInsufficientDriver && std::getenv("RUNGS_REQUIRE_GPU") == nullptr) {
    // No driver installed at all (CI's build machines) looks the same as an old one; a GPU
    // machine sets RUNGS_REQUIRE_GPU (scripts/gpu-check does) to make it a failure.
    std::printf("skipped: no usable CUDA driver (%s)\n", cudaGetErrorString(status));
    return 77;
  }
  if (status != cudaSuccess) {
    std::printf("CUDA cannot start: %s (%s)\n", cudaGetErrorName(status), cudaGetErrorString(status));
    return 1;
  }
  return Catch::Session().run(argc, argv);
}
