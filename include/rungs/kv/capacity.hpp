// KV-cache capacity arithmetic: bytes per token and block, blocks from a memory budget (the
// vLLM and the Gaudi rules), blocks per request and how many requests fit at once, against
// reserving max_model_len tokens per request up front.
//
// Sources: the vLLM and Gaudi rules as summarised in docs/kv-blocks.md (the Gaudi log:
// 79.16 GiB free x 0.5 usable, 0.4 of it for HPU graphs -> 1519 blocks of 128 tokens at
// 128 KiB per token); the paged-KV blog's Mistral-7B figures (0.125 MiB per token, 16-token
// blocks, 7 GiB -> 3584 blocks; 5000-token chats -> 313 blocks, 11 at once against 7 when each
// reserves 8k tokens).
#pragma once

#include <rungs/blocks.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <rungs/checked.hpp>
#include <rungs/kv/types.hpp>
#include <rungs/model_shape.hpp>
#include <span>

namespace rungs::kv {

using rungs::kv_shape;  // the KV projection of rungs::model_shape (model.kv())

namespace detail {
inline void require_positive(std::string_view what, std::int64_t v) {
  if (v <= 0)
    throw std::invalid_argument(std::string(what) + " = " + std::to_string(v) + " must be positive");
}
inline std::string fraction_text(double v) {
  std::string s = std::to_string(v);  // "0.400000": trim the zeros
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}
/// a x b, refusing to overflow.
inline std::int64_t checked_product(std::int64_t a, std::int64_t b) {
  if (const std::optional<std::int64_t> p = checked_mul(a, b)) return *p;
  throw std::invalid_argument("KV cache size overflows 64 bits: " + std::to_string(a) + " x " +
                              std::to_string(b));
}
inline void require_non_negative(std::string_view what, std::int64_t v) {
  if (v < 0)
    throw std::invalid_argument(std::string(what) + " = " + std::to_string(v) + " must not be negative");
}
/// A fraction in (0, 1] (how much of a memory may be used).
inline void require_share(std::string_view what, double v) {
  if (!(v > 0 && v <= 1))
    throw std::invalid_argument(std::string(what) + " = " + fraction_text(v) + " must be in (0, 1]");
}
/// A fraction in [0, 1) (how much of a memory is kept back).
inline void require_reserve(std::string_view what, double v) {
  if (!(v >= 0 && v < 1))
    throw std::invalid_argument(std::string(what) + " = " + fraction_text(v) + " must be in [0, 1)");
}
}  // namespace detail

/// K and V of every layer and KV head: 2 x layers x kv_heads x head_dim x bytes per element.
inline std::int64_t bytes_per_token(const kv_shape& s) {
  detail::require_positive("layers", s.layers);
  detail::require_positive("kv_heads", s.kv_heads);
  detail::require_positive("head_dim", s.head_dim);
  detail::require_positive("bytes_per_element", s.bytes_per_element);
  using detail::checked_product;
  return checked_product(
      checked_product(checked_product(checked_product(2, s.layers), s.kv_heads), s.head_dim),
      s.bytes_per_element);
}

inline std::int64_t bytes_per_block(const kv_shape& s, std::int64_t block_size) {
  detail::require_positive("block_size", block_size);
  return detail::checked_product(bytes_per_token(s), block_size);
}

/// Whole blocks in a KV budget (the remainder is left unused).
inline std::int64_t blocks_for_memory(std::int64_t kv_bytes, std::int64_t block_bytes) {
  detail::require_positive("block_bytes", block_bytes);
  if (kv_bytes < 0)
    throw std::invalid_argument("kv memory = " + std::to_string(kv_bytes) + " must not be negative");
  return kv_bytes / block_bytes;
}

/// vLLM: `total x gpu_memory_utilization` minus what the profiling run measured (weights, peak
/// activations, memory outside PyTorch's allocator) is the KV budget.
struct vllm_memory {
  std::int64_t total_bytes = 0;
  double gpu_memory_utilization = 0.9;
  std::int64_t weights_bytes = 0;
  std::int64_t peak_activation_bytes = 0;
  std::int64_t non_torch_bytes = 0;
};

inline std::int64_t kv_memory(const vllm_memory& m) {
  detail::require_positive("total_bytes", m.total_bytes);
  detail::require_share("gpu_memory_utilization", m.gpu_memory_utilization);
  detail::require_non_negative("weights_bytes", m.weights_bytes);
  detail::require_non_negative("peak_activation_bytes", m.peak_activation_bytes);
  detail::require_non_negative("non_torch_bytes", m.non_torch_bytes);
  const std::int64_t usable = floor_share(m.total_bytes, double(m.total_bytes) * m.gpu_memory_utilization);
  std::optional<std::int64_t> taken = checked_add(m.weights_bytes, m.peak_activation_bytes);
  if (taken) taken = checked_add(*taken, m.non_torch_bytes);
  if (!taken || *taken >= usable)
    throw std::invalid_argument("no memory left for the KV cache: usable " + std::to_string(usable) +
                                " bytes, weights + activations + non-torch " +
                                (taken ? std::to_string(*taken) : std::string("more than 2^63 - 1")) + " bytes");
  return usable - *taken;
}

/// Gaudi (vLLM HPU): usable = free memory after weights and profiling x gpu_memory_utilization;
/// graph_reserved_mem (VLLM_GRAPH_RESERVED_MEM) of it is kept for HPU graphs, the KV cache
/// gets the rest; blocks are floor(kv / block bytes), computed in floating point as upstream.
struct gaudi_memory {
  std::int64_t free_bytes = 0;
  double gpu_memory_utilization = 0.9;
  double graph_reserved_mem = 0.1;
};

inline std::int64_t kv_memory(const gaudi_memory& m) {
  detail::require_positive("free_bytes", m.free_bytes);
  detail::require_share("gpu_memory_utilization", m.gpu_memory_utilization);
  detail::require_reserve("graph_reserved_mem", m.graph_reserved_mem);
  return floor_share(m.free_bytes,
                             double(m.free_bytes) * m.gpu_memory_utilization * (1.0 - m.graph_reserved_mem));
}

/// Blocks one request of `tokens` tokens holds at its longest: ceil(tokens / block_size).
inline std::int64_t blocks_per_request(std::int64_t tokens, std::int64_t block_size) {
  detail::require_positive("tokens", tokens);
  detail::require_positive("block_size", block_size);
  return blocks_for(tokens, block_size);
}

/// Requests of `blocks_each` blocks that fit in `num_blocks` at once.
inline std::int64_t concurrent_requests(std::int64_t num_blocks, std::int64_t blocks_each) {
  detail::require_positive("blocks per request", blocks_each);
  return num_blocks / blocks_each;
}

/// Without paging every request reserves max_model_len tokens up front.
inline std::int64_t naive_concurrent_requests(std::int64_t kv_bytes, std::int64_t max_model_len,
                                              std::int64_t token_bytes) {
  detail::require_positive("max_model_len", max_model_len);
  detail::require_positive("bytes per token", token_bytes);
  return kv_bytes / detail::checked_product(max_model_len, token_bytes);
}

// ---- hybrid models: layer groups with full, sliding-window and chunked-local attention ----

/// `layers` layers whose attention is `attention`.
struct layer_group {
  attention_group attention;
  std::int64_t layers = 0;
};

/// Blocks one layer of `a` holds for a request of `tokens` tokens at its longest (while it
/// computes its last token, releasing blocks as they leave the window): every block for full
/// attention; for a window or chunk of S keys at most ceil((S - 1) / block_size) + 1 (a
/// query's S keys straddle that many blocks), or S / block_size for a chunk that is a whole
/// number of blocks (its chunks start on block boundaries); never more than full attention.
inline std::int64_t blocks_held(const attention_group& a, std::int64_t tokens, std::int64_t block_size) {
  const std::int64_t all = blocks_per_request(tokens, block_size);
  if (a.kind == attention_kind::full) return all;
  detail::require_positive("window or chunk", a.span);
  const std::int64_t span = a.span;
  const std::int64_t most = a.kind == attention_kind::chunked_local && span % block_size == 0
                                ? span / block_size
                                : blocks_for(span - 1, block_size) + 1;
  return std::min(all, most);
}

/// KV bytes one request of `tokens` tokens holds at its longest over every layer group:
/// sum of layers x blocks_held x block_size x bytes per token of one layer. `layer` is the
/// shape of one layer (layers = 1).
inline std::int64_t bytes_per_request(std::span<const layer_group> groups, const kv_shape& layer, std::int64_t tokens,
                                      std::int64_t block_size) {
  const std::int64_t per_layer_block = bytes_per_block(layer, block_size);
  std::int64_t total = 0;
  for (const layer_group& g : groups) {
    detail::require_positive("layers", g.layers);
    total += detail::checked_product(detail::checked_product(g.layers, blocks_held(g.attention, tokens, block_size)),
                                     per_layer_block);
  }
  return total;
}

}  // namespace rungs::kv
