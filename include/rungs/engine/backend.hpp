// The contract between the engine and an execution backend (host or CUDA).
//
// The engine does the planning: lookup, padding (host staging), capture decisions, budget,
// statistics. A backend only executes: it owns the static buffers sized once for the
// largest bucket, the workspace shared by every graph, and one graph (or prepared step) per
// slot; it runs the user's forward under capture, replays, or runs it eagerly.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <rungs/engine/batch.hpp>
#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

/// What one capture attempt cost, and whether it worked. Backends never throw from
/// capture(): a failure (OOM, invalidated capture, exception in forward) is reported here
/// and the engine keeps the bucket eager.
struct capture_report {
  bool ok = false;
  std::int64_t bytes = 0;  // device memory the graph took (may be negative: freed warm-up memory)
  double seconds = 0;
  std::string error{};
};

/// Sizes a backend allocates for, once, before the first capture.
struct backend_setup {
  std::size_t slots = 0;      // one graph slot per bucket
  std::int64_t seqs = 0;      // largest graph shape: sequence rows
  std::int64_t tokens = 0;    //   token rows
  std::int64_t width = 0;     //   block-table entries per sequence
  std::int64_t row_width = 0; // output values per sequence row
};

/// A runner step's block tables of every attention group, when the allocator has several
/// (kv::hybrid_allocator: full, sliding-window and chunked layers each read their group's
/// table). The staged batch carries group 0's; a backend whose layers read the others takes
/// them through an optional `stage_groups(const group_tables&)`, which the engine calls before
/// each runner step that has sequences. table(g, k) is group g's table of the step's row k (the
/// staged batch's row order), kv::null_block where blocks left the group's window. The spans
/// point into the allocator and hold until its next call.
struct group_tables {
  std::int32_t groups = 0;
  std::int64_t rows = 0;
  std::span<const std::span<const std::int32_t>> tables;  ///< [groups][rows]
  std::span<const std::int32_t> table(std::int32_t g, std::int64_t k) const {
    return tables[static_cast<std::size_t>(g * rows + k)];
  }
};

template <class B>
concept engine_backend = requires(B& b, const B& cb, const backend_setup& setup, std::size_t slot, const bucket& bk,
                                  const padded_batch& staged, std::int64_t rows) {
  { b.setup(setup) };                                             // allocate static buffers and workspace
  { b.capture(slot, bk, staged) } -> std::same_as<capture_report>;  // staged: a dummy batch in bk's shape
  { b.replay(slot, staged) };                                     // upload staged, replay slot's graph
  { b.eager(staged) };                                            // run forward on staged, unpadded
  { b.release(slot) };                                            // drop slot's graph
  { cb.rows(rows) };                                              // the first `rows` output rows of the last run
};

}  // namespace rungs::engine
