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

/// What a graph runner needs of the model and the KV pool, at run time.
struct run_shape {
  std::int64_t block_size = 0;  ///< tokens per KV block (the allocator's)
  std::int64_t num_blocks = 0;  ///< blocks in the KV pool: staged block ids are checked against it
  std::int64_t row_width = 0;   ///< output values per sequence (0: rows carry nothing, as a cost model's)
};

/// Element type of the KV cache: rungs::kv's (fp32, fp16, bf16, fp8).
using kv_dtype = rungs::kv::kv_dtype;

/// The model a forward is instantiated for (a structural value: a template argument).
struct model_shape {
  kv_dtype dtype = kv_dtype::fp16;  ///< element type of the KV cache
  int num_heads = 0;     ///< query heads
  int num_kv_heads = 0;  ///< KV heads (GQA when fewer than num_heads)
  int head_size = 0;     ///< elements per head
  int block_size = 0;    ///< tokens per KV block
  int num_layers = 0;    ///< decoder layers

  /// Field-wise equality (two equal shapes share one instantiation).
  friend constexpr bool operator==(const model_shape&, const model_shape&) = default;

  /// Width of one output row (one per sequence): the attention output of its last token.
  constexpr std::int64_t row_width() const { return std::int64_t{num_heads} * head_size; }
  /// The runner's shape for this model over a pool of `num_blocks` blocks.
  constexpr run_shape run(std::int64_t num_blocks) const { return {block_size, num_blocks, row_width()}; }
  /// The KV cache's shape, for rungs::kv's capacity arithmetic (bytes_per_block and
  /// blocks_for_memory size the Allocator's pool).
  constexpr rungs::kv::kv_shape kv() const {
    return {num_layers, num_kv_heads, head_size, rungs::kv::bytes_per_element(dtype)};
  }
};

/// The rules a model_shape must keep, named so that a compile-time check can say which one
/// an invalid shape breaks (see require_valid_shape).
enum class shape_rule : std::uint8_t {
  holds,
  num_heads_must_be_positive,
  num_kv_heads_must_be_positive,
  num_heads_must_be_a_multiple_of_num_kv_heads,
  head_size_must_be_positive,
  block_size_must_be_positive,
  num_layers_must_be_positive,
};

/// The first rule `m` breaks, or shape_rule::holds.
constexpr shape_rule broken_rule(const model_shape& m) {
  if (m.num_heads <= 0) return shape_rule::num_heads_must_be_positive;
  if (m.num_kv_heads <= 0) return shape_rule::num_kv_heads_must_be_positive;
  if (m.num_heads % m.num_kv_heads != 0) return shape_rule::num_heads_must_be_a_multiple_of_num_kv_heads;
  if (m.head_size <= 0) return shape_rule::head_size_must_be_positive;
  if (m.block_size <= 0) return shape_rule::block_size_must_be_positive;
  if (m.num_layers <= 0) return shape_rule::num_layers_must_be_positive;
  return shape_rule::holds;
}

/// Why `m` is not a usable shape, or an empty string when it is.
constexpr std::string_view invalid_reason(const model_shape& m) {
  switch (broken_rule(m)) {
    case shape_rule::holds: return {};
    case shape_rule::num_heads_must_be_positive: return "num_heads must be positive";
    case shape_rule::num_kv_heads_must_be_positive: return "num_kv_heads must be positive";
    case shape_rule::num_heads_must_be_a_multiple_of_num_kv_heads: return "num_heads must be a multiple of num_kv_heads";
    case shape_rule::head_size_must_be_positive: return "head_size must be positive";
    case shape_rule::block_size_must_be_positive: return "block_size must be positive";
    case shape_rule::num_layers_must_be_positive: return "num_layers must be positive";
  }
  return "unknown rule";
}

constexpr bool valid(const model_shape& m) { return broken_rule(m) == shape_rule::holds; }

/// True for shape_rule::holds. `static_assert(rule_holds<broken_rule(M)>)` fails naming the
/// broken rule in the compiler's note ("rule_holds<shape_rule::head_size_must_be_positive>
/// evaluates to false"), where a plain `valid(M)` could only say that some rule is broken.
template <shape_rule R>
inline constexpr bool rule_holds = R == shape_rule::holds;

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
