// Prefix caching through the allocator: exact hit blocks, the one-token cap, lazy LRU
// eviction tail first, a digest computed twice, tenant isolation by salt and adapter, both
// hashers.
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/sha256.hpp>

#include <catch2/catch.hpp>
#include <vector>

#include "support.hpp"

using namespace rungs::kv;

using namespace kv_test;

TEST_CASE("prefix hits, the one-token cap, duplicates, and lazy LRU eviction tail first") {
  prefix_caching_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 8,
                                .max_model_len = 32});
  const sequence_start s0 = admit(a, tokens(10));  // [0, 1, 2]; blocks 0 and 1 are full
  CHECK(s0.cached_tokens == 0);
  CHECK(table(a, s0.id) == ids{0, 1, 2});
  CHECK(a.pool().cached(0));
  CHECK(a.pool().cached(1));
  CHECK_FALSE(a.pool().cached(2));
  CHECK(a.free(s0.id) == errc::ok);
  kv_metrics m = a.metrics();
  CHECK(m.cached_blocks == 2);
  CHECK(m.free_blocks == 6);
  CHECK(m.live_blocks == 0);

  // Same 8-token start, different tail: both full blocks hit; the tail goes to block 2, the
  // free block at the front of the list.
  const sequence_start s1 = admit(a, concat(tokens(8), {99, 100, 101}));
  CHECK(s1.cached_tokens == 8);
  CHECK(table(a, s1.id) == ids{0, 1, 2});

  // An 8-token prompt may hit only 7 tokens' worth: one block. Its second block repeats
  // block 1's contents: block 3 is indexed under that digest too, beside block 1.
  const sequence_start s2 = admit(a, tokens(8));
  CHECK(s2.cached_tokens == 4);
  CHECK(table(a, s2.id) == ids{0, 3});
  CHECK(a.pool().cached(3));
  CHECK(a.pool().ref_count(0) == 2);

  const std::vector<token_id> other = tokens(16, 200);
  const sequence_start s3 = admit(a, other);  // the last 4 blocks, all registered
  CHECK(table(a, s3.id) == ids{4, 5, 6, 7});
  CHECK(a.metrics().free_blocks == 0);
  CHECK(a.free(s3.id) == errc::ok);  // releases 7, 6, 5, 4: the chain's tail is evicted first
  CHECK(a.free(s1.id) == errc::ok);  // 2 (free: front), 1 (cached: back); 0 is still used by s2
  m = a.metrics();
  CHECK(m.live_blocks == 2);
  CHECK(m.cached_blocks == 5);
  CHECK(m.free_blocks == 1);
  CHECK(m.evictions == 0);

  const sequence_start s4 = admit(a, tokens(13, 300));
  CHECK(table(a, s4.id) == ids{2, 7, 6, 5});
  CHECK(a.metrics().evictions == 3);

  // s3's first block (4) survived, its second (5) did not.
  const std::vector<token_id> other_head(other.begin(), other.begin() + 5);
  // The whole 16-token prompt would hit block 4 (evictable) and need 3 more: 2 are unused.
  const kv_metrics before = a.metrics();
  CHECK(a.create(other).error() == errc::out_of_blocks);
  // 9 tokens: hit block 4 and need 2 more. 2 blocks are unused, but one of them is block 4
  // itself, so admitting would leave the prefill a block short.
  CHECK(a.create(std::vector<token_id>(other.begin(), other.begin() + 9)).error() ==
        errc::out_of_blocks);
  CHECK(a.metrics() == before);
  const sequence_start s5 = admit(a, other_head);
  CHECK(s5.cached_tokens == 4);
  CHECK(table(a, s5.id) == ids{4, 1});

  m = a.metrics();
  CHECK(m.prefix_query_tokens == 10 + 11 + 8 + 16 + 13 + 5);
  CHECK(m.prefix_hit_tokens == 8 + 4 + 4);
  CHECK(m.evictions == 4);  // block 1 was evicted for s5's second block
  CHECK(a.check_consistency().empty());
}

// Two sequences admitted before either appended compute the same blocks: vLLM's
// BlockHashToBlockMap keeps both under the digest, and so does rungs' index. A lookup takes
// the older block; losing one (evicted, or dropped before its commit) leaves the other a hit.
TEST_CASE("a digest computed twice indexes both blocks, and losing one leaves the other a hit") {
  prefix_caching_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 8,
                                .max_model_len = 32});
  const std::vector<token_id> prompt = tokens(9);  // 2 full blocks and one token
  const sequence_start p = a.create(prompt).value();
  const sequence_start q = a.create(prompt).value();  // nothing is registered before an append
  CHECK(p.cached_tokens == 0);
  CHECK(q.cached_tokens == 0);
  CHECK(a.append(p.id, prompt) == errc::ok);
  CHECK(a.append(q.id, prompt) == errc::ok);
  CHECK(table(a, p.id) == ids{0, 1, 2});
  CHECK(table(a, q.id) == ids{3, 4, 5});
  for (block_id b : {0, 1, 3, 4}) CHECK(a.pool().cached(b));
  CHECK(a.check_consistency().empty());  // the index holds 4 blocks for 2 digests

  SECTION("both committed: a lookup takes the older block; evicting it leaves the younger") {
    CHECK(a.commit(p.id, 9) == errc::ok);
    CHECK(a.commit(q.id, 9) == errc::ok);
    const sequence_start r = admit(a, prompt);
    CHECK(r.cached_tokens == 8);
    CHECK(table(a, r.id) == ids{0, 1, 6});  // p's copies, registered first
    CHECK(a.free(r.id) == errc::ok);         // 6 goes to the front of the free list
    CHECK(a.free(p.id) == errc::ok);         // 2 to the front, then 1 and 0 (cached) to the back
    CHECK(a.metrics().cached_blocks == 2);
    // Unused, front to back: 2, 6, 7, 1, 0. Four blocks evict block 1 and keep block 0.
    const sequence_start u = admit(a, tokens(13, 100));
    CHECK(table(a, u.id) == ids{2, 6, 7, 1});
    CHECK(a.metrics().evictions == 1);
    CHECK_FALSE(a.pool().cached(1));
    CHECK(a.pool().cached(4));
    CHECK(a.cached_prefix_tokens(prompt) == 8);  // block 1's digest is still block 4
    CHECK(a.free(u.id) == errc::ok);             // unused: 1, 0, 7, 6, 2
    const sequence_start r2 = admit(a, prompt);
    CHECK(r2.cached_tokens == 8);
    CHECK(table(a, r2.id) == ids{0, 4, 1});  // p's evictable 0, q's live 4, then the free 1
    CHECK(a.pool().ref_count(4) == 2);
    CHECK(a.check_consistency().empty());
  }
  SECTION("the younger copy dropped before its commit: the older stays a hit") {
    CHECK(a.commit(p.id, 9) == errc::ok);
    CHECK(a.free(q.id) == errc::ok);  // q's step never ran: 3 and 4 leave the index, 0 and 1 stay
    CHECK_FALSE(a.pool().cached(3));
    CHECK_FALSE(a.pool().cached(4));
    CHECK(a.pool().cached(0));
    CHECK(a.pool().cached(1));
    CHECK(a.check_consistency().empty());
    const sequence_start r = admit(a, prompt);
    CHECK(r.cached_tokens == 8);
    CHECK(table(a, r.id) == ids{0, 1, 3});
  }
  SECTION("the older copy dropped before its commit: the younger stays a hit") {
    CHECK(a.commit(q.id, 9) == errc::ok);
    CHECK(a.free(p.id) == errc::ok);  // unused, front to back: 0, 1, 2, 6, 7
    CHECK_FALSE(a.pool().cached(0));
    CHECK_FALSE(a.pool().cached(1));
    CHECK(a.check_consistency().empty());
    const sequence_start r = admit(a, prompt);
    CHECK(r.cached_tokens == 8);
    CHECK(table(a, r.id) == ids{3, 4, 0});
  }
}

TEST_CASE("a preempted sequence hits its own prefix when readmitted") {
  prefix_caching_allocator<> a({.num_blocks = 16, .block_size = 4, .max_model_len = 64});
  const std::vector<token_id> prompt = tokens(14);
  const sequence_start s = admit(a, prompt);
  std::vector<token_id> generated{501, 502, 503};
  CHECK(a.append(s.id, generated) == errc::ok);
  CHECK(a.commit(s.id, 17) == errc::ok);  // the decode steps ran
  const ids held = table(a, s.id);  // 5 blocks, the 4th completed while decoding
  CHECK(a.free(s.id) == errc::ok);  // preemption by recompute
  const std::vector<token_id> resumed = concat(prompt, generated);  // 17 tokens
  const sequence_start again = admit(a, resumed);
  CHECK(again.cached_tokens == 16);
  const ids now = table(a, again.id);
  CHECK(ids(now.begin(), now.begin() + 4) == ids(held.begin(), held.begin() + 4));
}

TEMPLATE_TEST_CASE("tenants with different salts or adapters never share blocks", "", wyhash64,
                   sha256_hasher) {
  prefix_caching_allocator<TestType> a({.num_blocks = 32, .block_size = 4, .max_model_len = 64});
  const std::vector<token_id> prompt = tokens(21);
  const sequence_start alice = admit(a, prompt, {.cache_salt = "alice"});
  CHECK(alice.cached_tokens == 0);
  CHECK(admit(a, prompt, {.cache_salt = "bob"}).cached_tokens == 0);
  CHECK(admit(a, prompt).cached_tokens == 0);                                 // no salt
  CHECK(admit(a, prompt, {.adapter_id = 3, .cache_salt = "alice"}).cached_tokens == 0);
  const sequence_start alice2 = admit(a, prompt, {.cache_salt = "alice"});
  CHECK(alice2.cached_tokens == 20);
  const ids first = table(a, alice.id);
  const ids second = table(a, alice2.id);
  CHECK(ids(second.begin(), second.begin() + 5) == ids(first.begin(), first.begin() + 5));
  // Every block of the other tenants is their own.
  const kv_metrics m = a.metrics();
  CHECK(m.live_blocks == 4 * 6 + 1);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("blocks completed during decoding are registered and hit by later prompts") {
  prefix_caching_allocator<sha256_hasher> a({.num_blocks = 8, .block_size = 4, .max_model_len = 32});
  const sequence_start s = admit(a, tokens(3));  // nothing full yet
  CHECK(a.metrics().cached_blocks == 0);
  for (token_id t = 4; t <= 9; ++t) CHECK(a.append(s.id, std::vector<token_id>{t}) == errc::ok);
  CHECK(a.pool().cached(table(a, s.id)[0]));
  CHECK(a.pool().cached(table(a, s.id)[1]));
  CHECK(admit(a, tokens(9)).cached_tokens == 8);
}

TEST_CASE("a block is a prefix hit after a free only once its step is committed") {
  prefix_caching_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 8,
                                .max_model_len = 32});
  const std::vector<token_id> prompt = tokens(17);  // 4 full blocks and one token

  SECTION("append -> free -> create: the step never ran, nothing hits") {
    const sequence_start s = a.create(prompt).value();
    CHECK(a.append(s.id, prompt) == errc::ok);
    CHECK(a.metrics().live_blocks == 5);
    CHECK(a.free(s.id) == errc::ok);
    const kv_metrics m = a.metrics();
    CHECK(m.cached_blocks == 0);
    CHECK(m.free_blocks == 8);
    CHECK(a.check_consistency().empty());
    CHECK(admit(a, prompt).cached_tokens == 0);
  }
  SECTION("append -> commit -> free -> create: every full block hits") {
    const sequence_start s = a.create(prompt).value();
    CHECK(a.append(s.id, prompt) == errc::ok);
    CHECK(a.commit(s.id, 17) == errc::ok);
    CHECK(a.free(s.id) == errc::ok);
    CHECK(a.metrics().cached_blocks == 4);
    CHECK(admit(a, prompt).cached_tokens == 16);
  }
  SECTION("a commit of the first 9 tokens keeps the first 2 blocks") {
    const sequence_start s = a.create(prompt).value();
    CHECK(a.append(s.id, std::span(prompt).first(9)) == errc::ok);
    CHECK(a.commit(s.id, 9) == errc::ok);
    CHECK(a.append(s.id, std::span(prompt).subspan(9)) == errc::ok);  // planned, never run
    CHECK(a.commit(s.id, 5) == errc::ok);  // fewer than before: nothing changes
    CHECK(a.free(s.id) == errc::ok);
    CHECK(a.metrics().cached_blocks == 2);
    CHECK(a.check_consistency().empty());
    CHECK(admit(a, prompt).cached_tokens == 8);
  }
  SECTION("a sequence admitted in the same step hits pending blocks, as in vLLM") {
    const sequence_start p = a.create(prompt).value();
    CHECK(a.append(p.id, prompt) == errc::ok);
    const sequence_start q = a.create(prompt).value();  // its KV is written in the same pass
    CHECK(q.cached_tokens == 16);
    CHECK(table(a, q.id) == ids{0, 1, 2, 3});
    CHECK(a.append(q.id, std::span(prompt).subspan(16)) == errc::ok);
    SECTION("the step ran") {
      CHECK(a.commit(p.id, 17) == errc::ok);
      CHECK(a.commit(q.id, 17) == errc::ok);
      CHECK(a.free(p.id) == errc::ok);
      CHECK(a.free(q.id) == errc::ok);
      CHECK(a.metrics().cached_blocks == 4);
      CHECK(admit(a, prompt).cached_tokens == 16);
    }
    SECTION("the step was abandoned: freeing p drops its blocks from the index, q keeps them") {
      CHECK(a.free(p.id) == errc::ok);
      CHECK(a.metrics().live_blocks == 5);  // q's 0 to 3 and its own block 5
      CHECK(a.metrics().cached_blocks == 0);
      CHECK_FALSE(a.pool().cached(0));
      CHECK(a.check_consistency().empty());
      CHECK(a.free(q.id) == errc::ok);
      CHECK(a.metrics().free_blocks == 8);
      CHECK(admit(a, prompt).cached_tokens == 0);
    }
  }
  SECTION("a fork freed before the commit drops the pending blocks it shares") {
    const sequence_start p = a.create(prompt).value();
    CHECK(a.append(p.id, prompt) == errc::ok);
    const sequence_id c = a.fork(p.id).value();
    CHECK(a.free(c) == errc::ok);
    CHECK(a.metrics().cached_blocks == 0);
    CHECK_FALSE(a.pool().cached(0));
    CHECK(a.commit(p.id, 17) == errc::ok);  // too late to register them again
    CHECK(a.free(p.id) == errc::ok);
    CHECK(a.check_consistency().empty());
    CHECK(admit(a, prompt).cached_tokens == 0);
  }
  SECTION("commit: unknown or freed ids and ranges past the tokens are rejected") {
    const sequence_start s = admit(a, prompt);
    CHECK(a.commit(s.id, 18) == errc::invalid_range);
    CHECK(a.commit(s.id, -1) == errc::invalid_range);
    CHECK(a.finish(s.id) == errc::ok);
    CHECK(a.commit(s.id, 17) == errc::ok);  // a finished sequence commits its last step
    CHECK(a.free(s.id) == errc::ok);
    CHECK(a.commit(s.id, 0) == errc::unknown_sequence);
  }
}
