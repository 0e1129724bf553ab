// hybrid_allocator: KV-cache groups (full, sliding window, chunked local) under one block pool.
// Scripted cases with exact block ids, then random traffic checked after every operation:
// check_consistency(), and every group reads back the tokens its window still holds.
#include <rungs/kv/allocator.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/hybrid_allocator.hpp>

#include <catch2/catch.hpp>
#include <random>
#include <stdexcept>
#include <vector>

#include "support.hpp"

using namespace rungs::kv;
using namespace kv_test;

namespace {
constexpr attention_group full{};
constexpr attention_group sliding(std::int32_t w) { return {attention_kind::sliding_window, w}; }
constexpr attention_group chunked(std::int32_t c) { return {attention_kind::chunked_local, c}; }

template <class A>
ids group_table(const A& a, sequence_id s, std::int32_t g) {
  const auto t = a.block_table(s, g).value();
  return ids(t.begin(), t.end());
}
template <class A>
sequence_start admit_all(A& a, const std::vector<token_id>& prompt) {
  const sequence_start s = a.create(prompt).value();
  REQUIRE(a.append(s.id, std::span(prompt).subspan(static_cast<std::size_t>(s.cached_tokens))) == errc::ok);
  REQUIRE(a.commit(s.id, static_cast<std::int32_t>(prompt.size())) == errc::ok);
  REQUIRE(a.check_consistency().empty());
  return s;
}
}  // namespace

// Block size 4. Group 0 full attention, group 1 a sliding window of 8 keys (gpt-oss's layout:
// half the layers each): a query at p reads group 1's keys from p - 7 on.
TEST_CASE("hybrid: one pool, a table per group, windowed blocks released tail first") {
  hybrid_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                        .groups = {full, sliding(8)}});
  const sequence_id s = admit_all(a, tokens(12)).id;  // 3 blocks in each group, taken group by group
  CHECK(group_table(a, s, 0) == ids{0, 1, 2});
  CHECK(group_table(a, s, 1) == ids{3, 4, 5});
  CHECK(a.metrics().live_blocks == 6);
  // p = 12 sees [5, 12]: group 1's block 0 (keys 0..3) leaves, cached; the two new blocks
  // are the free 6 and 7 (free blocks are reused before cached ones).
  CHECK(a.append(s, tokens(1, 13)) == errc::ok);
  CHECK(group_table(a, s, 0) == ids{0, 1, 2, 6});
  CHECK(group_table(a, s, 1) == ids{null_block, 4, 5, 7});
  CHECK(a.metrics().cached_blocks == 1);  // block 3 is committed and cached
  CHECK(a.metrics().free_blocks == 0);
  // p = 15 sees [8, 15]: group 1's block 1 (4) leaves, cached. p = 16 opens a block in both
  // groups: the pool has only the cached 3 and 4, evicted in the order they were released.
  REQUIRE(a.commit(s, 13) == errc::ok);
  for (int i = 0; i < 3; ++i) CHECK(a.append(s, tokens(1, 14 + i)) == errc::ok);
  CHECK(a.append(s, tokens(1, 17)) == errc::ok);
  CHECK(group_table(a, s, 0) == ids{0, 1, 2, 6, 3});
  CHECK(group_table(a, s, 1) == ids{null_block, null_block, 5, 7, 4});
  CHECK(a.check_consistency().empty());
  // The pool is full: a second sequence of one block needs 2 (one per group).
  CHECK(a.create(tokens(3, 100)).error() == errc::out_of_blocks);
  CHECK(a.free(s) == errc::ok);
  CHECK(a.metrics().live_blocks == 0);
  CHECK(a.check_consistency().empty());
}

TEST_CASE("hybrid: admission and growth are one decision for every group") {
  hybrid_allocator<> a({.num_blocks = 5, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                        .groups = {full, sliding(4)}});
  CHECK(a.create(tokens(12)).error() == errc::out_of_blocks);  // 3 + 3 blocks > 5
  const sequence_id s = admit_all(a, tokens(8)).id;             // 2 + 2
  CHECK(group_table(a, s, 1) == ids{2, 3});
  // p = 8 sees [5, 8]: group 1's block 0 leaves (returns 2); 2 new blocks, 1 free + 1 returned.
  CHECK(a.append(s, tokens(1, 9)) == errc::ok);
  CHECK(group_table(a, s, 0) == ids{0, 1, 4});
  CHECK(group_table(a, s, 1) == ids{null_block, 3, 2});
  // p = 9: nothing leaves (block 1 holds 5..7), 3 draft slots open block 3 in both groups:
  // 2 blocks, none unused. Rejected, and nothing changed.
  const auto before = a.metrics();
  CHECK(a.append(s, tokens(1, 10), 3) == errc::out_of_blocks);
  CHECK(a.metrics().live_blocks == before.live_blocks);
  CHECK(group_table(a, s, 1) == ids{null_block, 3, 2});
  CHECK(a.check_consistency().empty());
}

// The cross-group hit: the full group bounds it, a sliding group shortens it where the blocks
// its first query reads were evicted; then the full group is cut to the shorter length.
TEST_CASE("hybrid: the prefix hit is what every group can serve") {
  hybrid_allocator<> a({.num_blocks = 12, .block_size = 4, .max_sequences = 3, .max_model_len = 32,
                        .groups = {full, sliding(5)}});  // sliding: a hit needs the last 1 block
  const sequence_id x = admit_all(a, tokens(16)).id;
  CHECK(group_table(a, x, 0) == ids{0, 1, 2, 3});
  CHECK(group_table(a, x, 1) == ids{4, 5, 6, 7});
  CHECK(a.free(x) == errc::ok);  // each group tail first: 3 2 1 0, then 7 6 5 4 (cached)
  // 17 tokens: 4 whole blocks may hit; both groups have them all. The sliding group's first
  // query, at 16, reads keys 12..16: only block 3 of it is taken.
  CHECK(a.cached_prefix_tokens(tokens(17)) == 16);
  const sequence_start y = a.create(tokens(17)).value();
  CHECK(y.cached_tokens == 16);
  CHECK(group_table(a, y.id, 0) == ids{0, 1, 2, 3});
  CHECK(group_table(a, y.id, 1) == ids{null_block, null_block, null_block, 7});
  CHECK(a.free(y.id) == errc::ok);
  // Unused now, in eviction order: free 8..11, then x's untouched 6 5 4, then y's 3 2 1 0 7.
  // A 12-token prompt of other tokens takes 8 9 10 | 11 6 5: the sliding chain loses its
  // blocks 2 and 1; the full chain keeps all four.
  const sequence_id z = admit_all(a, tokens(12, 100)).id;
  CHECK(group_table(a, z, 0) == ids{8, 9, 10});
  CHECK(group_table(a, z, 1) == ids{11, 6, 5});
  // 13 tokens: at most 3 blocks. Full: 3. Sliding at 12 needs chain block 2 (gone), at 8
  // block 1 (gone), at 4 block 0 (4, cached): 1 block. The full group is cut to it: 4 tokens.
  CHECK(a.cached_prefix_tokens(tokens(13)) == 4);
  CHECK(a.cached_prefix_tokens(tokens(17)) == 16);  // sliding at 16 needs block 3 (7): cached
  // The whole prompt would need 3 + 3 new blocks plus the 2 evictable hits: 8 > 6 unused.
  CHECK(a.create(tokens(13)).error() == errc::out_of_blocks);
  // Its first chunk of 1 token past the hit needs 1 + 1 plus the 2 hits: admitted.
  const sequence_start w = a.create(tokens(13), {.admit_tokens = 1}).value();
  CHECK(w.cached_tokens == 4);
  CHECK(group_table(a, w.id, 0) == ids{0});
  CHECK(group_table(a, w.id, 1) == ids{4});
  CHECK(a.check_consistency().empty());
}

TEST_CASE("hybrid: a sliding group's evicted window shortens the full group's hit") {
  hybrid_allocator<> a({.num_blocks = 10, .block_size = 4, .max_sequences = 3, .max_model_len = 32,
                        .groups = {full, sliding(8)}});  // sliding: a hit needs the last 2 blocks
  const sequence_id x = admit_all(a, tokens(16)).id;  // full 0..3, sliding 4..7
  // p = 16 sees [9, 16]: sliding blocks 0 and 1 (4, 5) leave, tail first: 5 then 4.
  CHECK(a.append(x, tokens(1, 17)) == errc::ok);
  CHECK(group_table(a, x, 0) == ids{0, 1, 2, 3, 8});
  CHECK(group_table(a, x, 1) == ids{null_block, null_block, 6, 7, 9});
  // Another sequence takes the two free... none are free: 4 and 5 are cached, evicted 5 first.
  const sequence_id y = admit_all(a, tokens(1, 100)).id;  // one block per group: 5 and 4
  CHECK(group_table(a, y, 0) == ids{5});
  CHECK(group_table(a, y, 1) == ids{4});
  // tokens(13): 3 whole blocks may hit. Full: 0, 1, 2 all held by x. Sliding at 12 reads
  // blocks 1 and 2 of the chain: block 1 (once 5) is gone, so 12 fails; at 8 it reads blocks
  // 0 and 1: gone; at 4, blocks [0, 1): gone too. No hit, though the full group has 12.
  CHECK(a.cached_prefix_tokens(tokens(13)) == 0);
  // tokens(17) again: 4 whole blocks. Sliding at 16 reads blocks 2, 3 (6, 7, held): 16.
  CHECK(a.cached_prefix_tokens(tokens(17)) == 16);
  CHECK(a.check_consistency().empty());
}

// Chunked local attention of C = 8 keys (Llama 4's local layers): a query at p reads the keys
// of its chunk, [p / 8 * 8, p].
TEST_CASE("hybrid: chunked local groups release whole chunks and hit from the chunk start") {
  hybrid_allocator<> a({.num_blocks = 16, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                        .groups = {full, chunked(8)}});
  const sequence_id x = admit_all(a, tokens(10)).id;  // full 0 1 2, chunked 3 4 5
  CHECK(a.append(x, tokens(1, 11)) == errc::ok);       // p = 10: chunk 8..15, blocks 0, 1 leave
  CHECK(group_table(a, x, 1) == ids{null_block, null_block, 5});
  CHECK(a.append(x, tokens(2, 12)) == errc::ok);       // p = 11, still chunk 1; 12 opens block 3
  REQUIRE(a.commit(x, 13) == errc::ok);
  CHECK(a.append(x, tokens(3, 14)) == errc::ok);       // p = 13: fills block 3
  CHECK(group_table(a, x, 0) == ids{0, 1, 2, 6});
  CHECK(group_table(a, x, 1) == ids{null_block, null_block, 5, 7});
  REQUIRE(a.commit(x, 16) == errc::ok);
  CHECK(a.append(x, tokens(1, 17)) == errc::ok);       // p = 16: chunk 16..23, 5 and 7 leave
  CHECK(group_table(a, x, 0) == ids{0, 1, 2, 6, 8});
  CHECK(group_table(a, x, 1) == ids{null_block, null_block, null_block, null_block, 9});
  // tokens(17): 4 whole blocks. Chunked at 16: the chunk starts at 16, nothing to read: a hit
  // of 16 with no chunked block; the full group has all 4.
  const sequence_start y = a.create(tokens(17)).value();
  CHECK(y.cached_tokens == 16);
  CHECK(group_table(a, y.id, 0) == ids{0, 1, 2, 6});
  CHECK(group_table(a, y.id, 1) == ids{null_block, null_block, null_block, null_block});
  // tokens(13): 3 whole blocks; chunked at 12 reads block 2 (its chunk starts at 8), cached
  // as 5 (released when x left that chunk): 12.
  CHECK(a.cached_prefix_tokens(tokens(13)) == 12);
  CHECK(a.check_consistency().empty());
}

// An engine runs on it: the block_allocator concept, with group 0's table as the staged one.
static_assert(check_block_allocator<hybrid_allocator<>>());
static_assert(check_block_allocator<hybrid_allocator<no_prefix_cache, free_stack>>());

// Block size 4, {full, sliding 8}, 12 blocks. A 6-token prompt takes 0 1 (full) and 2 3
// (sliding); its fork shares all four. The child's decode at p = 6 writes block 1 of each
// group, shared: each group copies its own (1 -> 4, then 3 -> 5). The parent's decode then
// finds its blocks private again and copies nothing.
TEST_CASE("hybrid: fork shares every group's blocks; an append copies the shared tail per group") {
  hybrid_allocator<> a({.num_blocks = 12, .block_size = 4, .max_sequences = 3, .max_model_len = 32,
                        .groups = {full, sliding(8)}});
  const sequence_id parent = admit_all(a, tokens(6)).id;
  const sequence_id child = a.fork(parent).value();
  CHECK(group_table(a, child, 0) == ids{0, 1});
  CHECK(group_table(a, child, 1) == ids{2, 3});
  CHECK(a.pool().ref_count(1) == 2);
  CHECK(a.live_blocks(0) == 2);
  CHECK(a.live_blocks(1) == 2);
  CHECK(a.append(child, tokens(1, 7)) == errc::ok);
  CHECK(group_table(a, child, 0) == ids{0, 4});
  CHECK(group_table(a, child, 1) == ids{2, 5});
  CHECK(group_table(a, parent, 0) == ids{0, 1});
  CHECK(group_table(a, parent, 1) == ids{2, 3});
  REQUIRE(a.copies().size() == 2);
  CHECK(a.copies()[0] == block_copy{1, 4});
  CHECK(a.copies()[1] == block_copy{3, 5});
  a.clear_copies();
  CHECK(a.append(parent, tokens(1, 7)) == errc::ok);
  CHECK(a.copies().empty());
  CHECK(a.metrics().cow_copies == 2);
  CHECK(a.live_blocks(0) == 3);  // 0 1 4
  CHECK(a.live_blocks(1) == 3);  // 2 3 5
  // The unqualified views are group 0's: what an engine stages.
  CHECK(ids(a.block_table(child).value().begin(), a.block_table(child).value().end()) == ids{0, 4});
  CHECK(a.block_tables().data == a.block_tables(0).data);
  std::vector<slot_id> slots(3);
  const slot_range r[] = {{child, 5, 2}};
  CHECK(a.slot_mapping(r, slots).value() == 2);
  CHECK(slots == std::vector<slot_id>{4 * 4 + 1, 4 * 4 + 2, -1});  // positions 5 and 6: block 4, its copy
  CHECK(a.fork(child).has_value());
  CHECK(a.fork(parent).error() == errc::too_many_sequences);
  CHECK(a.check_consistency().empty());
  REQUIRE(a.finish(parent) == errc::ok);
  CHECK(a.fork(parent).error() == errc::sequence_finished);
}

// Admission without a prompt (the scheduler's reservation check) and the most a request
// holds: block size 4, {full, sliding 8}.
TEST_CASE("hybrid: can_admit counts every group; blocks_held caps the windowed ones") {
  hybrid_allocator<> a({.num_blocks = 8, .block_size = 4, .max_sequences = 2, .max_model_len = 32,
                        .groups = {full, sliding(8)}});
  CHECK(a.max_model_len() == 32);
  CHECK(a.can_admit(16));   // 4 blocks in each group: 8 of 8
  CHECK(!a.can_admit(17));  // 5 + 5
  // One token per append: the sliding group holds at most ceil((1 + 7) / 4) + 1 = 3 blocks
  // (p = 12 reads keys 5..12 in blocks 1, 2, 3), the full group all 8.
  CHECK(a.blocks_held(32, 1) == 8 + 3);
  // All 32 at once: both groups take all 8 blocks in the one append.
  CHECK(a.blocks_held(32, 32) == 8 + 8);
  CHECK(a.blocks_held(6, 1) == 2 + 2);
}

TEST_CASE("hybrid: bad configuration is named") {
  using A = hybrid_allocator<>;
  CHECK_THROWS_WITH(A({.num_blocks = 8, .groups = {}}), "hybrid_config: groups is empty; a model has at least one attention group");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .groups = {full, sliding(0)}}),
                    "hybrid_config: groups[1].span = 0 must be a positive number of keys");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .groups = {{attention_kind::full, 4}}}),
                    "hybrid_config: groups[0].span = 4 must be 0 for full attention");
  CHECK_THROWS_WITH(A({.num_blocks = 8, .groups = {sliding(128), full, sliding(128)}}),
                    "hybrid_config: groups[2] repeats groups[0]; layers of one spec share a group");
  CHECK_THROWS_WITH(A({.num_blocks = 0, .groups = {full}}), "hybrid_config: num_blocks = 0 must be in [1, 2147483583]");
}

// Random traffic: creates with shared prefixes, prefill chunks, decodes with drafts, commits,
// frees (preemption when out of blocks). A fake device keeps one token per slot of each
// group; after every operation the allocator is consistent and every sequence reads back,
// through each group's table, the tokens that group's window still holds.
namespace {
template <class A>
struct hybrid_model {
  A& a;
  std::mt19937 rng;
  std::vector<std::vector<token_id>> kv;  // [group][slot]
  std::vector<attention_group> groups;
  struct seq {
    sequence_id id;
    std::vector<token_id> tokens, rest;
    std::vector<std::int32_t> first;  // per group: blocks before it left the window
  };

  // The model's own window rule: the first block a query at p reads in group g.
  std::int32_t window_start(std::size_t g, std::int32_t p) const {
    const attention_group& x = groups[g];
    if (x.kind == attention_kind::sliding_window) return std::max(0, p - x.span + 1) / a.block_size();
    if (x.kind == attention_kind::chunked_local) return p / x.span * x.span / a.block_size();
    return 0;
  }
  void moved_to(seq& s, std::int32_t p) {
    for (std::size_t g = 0; g < groups.size(); ++g) s.first[g] = std::max(s.first[g], window_start(g, p));
  }
  std::vector<seq> live;
  std::uint64_t hits = 0, preemptions = 0, steps = 0, forks = 0;

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  void write(const seq& s, std::int32_t first, std::int32_t n) {
    for (std::int32_t g = 0; g < a.num_groups(); ++g) {
      std::vector<slot_id> slots(static_cast<std::size_t>(n));
      const slot_range r[] = {{s.id, first, n}};
      REQUIRE(a.slot_mapping(g, r, slots).value() == n);
      for (std::int32_t i = 0; i < n; ++i) kv[g][static_cast<std::size_t>(slots[i])] = s.tokens[first + i];
    }
  }
  void check() {
    REQUIRE(a.check_consistency() == "");
    for (const seq& s : live)
      for (std::int32_t g = 0; g < a.num_groups(); ++g) {
        const auto t = a.block_table(s.id, g).value();
        const std::int32_t first = s.first[static_cast<std::size_t>(g)];
        for (std::int32_t k = 0; k < static_cast<std::int32_t>(t.size()); ++k)
          REQUIRE((t[static_cast<std::size_t>(k)] == null_block) == (k < first));  // exactly the window is held
        for (std::size_t p = static_cast<std::size_t>(first) * a.block_size(); p < s.tokens.size(); ++p) {
          const block_id b = t[p / a.block_size()];
          REQUIRE(kv[g][static_cast<std::size_t>(b) * a.block_size() + p % a.block_size()] == s.tokens[p]);
        }
      }
  }
  void fork() {
    seq& p = live[static_cast<std::size_t>(uniform(0, static_cast<int>(live.size()) - 1))];
    const auto r = a.fork(p.id);
    if (!r) {
      REQUIRE(r.error() == errc::too_many_sequences);
      return;
    }
    seq c = p;
    c.id = *r;
    live.push_back(std::move(c));
    ++forks;
  }
  // The copies an append asked for, on the fake device: a pair's blocks belong to one group,
  // and copying the other groups' slots of them too changes nothing they read.
  void copy_blocks() {
    for (const block_copy& c : a.copies())
      for (std::vector<token_id>& g : kv)
        for (std::int32_t i = 0; i < a.block_size(); ++i)
          g[static_cast<std::size_t>(c.dst) * a.block_size() + i] = g[static_cast<std::size_t>(c.src) * a.block_size() + i];
    a.clear_copies();
  }
  void preempt() {
    if (live.empty()) return;
    const std::size_t i = static_cast<std::size_t>(uniform(0, static_cast<int>(live.size()) - 1));
    REQUIRE(a.free(live[i].id) == errc::ok);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    ++preemptions;
  }
  void create(const std::vector<std::vector<token_id>>& stems) {
    std::vector<token_id> prompt = stems[static_cast<std::size_t>(uniform(0, 2))];
    for (int i = uniform(1, 10); i > 0; --i) prompt.push_back(uniform(0, 50));
    const auto r = a.create(prompt, {.admit_tokens = uniform(0, 1) ? 0 : uniform(1, 8)});
    if (!r) {
      REQUIRE((r.error() == errc::out_of_blocks || r.error() == errc::too_many_sequences));
      return preempt();
    }
    const auto cached = static_cast<std::size_t>(r->cached_tokens);
    REQUIRE(cached < prompt.size());
    hits += cached;
    live.push_back({r->id, {prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(cached)},
                    {prompt.begin() + static_cast<std::ptrdiff_t>(cached), prompt.end()},
                    std::vector<std::int32_t>(groups.size(), 0)});
    moved_to(live.back(), static_cast<std::int32_t>(cached));
  }
  void advance(seq& s) {
    std::vector<token_id> t;
    if (!s.rest.empty()) {
      const std::size_t n = std::min<std::size_t>(s.rest.size(), static_cast<std::size_t>(uniform(1, 9)));
      t.assign(s.rest.begin(), s.rest.begin() + static_cast<std::ptrdiff_t>(n));
    } else {
      t.push_back(uniform(0, 50));
    }
    const auto first = static_cast<std::int32_t>(s.tokens.size());
    const errc e = a.append(s.id, t, s.rest.empty() ? uniform(0, 2) : 0);
    if (e == errc::sequence_too_long) {
      REQUIRE(a.free(s.id) == errc::ok);
      live.erase(live.begin() + (&s - live.data()));
      return;
    }
    if (e == errc::out_of_blocks) return preempt();
    REQUIRE(e == errc::ok);
    copy_blocks();
    moved_to(s, first);
    s.tokens.insert(s.tokens.end(), t.begin(), t.end());
    if (!s.rest.empty()) s.rest.erase(s.rest.begin(), s.rest.begin() + static_cast<std::ptrdiff_t>(t.size()));
    write(s, first, static_cast<std::int32_t>(t.size()));
    REQUIRE(a.commit(s.id, static_cast<std::int32_t>(s.tokens.size())) == errc::ok);
    ++steps;
  }
};

template <class A>
void run_hybrid(std::uint32_t seed, std::vector<attention_group> groups) {
  A a({.num_blocks = 40, .block_size = 4, .max_sequences = 6, .max_model_len = 64, .groups = groups});
  hybrid_model<A> m{a, std::mt19937(seed), {}, groups, {}};
  m.kv.assign(static_cast<std::size_t>(a.num_groups()), std::vector<token_id>(40 * 4, -1));
  std::vector<std::vector<token_id>> stems;
  for (int i = 0; i < 3; ++i) stems.push_back(tokens(4 * (2 + 3 * i), 1000 * (i + 1)));
  for (int i = 0; i < 3000; ++i) {
    CAPTURE(seed, i);
    const int op = m.uniform(0, 9);
    if (op == 0 || m.live.empty()) m.create(stems);
    else if (op == 1) m.preempt();
    else if (op == 2) m.fork();
    else m.advance(m.live[static_cast<std::size_t>(m.uniform(0, static_cast<int>(m.live.size()) - 1))]);
    m.check();
  }
  CHECK(m.preemptions > 0);
  CHECK(m.steps > 1000);
  CHECK(m.forks > 0);
  if constexpr (A::cache_type::enabled) CHECK(m.hits > 0);
}
}  // namespace

TEMPLATE_TEST_CASE("hybrid: random traffic keeps every invariant", "", hybrid_allocator<>,
                   (hybrid_allocator<no_prefix_cache, free_stack>)) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    run_hybrid<TestType>(seed, {full, sliding(6)});
    run_hybrid<TestType>(seed, {sliding(13), full, chunked(8)});
    run_hybrid<TestType>(seed, {sliding(1), chunked(6)});
  }
}
