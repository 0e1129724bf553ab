// block_tables: every sequence's block ids in one preallocated row-major int32 buffer
// [max_sequences, max_blocks_per_sequence] (the layout of vLLM's block_table tensor), so the
// engine uploads one contiguous array per step and a sequence's row never moves.
// write_slots: the slot mapping of a run of positions, `block_id * block_size + offset`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <rungs/kv/result.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

class block_tables {
 public:
  block_tables(std::int32_t rows, std::int32_t stride)
      : rows_(rows),
        stride_(stride),
        ids_(static_cast<std::size_t>(rows) * static_cast<std::size_t>(stride), null_block) {}

  std::span<block_id> row(std::uint32_t r) {
    return {ids_.data() + static_cast<std::size_t>(r) * stride_, static_cast<std::size_t>(stride_)};
  }
  std::span<const block_id> row(std::uint32_t r) const {
    return {ids_.data() + static_cast<std::size_t>(r) * stride_, static_cast<std::size_t>(stride_)};
  }
  block_table_view view() const { return {ids_.data(), rows_, stride_}; }
  std::int32_t rows() const { return rows_; }
  std::int32_t stride() const { return stride_; }

 private:
  std::int32_t rows_, stride_;
  std::vector<block_id> ids_;
};

/// Writes the slots of positions [first, first + count) of a sequence whose block ids are
/// `row` to out[0, count). The positions must lie inside the row's blocks.
inline void write_slots(std::span<const block_id> row, std::int32_t block_size, std::int32_t first,
                        std::int32_t count, slot_id* out) {
  std::int32_t block = first / block_size, offset = first % block_size;
  while (count > 0) {
    const slot_id base = static_cast<slot_id>(row[block]) * block_size;
    const std::int32_t run = count < block_size - offset ? count : block_size - offset;
    for (std::int32_t i = 0; i < run; ++i) out[i] = base + offset + i;
    out += run;
    count -= run;
    offset = 0;
    ++block;
  }
}

/// A sequence's row as slot mapping reads it: blocks [first_block, num_blocks) are held.
struct held_row {
  std::span<const block_id> row;
  std::int32_t first_block = 0;
  std::int32_t num_blocks = 0;
};

/// The step's slot mapping (the allocators' slot_mapping): the slots of every range, in
/// order, then padded_slot for the rest of `out`. `held(seq)` is the sequence's held_row, or
/// nullopt for an unknown id. A range outside its held blocks is invalid_range; on any error
/// nothing is written. Returns the number of real slots.
template <class Held>
result<std::int32_t> write_slot_mapping(std::span<const slot_range> ranges, std::span<slot_id> out,
                                        std::int32_t block_size, Held held) {
  std::int64_t total = 0;
  for (const slot_range& r : ranges) {
    const std::optional<held_row> h = held(r.seq);
    if (!h) return errc::unknown_sequence;
    if (r.first < std::int64_t{h->first_block} * block_size || r.count < 0 ||
        std::int64_t{r.first} + r.count > std::int64_t{h->num_blocks} * block_size)
      return errc::invalid_range;
    total += r.count;
  }
  if (total > static_cast<std::int64_t>(out.size())) return errc::buffer_too_small;
  slot_id* o = out.data();
  for (const slot_range& r : ranges) {
    write_slots(held(r.seq)->row, block_size, r.first, r.count, o);
    o += r.count;
  }
  std::fill(o, out.data() + out.size(), padded_slot);
  return static_cast<std::int32_t>(total);
}

}  // namespace rungs::kv
