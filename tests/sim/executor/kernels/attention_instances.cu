// Device code only (compiled with nvcc -ptx, never linked): every attention kernel instance of
// rungs::attention::default_instantiations (the set CI compiles for sm_80 and sm_90), referenced
// so that nvcc emits their PTX for the executor's end-to-end test (kernels_test.cpp): per element
// type and head dim, one decode kernel per GQA group, the prefill kernel, the split merge and the
// cache write. The lists come from the set itself, so an instance added to it is run here too.
#include <rungs/attention/detail/kernels.cuh>
#include <rungs/attention/detail/tensor_core.cuh>
#include <rungs/attention/dispatch.hpp>

#include "fp8_widen_probe.cuh"

#include <type_traits>

namespace ra = rungs::attention;
namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;

namespace {

using set = ra::default_instantiations;
static_assert(std::is_same_v<set::block_sizes, ra::values<ra::dynamic_block_size>>,
              "the executor test runs the dynamic-block-size instances (the block size is a run-time value)");

template <ra::dtype Type>
using device_t = rd::device_type_t<ra::host_type<Type>>;

// Taking a kernel's address instantiates it, so nvcc emits its PTX entry.
template <class T, int D, int... G>
void head_dim_kernels(void**& out, ra::values<G...>) {
  ((*out++ = reinterpret_cast<void*>(
        &rd::paged_attention_kernel<T, D, 0, geo::decode_rows_per_thread(G), geo::decode_row_groups(G), true>)),
   ...);
  *out++ = reinterpret_cast<void*>(
      &rd::paged_attention_kernel<T, D, 0, geo::prefill_rows_per_thread, geo::thread_rows(D), false>);
  *out++ = reinterpret_cast<void*>(&rd::merge_splits_kernel<T, D>);
  *out++ = reinterpret_cast<void*>(&rd::cache_write_kernel<T, D>);
}

template <class T, int... D>
void dtype_kernels(void**& out, ra::values<D...>) {
  (head_dim_kernels<T, D>(out, set::decode_groups{}), ...);
}

template <ra::dtype... Types>
void set_kernels(void**& out, ra::dtypes<Types...>) {
  (dtype_kernels<device_t<Types>>(out, set::head_dims{}), ...);
}

}  // namespace

// Writes the address of every instance to `out` (which holds at least 2 x 5 x 12 pointers).
void rungs_sim_attention_instances(void** out) { set_kernels(out, set::dtype_list{}); }

// The set's fp8-cache instances (fp8_kv_instances): per (query type, cache type, head dim,
// group) the decode kernel (SIMT and tensor cores), and per (query type, cache type, head dim) the prefill kernel and
// the cache write (their merge is the 16-bit one above); and an E5M2 cache under f16 queries
// at head dim 64, group 2, beside them (kernels_test.cpp runs both formats).
namespace {
template <class T, class KV, int D, int G>
void fp8_kernels(void**& out) {
  *out++ = reinterpret_cast<void*>(
      &rd::paged_attention_kernel<T, D, 0, geo::decode_rows_per_thread(G), geo::decode_row_groups(G), true, 0, KV>);
  // The tensor-core decode over the same cache (the set has it where its tensor-core list has
  // the shape; E5M2 at D 64, group 2 is outside the set, as its SIMT decode).
  if constexpr (geo::tensor_core_decode_fits(D, G)) {
    *out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<T, D, 0, G, 0, KV>);
  }
  *out++ = reinterpret_cast<void*>(
      &rd::paged_attention_kernel<T, D, 0, geo::prefill_rows_per_thread, geo::thread_rows(D), false, 0, KV>);
  *out++ = reinterpret_cast<void*>(&rd::cache_write_kernel<T, D, KV>);
}
struct fp8_instance {
  void**& out;
  template <ra::dtype Type, ra::dtype Kv, int D, int G>
  void operator()() const {
    fp8_kernels<device_t<Type>, device_t<Kv>, D, G>(out);
  }
};
}  // namespace
void rungs_sim_fp8_instances(void** out) {
  ra::for_each_fp8_instance<set::fp8_kv>(fp8_instance{out});
  fp8_kernels<__half, __nv_fp8_e5m2, 64, 2>(out);
  *out++ = reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 64>);
}

// The score transforms (score_mod.hpp), all three at once, on one decode and one prefill
// instance, with the merges that add the sinks (not in the default set: kernels_test.cpp runs
// them against the reference).
namespace {
constexpr unsigned all_mods = ra::score_mod_bits({.sliding_window = true, .soft_cap = true, .sinks = true});
}  // namespace
extern void* const rungs_sim_score_mod_instances[];
void* const rungs_sim_score_mod_instances[] = {
    reinterpret_cast<void*>(&rd::paged_attention_kernel<__half, 128, 0, geo::decode_rows_per_thread(4),
                                                        geo::decode_row_groups(4), true, all_mods>),
    reinterpret_cast<void*>(&rd::paged_attention_kernel<__nv_bfloat16, 128, 0, geo::prefill_rows_per_thread,
                                                        geo::thread_rows(128), false, all_mods>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 128, true>),
    reinterpret_cast<void*>(&rd::merge_splits_kernel<__nv_bfloat16, 128, true>),
};

// The tensor-core decode (tensor_core.cuh): the set's instances (tensor_core_decode_instances),
// and beside them head dim 64 at groups 16 and 1, and every score transform at Mistral's shape
// (f16, D 128, group 4) and gpt-oss's (bf16, D 64, group 8), with the SIMT decode of the
// latter and the sinks merge at D 64 (kernels_test.cpp runs each against the reference).
namespace {
template <class T, int D, int... G>
void tensor_core_groups(void**& out, ra::values<G...>) {
  ((*out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<T, D, 0, G>)), ...);
}
template <class T, int... D>
void tensor_core_dims(void**& out, ra::values<D...>) {
  (tensor_core_groups<T, D>(out, set::tensor_core_decode::decode_groups{}), ...);
}
template <ra::dtype... Types>
void tensor_core_set(void**& out, ra::dtypes<Types...>) {
  (tensor_core_dims<device_t<Types>>(out, set::tensor_core_decode::head_dims{}), ...);
}
}  // namespace
void rungs_sim_tensor_core_instances(void** out) {
  tensor_core_set(out, set::tensor_core_decode::dtype_list{});
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<__half, 64, 0, 16>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<__nv_bfloat16, 64, 0, 1>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<__half, 128, 0, 4, all_mods>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_decode_kernel<__nv_bfloat16, 64, 0, 8, all_mods>);
  *out++ = reinterpret_cast<void*>(&rd::paged_attention_kernel<__nv_bfloat16, 64, 0, geo::decode_rows_per_thread(8),
                                                               geo::decode_row_groups(8), true, all_mods>);
  *out++ = reinterpret_cast<void*>(&rd::merge_splits_kernel<__nv_bfloat16, 64, true>);
}


// The tensor-core prefill (tensor_core.cuh): the set's instances (tensor_core_prefill_instances,
// and over an fp8 cache those its fp8_kv_instances list too), and beside them f16 at head dim
// 64, every score transform at the SIMT prefill's shape above (bf16, D 128) and at f16 D 64
// (with its SIMT prefill and sinks merge), and f16 over E5M2 at D 64 (kernels_test.cpp runs
// each against the reference).
namespace {
template <class T, int... D>
void tensor_core_prefill_dims(void**& out, ra::values<D...>) {
  ((*out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<T, D, 0>)), ...);
}
template <ra::dtype... Types>
void tensor_core_prefill_set(void**& out, ra::dtypes<Types...>) {
  (tensor_core_prefill_dims<device_t<Types>>(out, set::tensor_core_prefill::head_dims{}), ...);
}
struct tensor_core_prefill_fp8 {
  void**& out;
  template <ra::dtype Type, ra::dtype Kv, int D, int G>
  void operator()() const {
    if constexpr (set::tensor_core_prefill::contains(Type, D)) {
      *out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<device_t<Type>, D, 0, 0, device_t<Kv>>);
    }
  }
};
}  // namespace
void rungs_sim_tensor_core_prefill_instances(void** out) {
  tensor_core_prefill_set(out, set::tensor_core_prefill::dtype_list{});
  ra::for_each_fp8_instance<set::fp8_kv>(tensor_core_prefill_fp8{out});
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<__half, 64, 0>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<__nv_bfloat16, 128, 0, all_mods>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<__half, 64, 0, all_mods>);
  *out++ = reinterpret_cast<void*>(
      &rd::paged_attention_kernel<__half, 64, 0, geo::prefill_rows_per_thread, geo::thread_rows(64), false, all_mods>);
  *out++ = reinterpret_cast<void*>(&rd::merge_splits_kernel<__half, 64, true>);
  *out++ = reinterpret_cast<void*>(&rd::tensor_core_prefill_kernel<__half, 64, 0, 0, __nv_fp8_e5m2>);
}
