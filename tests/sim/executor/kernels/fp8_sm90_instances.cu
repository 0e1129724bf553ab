// Device code only (compiled with nvcc -ptx -arch=compute_90, never linked): the fp8 paths as
// sm_89 and newer compile them (device.cuh's fp8_hardware_cvt: E4M3 widened by
// cvt.rn.f16x2.e4m3x2, in units of kv_unit = 1), which the compute_80 PTX of
// attention_instances.cu never executes: the widening probe, and the default set's E4M3 decode
// (bf16 queries, head dim 128, group 4) on both decodes, with the split merge.
// kernels_test.cpp runs them against the host reference, as it runs the compute_80 ones.
#include <rungs/attention/detail/kernels.cuh>
#include <rungs/attention/geometry.hpp>

#include "fp8_widen_probe.cuh"

namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;

extern void* const rungs_sim_fp8_sm90_instances[];
void* const rungs_sim_fp8_sm90_instances[] = {
    reinterpret_cast<void*>(&rd::paged_attention_kernel<__nv_bfloat16, 128, 0, geo::decode_rows_per_thread(4),
                                                         geo::decode_row_groups(4), true, 0u, __nv_fp8_e4m3>),
    reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<__nv_bfloat16, 128, 0, 4, 0u, __nv_fp8_e4m3>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__nv_bfloat16, 128, false>),
};
