// expect: (missing_append_allocator.*block_allocator: lacks `errc append|block_allocator: lacks `errc append.*missing_append_allocator)
// Must NOT compile: the diagnostic names this type and the missing append() (either order:
// GCC prints the instantiation first, Clang the error first).
#include <rungs/kv/allocator.hpp>

struct missing_append_allocator {
  std::int32_t block_size() const { return 16; }
  std::int32_t num_blocks() const { return 1; }
  bool can_admit(std::int32_t) const { return false; }
  rungs::kv::result<rungs::kv::sequence_start> create(std::span<const rungs::kv::token_id>,
                                                      const rungs::kv::sequence_params&) {
    return rungs::kv::errc::out_of_blocks;
  }
};

static_assert(rungs::kv::check_block_allocator<missing_append_allocator>());
