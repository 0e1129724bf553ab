// The block_allocator concept: both shipped allocators satisfy it, a user type that lacks an
// operation does not (the compile-fail test in CMakeLists.txt checks the static_assert's text),
// and generic engine code runs on any allocator through it alone.
#include <rungs/kv/allocator.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/priority_lru.hpp>
#include <rungs/kv/sha256.hpp>

#include <catch2/catch.hpp>
#include <vector>

using namespace rungs::kv;

namespace {
// An allocator missing append(): not a block_allocator.
struct no_append {
  std::int32_t block_size() const { return 16; }
  std::int32_t num_blocks() const { return 1; }
  bool can_admit(std::int32_t) const { return false; }
  result<sequence_start> create(std::span<const token_id>, const sequence_params&) {
    return errc::out_of_blocks;
  }
};

}  // namespace

static_assert(check_block_allocator<free_list_allocator>());
static_assert(check_block_allocator<prefix_caching_allocator<>>());
static_assert(block_allocator<prefix_caching_allocator<sha256_hasher, priority_lru<8>>>);
static_assert(!block_allocator<no_append>);
static_assert(!block_allocator<int>);

namespace {
// A prefill, a beam fork and one decode step, written against the concept only.
template <block_allocator A>
void run_engine_steps(A& a) {
  const std::vector<token_id> prompt{5, 6, 7, 8, 9};
  const sequence_start s = a.create(prompt, {}).value();
  REQUIRE(a.append(s.id, prompt, 0) == errc::ok);
  REQUIRE(a.commit(s.id, 5) == errc::ok);
  const sequence_id beam = a.fork(s.id).value();
  const sequence_id batch[] = {s.id, beam};
  const token_id sampled = 42;
  for (const sequence_id id : batch) REQUIRE(a.append(id, std::span(&sampled, 1), 0) == errc::ok);
  // s wrote first into shared block 1 and got a private copy; beam then held block 1 alone.
  CHECK(a.copies().size() == 1);
  a.clear_copies();
  const slot_range ranges[] = {{s.id, 5, 1}, {beam, 5, 1}};
  std::vector<slot_id> out(4);
  CHECK(a.slot_mapping(ranges, out).value() == 2);
  CHECK(out[0] != out[1]);
  CHECK(out[2] == padded_slot);
  CHECK(a.metrics().cow_copies == 1);
  CHECK(a.finish(s.id) == errc::ok);
  CHECK(a.free(s.id) == errc::ok);
  CHECK(a.free(beam) == errc::ok);
  CHECK(a.metrics().live_blocks == 0);
}
}  // namespace

TEMPLATE_TEST_CASE("generic engine code drives every allocator through the concept", "",
                   free_list_allocator, prefix_caching_allocator<>,
                   (prefix_caching_allocator<sha256_hasher, priority_lru<4>>)) {
  TestType a({.num_blocks = 16, .block_size = 4, .max_sequences = 4, .max_model_len = 64});
  run_engine_steps(a);
}
