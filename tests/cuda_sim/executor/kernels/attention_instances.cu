// Device code only (compiled with nvcc -ptx, never linked): the attention kernel instances the
// executor's end-to-end test runs (kernels_test.cpp), referenced so that nvcc emits their PTX.
#include <rungs/attention/detail/kernels.cuh>

namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;

template <class T, int D, int G>
constexpr auto decode_kernel = &rd::paged_attention_kernel<T, D, 0, geo::decode_rows_per_thread(G), geo::decode_row_groups(G), true>;
template <class T, int D>
constexpr auto prefill_kernel = &rd::paged_attention_kernel<T, D, 0, geo::max_rows_per_thread, geo::thread_rows(D), false>;

extern void* const rungs_sim_attention_instances[];
void* const rungs_sim_attention_instances[] = {
    reinterpret_cast<void*>(decode_kernel<__half, 128, 4>),
    reinterpret_cast<void*>(decode_kernel<__nv_bfloat16, 64, 16>),
    reinterpret_cast<void*>(decode_kernel<__half, 96, 1>),
    reinterpret_cast<void*>(prefill_kernel<__nv_bfloat16, 128>),
    reinterpret_cast<void*>(prefill_kernel<__half, 80>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 128>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__nv_bfloat16, 64>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__nv_bfloat16, 128>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 96>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 80>),
    reinterpret_cast<void*>(&rd::cache_write_kernel<__half, 128>),
};
