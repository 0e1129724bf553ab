// The element types rungs knows, one enum for every layer: the KV cache's capacity
// arithmetic (rungs::kv), the model shape an engine forward is instantiated for, and the
// attention kernels' queries and outputs (fp16, bf16) and KV cache (fp16, bf16, fp8 E4M3 and
// E5M2).
//
// "fp8" was this enum's only 8-bit value before the two formats were told apart; it stays, as
// a second name of fp8_e4m3 (the format vLLM's `--kv-cache-dtype fp8` means on CUDA), so that
// code naming dtype::fp8 and flags spelling "fp8" keep their meaning and their byte size.
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
  fp8_e4m3,  ///< OCP FP8 E4M3 (rungs::e4m3, CUDA's __nv_fp8_e4m3)
  fp8_e5m2,  ///< OCP FP8 E5M2 (rungs::e5m2, CUDA's __nv_fp8_e5m2)
  fp8 = fp8_e4m3,  ///< the same value as fp8_e4m3 (see the file comment)
};

/// The dtype's name as flags and logs spell it: "fp32", "fp16", "bf16", "fp8_e4m3",
/// "fp8_e5m2" (dtype::fp8 is fp8_e4m3 and is named so).
constexpr std::string_view name(dtype t) {
  switch (t) {
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
    case dtype::bf16: return "bf16";
    case dtype::fp8_e4m3: return "fp8_e4m3";
    case dtype::fp8_e5m2: return "fp8_e5m2";
  }
  return "unknown";
}

/// Whether t is one of the 8-bit float formats.
constexpr bool is_fp8(dtype t) { return t == dtype::fp8_e4m3 || t == dtype::fp8_e5m2; }

/// Bytes of one element.
constexpr std::int32_t bytes_per_element(dtype t) {
  switch (t) {
    case dtype::fp32: return 4;
    case dtype::fp16:
    case dtype::bf16: return 2;
    case dtype::fp8_e4m3:
    case dtype::fp8_e5m2: return 1;
  }
  return 0;
}

/// The names parse_dtype accepts, as flags' help and errors list them.
inline constexpr std::string_view dtype_names = "fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, fp32";

/// The dtype a name stands for (one name() writes, or "fp8": fp8_e4m3), or nullopt.
constexpr std::optional<dtype> parse_dtype(std::string_view s) {
  if (s == "fp8") return dtype::fp8_e4m3;
  for (dtype t : {dtype::fp32, dtype::fp16, dtype::bf16, dtype::fp8_e4m3, dtype::fp8_e5m2})
    if (s == name(t)) return t;
  return std::nullopt;
}

namespace detail {
template <dtype T>
struct host_element;
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
template <>
struct host_element<dtype::fp8_e4m3> {
  using type = e4m3;
};
template <>
struct host_element<dtype::fp8_e5m2> {
  using type = e5m2;
};
}  // namespace detail

/// The host storage type of a dtype's elements: float, rungs::f16, rungs::bf16, rungs::e4m3
/// or rungs::e5m2.
template <dtype T>
using host_type = typename detail::host_element<T>::type;

}  // namespace rungs
