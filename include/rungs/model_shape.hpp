// The model shape, stated once for every layer: the engine's forwards are instantiated for it
// (a structural value, so a template argument), the KV cache's capacity arithmetic reads its
// KV projection (kv_shape), the attention kernels read their layer shape from it
// (rungs::attention::attention_shape::of) and the graph runner its run_shape
// (rungs::engine::run_shape::of). One name per concept, as CUTLASS and FlashInfer spell them:
// num_qo_heads, num_kv_heads, head_dim, block_size.
//
// An invalid shape names the rule it breaks: at run time in validate()'s message, at compile
// time through `static_assert(rule_holds<broken_rule(M)>)`, whose note names the rule.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <rungs/dtype.hpp>

namespace rungs {

/// The KV cache's shape on one device (with tensor parallelism, kv_heads is per device): what
/// the capacity arithmetic of rungs::kv needs (bytes per token and per block).
struct kv_shape {
  std::int64_t layers = 0;             ///< decoder layers
  std::int64_t kv_heads = 0;           ///< KV heads
  std::int64_t head_dim = 0;           ///< elements per head
  std::int64_t bytes_per_element = 2;  ///< bytes of one cached element
};

/// The model a forward is instantiated for (a structural value: a template argument).
struct model_shape {
  rungs::dtype dtype = rungs::dtype::fp16;  ///< element type of the KV cache
  int num_qo_heads = 0;  ///< query (and output) heads
  int num_kv_heads = 0;  ///< KV heads (GQA when fewer than num_qo_heads)
  int head_dim = 0;      ///< elements per head
  int block_size = 0;    ///< tokens per KV block
  int num_layers = 0;    ///< decoder layers

  /// Field-wise equality (two equal shapes share one instantiation).
  friend constexpr bool operator==(const model_shape&, const model_shape&) = default;

  /// Width of one output row (one per sequence): the attention output of its last token.
  constexpr std::int64_t row_width() const { return std::int64_t{num_qo_heads} * head_dim; }
  /// The KV cache's shape, for rungs::kv's capacity arithmetic (bytes_per_block and
  /// blocks_for_memory size the allocator's pool).
  constexpr kv_shape kv() const { return {num_layers, num_kv_heads, head_dim, bytes_per_element(dtype)}; }
};

/// The rules a model_shape must keep, named so that a compile-time check can say which one
/// an invalid shape breaks (see rule_holds).
enum class shape_rule : std::uint8_t {
  holds,                                            ///< no rule broken
  num_qo_heads_must_be_positive,                    ///< num_qo_heads <= 0
  num_kv_heads_must_be_positive,                    ///< num_kv_heads <= 0
  num_qo_heads_must_be_a_multiple_of_num_kv_heads,  ///< GQA groups must be whole
  head_dim_must_be_positive,                        ///< head_dim <= 0
  block_size_must_be_positive,                      ///< block_size <= 0
  num_layers_must_be_positive,                      ///< num_layers <= 0
};

/// The first rule `m` breaks, or shape_rule::holds.
constexpr shape_rule broken_rule(const model_shape& m) {
  if (m.num_qo_heads <= 0) return shape_rule::num_qo_heads_must_be_positive;
  if (m.num_kv_heads <= 0) return shape_rule::num_kv_heads_must_be_positive;
  if (m.num_qo_heads % m.num_kv_heads != 0) return shape_rule::num_qo_heads_must_be_a_multiple_of_num_kv_heads;
  if (m.head_dim <= 0) return shape_rule::head_dim_must_be_positive;
  if (m.block_size <= 0) return shape_rule::block_size_must_be_positive;
  if (m.num_layers <= 0) return shape_rule::num_layers_must_be_positive;
  return shape_rule::holds;
}

/// Why `m` is not a usable shape, or an empty string when it is.
constexpr std::string_view invalid_reason(const model_shape& m) {
  switch (broken_rule(m)) {
    case shape_rule::holds: return {};
    case shape_rule::num_qo_heads_must_be_positive: return "num_qo_heads must be positive";
    case shape_rule::num_kv_heads_must_be_positive: return "num_kv_heads must be positive";
    case shape_rule::num_qo_heads_must_be_a_multiple_of_num_kv_heads:
      return "num_qo_heads must be a multiple of num_kv_heads";
    case shape_rule::head_dim_must_be_positive: return "head_dim must be positive";
    case shape_rule::block_size_must_be_positive: return "block_size must be positive";
    case shape_rule::num_layers_must_be_positive: return "num_layers must be positive";
  }
  return "unknown rule";
}

/// True when `m` breaks no rule.
constexpr bool valid(const model_shape& m) { return broken_rule(m) == shape_rule::holds; }

/// True for shape_rule::holds. `static_assert(rule_holds<broken_rule(M)>)` fails naming the
/// broken rule in the compiler's note ("rule_holds<shape_rule::head_dim_must_be_positive>
/// evaluates to false"), where a plain `valid(M)` could only say that some rule is broken.
template <shape_rule R>
inline constexpr bool rule_holds = R == shape_rule::holds;

/// Writes `model_shape{dtype=bf16, heads=4/2, head_dim=16, block_size=16, layers=2}`.
inline std::ostream& operator<<(std::ostream& os, const model_shape& m) {
  return os << "model_shape{dtype=" << name(m.dtype) << ", heads=" << m.num_qo_heads << "/" << m.num_kv_heads
            << ", head_dim=" << m.head_dim << ", block_size=" << m.block_size << ", layers=" << m.num_layers << "}";
}

/// Throws std::invalid_argument naming the rule `m` breaks.
inline void validate(const model_shape& m) {
  if (!valid(m)) throw std::invalid_argument("model shape: " + std::string(invalid_reason(m)));
}

}  // namespace rungs
