// The engine's view of the model: rungs::model_shape (rungs/model_shape.hpp, the one model
// and attention vocabulary) fixes the forwards' instantiation; a graph runner needs only the
// run_shape derived from it and the KV pool (or, for a cost model, no model at all).
#pragma once

#include <cstdint>

#include <rungs/model_shape.hpp>

namespace rungs::engine {

using rungs::model_shape;  // the engine's forwards are instantiated for the one model shape

/// What a graph runner needs of the model and the KV pool, at run time.
struct run_shape {
  std::int64_t block_size = 0;  ///< tokens per KV block (the allocator's)
  std::int64_t num_blocks = 0;  ///< blocks in the KV pool: staged block ids are checked against it
  std::int64_t row_width = 0;   ///< output values per sequence (0: rows carry nothing, as a cost model's)

  /// The runner's shape for model `m` over a pool of `num_blocks` blocks.
  static constexpr run_shape of(const model_shape& m, std::int64_t num_blocks) {
    return {m.block_size, num_blocks, m.row_width()};
  }
};

}  // namespace rungs::engine
