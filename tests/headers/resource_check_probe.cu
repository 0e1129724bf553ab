// Probe kernels for rungs' ptxas resource check (RUNGS_CUDA_RESOURCE_CHECKS). The test
// (resource_check.cmake) compiles this file three times with the flags rungs' own CUDA targets
// get, and expects: PROBE=0 (64 floats in registers) compiles; PROBE=1 (the same array read
// at a run-time index, so it must live in local memory) fails; PROBE=2 (the array under a
// launch bound that leaves 32 registers per thread) fails on spills. If a toolkit stops
// reporting these, the check would silently pass everything: this test is what notices.
#ifndef PROBE
#define PROBE 0
#endif
#if PROBE == 2
#define RUNGS_PROBE_BOUNDS __launch_bounds__(1024, 2)
#else
#define RUNGS_PROBE_BOUNDS __launch_bounds__(128)
#endif

__global__ void RUNGS_PROBE_BOUNDS probe_kernel(float* out, const float* in, const int* n) {
  float a[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) a[i] = in[threadIdx.x * 64 + i];
  for (int k = 0; k < n[0]; ++k) {
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = fmaf(a[i], a[(i + 1) % 64], in[k]);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += a[i];
#if PROBE == 1
  for (int i = 0; i < n[1]; ++i) s += a[(i * 7) & 63];  // a run-time index: local memory
#endif
  out[threadIdx.x] = s;
}
