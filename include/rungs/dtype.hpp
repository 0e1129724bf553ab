// The element types rungs knows, one enum for every layer: the KV cache's capacity
// arithmetic (rungs::kv), the model shape an engine forward is instantiated for, and the
// attention kernels' queries, KV cache and outputs (which support fp16 and bf16).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <rungs/numeric/float16.hpp>

namespace rungs {

/// Element type of a tensor (KV cache, queries, outputs).
enum class dtype : std::uint8_t {
  fp32,  ///< IEEE binary32 (float)
  fp16,  ///< IEEE binary16 (rungs::f16, CUDA's __half)
  bf16,  ///< bfloat16 (rungs::bf16, CUDA's __nv_bfloat16)
  fp8,   ///< 8-bit floating point (KV cache capacity only: no host storage type)
};

/// The dtype's name as flags and logs spell it: "fp32", "fp16", "bf16", "fp8".
constexpr std::string_view name(dtype t) {
  switch (t) {
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
    case dtype::bf16: return "bf16";
    case dtype::fp8: return "fp8";
  }
  return "unknown";
}

/// Bytes of one element.
constexpr std::int32_t bytes_per_element(dtype t) {
  switch (t) {
    case dtype::fp32: return 4;
    case dtype::fp16:
    case dtype::bf16: return 2;
    case dtype::fp8: return 1;
  }
  return 0;
}

/// The dtype a name (as name() writes it) stands for, or nullopt.
constexpr std::optional<dtype> parse_dtype(std::string_view s) {
  for (dtype t : {dtype::fp32, dtype::fp16, dtype::bf16, dtype::fp8})
    if (s == name(t)) return t;
  return std::nullopt;
}

namespace detail {
template <dtype T>
struct host_element {
  static_assert(T != dtype::fp8, "rungs::host_type: fp8 has no host storage type");
};
template <>
struct host_element<dtype::fp32> {
  using type = float;
};
template <>
struct host_element<dtype::fp16> {
  using type = f16;
};
template <>
struct host_element<dtype::bf16> {
  using type = bf16;
};
}  // namespace detail

/// The host storage type of a dtype's elements: float, rungs::f16 or rungs::bf16.
template <dtype T>
using host_type = typename detail::host_element<T>::type;

}  // namespace rungs
