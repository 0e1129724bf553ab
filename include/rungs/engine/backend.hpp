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
#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

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

/// What a device copy holds of a hybrid model's further attention groups' block tables
/// (groups 1 and up; group 0's travel in the staged batch), mirrored in host memory the caller
/// owns: cuda_backend's pinned buffer, host_backend's vector. write() brings the mirror to a
/// step's tables and hands every changed run of entries to `add`, so both backends upload, or
/// count, the same bytes: only entries that differ, or every entry of the capacity when the
/// copy is unknown (new, forgotten) or the rows moved (another width).
///
/// The mirror holds groups - 1 tables `stride` entries apart; a table's rows are the staged
/// batch's, `width` entries apart; kv::null_block entries and padding rows are 0.
class group_table_copy {
 public:
  /// A copy of `groups` groups' tables for up to `rows` rows, nothing of it known.
  group_table_copy(std::int32_t groups = 1, std::int64_t rows = 0)
      : groups_(groups), rows_(rows), held_(static_cast<std::size_t>(std::max(groups - 1, 0) * rows), 0) {}

  std::int32_t groups() const { return groups_; }
  /// A backend's stage_groups check: throws std::invalid_argument, naming `who` and both
  /// counts, when the allocator stages another number of groups than the backend's options.
  static void check_staged(const char* who, const group_tables& t, std::int32_t groups) {
    if (t.groups != groups)
      throw std::invalid_argument(std::string(who) + ": the allocator stages " + std::to_string(t.groups) +
                                  " attention groups; options::groups = " + std::to_string(groups) +
                                  " (the forward reads that many block tables)");
  }
  std::int64_t rows() const { return rows_; }
  /// The device copy was overwritten by something else (a failed step): the next write is whole.
  void forget() { known_ = false; }

  /// Writes `s`'s step's further groups' tables (`t`; none for a step on padding: a capture's
  /// dummy) into `mirror`, calling add(entry offset in the mirror, entries) per changed run, in
  /// increasing order. `who` names the backend in errors: a step whose real rows come without
  /// their tables (or with another number of rows) throws std::logic_error, as does a batch
  /// the mirror cannot hold (more than rows() rows, or more than `stride` entries).
  template <class Add>
  void write(std::int32_t* mirror, std::int64_t stride, const padded_batch& s, const std::optional<group_tables>& t,
             const char* who, Add&& add) {
    const std::int64_t real = t ? t->rows : 0;
    if (real != s.real_seqs())
      throw std::logic_error(std::string(who) + ": a step of " + std::to_string(s.real_seqs()) + " sequences was given " +
                             (t ? std::to_string(real) + " rows of group tables" : std::string("no group tables")) +
                             " (options::groups = " + std::to_string(groups_) +
                             "; the engine stages them through stage_groups)");
    if (s.seqs() > rows_ || s.seqs() * s.width() > stride)
      throw std::logic_error(std::string(who) + ": a staged batch of " + std::to_string(s.seqs()) + " rows x " +
                             std::to_string(s.width()) + " entries outgrew its group tables (" +
                             std::to_string(rows_) + " rows, " + std::to_string(stride) + " entries)");
    const std::int64_t width = s.width();
    for (std::int32_t g = 1; g < groups_; ++g) {
      std::int32_t* table = mirror + (g - 1) * stride;
      std::int64_t* held = held_.data() + (g - 1) * rows_;
      const std::int64_t base = (g - 1) * stride;
      auto entry = [&](std::int64_t r, std::int64_t k) -> std::int32_t {
        if (r >= real) return 0;
        const std::span<const std::int32_t> row = t->table(g, r);
        return k < static_cast<std::int64_t>(row.size()) ? std::max(row[static_cast<std::size_t>(k)], 0) : 0;
      };
      auto row_size = [&](std::int64_t r) {
        return r < real ? std::min<std::int64_t>(width, static_cast<std::int64_t>(t->table(g, r).size())) : 0;
      };
      if (!known_ || width != width_) {  // the whole capacity
        std::fill(table, table + stride, 0);
        for (std::int64_t r = 0; r < rows_; ++r) {
          held[r] = row_size(r);
          for (std::int64_t k = 0; k < held[r]; ++k) table[r * width + k] = entry(r, k);
        }
        add(base, stride);
        continue;
      }
      // Entries [0, n) of the row at `at` that differ, one add per changed run.
      auto put = [&](std::int64_t at, std::int64_t n, auto value) {
        std::int64_t run = -1;
        for (std::int64_t k = 0; k <= n; ++k) {
          const bool differs = k < n && table[at + k] != value(k);
          if (differs) {
            table[at + k] = value(k);
            if (run < 0) run = k;
          } else if (run >= 0) {
            add(base + at + run, k - run);
            run = -1;
          }
        }
      };
      for (std::int64_t r = 0; r < rows_; ++r) {
        const std::int64_t n = row_size(r);
        if (n == 0 && held[r] == 0) continue;
        put(r * width, std::max(n, held[r]), [&](std::int64_t k) { return k < n ? entry(r, k) : 0; });
        held[r] = n;
      }
    }
    width_ = width;
    known_ = true;
  }

 private:
  std::int32_t groups_ = 1;
  std::int64_t rows_ = 0;
  std::int64_t width_ = 0;
  bool known_ = false;
  // Per group and row: entries [0, held) of the mirror may be non-zero; every other entry is 0.
  std::vector<std::int64_t> held_;  // [groups - 1][rows]
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
