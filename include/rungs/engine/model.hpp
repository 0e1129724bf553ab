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

namespace rungs::engine {

/// Element type of the KV cache.
enum class kv_dtype : std::uint8_t { f32, f16, bf16, fp8 };

constexpr std::int64_t size_of(kv_dtype t) {
  switch (t) {
    case kv_dtype::f32: return 4;
    case kv_dtype::f16:
    case kv_dtype::bf16: return 2;
    case kv_dtype::fp8: return 1;
  }
  return 0;
}

constexpr std::string_view to_string(kv_dtype t) {
  switch (t) {
    case kv_dtype::f32: return "f32";
    case kv_dtype::f16: return "f16";
    case kv_dtype::bf16: return "bf16";
    case kv_dtype::fp8: return "fp8";
  }
  return "?";
}

struct model_shape {
  kv_dtype dtype = kv_dtype::f16;
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // KV heads (GQA when fewer than num_heads)
  int head_size = 0;
  int block_size = 0;  // tokens per KV block
  int num_layers = 0;

  friend constexpr bool operator==(const model_shape&, const model_shape&) = default;

  /// Width of one output row (one per sequence): the attention output of its last token.
  constexpr std::int64_t row_width() const { return std::int64_t{num_heads} * head_size; }
  /// K and V of one token over all layers (vLLM's and Gaudi's capacity arithmetic).
  constexpr std::int64_t kv_bytes_per_token() const {
    return 2 * std::int64_t{num_layers} * num_kv_heads * head_size * size_of(dtype);
  }
  constexpr std::int64_t block_bytes() const { return kv_bytes_per_token() * block_size; }
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
  return os << "model_shape{dtype=" << to_string(m.dtype) << ", heads=" << m.num_heads << "/" << m.num_kv_heads
            << ", head_size=" << m.head_size << ", block_size=" << m.block_size << ", layers=" << m.num_layers
            << "}";
}

/// Throws std::invalid_argument naming the rule `m` breaks.
inline void validate(const model_shape& m) {
  if (!valid(m)) throw std::invalid_argument("model shape: " + std::string(invalid_reason(m)));
}

}  // namespace rungs::engine
