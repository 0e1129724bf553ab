// Scripted scenarios with exact block ids: allocation order, reuse after frees, lookahead,
// slot mapping, fork and copy-on-write, finish/free, admission, and rejected calls leaving
// the allocator exactly as it was.
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/priority_lru.hpp>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "support.hpp"

using namespace rungs::kv;

using namespace kv_test;
using slots = std::vector<slot_id>;

TEST_CASE("free list: blocks only when the last one is full, LIFO reuse, tail-first free") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id s0 = admit(a, tokens(6)).id;
  CHECK(table(a, s0) == ids{0, 1});
  const sequence_id s1 = admit(a, tokens(3)).id;
  CHECK(table(a, s1) == ids{2});
  CHECK(a.append(s0, tokens(2)) == errc::ok);  // 8 tokens: block 1 now full, no new block
  CHECK(table(a, s0) == ids{0, 1});
  CHECK(a.append(s0, tokens(1)) == errc::ok);  // the 9th token opens a block
  CHECK(table(a, s0) == ids{0, 1, 3});
  CHECK(a.free(s1) == errc::ok);
  const sequence_id s2 = admit(a, tokens(9)).id;
  CHECK(table(a, s2) == ids{2, 4, 5});  // 2 freed last: reused first
  CHECK(a.free(s0) == errc::ok);        // releases 3, 1, 0: 0 is on top
  CHECK(a.append(s2, tokens(8)) == errc::ok);
  CHECK(table(a, s2) == ids{2, 4, 5, 0, 1});
  const kv_metrics m = a.metrics();
  CHECK(m.live_blocks == 5);
  CHECK(m.free_blocks == 3);
  CHECK(m.cached_blocks == 0);
  CHECK(m.sequences == 1);
  CHECK(m.usage() == Approx(5.0 / 8));
  CHECK(a.check_consistency().empty());
}

TEST_CASE("slot mapping: block_id * block_size + offset, padded rows -1") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id x = admit(a, tokens(2)).id;  // [0]
  const sequence_id y = admit(a, tokens(6)).id;  // [1, 2]
  CHECK(a.append(x, tokens(3)) == errc::ok);  // x: [0, 3], 5 tokens
  slots out(12, 99);
  const slot_range step[] = {{x, 2, 3}, {y, 3, 3}};
  const result<std::int32_t> n = a.slot_mapping(step, out);
  REQUIRE(n.has_value());
  CHECK(*n == 6);
  // x positions 2,3 in block 0, 4 in block 3; y positions 3 in block 1, 4,5 in block 2.
  CHECK(out == slots{2, 3, 12, 7, 8, 9, -1, -1, -1, -1, -1, -1});
  const block_table_view v = a.block_tables();
  CHECK(v.rows == 4);
  CHECK(v.stride == 8);
  CHECK(ids(v.data, v.data + 10) == ids{0, 3, -1, -1, -1, -1, -1, -1, 1, 2});
}

TEST_CASE("slot mapping rejects bad ranges and small buffers without writing") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id x = admit(a, tokens(5)).id;  // 2 blocks: positions 0..7 have slots
  slots out(4, 99);
  const slot_range past[] = {{x, 6, 3}};
  CHECK(a.slot_mapping(past, out).error() == errc::invalid_range);
  const slot_range negative[] = {{x, -1, 2}};
  CHECK(a.slot_mapping(negative, out).error() == errc::invalid_range);
  const slot_range big[] = {{x, 0, 5}};
  CHECK(a.slot_mapping(big, out).error() == errc::buffer_too_small);
  const slot_range stale[] = {{sequence_id{3, 0}, 0, 1}};
  CHECK(a.slot_mapping(stale, out).error() == errc::unknown_sequence);
  CHECK(out == slots(4, 99));
  const slot_range reserved[] = {{x, 5, 3}};  // beyond the tokens, inside the blocks
  CHECK(a.slot_mapping(reserved, out).value() == 3);
  CHECK(out == slots{5, 6, 7, -1});
}

TEST_CASE("lookahead slots for speculative decoding") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 2, .max_model_len = 16});
  const sequence_id s = admit(a, tokens(3)).id;
  CHECK(table(a, s) == ids{0});
  // Last sampled token + 3 drafts: positions 3..6, one more block.
  CHECK(a.append(s, tokens(1), 3) == errc::ok);
  CHECK(table(a, s) == ids{0, 1});
  CHECK(a.num_tokens(s).value() == 4);
  slots out(4);
  const slot_range verify[] = {{s, 3, 4}};
  CHECK(a.slot_mapping(verify, out).value() == 4);
  CHECK(out == slots{3, 4, 5, 6});
  // Two drafts accepted (+ bonus token): 3 tokens committed, 3 new drafts need block 2.
  CHECK(a.append(s, tokens(3), 3) == errc::ok);
  CHECK(a.num_tokens(s).value() == 7);
  CHECK(table(a, s) == ids{0, 1, 2});
  // A shorter lookahead keeps the reserved block.
  CHECK(a.append(s, tokens(1), 0) == errc::ok);
  CHECK(table(a, s) == ids{0, 1, 2});
  CHECK(a.append(s, {}, 9) == errc::sequence_too_long);  // 8 + 9 > 16
  CHECK(a.append(s, {}, -1) == errc::invalid_range);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("fork shares every block; the first write to a shared block copies it") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id parent = admit(a, tokens(6)).id;  // [0, 1]
  const sequence_id child = a.fork(parent).value();
  CHECK(table(a, child) == ids{0, 1});
  CHECK(a.pool().ref_count(0) == 2);
  CHECK(a.pool().ref_count(1) == 2);
  CHECK(a.copies().empty());
  CHECK(a.append(child, tokens(1)) == errc::ok);  // writes position 6 of shared block 1
  CHECK(table(a, child) == ids{0, 2});
  CHECK(table(a, parent) == ids{0, 1});
  CHECK(std::vector<block_copy>(a.copies().begin(), a.copies().end()) ==
        std::vector<block_copy>{{1, 2}});
  CHECK(a.append(parent, tokens(1)) == errc::ok);  // block 1 is private again: no copy
  CHECK(a.copies().size() == 1);
  a.clear_copies();
  const sequence_id child2 = a.fork(parent).value();
  CHECK(a.append(parent, tokens(2)) == errc::ok);  // position 7 (shared block 1), 8 (new)
  CHECK(table(a, parent) == ids{0, 3, 4});
  CHECK(table(a, child2) == ids{0, 1});
  CHECK(std::vector<block_copy>(a.copies().begin(), a.copies().end()) ==
        std::vector<block_copy>{{1, 3}});
  CHECK(a.metrics().cow_copies == 2);
  // Full shared blocks are never written, so they are never copied.
  CHECK(a.pool().ref_count(0) == 3);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("fork copies reserved lookahead blocks each sharer writes") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id p = admit(a, tokens(4)).id;      // [0], full
  CHECK(a.append(p, tokens(1), 4) == errc::ok);  // 5 tokens + 4 drafts: [0, 1, 2]
  const sequence_id c = a.fork(p).value();
  CHECK(a.append(c, tokens(1), 4) == errc::ok);  // writes positions 5..9: blocks 1, 2 shared
  CHECK(table(a, c) == ids{0, 3, 4});
  CHECK(std::vector<block_copy>(a.copies().begin(), a.copies().end()) ==
        std::vector<block_copy>{{1, 3}, {2, 4}});
  CHECK(a.append(p, tokens(1), 4) == errc::ok);  // its blocks are private now
  CHECK(a.copies().size() == 2);
}

TEST_CASE("a sharer that writes its reserved blocks one at a time copies each of them") {
  // append skips the copy-on-write pass once a forked sequence's whole tail is private; until
  // then every append must look, even after one that found nothing left to copy in its range.
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const sequence_id p = admit(a, tokens(4)).id;      // [0], full
  CHECK(a.append(p, tokens(1), 8) == errc::ok);      // 5 tokens + 8 drafts: [0, 1, 2, 3]
  const sequence_id c = a.fork(p).value();
  CHECK(a.append(c, tokens(1)) == errc::ok);         // position 5: block 1
  CHECK(a.append(c, tokens(2)) == errc::ok);         // positions 6, 7: block 1, already private
  CHECK(a.copies().size() == 1);
  CHECK(a.append(c, tokens(3)) == errc::ok);         // positions 8..10: block 2
  CHECK(a.append(c, tokens(4)) == errc::ok);         // positions 11..14: blocks 2 and 3
  CHECK(table(a, c) == ids{0, 4, 5, 6});
  CHECK(table(a, p) == ids{0, 1, 2, 3});
  CHECK(std::vector<block_copy>(a.copies().begin(), a.copies().end()) ==
        std::vector<block_copy>{{1, 4}, {2, 5}, {3, 6}});
  CHECK(a.append(p, tokens(1), 7) == errc::ok);      // the parent's blocks are private again
  CHECK(a.copies().size() == 3);
  CHECK(a.metrics().cow_copies == 3);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("finish stops appends, free releases; stale ids are errors") {
  free_list_allocator a({.num_blocks = 4, .block_size = 4, .max_sequences = 2, .max_model_len = 16});
  const sequence_id s = admit(a, tokens(5)).id;
  CHECK(a.finish(s) == errc::ok);
  CHECK(a.append(s, tokens(1)) == errc::sequence_finished);
  CHECK(a.fork(s).error() == errc::sequence_finished);
  CHECK(a.finish(s) == errc::sequence_finished);
  CHECK(table(a, s) == ids{0, 1});  // still readable until freed
  CHECK(a.free(s) == errc::ok);
  CHECK(a.free(s) == errc::unknown_sequence);
  CHECK(a.append(s, tokens(1)) == errc::unknown_sequence);
  CHECK(a.block_table(s).error() == errc::unknown_sequence);
  const sequence_id t = admit(a, tokens(1)).id;
  CHECK(t.slot == s.slot);  // the row is reused under a new generation
  CHECK(a.free(s) == errc::unknown_sequence);
  CHECK(a.contains(t));
  CHECK(a.free(sequence_id{}) == errc::unknown_sequence);
  CHECK(a.free(sequence_id{77, 1}) == errc::unknown_sequence);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("rejected calls leave the allocator exactly as it was") {
  prefix_caching_allocator<> a(
      {.num_blocks = 6, .block_size = 4, .max_sequences = 3, .max_model_len = 24});
  const sequence_id s0 = admit(a, tokens(9)).id;  // 3 blocks
  const sequence_id s1 = a.fork(s0).value();
  const sequence_id done = admit(a, tokens(2, 100)).id;
  CHECK(a.finish(done) == errc::ok);
  const snapshot before = observe(a);

  // 22 tokens need 3 more blocks and a private copy of shared block 2; 2 are unused.
  CHECK(a.append(s0, tokens(13), 0) == errc::out_of_blocks);
  CHECK(a.append(s1, tokens(1), 20) == errc::sequence_too_long);
  CHECK(a.append(done, tokens(1)) == errc::sequence_finished);
  CHECK(a.create(tokens(3)).error() == errc::too_many_sequences);
  CHECK(a.fork(s0).error() == errc::too_many_sequences);
  CHECK(a.free(sequence_id{s0.slot, s0.generation + 1}) == errc::unknown_sequence);
  CHECK(a.finish(sequence_id{9, 1}) == errc::unknown_sequence);
  CHECK(before == observe(a));
  CHECK(a.check_consistency().empty());

  CHECK(a.free(done) == errc::ok);
  const snapshot after_free = observe(a);
  CHECK(a.create(tokens(25)).error() == errc::sequence_too_long);
  CHECK(a.create(tokens(20, 500)).error() == errc::out_of_blocks);  // 5 blocks, 3 unused
  CHECK(after_free == observe(a));
}

TEST_CASE("admission on the first chunk: admit_tokens counts past the cached prefix") {
  prefix_caching_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const std::vector<token_id> shared = tokens(8, 1);  // 2 full blocks, cached once freed
  const sequence_id first = admit(a, shared).id;
  CHECK(a.free(first) == errc::ok);
  const sequence_id hold = admit(a, tokens(16, 500)).id;  // 4 blocks: 4 unused, 2 of them cached
  (void)hold;
  // A 24-token prompt sharing the 8 cached tokens needs 6 blocks, 4 beyond the 2 hits; with the
  // 2 evictable hits taken, 2 blocks are left for new tokens: the whole prompt does not fit.
  std::vector<token_id> prompt = shared;
  for (token_id t : tokens(16, 900)) prompt.push_back(t);
  const snapshot before = observe(a);
  CHECK(a.create(prompt).error() == errc::out_of_blocks);
  CHECK(a.create(prompt, {.admit_tokens = 12}).error() == errc::out_of_blocks);  // 8 + 12 tokens: 3 new blocks
  CHECK(a.create(prompt, {.admit_tokens = -1}).error() == errc::invalid_range);
  CHECK(before == observe(a));
  // 8 cached + 8 new tokens: 2 new blocks fit.
  const sequence_start s = a.create(prompt, {.admit_tokens = 8}).value();
  CHECK(s.cached_tokens == 8);
  CHECK(a.append(s.id, std::span(prompt).subspan(8, 8)) == errc::ok);
  CHECK(a.append(s.id, std::span(prompt).subspan(16, 8)) == errc::out_of_blocks);  // the next chunk waits
  CHECK(a.check_consistency().empty());
}

TEST_CASE("admission: can_admit and create keep the watermark free") {
  free_list_allocator a({.num_blocks = 10, .block_size = 4, .max_sequences = 4,
                         .max_model_len = 64, .watermark_blocks = 2});
  CHECK(a.can_admit(32));   // 8 blocks + 2 watermark = 10
  CHECK_FALSE(a.can_admit(33));
  CHECK_FALSE(a.can_admit(65));  // longer than max_model_len
  CHECK(a.create(tokens(33)).error() == errc::out_of_blocks);
  const sequence_id s = admit(a, tokens(32)).id;
  CHECK(a.metrics().free_blocks == 2);
  CHECK(a.can_admit(0));
  CHECK_FALSE(a.can_admit(1));
  // Running sequences may dip into the watermark: it guards admission only.
  CHECK(a.append(s, tokens(8)) == errc::ok);
  CHECK(a.metrics().free_blocks == 0);
}

TEST_CASE("a configuration out of range is rejected with the field's name") {
  using A = free_list_allocator;
  CHECK_THROWS_WITH(A({.num_blocks = 0}), "allocator_config: num_blocks = 0 must be positive");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .block_size = 0}),
                    "allocator_config: block_size = 0 must be positive");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .max_sequences = -1}),
                    "allocator_config: max_sequences = -1 must be positive");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .max_model_len = 0}),
                    "allocator_config: max_model_len = 0 must be positive");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .watermark_blocks = 8}),
                    "allocator_config: watermark_blocks = 8 must be in [0, num_blocks)");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .sliding_window = -1}),
                    "allocator_config: sliding_window = -1 must be 0 (full attention) or a positive number of keys");
  CHECK_THROWS_WITH(
      A({.num_blocks = 8, .block_size = 1, .max_sequences = 1 << 20, .max_model_len = 1 << 20}),
      "allocator_config: max_sequences * ceil(max_model_len / block_size) = 1099511627776 "
      "block-table entries exceeds 2^30");
  // One sequence of one huge block: the table is one entry, the partial-block buffer is not.
  CHECK_THROWS_WITH(A({.num_blocks = 1, .block_size = 2147483647, .max_sequences = 1, .max_model_len = 1}),
                    "allocator_config: max_sequences * block_size = 2147483647 partial-block tokens exceeds 2^30");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .block_size = 1 << 16, .max_sequences = 1 << 15}),
                    "allocator_config: max_sequences * block_size = 2147483648 partial-block tokens exceeds 2^30");
}

TEST_CASE("priority eviction keeps the prefix of a high-priority sequence") {
  prefix_caching_allocator<wyhash64, priority_lru<4>> a(
      {.num_blocks = 4, .block_size = 2, .max_sequences = 4, .max_model_len = 8});
  const std::vector<token_id> system{1, 2, 3, 4, 5};
  const std::vector<token_id> chat{7, 8, 9, 10, 11};
  const sequence_id important = admit(a, system, {.priority = 3}).id;  // [0, 1, 2]
  CHECK(a.free(important) == errc::ok);  // 0 and 1 cached at priority 3, 2 free
  const sequence_id other = admit(a, chat, {.priority = 0}).id;
  // Free block 2 first, then 3, then the LRU block of level 3: the chain's tail, 1.
  CHECK(table(a, other) == ids{2, 3, 1});
  CHECK(a.free(other) == errc::ok);
  CHECK(a.create(system).value().cached_tokens == 2);  // block 0 survived
}

TEST_CASE("cached_prefix_tokens: what create would reuse, asked without changing anything") {
  prefix_caching_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  const std::vector<token_id> shared = tokens(12, 1);  // 3 full blocks, cached once freed
  CHECK(a.cached_prefix_tokens(shared) == 0);
  CHECK(a.free(admit(a, shared).id) == errc::ok);
  std::vector<token_id> prompt = tokens(8, 1);  // the first 2 blocks, then other tokens
  for (token_id t : tokens(6, 900)) prompt.push_back(t);
  const snapshot before = observe(a);
  CHECK(a.cached_prefix_tokens(prompt) == 8);
  CHECK(a.cached_prefix_tokens(shared) == 8);  // the last token is computed: 11 tokens, 2 whole blocks
  CHECK(a.cached_prefix_tokens(tokens(13, 1)) == 12);
  CHECK(a.cached_prefix_tokens(tokens(12, 2)) == 0);  // the first block differs
  CHECK(a.cached_prefix_tokens(shared, {.cache_salt = "tenant"}) == 0);
  CHECK(a.cached_prefix_tokens({}) == 0);
  CHECK(before == observe(a));
  CHECK(a.create(prompt).value().cached_tokens == 8);
  free_list_allocator f({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  CHECK(f.free(admit(f, shared).id) == errc::ok);
  CHECK(f.cached_prefix_tokens(shared) == 0);
}

// ---- sliding window -------------------------------------------------------------------------
// Block size 4: block i holds positions [4i, 4i + 4). A step whose first query is at position p
// sees keys from p - W + 1 on, so block i leaves once 4(i + 1) <= p - W + 1.

TEST_CASE("sliding window: append releases the blocks the step's first query cannot see") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                         .sliding_window = 6});
  const sequence_id s = admit(a, tokens(10)).id;  // the prefill's first query is at 0
  CHECK(table(a, s) == ids{0, 1, 2});
  CHECK(a.append(s, tokens(1)) == errc::ok);  // p = 10 sees [5, 10]: block 0 (0..3) leaves
  CHECK(table(a, s) == ids{null_block, 1, 2});
  CHECK(a.metrics().live_blocks == 2);
  CHECK(a.append(s, tokens(1)) == errc::ok);  // p = 11 sees [6, 11]: block 1 still holds 6, 7
  CHECK(a.append(s, tokens(1)) == errc::ok);  // p = 12 opens a block: 0, freed last, comes back
  CHECK(table(a, s) == ids{null_block, 1, 2, 0});
  CHECK(a.append(s, tokens(1)) == errc::ok);  // p = 13 sees [8, 13]: block 1 (4..7) leaves
  CHECK(table(a, s) == ids{null_block, null_block, 2, 0});
  CHECK(a.num_tokens(s).value() == 14);
  slots out(6, 99);
  const slot_range released[] = {{s, 7, 1}};  // position 7 was in block 1
  CHECK(a.slot_mapping(released, out).error() == errc::invalid_range);
  CHECK(out == slots(6, 99));
  const slot_range held[] = {{s, 8, 6}};  // 8..11 in block 2, 12..13 in block 0
  CHECK(a.slot_mapping(held, out).value() == 6);
  CHECK(out == slots{8, 9, 10, 11, 0, 1});
  CHECK(a.check_consistency().empty());
  CHECK(a.free(s) == errc::ok);
  CHECK(a.metrics().free_blocks == 8);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("sliding window: blocks leaving the window pay for the append; a rejected one keeps them") {
  const allocator_config full{.num_blocks = 3, .block_size = 4, .max_sequences = 2, .max_model_len = 32};
  free_list_allocator unwindowed(full);
  const sequence_id u = admit(unwindowed, tokens(12)).id;  // [0, 1, 2]: the pool is full
  CHECK(unwindowed.append(u, tokens(1)) == errc::out_of_blocks);

  allocator_config w4 = full;
  w4.sliding_window = 4;
  free_list_allocator a(w4);
  const sequence_id s = admit(a, tokens(12)).id;
  CHECK(a.append(s, tokens(1)) == errc::ok);  // p = 12 sees [9, 12]: blocks 0 and 1 leave
  CHECK(table(a, s) == ids{null_block, null_block, 2, 0});  // released tail first: 0 went last
  CHECK(a.metrics().free_blocks == 1);

  allocator_config w8 = full;
  w8.sliding_window = 8;
  free_list_allocator b(w8);
  const sequence_id t = admit(b, tokens(12)).id;
  const snapshot before = observe(b);
  // p = 12 sees [5, 12]: only block 0 leaves, and the token with 4 draft slots needs 2 blocks.
  CHECK(b.append(t, tokens(1), 4) == errc::out_of_blocks);
  CHECK(observe(b) == before);
  CHECK(table(b, t) == ids{0, 1, 2});
  CHECK(b.append(t, tokens(1)) == errc::ok);  // one new block: block 0 pays for it
  CHECK(table(b, t) == ids{null_block, 1, 2, 0});
  CHECK(b.check_consistency().empty());
}

TEST_CASE("sliding window: a forked block is released by each sharer, freed by the last") {
  free_list_allocator a({.num_blocks = 8, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                         .sliding_window = 4});
  const sequence_id parent = admit(a, tokens(8)).id;  // [0, 1]
  const sequence_id child = a.fork(parent).value();
  CHECK(a.append(parent, tokens(1)) == errc::ok);  // p = 8 sees [5, 8]: block 0 leaves the parent
  CHECK(table(a, parent) == ids{null_block, 1, 2});
  CHECK(a.pool().ref_count(0) == 1);  // the child still reads it
  CHECK(a.copies().empty());          // block 1 is full: nothing is written into it
  CHECK(a.append(child, tokens(1)) == errc::ok);  // the child lets go of 0, which comes back
  CHECK(table(a, child) == ids{null_block, 1, 0});
  CHECK(a.pool().ref_count(1) == 2);
  CHECK(a.metrics().live_blocks == 3);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("sliding window with prefix caching: committed blocks stay hits, pending ones do not") {
  const allocator_config c{.num_blocks = 8, .block_size = 4, .max_sequences = 3, .max_model_len = 32,
                           .sliding_window = 4};
  prefix_caching_allocator<> a(c);
  const sequence_id s = admit(a, tokens(12)).id;  // 3 full blocks, committed
  CHECK(table(a, s) == ids{0, 1, 2});
  CHECK(a.append(s, tokens(1, 100)) == errc::ok);  // p = 12: blocks 0 and 1 leave, still cached
  CHECK(table(a, s) == ids{null_block, null_block, 2, 3});
  CHECK(a.metrics().live_blocks == 2);
  CHECK(a.metrics().cached_blocks == 2);
  CHECK(a.cached_prefix_tokens(tokens(12)) == 8);  // 11 tokens: two full blocks, both indexed
  const sequence_start again = a.create(tokens(12)).value();
  CHECK(again.cached_tokens == 8);
  // The first query, at 8, sees [5, 8]: block 0 is outside, neither taken nor refreshed.
  CHECK(table(a, again.id) == ids{null_block, 1});
  CHECK(a.pool().ref_count(0) == 0);
  CHECK(a.check_consistency().empty());

  // An engine with a step in flight plans the next one before committing the last: the blocks
  // that leave the window then were registered by a step that may still be dropped.
  prefix_caching_allocator<> b(c);
  const sequence_id t = b.create(tokens(12)).value().id;
  CHECK(b.append(t, tokens(12)) == errc::ok);      // step 1, not committed yet
  CHECK(b.append(t, tokens(1, 100)) == errc::ok);  // step 2: blocks 0 and 1 leave, uncommitted
  CHECK(b.commit(t, 13) == errc::ok);
  CHECK(b.cached_prefix_tokens(tokens(12)) == 0);  // the chain's first two blocks are forgotten
  CHECK(b.metrics().cached_blocks == 0);
  CHECK(b.check_consistency().empty());
}

// vLLM's SlidingWindowManager.find_longest_cache_hit: a hit ending at block e needs only the
// ceil((W - 1) / block_size) blocks before e cached (the first query, at 4e, sees keys from
// 4e - W + 1 on); W = 6 needs 2. The blocks before them may be evicted.
TEST_CASE("sliding window with prefix caching: a hit needs only the blocks inside the window") {
  const allocator_config c{.num_blocks = 6, .block_size = 4, .max_sequences = 3, .max_model_len = 32,
                           .sliding_window = 6};
  SECTION("admission counts only what the first append needs; blocks outside are not touched") {
    prefix_caching_allocator<> a(c);
    const sequence_id x = admit(a, tokens(20)).id;  // blocks 0..4, committed; 5 is free
    CHECK(a.append(x, tokens(1, 21)) == errc::ok);  // p = 20 sees [15, 20]: 0, 1, 2 leave
    CHECK(table(a, x) == ids{null_block, null_block, null_block, 3, 4, 5});
    CHECK(a.metrics().cached_blocks == 3);  // released 2, 1, 0: the chain's tail is evicted first
    CHECK(a.metrics().free_blocks == 0);
    // 21 tokens: 5 whole blocks may hit; the first query, at 20, reads blocks 3 and 4 only.
    // One new block is needed and 3 are unused: admitted (counting the evictable hits 0, 1, 2
    // as taken, as rungs did before, would need 4).
    CHECK(a.cached_prefix_tokens(tokens(21)) == 20);
    const sequence_start z = a.create(tokens(21)).value();
    CHECK(z.cached_tokens == 20);
    CHECK(table(a, z.id) == ids{null_block, null_block, null_block, 3, 4});
    CHECK(a.pool().ref_count(0) == 0);
    CHECK(a.pool().ref_count(3) == 2);
    CHECK(a.metrics().cached_blocks == 3);
    CHECK(a.append(z.id, tokens(1, 21)) == errc::ok);  // opens block 5 of the prompt: evicts 2
    CHECK(table(a, z.id) == ids{null_block, null_block, null_block, 3, 4, 2});
    CHECK(a.cached_prefix_tokens(tokens(9)) == 8);  // the head, 0 and 1, is still a hit
    CHECK(a.check_consistency().empty());
  }
  SECTION("the chain's head evicted: the blocks in the window still hit") {
    prefix_caching_allocator<> a(c);
    const sequence_id x = admit(a, tokens(20)).id;
    CHECK(a.append(x, tokens(1, 21)) == errc::ok);  // 0, 1, 2 left the window, cached
    const sequence_id y = admit(a, tokens(12, 100)).id;  // takes 2, 1, 0: the chain's head is gone
    CHECK(table(a, y) == ids{2, 1, 0});
    CHECK(a.free(y) == errc::ok);
    CHECK(a.cached_prefix_tokens(tokens(9)) == 0);
    CHECK(a.cached_prefix_tokens(tokens(21)) == 20);  // blocks 3 and 4, held by x
    const sequence_start z = a.create(tokens(21)).value();
    CHECK(z.cached_tokens == 20);
    CHECK(table(a, z.id) == ids{null_block, null_block, null_block, 3, 4});
    // Block 4 of this prompt differs: a hit would have to end at block 3 or earlier, and no
    // two blocks in a row before it are cached (0..2 were evicted).
    CHECK(a.cached_prefix_tokens(concat(tokens(16), tokens(5, 200))) == 0);
    CHECK(a.check_consistency().empty());
  }
  SECTION("full attention needs the whole chain") {
    allocator_config full = c;
    full.sliding_window = 0;
    prefix_caching_allocator<> a(full);
    const sequence_id x = admit(a, tokens(20)).id;
    CHECK(a.free(x) == errc::ok);  // released 4, 3, 2, 1, 0: 4 is evicted first
    const sequence_id y = admit(a, tokens(4, 100)).id;  // evicts 5 (free), then nothing cached
    CHECK(table(a, y) == ids{5});
    const sequence_id y2 = admit(a, tokens(4, 200)).id;  // evicts 4, the chain's tail
    CHECK(table(a, y2) == ids{4});
    CHECK(a.cached_prefix_tokens(tokens(21)) == 16);  // blocks 0..3
  }
}

// W = 1: a query reads only its own key, so every hit block is outside the window: the hit
// takes no block at all. vLLM caches no block for W = 1 and never hits (its sliding group
// keeps only blocks a later query could read); rungs keeps them and skips their compute.
TEST_CASE("sliding window of 1 with prefix caching: hits hold no block") {
  prefix_caching_allocator<> a({.num_blocks = 4, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                                .sliding_window = 1});
  const sequence_id x = admit(a, tokens(9)).id;  // 0, 1, 2
  CHECK(a.append(x, tokens(1, 10)) == errc::ok);  // p = 9 sees [9]: blocks 0 and 1 leave
  CHECK(table(a, x) == ids{null_block, null_block, 2});
  const sequence_start z = a.create(tokens(9)).value();
  CHECK(z.cached_tokens == 8);
  CHECK(table(a, z.id) == ids{null_block, null_block});
  CHECK(a.metrics().live_blocks == 1);
  CHECK(a.append(z.id, tokens(1, 9)) == errc::ok);  // position 8: a new block
  CHECK(table(a, z.id) == ids{null_block, null_block, 3});
  CHECK(a.check_consistency().empty());
}
