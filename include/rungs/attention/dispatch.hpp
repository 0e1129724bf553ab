// Run-time values to kernel instantiations for rungs' paged attention, in plain C++ so the
// rules and their error messages are tested on any machine.
//
// Two layers of "supported":
//  * the contract: what the kernels are written for (check_shape below): element types f16
//    and bf16 (queries, outputs and the KV cache, or an fp8 E4M3/E5M2 KV cache), head dims 64,
//    80, 96, 128, 256, block sizes 8, 16, 32, 64, 128, GQA groups 1-8 and 16 for decode (any
//    group for prefill, which flattens heads into rows);
//  * an instantiation set: which template instances a build compiles. rungs is header-only,
//    so the set is a template argument of the launch API; the dispatcher rejects a value the
//    set lacks with rungs::unsupported_value listing what the set has.
//
// Block size is compile-time-capable: a set lists either static block sizes (the kernel's
// token -> block arithmetic uses constants) or dynamic_block_size (one instance for every
// block size, whose arithmetic is a shift and a mask by a run-time log2). Both cost the same
// two integer instructions per token, so the default set uses the dynamic instance; the full
// set compiles each static one (see docs/kernels.md, "Instantiation sets").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <rungs/attention/geometry.hpp>
#include <rungs/attention/layout.hpp>
#include <rungs/dispatch.hpp>

namespace rungs::attention {

/// A compile-time list of values (head dims, block sizes, group sizes).
template <auto... V>
struct values {
  static constexpr std::size_t size = sizeof...(V);
  template <class T>
  static constexpr bool contains(const T& v) {
    return ((v == V) || ...);
  }
  static std::string list() { return rungs::detail::supported_list<V...>(); }
};

/// A compile-time list of element types.
template <dtype... D>
struct dtypes {
  static constexpr bool contains(dtype t) { return ((t == D) || ...); }
  static std::string list() {
    std::string s;
    ((s += (s.empty() ? "" : ", "), s += name(D)), ...);
    return s;
  }
};

/// Block-size entry meaning "one instance for every supported block size".
inline constexpr int dynamic_block_size = 0;

// The contract.
using supported_dtypes = dtypes<dtype::fp16, dtype::bf16>;
/// KV cache types besides the queries' own.
using supported_fp8_kv_dtypes = dtypes<dtype::fp8_e4m3, dtype::fp8_e5m2>;
using supported_head_dims = values<64, 80, 96, 128, 256>;
using supported_block_sizes = values<8, 16, 32, 64, 128>;
using supported_decode_groups = values<1, 2, 3, 4, 5, 6, 7, 8, 16>;

namespace detail {
template <class List, class Within>
struct all_within;
template <auto... V, class Within>
struct all_within<values<V...>, Within> : std::bool_constant<(Within::contains(V) && ...)> {};
template <dtype... D, class Within>
struct all_within<dtypes<D...>, Within> : std::bool_constant<(Within::contains(D) && ...)> {};

// Whether dispatch_block finds an instance for block size b.
template <auto... V>
constexpr bool block_dispatchable(values<V...>, int b) {
  return ((V == dynamic_block_size || V == b) || ...);
}

template <auto... V>
constexpr bool block_entries_valid(values<V...>) {
  return ((V == dynamic_block_size || supported_block_sizes::contains(V)) && ...);
}
template <auto... G>
constexpr bool groups_fit(values<G...>, int head_dim) {
  return (geometry::decode_group_fits(head_dim, G) && ...);
}
template <class Groups, auto... D>
constexpr bool groups_fit_all(values<D...>) {
  return (groups_fit(Groups{}, D) && ...);
}
}  // namespace detail

/// The fp8-cache instances of an instantiation set: query (and output) types x fp8 cache
/// types x head dims x decode groups, at the set's block sizes. Each is another decode,
/// prefill and cache-write kernel per combination, so sets list few.
template <class QueryDtypes, class KvDtypes, class HeadDims, class DecodeGroups>
struct fp8_kv_instances {
  using query_dtypes = QueryDtypes;
  using kv_dtypes = KvDtypes;
  using head_dims = HeadDims;
  using decode_groups = DecodeGroups;
  static constexpr bool empty = HeadDims::size == 0;

  static_assert(detail::all_within<QueryDtypes, supported_dtypes>::value,
                "rungs::attention::fp8_kv_instances: a query type is outside the supported f16, bf16");
  static_assert(detail::all_within<KvDtypes, supported_fp8_kv_dtypes>::value,
                "rungs::attention::fp8_kv_instances: a KV cache type is outside the supported fp8_e4m3, fp8_e5m2");
  static_assert(detail::all_within<HeadDims, supported_head_dims>::value,
                "rungs::attention::fp8_kv_instances: a head dim is outside the supported 64, 80, 96, 128, 256");
  static_assert(detail::all_within<DecodeGroups, supported_decode_groups>::value,
                "rungs::attention::fp8_kv_instances: a decode group size is outside the supported 1-8, 16");
  static_assert(detail::groups_fit_all<DecodeGroups>(HeadDims{}),
                "rungs::attention::fp8_kv_instances: a decode group size does not fit the kernel geometry");
};
/// No fp8-cache instances.
using no_fp8_kv = fp8_kv_instances<dtypes<>, dtypes<>, values<>, values<>>;

namespace detail {
template <dtype Q, dtype Kv, int D, int... G, class F>
void each_fp8_group(F& f, values<G...>) {
  (f.template operator()<Q, Kv, D, G>(), ...);
}
template <dtype Q, dtype Kv, int... D, class F, class Groups>
void each_fp8_head_dim(F& f, values<D...>, Groups groups) {
  (each_fp8_group<Q, Kv, D>(f, groups), ...);
}
template <dtype Q, dtype... Kv, class F, class HeadDims, class Groups>
void each_fp8_kv(F& f, dtypes<Kv...>, HeadDims dims, Groups groups) {
  (each_fp8_head_dim<Q, Kv>(f, dims, groups), ...);
}
template <dtype... Q, class F, class Kvs, class HeadDims, class Groups>
void each_fp8_query(F& f, dtypes<Q...>, Kvs kvs, HeadDims dims, Groups groups) {
  (each_fp8_kv<Q>(f, kvs, dims, groups), ...);
}
}  // namespace detail

/// Calls f.template operator()<QueryType, KvType, HeadDim, Group>() (dtypes and ints) for every
/// combination an fp8_kv_instances lists, e.g. to run or precompile each.
template <class Fp8, class F>
void for_each_fp8_instance(F&& f) {
  detail::each_fp8_query(f, typename Fp8::query_dtypes{}, typename Fp8::kv_dtypes{}, typename Fp8::head_dims{},
                         typename Fp8::decode_groups{});
}

/// The tensor-core decode instances of an instantiation set (kernels/.../tensor_core.cuh):
/// element types x head dims x decode groups, at the set's block sizes, beside the SIMT decode
/// instances (which every shape keeps: the tensor-core decode is chosen by the plan). Over an
/// fp8 cache, the set has the tensor-core decode of each shape this list and the set's
/// fp8_kv_instances both have (for the query type).
///
/// SplitGroups: the decode groups (of DecodeGroups) whose in-CTA split instances the set also
/// compiles (a CTA of 2 to 4 warp groups, tensor_core_decode_agent's WarpGroups; 16-bit caches),
/// each W where geometry::tensor_core_decode_split_fits. The planner picks one for grids that
/// leave SMs under-filled (geometry::tensor_core_decode_warp_groups; docs/kernels.md, "The in-CTA
/// split").
template <class Dtypes, class HeadDims, class DecodeGroups, class SplitGroups = values<>>
struct tensor_core_decode_instances {
  using dtype_list = Dtypes;
  using head_dims = HeadDims;
  using decode_groups = DecodeGroups;
  using split_groups = SplitGroups;
  static constexpr bool empty = HeadDims::size == 0;

  static_assert(detail::all_within<Dtypes, supported_dtypes>::value,
                "rungs::attention::tensor_core_decode_instances: an element type is outside the supported f16, bf16");
  static_assert(detail::all_within<HeadDims, values<64, 80, 96, 128, 256>>::value,
                "rungs::attention::tensor_core_decode_instances: the tensor-core decode takes head dims 64, 80, 96, 128 "
                "and 256");
  static_assert(detail::all_within<DecodeGroups, values<1, 2, 3, 4, 5, 6, 7, 8, 16>>::value,
                "rungs::attention::tensor_core_decode_instances: the tensor-core decode takes groups 1-8 and 16");
  static_assert(detail::all_within<SplitGroups, DecodeGroups>::value,
                "rungs::attention::tensor_core_decode_instances: an in-CTA split group is not one of the decode groups");

  /// Whether the list has an instance for (type, head dim, group) (the set's block sizes aside).
  static constexpr bool contains(dtype type, int head_dim, int group) {
    return Dtypes::contains(type) && HeadDims::contains(head_dim) && DecodeGroups::contains(group);
  }
  /// Whether the list has the in-CTA split of `warp_groups` groups for (type, head dim, group)
  /// (geometry::tensor_core_decode_split_fits).
  static constexpr bool contains_split(dtype type, int head_dim, int group, int warp_groups) {
    return contains(type, head_dim, group) && SplitGroups::contains(group) &&
           geometry::tensor_core_decode_split_fits(head_dim, group, warp_groups);
  }
};
/// No tensor-core decode instances.
using no_tensor_core_decode = tensor_core_decode_instances<dtypes<>, values<>, values<>>;

/// The tensor-core prefill instances of an instantiation set (kernels/.../tensor_core.cuh):
/// element types x head dims, at the set's block sizes, beside the SIMT prefill instances
/// (which every shape keeps: the tensor-core prefill is chosen by the plan).
template <class Dtypes, class HeadDims>
struct tensor_core_prefill_instances {
  using dtype_list = Dtypes;
  using head_dims = HeadDims;
  static constexpr bool empty = HeadDims::size == 0;

  static_assert(detail::all_within<Dtypes, supported_dtypes>::value,
                "rungs::attention::tensor_core_prefill_instances: an element type is outside the supported f16, bf16");
  static_assert(detail::all_within<HeadDims, values<64, 128>>::value,
                "rungs::attention::tensor_core_prefill_instances: the tensor-core prefill takes head dims 64 and 128");

  /// Whether the list has an instance for (type, head dim) (the set's block sizes aside).
  static constexpr bool contains(dtype type, int head_dim) {
    return Dtypes::contains(type) && HeadDims::contains(head_dim);
  }
};
/// No tensor-core prefill instances.
using no_tensor_core_prefill = tensor_core_prefill_instances<dtypes<>, values<>>;

/// The template instances a build compiles: element types x head dims x block sizes (static
/// values and/or dynamic_block_size) x decode group sizes, for caches of the queries' type,
/// plus the fp8-cache instances Fp8Kv lists and the tensor-core decode and prefill instances
/// TensorCore and TensorCorePrefill list. Prefill and cache writes do not depend on the group
/// (prefill flattens it into rows), so they instantiate dtypes x head dims x block sizes and
/// dtypes x head dims.
template <class Dtypes, class HeadDims, class BlockSizes, class DecodeGroups, class Fp8Kv = no_fp8_kv,
          class TensorCore = no_tensor_core_decode, class TensorCorePrefill = no_tensor_core_prefill>
struct instantiation_set {
  using dtype_list = Dtypes;
  using head_dims = HeadDims;
  using block_sizes = BlockSizes;
  using decode_groups = DecodeGroups;
  using fp8_kv = Fp8Kv;
  using tensor_core_decode = TensorCore;
  using tensor_core_prefill = TensorCorePrefill;

  static_assert(detail::all_within<Dtypes, supported_dtypes>::value,
                "rungs::attention::instantiation_set: an element type is outside the supported f16, bf16");
  static_assert(detail::all_within<HeadDims, supported_head_dims>::value,
                "rungs::attention::instantiation_set: a head dim is outside the supported 64, 80, 96, 128, 256");
  static_assert(detail::block_entries_valid(BlockSizes{}),
                "rungs::attention::instantiation_set: block sizes must be among 8, 16, 32, 64, 128 or "
                "dynamic_block_size");
  static_assert(detail::all_within<DecodeGroups, supported_decode_groups>::value,
                "rungs::attention::instantiation_set: a decode group size is outside the supported 1-8, 16");
  static_assert(detail::groups_fit_all<DecodeGroups>(HeadDims{}),
                "rungs::attention::instantiation_set: a decode group size does not fit the kernel geometry");
};

/// The fp8-cache instances of the default and full sets: an E4M3 cache under bf16 queries at
/// head dim 128, decode group 4 (Llama-3-8B's 32/8 heads): one decode, one prefill and one
/// cache-write kernel (the merge is the bf16 one). Other fp8 shapes need a set of their own.
using default_fp8_kv_instances = fp8_kv_instances<dtypes<dtype::bf16>, dtypes<dtype::fp8_e4m3>, values<128>, values<4>>;

/// The tensor-core decode instances of the default and full sets: fp16 and bf16 at head dims
/// 64, 80, 96, 128 and 256, groups 1, 2 (rows of the mma tile padded to 16), 4 (Llama-3-8B's 32/8
/// heads), 8 (Llama-3-70B's 64/8) and 16 (a full tile), where scripts/sass-check's issue margin
/// is above the SIMT decode's (benchmarks/RESULTS.md, "Issue margins of every default decode",
/// "Tensor-core decode at head dim 256").
/// The planner picks them on sm_90 for groups of 4 and more and head dim 80 at group 2, as an
/// H100 and an H200 measured (plan.hpp, decode_wants_tensor_cores; elsewhere groups of 4 and more
/// at head dims 64 and 128); the other groups 1 and 2 tied or lost there and run on them only
/// when forced (plan_options::kernel). Groups 3 and 5-7 run the SIMT decode. With default_fp8_kv_instances they also give the tensor-core decode
/// over the E4M3 cache (bf16, head dim 128, group 4). Groups 8 and 16 also have the in-CTA
/// split (2 to 4 warp groups a CTA) for the small grids where they fill few of the SMs' CTA slots
/// (batch 1 x 16384 at both, 8 x 4096 at group 16: benchmarks/RESULTS.md, "The small grids").
using default_tensor_core_decode_instances =
    tensor_core_decode_instances<supported_dtypes, values<64, 80, 96, 128, 256>, values<1, 2, 4, 8, 16>, values<8, 16>>;

/// The tensor-core prefill instances of the default and full sets: fp16 and bf16 at head dim
/// 128 (2 kernels; the planner picks them on sm_80 and newer); other head dims run the SIMT
/// prefill. With default_fp8_kv_instances they also give the tensor-core prefill over the
/// E4M3 cache (bf16, head dim 128).
using default_tensor_core_prefill_instances = tensor_core_prefill_instances<supported_dtypes, values<128>>;

/// What CI compiles (for sm_80 and sm_90) and the launch API uses unless told otherwise: the
/// whole 16-bit contract with the dynamic block size, 2 x 5 x 9 = 90 decode kernels, 10
/// prefill, 10 merge and 10 cache-write kernels (about 1.5 minutes of ptxas per architecture),
/// the fp8 instances, the 51 tensor-core decode kernels above (50 16-bit, 1 over E4M3) and the 3
/// tensor-core prefill kernels (2 16-bit, 1 over E4M3).
using default_instantiations =
    instantiation_set<supported_dtypes, supported_head_dims, values<dynamic_block_size>, supported_decode_groups,
                      default_fp8_kv_instances, default_tensor_core_decode_instances,
                      default_tensor_core_prefill_instances>;

/// The default set plus a static instance for every block size: 2 x 5 x 6 x 9 = 540 decode
/// and 60 prefill kernels (and the fp8 instances at every block size). Built by the cuda-full
/// preset (-DRUNGS_KERNEL_INSTANTIATIONS=full) to measure what static block sizes buy and to
/// keep them compiling.
using full_instantiations =
    instantiation_set<supported_dtypes, supported_head_dims,
                      values<8, 16, 32, 64, 128, dynamic_block_size>, supported_decode_groups,
                      default_fp8_kv_instances, default_tensor_core_decode_instances,
                      default_tensor_core_prefill_instances>;

namespace detail {

// A callable for dispatch that only checks membership.
struct accept_value {
  template <int>
  void operator()() const {}
};

template <auto... V, class F>
decltype(auto) dispatch_in(values<V...>, std::string_view parameter, int value, F&& f) {
  return rungs::dispatch<V...>(parameter, value, std::forward<F>(f));
}

template <class R, dtype First, dtype... Rest, class F, class Fail>
R dispatch_dtype_one(dtype value, F& f, Fail& fail) {
  if (value == First) return f.template operator()<host_type<First>>();
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_dtype_one<R, Rest...>(value, f, fail);
  } else {
    fail();  // throws
    throw;   // unreachable
  }
}

template <dtype... D, class F>
decltype(auto) dispatch_dtype(dtypes<D...>, dtype value, F&& f) {
  using R = decltype(f.template operator()<host_type<rungs::detail::first_value<D...>>>());
  auto fail = [&] {
    throw unsupported_value("dtype = " + std::string(name(value)) +
                            " is not supported by this build; supported: " + dtypes<D...>::list());
  };
  return dispatch_dtype_one<R, D...>(value, f, fail);
}

// A static block size when the set has it, else the dynamic instance when the set has that.
template <auto... V, class F>
decltype(auto) dispatch_block(values<V...>, int block_size, F&& f) {
  constexpr bool has_dynamic = ((V == dynamic_block_size) || ...);
  if constexpr (has_dynamic) {
    if (!((block_size == V && V != dynamic_block_size) || ...)) {
      return f.template operator()<dynamic_block_size>();
    }
  }
  return rungs::dispatch<V...>("block_size", block_size, std::forward<F>(f));
}

}  // namespace detail

/// Throws std::invalid_argument or rungs::unsupported_value when a shape is outside the
/// contract (for any instantiation set): the message names the value and the rule.
inline void check_shape(const attention_shape& s) {
  auto fail = [](auto&&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    throw std::invalid_argument(os.str());
  };
  if (s.num_kv_heads < 1) fail("num_kv_heads = ", s.num_kv_heads, " must be at least 1");
  if (s.num_kv_heads > 65535) fail("num_kv_heads = ", s.num_kv_heads, " exceeds 65535 (the grid's y limit)");
  if (s.num_qo_heads < 1) fail("num_qo_heads = ", s.num_qo_heads, " must be at least 1");
  if (s.num_qo_heads % s.num_kv_heads != 0) {
    fail("num_qo_heads = ", s.num_qo_heads, " must be a multiple of num_kv_heads = ", s.num_kv_heads,
         " (each KV head serves a whole group of query heads)");
  }
  if (s.num_blocks < 1) fail("num_blocks = ", s.num_blocks, " must be at least 1");
  (void)detail::dispatch_in(supported_head_dims{}, "head_dim", s.head_dim, detail::accept_value{});
  (void)detail::dispatch_in(supported_block_sizes{}, "block_size", s.block_size, detail::accept_value{});
  // Block tables hold 32-bit ids, and the kernels address a pool's (block, head, token) rows in
  // 32 bits (kv_pipeline's leads; bytes are 64-bit): 2^31 rows of 64 fp8 dims are 128 GiB.
  constexpr std::int64_t kMax32 = 2147483647;
  if (s.num_blocks > kMax32) fail("num_blocks = ", s.num_blocks, " exceeds 2^31 - 1 (block tables hold 32-bit ids)");
  const std::int64_t rows = s.num_blocks * s.num_kv_heads * s.block_size;
  if (rows > kMax32) {
    fail("num_blocks * num_kv_heads * block_size = ", rows,
         " rows exceed 2^31 - 1 (the kernels address a pool's rows in 32 bits)");
  }
}

/// check_shape plus the decode-only rule on the group size.
inline void check_decode_shape(const attention_shape& s) {
  check_shape(s);
  (void)detail::dispatch_in(supported_decode_groups{}, "group_size", s.group_size(), detail::accept_value{});
}

/// Calls f.template operator()<T, HeadDim, BlockSize, Group>() with T the host element type
/// (rungs::f16 or rungs::bf16) and BlockSize a static block size or dynamic_block_size.
template <class Set, class F>
decltype(auto) dispatch_decode(dtype type, const attention_shape& s, F&& f) {
  check_decode_shape(s);
  return detail::dispatch_dtype(typename Set::dtype_list{}, type, [&]<class T>() -> decltype(auto) {
    return detail::dispatch_in(typename Set::head_dims{}, "head_dim", s.head_dim, [&]<int D>() -> decltype(auto) {
      return detail::dispatch_block(typename Set::block_sizes{}, s.block_size, [&]<int B>() -> decltype(auto) {
        return detail::dispatch_in(typename Set::decode_groups{}, "group_size", s.group_size(),
                                   [&]<int G>() -> decltype(auto) { return f.template operator()<T, D, B, G>(); });
      });
    });
  });
}

/// Calls f.template operator()<T, HeadDim, BlockSize>().
template <class Set, class F>
decltype(auto) dispatch_prefill(dtype type, const attention_shape& s, F&& f) {
  check_shape(s);
  return detail::dispatch_dtype(typename Set::dtype_list{}, type, [&]<class T>() -> decltype(auto) {
    return detail::dispatch_in(typename Set::head_dims{}, "head_dim", s.head_dim, [&]<int D>() -> decltype(auto) {
      return detail::dispatch_block(typename Set::block_sizes{}, s.block_size,
                                    [&]<int B>() -> decltype(auto) { return f.template operator()<T, D, B>(); });
    });
  });
}

/// Calls f.template operator()<T, HeadDim>() (cache writes only move 16-byte vectors; the
/// block size enters as a run-time shift).
template <class Set, class F>
decltype(auto) dispatch_cache_write(dtype type, const attention_shape& s, F&& f) {
  check_shape(s);
  return detail::dispatch_dtype(typename Set::dtype_list{}, type, [&]<class T>() -> decltype(auto) {
    return detail::dispatch_in(typename Set::head_dims{}, "head_dim", s.head_dim,
                               [&]<int D>() -> decltype(auto) { return f.template operator()<T, D>(); });
  });
}

/// Whether Set has a tensor-core decode instance for (type, shape) at a block size it lists,
/// over a cache of kv_type (default: the queries' type). An fp8 cache's instance exists for
/// each shape that both Set::tensor_core_decode (for the query type) and Set::fp8_kv list, at
/// the head dims the fp8 tensor-core decode takes (geometry::tensor_core_fp8_decode_fits).
template <class Set>
bool has_tensor_core_decode(dtype type, const attention_shape& s, std::optional<dtype> kv_type = {}) {
  const bool fp8_listed = !kv_type || *kv_type == type ||
                          (Set::fp8_kv::query_dtypes::contains(type) && Set::fp8_kv::kv_dtypes::contains(*kv_type) &&
                           Set::fp8_kv::head_dims::contains(s.head_dim) &&
                           Set::fp8_kv::decode_groups::contains(s.group_size()) &&
                           geometry::tensor_core_fp8_decode_fits(s.head_dim));
  return fp8_listed && Set::tensor_core_decode::contains(type, s.head_dim, s.group_size()) &&
         detail::block_dispatchable(typename Set::block_sizes{}, s.block_size);
}

/// Calls f.template operator()<T, HeadDim, BlockSize, Group>() for the tensor-core decode
/// instance of Set::tensor_core_decode; unsupported_value when the set lacks it.
template <class Set, class F>
void dispatch_tensor_core_decode(dtype type, const attention_shape& s, F&& f) {
  check_decode_shape(s);
  using tc = typename Set::tensor_core_decode;
  if constexpr (tc::empty) {
    throw unsupported_value("the tensor-core decode is not compiled in this build (its instantiation set lists no "
                            "tensor_core_decode_instances)");
  } else {
    detail::dispatch_dtype(typename tc::dtype_list{}, type, [&]<class T>() {
      detail::dispatch_in(typename tc::head_dims{}, "head_dim", s.head_dim, [&]<int D>() {
        detail::dispatch_block(typename Set::block_sizes{}, s.block_size, [&]<int B>() {
          detail::dispatch_in(typename tc::decode_groups{}, "group_size", s.group_size(),
                              [&]<int G>() { f.template operator()<T, D, B, G>(); });
        });
      });
    });
  }
}

/// Whether Set has a tensor-core prefill instance for (type, shape) at a block size it lists,
/// over a cache of kv_type (default: the queries' type). An fp8 cache's instance exists for
/// each (query type, head dim) that both Set::tensor_core_prefill and Set::fp8_kv list (with
/// the cache type), as has_tensor_core_decode's.
template <class Set>
bool has_tensor_core_prefill(dtype type, const attention_shape& s, std::optional<dtype> kv_type = {}) {
  const bool fp8_listed = !kv_type || *kv_type == type ||
                          (Set::fp8_kv::query_dtypes::contains(type) && Set::fp8_kv::kv_dtypes::contains(*kv_type) &&
                           Set::fp8_kv::head_dims::contains(s.head_dim));
  return fp8_listed && Set::tensor_core_prefill::contains(type, s.head_dim) &&
         detail::block_dispatchable(typename Set::block_sizes{}, s.block_size);
}

/// Calls f.template operator()<T, HeadDim, BlockSize>() for the tensor-core prefill instance
/// of Set::tensor_core_prefill; unsupported_value when the set lacks it.
template <class Set, class F>
void dispatch_tensor_core_prefill(dtype type, const attention_shape& s, F&& f) {
  check_shape(s);
  using tc = typename Set::tensor_core_prefill;
  if constexpr (tc::empty) {
    throw unsupported_value("the tensor-core prefill is not compiled in this build (its instantiation set lists no "
                            "tensor_core_prefill_instances)");
  } else {
    detail::dispatch_dtype(typename tc::dtype_list{}, type, [&]<class T>() {
      detail::dispatch_in(typename tc::head_dims{}, "head_dim", s.head_dim, [&]<int D>() {
        detail::dispatch_block(typename Set::block_sizes{}, s.block_size,
                               [&]<int B>() { f.template operator()<T, D, B>(); });
      });
    });
  }
}

namespace detail {

// The fp8 instances' query and cache types, with messages that name both.
template <class Fp8, class F>
decltype(auto) dispatch_fp8_types(dtype type, dtype kv_type, F&& f) {
  if constexpr (Fp8::empty) {
    throw unsupported_value("kv cache dtype = " + std::string(name(kv_type)) +
                            " is not supported by this build (its instantiation set has no fp8 instances)");
  } else {
    if (!supported_fp8_kv_dtypes::contains(kv_type)) {
      throw unsupported_value("kv cache dtype = " + std::string(name(kv_type)) + " with queries " +
                              std::string(name(type)) + ": a cache of another type than the queries' must be one of " +
                              supported_fp8_kv_dtypes::list());
    }
    if (!Fp8::kv_dtypes::contains(kv_type) || !Fp8::query_dtypes::contains(type)) {
      throw unsupported_value("dtype = " + std::string(name(type)) + " with kv cache dtype = " +
                              std::string(name(kv_type)) + " is not supported by this build; supported: queries " +
                              Fp8::query_dtypes::list() + " with caches " + Fp8::kv_dtypes::list());
    }
    return dispatch_dtype(typename Fp8::query_dtypes{}, type, [&]<class T>() -> decltype(auto) {
      return dispatch_dtype(typename Fp8::kv_dtypes{}, kv_type,
                            [&]<class KV>() -> decltype(auto) { return f.template operator()<T, KV>(); });
    });
  }
}

}  // namespace detail

/// For a cache of another type than the queries' (fp8): calls
/// f.template operator()<T, KV, HeadDim, BlockSize, Group>() with KV rungs::e4m3 or
/// rungs::e5m2, from the set's fp8_kv instances (its block sizes).
template <class Set, class F>
void dispatch_fp8_decode(dtype type, dtype kv_type, const attention_shape& s, F&& f) {
  check_decode_shape(s);
  using fp8 = typename Set::fp8_kv;
  detail::dispatch_fp8_types<fp8>(type, kv_type, [&]<class T, class KV>() {
    detail::dispatch_in(typename fp8::head_dims{}, "head_dim", s.head_dim, [&]<int D>() {
      detail::dispatch_block(typename Set::block_sizes{}, s.block_size, [&]<int B>() {
        detail::dispatch_in(typename fp8::decode_groups{}, "group_size", s.group_size(),
                            [&]<int G>() { f.template operator()<T, KV, D, B, G>(); });
      });
    });
  });
}

/// Prefill over an fp8 cache: f.template operator()<T, KV, HeadDim, BlockSize>().
template <class Set, class F>
void dispatch_fp8_prefill(dtype type, dtype kv_type, const attention_shape& s, F&& f) {
  check_shape(s);
  using fp8 = typename Set::fp8_kv;
  detail::dispatch_fp8_types<fp8>(type, kv_type, [&]<class T, class KV>() {
    detail::dispatch_in(typename fp8::head_dims{}, "head_dim", s.head_dim, [&]<int D>() {
      detail::dispatch_block(typename Set::block_sizes{}, s.block_size,
                             [&]<int B>() { f.template operator()<T, KV, D, B>(); });
    });
  });
}

/// Cache write into an fp8 cache: f.template operator()<T, KV, HeadDim>().
template <class Set, class F>
void dispatch_fp8_cache_write(dtype type, dtype kv_type, const attention_shape& s, F&& f) {
  check_shape(s);
  using fp8 = typename Set::fp8_kv;
  detail::dispatch_fp8_types<fp8>(type, kv_type, [&]<class T, class KV>() {
    detail::dispatch_in(typename fp8::head_dims{}, "head_dim", s.head_dim,
                        [&]<int D>() { f.template operator()<T, KV, D>(); });
  });
}

}  // namespace rungs::attention
