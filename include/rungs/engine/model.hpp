// The model shape an engine is built for: it fixes the attention kernels' instantiation
// (head size, block size, KV dtype) and the sizes the engine derives from it (output row
// width, bytes per KV block).
//
// A model_shape is a structural value, so it is passed as a template argument
// (`engine<llama_8b, ...>`): two engines for the same shape share one instantiation, and a
// shape the kernels do not support fails to compile (`static_assert(valid(M))`) instead of at
// the first step.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <rungs/kv/capacity.hpp>

namespace rungs::engine {

/// Element type of the KV cache: rungs::kv's (fp32, fp16, bf16, fp8).
using kv_dtype = rungs::kv::kv_dtype;

struct model_shape {
  kv_dtype dtype = kv_dtype::fp16;
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // KV heads (GQA when fewer than num_heads)
  int head_size = 0;
  int block_size = 0;  // tokens per KV block
  int num_layers = 0;

  friend constexpr bool operator==(const model_shape&, const model_shape&) = default;

  /// Width of one output row (one per sequence): the attention output of its last token.
  constexpr std::int64_t row_width() const { return std::int64_t{num_heads} * head_size; }
  /// The KV cache's shape, for rungs::kv's capacity arithmetic (bytes_per_block and
  /// blocks_for_memory size the Allocator's pool).
  constexpr rungs::kv::kv_shape kv() const {
    return {num_layers, num_kv_heads, head_size, rungs::kv::bytes_per_element(dtype)};
  }
};

/// Why `m` is not a usable shape, or an empty string when it is.
constexpr std::string_view invalid_reason(const model_shape& m) {
  if (m.num_heads <= 0) return "num_heads must be positive";
  if (m.num_kv_heads <= 0) return "num_kv_heads must be positive";
  if (m.num_heads % m.num_kv_heads != 0) return "num_heads must be a multiple of num_kv_heads";
  if (m.head_size <= 0) return "head_size must be positive";
  if (m.block_size <= 0) return "block_size must be positive";
  if (m.num_layers <= 0) return "num_layers must be positive";
  return {};
}

constexpr bool valid(const model_shape& m) { return invalid_reason(m).empty(); }

inline std::ostream& operator<<(std::ostream& os, const model_shape& m) {
  constexpr const char* dtypes[] = {"fp32", "fp16", "bf16", "fp8"};
  return os << "model_shape{dtype=" << dtypes[static_cast<int>(m.dtype)] << ", heads=" << m.num_heads << "/" << m.num_kv_heads
            << ", head_size=" << m.head_size << ", block_size=" << m.block_size << ", layers=" << m.num_layers
            << "}";
}

/// Throws std::invalid_argument naming the rule `m` breaks.
inline void validate(const model_shape& m) {
  if (!valid(m)) throw std::invalid_argument("model shape: " + std::string(invalid_reason(m)));
}

}  // namespace rungs::engine
