// Must NOT compile: kv.concept_error checks that the error names this type and append().
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
