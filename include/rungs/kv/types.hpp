// Vocabulary of the paged KV cache: ids of tokens, blocks and sequences, slots, and the small
// records the allocators exchange with an inference engine.
//
// A block id indexes the device KV tensors ([num_blocks, block_size, ...] per layer); a slot is
// `block_id * block_size + offset`, the flat row a KV-write kernel stores a token's K and V to.
// Block ids are int32 because block tables are uploaded as int32 (as vLLM, FlashInfer and
// TensorRT-LLM do); slots are int64 because `num_blocks * block_size` may exceed 2^31.
#pragma once

#include <cstdint>
#include <string_view>

namespace rungs::kv {

using token_id = std::int32_t;
using block_id = std::int32_t;
using slot_id = std::int64_t;

/// "No block": an empty entry of a block table row, and the eviction policies' "nothing left".
inline constexpr block_id null_block = -1;
/// The slot of a padded row of the step's batch: KV-write kernels skip it.
inline constexpr slot_id padded_slot = -1;

/// A live sequence. `slot` is its row in the block table (stable for its whole life);
/// `generation` tells a freed-and-reused row from the sequence that held it before, so a stale
/// id is reported as unknown instead of touching another sequence's blocks.
struct sequence_id {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  friend constexpr bool operator==(sequence_id, sequence_id) = default;
};

/// What a new sequence carries besides its prompt.
struct sequence_params {
  /// LoRA adapter (0: the base model). Blocks computed under different adapters differ.
  std::uint64_t adapter_id = 0;
  /// Per-tenant salt: sequences with different salts never share a cached block.
  std::string_view cache_salt = {};
  /// Retention priority of the sequence's blocks once unused (higher is evicted later); only
  /// priority-aware eviction policies read it.
  std::uint8_t priority = 0;
  /// Admission: create() requires room for this many prompt tokens past the cached prefix
  /// (the first prefill chunk, as vLLM's v1 scheduler allocates), instead of the whole prompt;
  /// 0 means the whole prompt. Later chunks may then find the pool full (preempt and retry).
  std::int32_t admit_tokens = 0;
};

/// Result of admitting a sequence: its id and how many leading prompt tokens were found in the
/// prefix cache (their KV is already on the device; the engine computes the rest).
struct sequence_start {
  sequence_id id;
  std::int32_t cached_tokens = 0;
  friend constexpr bool operator==(const sequence_start&, const sequence_start&) = default;
};

/// A copy-on-write the engine performs on the device before the step's KV writes:
/// every layer's block `src` is copied to block `dst`.
struct block_copy {
  block_id src = null_block;
  block_id dst = null_block;
  friend constexpr bool operator==(block_copy, block_copy) = default;
};

/// Positions [first, first + count) of one sequence, for the step's slot mapping.
struct slot_range {
  sequence_id seq;
  std::int32_t first = 0;
  std::int32_t count = 0;
};

/// The whole block table as one row-major int32 buffer, ready for one device upload:
/// row `id.slot` holds that sequence's block ids, then null_block up to `stride`.
struct block_table_view {
  const block_id* data = nullptr;
  std::int32_t rows = 0;
  std::int32_t stride = 0;
};

enum class attention_kind : std::uint8_t { full, sliding_window, chunked_local };

/// The attention of one KV-cache group's layers (hybrid_allocator, capacity). `span` is the
/// window W (keys a query sees, itself included) for sliding_window, the chunk C for
/// chunked_local, 0 for full attention.
struct attention_group {
  attention_kind kind = attention_kind::full;
  std::int32_t span = 0;
  friend constexpr bool operator==(const attention_group&, const attention_group&) = default;
};

}  // namespace rungs::kv
