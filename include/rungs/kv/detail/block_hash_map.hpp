// A fixed-capacity open-addressing multimap from block digest to block id, for the prefix
// cache: several blocks may hold one digest (two sequences computed the same block), as in
// vLLM's BlockHashToBlockMap, and each is an entry of its own.
//
// At most one digest per block is ever stored, so a table of at least 2N slots never fills
// beyond half and never grows: no allocation after construction. Linear probing keeps a
// lookup to one or two cache lines; erase shifts later entries of the probe run back instead
// of leaving tombstones, so a long-running server's probe lengths do not degrade. Entries of
// one digest share a home slot, so insertion puts a later one after every earlier one in the
// probe run, and the backward shift never moves one past another: find() returns the oldest
// block still under the digest, the one vLLM's get_one_block returns (its dict keeps
// insertion order).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include <rungs/kv/types.hpp>

namespace rungs::kv::detail {

template <class Digest, class Hasher>
class block_hash_map {
 public:
  explicit block_hash_map(std::int32_t max_entries)
      : entries_(std::bit_ceil(std::max<std::size_t>(16, 2 * static_cast<std::size_t>(max_entries)))),
        mask_(entries_.size() - 1) {}

  /// The oldest block inserted under `key` and not erased since, or null_block.
  block_id find(const Digest& key) const {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const entry& e = entries_[i];
      if (e.block == null_block) return null_block;
      if (e.key == key) return e.block;
    }
  }

  /// Whether `key` maps to `b` (among the blocks under it).
  bool contains(const Digest& key, block_id b) const {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const entry& e = entries_[i];
      if (e.block == null_block) return false;
      if (e.block == b && e.key == key) return true;
    }
  }

  /// Adds `b` under `key`, after any blocks already there. `b` must be in no entry.
  void insert(const Digest& key, block_id b) {
    std::size_t i = home(key);
    while (entries_[i].block != null_block) i = (i + 1) & mask_;
    entries_[i] = entry{key, b};
    ++size_;
  }

  /// Removes the entry mapping `key` to `b`, if any; returns whether it did. Other blocks
  /// under `key` stay.
  bool erase(const Digest& key, block_id b) {
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (entries_[i].block == null_block) return false;
      if (entries_[i].block == b && entries_[i].key == key) break;
    }
    // Backward-shift deletion: move each later entry of the run into the hole unless its home
    // lies cyclically in (hole, entry], where moving it would put it before its home.
    for (std::size_t j = i;;) {
      j = (j + 1) & mask_;
      if (entries_[j].block == null_block) break;
      const std::size_t k = home(entries_[j].key);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) {
        entries_[i] = entries_[j];
        i = j;
      }
    }
    entries_[i].block = null_block;
    --size_;
    return true;
  }

  /// Entries (blocks), not distinct digests.
  std::int32_t size() const { return size_; }

 private:
  struct entry {
    Digest key{};
    block_id block = null_block;
  };
  std::size_t home(const Digest& key) const {
    // Digests are already uniform; the multiply spreads low-entropy custom digests too.
    return static_cast<std::size_t>((Hasher::bucket(key) * 0x9e3779b97f4a7c15ull) >> 32) & mask_;
  }

  std::vector<entry> entries_;
  std::size_t mask_;
  std::int32_t size_ = 0;
};

}  // namespace rungs::kv::detail
