// fp8x8_to (device.cuh), the fp8 tile widening, over every code: thread i widens codes 8i ..
// 8i + 7 (kernels_test.cpp compares each with the host's value over kv_unit, NaN included,
// which no kernel test's cache holds where it is read). Included by attention_instances.cu
// (compute_80 PTX: the integer route) and fp8_sm90_instances.cu (compute_90: the hardware one).
#pragma once

#include <rungs/attention/detail/device.cuh>

struct fp8_widen_params {
  const uint2* codes;  // 256 codes
  uint4* out;          // 256 elements of T
};
template <class T, class KV>
__global__ void fp8_widen_probe(const fp8_widen_params p) {
  p.out[threadIdx.x] = rungs::attention::detail::fp8x8_to<T, KV>(p.codes[threadIdx.x]);
}
extern void* const rungs_sim_fp8_widen_probes[];
void* const rungs_sim_fp8_widen_probes[] = {
    reinterpret_cast<void*>(&fp8_widen_probe<__half, __nv_fp8_e4m3>),
    reinterpret_cast<void*>(&fp8_widen_probe<__half, __nv_fp8_e5m2>),
    reinterpret_cast<void*>(&fp8_widen_probe<__nv_bfloat16, __nv_fp8_e4m3>),
    reinterpret_cast<void*>(&fp8_widen_probe<__nv_bfloat16, __nv_fp8_e5m2>),
};
