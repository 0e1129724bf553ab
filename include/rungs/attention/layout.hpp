// The paged KV-cache layout shared by rungs' attention kernels and their host reference.
//
// K and V live in two pools of the same shape, each
//
//     [num_blocks][num_kv_heads][block_size][head_dim]        ("HND" in FlashInfer's terms)
//
// A block id is the block pool's id; token position p of a sequence lives in slot
// `block_table[p / block_size] * block_size + p % block_size`. With this layout the part of a
// block one KV head reads (block_size x head_dim elements) is contiguous: a decode CTA, which
// owns one KV head, streams whole contiguous runs of at least 8 x 64 x 2 = 1 KiB, whatever the
// block size. docs/kernels.md explains the choice against vLLM's split layout and NHD.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include <rungs/dtype.hpp>
#include <rungs/model_shape.hpp>

namespace rungs::attention {

using rungs::dtype;      // element type of queries, KV cache and outputs (fp16 or bf16 here)
using rungs::host_type;  // its host storage type: rungs::f16 or rungs::bf16

/// Shape of one attention layer over a paged KV cache.
struct attention_shape {
  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;             ///< tokens per block
  std::int64_t num_blocks = 0;    ///< blocks in each of the K and V pools

  /// One layer of model `m` over pools of `num_blocks` blocks.
  static constexpr attention_shape of(const model_shape& m, std::int64_t num_blocks) {
    return {m.num_qo_heads, m.num_kv_heads, m.head_dim, m.block_size, num_blocks};
  }

  /// Query heads per KV head (GQA group size); 0 when the heads do not divide.
  constexpr int group_size() const {
    return num_kv_heads > 0 && num_qo_heads % num_kv_heads == 0 ? num_qo_heads / num_kv_heads : 0;
  }
  /// Slots in a pool: num_blocks * block_size.
  constexpr std::int64_t num_slots() const { return num_blocks * block_size; }
  /// Elements in one pool (K or V).
  constexpr std::int64_t pool_elements() const {
    return num_blocks * num_kv_heads * block_size * static_cast<std::int64_t>(head_dim);
  }
  /// Offset, in elements, of (block, kv head, position in block, dim 0) in a pool. All int64:
  /// 32k blocks of 128 tokens x 8 heads x 128 dims already exceed 2^31 elements.
  constexpr std::int64_t kv_offset(std::int64_t block, int kv_head, int position) const {
    return ((block * num_kv_heads + kv_head) * block_size + position) * static_cast<std::int64_t>(head_dim);
  }
  /// Offset of (slot, kv head, dim 0), slot = block * block_size + position.
  constexpr std::int64_t slot_offset(std::int64_t slot, int kv_head) const {
    return kv_offset(slot / block_size, kv_head, static_cast<int>(slot % block_size));
  }
  /// Elements in one token row of queries or outputs: num_qo_heads * head_dim.
  constexpr std::int64_t q_row_elements() const { return static_cast<std::int64_t>(num_qo_heads) * head_dim; }
  /// Elements in one token row of new keys or values: num_kv_heads * head_dim.
  constexpr std::int64_t kv_row_elements() const { return static_cast<std::int64_t>(num_kv_heads) * head_dim; }
};

}  // namespace rungs::attention
