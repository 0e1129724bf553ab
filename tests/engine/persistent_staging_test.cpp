// Persistent staging (include/rungs/engine/batch.hpp: padded_batch::update, batch_rows,
// upload_tracker) against the full restage, padded_batch::stage: exact hand-checked updates,
// changed ranges and row moves; random batches whose device copy, kept through the tracker's
// ranges only, must equal the staging after every step; and the engine driven at random through
// admissions, finishes, preemption by recompute, chunked prefill, bucket changes up and down,
// eager fallbacks, sliding-window releases and Gaudi grids under staging_policy::checked, which
// compares the persistent arrays with a full restage after every step.
#include <rungs/engine/batch.hpp>
#include <rungs/engine/engine.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/phased_buckets.hpp>
#include <rungs/kv/paged_allocator.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;
namespace kv = rungs::kv;

namespace {

using ints = std::vector<std::int32_t>;
using longs = std::vector<std::int64_t>;

template <class S>
auto vec(S s) {
  return std::vector<typename S::value_type>(s.begin(), s.end());
}

// Every array of `a` equals the full restage of `live` at the same shape.
void check_equals_restage(const padded_batch& a, std::span<const sequence> live, std::int64_t block_size,
                          std::int64_t query = 0) {
  padded_batch fresh;
  fresh.stage(live, a.seqs(), a.tokens(), a.width(), block_size, 0, query);
  CHECK(vec(a.token_ids()) == vec(fresh.token_ids()));
  CHECK(vec(a.positions()) == vec(fresh.positions()));
  CHECK(vec(a.slot_mapping()) == vec(fresh.slot_mapping()));
  CHECK(vec(a.query_start()) == vec(fresh.query_start()));
  CHECK(vec(a.seq_lens()) == vec(fresh.seq_lens()));
  CHECK(vec(a.block_tables()) == vec(fresh.block_tables()));
  CHECK(a.real_seqs() == fresh.real_seqs());
  CHECK(a.real_tokens() == fresh.real_tokens());
}

std::vector<index_range> ranges(const padded_batch& p) { return vec(p.changes().block_tables); }

}  // namespace

TEST_CASE("update writes what a decode step changed, and the ranges it wrote") {
  const std::int64_t bs = 4, width = 3;
  ints t1{11}, t2{21}, t3{31}, b1{3, 9}, b2{4}, b3{5, 6};
  std::vector<sequence> live{{.tokens = t1, .context = 5, .block_table = b1, .id = 1},
                             {.tokens = t2, .context = 2, .block_table = b2, .id = 2},
                             {.tokens = t3, .context = 7, .block_table = b3, .id = 3}};
  padded_batch p;
  upload_tracker device;
  p.update(live, 4, 4, width, bs);
  CHECK(vec(p.token_ids()) == ints{11, 21, 31, 0});
  CHECK(vec(p.positions()) == ints{5, 2, 7, 0});
  CHECK(vec(p.slot_mapping()) == longs{37, 18, 27, -1});  // 9*4+1, 4*4+2, 6*4+3
  CHECK(vec(p.query_start()) == ints{0, 1, 2, 3, 3});
  CHECK(vec(p.seq_lens()) == ints{6, 3, 8, 0});
  CHECK(vec(p.block_tables()) == ints{3, 9, 0, 4, 0, 0, 5, 6, 0, 0, 0, 0});
  // A first upload copies the whole view: 4 tokens x (4 + 4 + 8) + 5 x 4 + 4 x 4 + 12 x 4.
  CHECK(upload_tracker::bytes(device.plan(p)) == 64 + 20 + 16 + 48);

  SECTION("a steady decode step: one token, position, slot and length per row; a block entry where one is appended") {
    // example-begin steady-decode
    ints u1{12}, u2{22}, u3{32}, c3{5, 6, 7};
    live = {{.tokens = u1, .context = 6, .block_table = b1, .id = 1},
            {.tokens = u2, .context = 3, .block_table = b2, .id = 2},
            {.tokens = u3, .context = 8, .block_table = c3, .id = 3}};  // position 8 opens block 2
    p.update(live, 4, 4, width, bs);
    check_equals_restage(p, live, bs);  // what stage() would write, every element
    CHECK(p.changes().tokens == index_range{0, 3});
    CHECK(p.changes().seq_lens == index_range{0, 3});
    CHECK(p.changes().query_start.empty());
    CHECK(ranges(p) == std::vector<index_range>{{8, 9}});  // row 2, entry 2
    // The device copy takes 3 x (4 + 4 + 8) token bytes, 3 lengths and one block entry.
    CHECK(upload_tracker::bytes(device.plan(p)) == 48 + 12 + 4);
    // example-end steady-decode

    SECTION("a finished sequence's row taken by a new one: that row is rewritten, the others are not") {
      ints v1{13}, v4{41, 42}, v3{33}, b4{8};
      live = {{.tokens = v1, .context = 7, .block_table = b1, .id = 1},
              {.tokens = v4, .context = 0, .block_table = b4, .id = 4},
              {.tokens = v3, .context = 9, .block_table = c3, .id = 3}};
      p.update(live, 4, 4, width, bs);
      check_equals_restage(p, live, bs);
      CHECK(vec(p.query_start()) == ints{0, 1, 3, 4, 4});
      CHECK(p.changes().query_start == index_range{2, 5});
      CHECK(ranges(p) == std::vector<index_range>{{3, 4}});  // row 1, entry 0: block 8 for 4

      SECTION("a larger bucket re-pads only the rows it adds") {
        ints w1{14}, w4{43, 44}, w3{34}, d1{3, 9, 10};
        live = {{.tokens = w1, .context = 8, .block_table = d1, .id = 1},
                {.tokens = w4, .context = 2, .block_table = b4, .id = 4},
                {.tokens = w3, .context = 10, .block_table = c3, .id = 3}};
        device.plan(p);
        p.update(live, 8, 8, width, bs);
        check_equals_restage(p, live, bs);
        CHECK(p.changes().query_start == index_range{5, 9});  // rows 4 and below already held 4
        CHECK(ranges(p) == std::vector<index_range>{{2, 3}});
        // Tokens 0-3 changed, 4-7 were never copied; query_start 5-8 and seq_lens 4-7 likewise;
        // the block table: entry 2 and the 12 entries of rows 4-7.
        CHECK(upload_tracker::bytes(device.plan(p)) == 8 * 16 + 4 * 4 + (3 + 4) * 4 + (1 + 12) * 4);

        SECTION("and a smaller one leaves nothing stale for the next larger one") {
          ints x1{15};
          std::vector<sequence> one{{.tokens = x1, .context = 9, .block_table = d1, .id = 1}};
          p.update(one, 1, 1, width, bs);
          check_equals_restage(p, one, bs);
          p.update(one, 8, 8, width, bs);  // the same id at a context that did not advance: rewritten whole
          check_equals_restage(p, one, bs);
        }
      }
    }
  }

  SECTION("entries that left a sliding window are staged as block 0") {
    ints u1{12}, n1{kv::null_block, 9};
    std::vector<sequence> one{{.tokens = u1, .context = 6, .block_table = n1, .id = 1}};
    p.update(one, 4, 4, width, bs);
    check_equals_restage(p, one, bs);
    CHECK(vec(p.block_tables()).front() == 0);
    CHECK(ranges(p) == std::vector<index_range>{{0, 1}, {3, 4}, {6, 8}});  // row 0 entry 0; rows 1-2 cleared
  }

  SECTION("a null entry past the leading run, or at the block a new token writes, is refused") {
    const std::uint64_t before = p.version();
    ints u1{12}, mid{3, kv::null_block, 9}, at{kv::null_block, kv::null_block};
    std::vector<sequence> bad{{.tokens = u1, .context = 8, .block_table = mid, .id = 1}};
    CHECK_THROWS_WITH(p.update(bad, 4, 4, width, bs),
                      "sequence 0: block-table entry 1 is null; only a leading run of entries before the block of the "
                      "first new token (2) may be, the blocks that left a sliding window");
    std::vector<sequence> bad2{{.tokens = u1, .context = 6, .block_table = at, .id = 9}};
    CHECK_THROWS_WITH(p.stage(bad2, 4, 4, width, bs),
                      "sequence 0: block-table entry 1 is null; only a leading run of entries before the block of the "
                      "first new token (1) may be, the blocks that left a sliding window");
    // The refused update reset the batch: the next one rewrites everything, and the device
    // copy takes it whole.
    live[0].context = 5;
    p.update(live, 4, 4, width, bs);
    CHECK(p.version() > before + 1);
    check_equals_restage(p, live, bs);
    CHECK(upload_tracker::bytes(device.plan(p)) == 64 + 20 + 16 + 48);
  }

  SECTION("a new width moves every row") {
    ints u1{12}, u2{22}, u3{32}, c3{5, 6, 7};
    live = {{.tokens = u1, .context = 6, .block_table = b1, .id = 1},
            {.tokens = u2, .context = 3, .block_table = b2, .id = 2},
            {.tokens = u3, .context = 8, .block_table = c3, .id = 3}};
    p.update(live, 4, 4, 5, bs);
    check_equals_restage(p, live, bs);
    CHECK(ranges(p) == std::vector<index_range>{{0, 20}});
  }
}

TEST_CASE("batch_rows keeps rows, fills holes with new sequences, then condenses from the end") {
  using id = kv::sequence_id;
  const id a{0, 1}, b{1, 1}, c{2, 1}, d{3, 1}, e{4, 1}, b2{1, 2};
  batch_rows rows;
  auto order = [&](std::vector<id> keys) {
    auto o = rows.arrange(keys);
    std::vector<id> by_row;
    for (std::uint32_t k : o) by_row.push_back(keys[k]);
    return by_row;
  };
  CHECK(order({a, b, c, d}) == std::vector<id>{a, b, c, d});
  CHECK(order({d, a, c, e}) == std::vector<id>{a, e, c, d});  // b left: e takes its row
  CHECK(order({a, c}) == std::vector<id>{a, c});              // e, d left: c moves into row 1
  CHECK(order({b2, c, a}) == std::vector<id>{a, c, b2});      // slot 1 again, a new generation: a new row
  CHECK(order({c}) == std::vector<id>{c});                    // a and b2 left: c moves down to row 0
  CHECK(order({}) == std::vector<id>{});
}

TEST_CASE("random stagings: update equals the full restage, and a device copy kept by the changed ranges equals both") {
  std::mt19937 rng(20261127);
  auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::int64_t bs = 4;
  struct live_seq {
    std::uint64_t id;
    std::int64_t context;
    ints tokens, table;
  };
  std::vector<live_seq> seqs;
  std::uint64_t next_id = 1;
  std::int32_t next_block = 0;
  padded_batch p;
  upload_tracker tracker;
  // The device copy: large enough for every shape below; starts as garbage.
  std::vector<std::int32_t> d_tok(64, 77), d_pos(64, 77), d_qs(64, 77), d_len(64, 77), d_tab(64 * 16, 77);
  std::vector<std::int64_t> d_slot(64, 77);
  std::int64_t moved = 0, incremental = 0;
  for (int step = 0; step < 3000; ++step) {
    // Finish, preempt (a new id for the same blocks), admit, and advance the rest.
    for (std::size_t i = 0; i < seqs.size();) {
      const int roll = draw(0, 99);
      if (roll < 6) {
        seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (roll < 8) seqs[i].id = next_id++, seqs[i].context = 0;
      ++i;
    }
    if (seqs.size() < 6 && draw(0, 2) == 0) seqs.push_back({next_id++, draw(0, 8), {}, {}});
    if (draw(0, 9) == 0 && seqs.size() > 1) std::swap(seqs[0], seqs[seqs.size() - 1]);  // rows move
    for (live_seq& s : seqs) {
      s.tokens.assign(static_cast<std::size_t>(draw(0, 3) == 0 ? draw(1, 5) : 1), draw(1, 99));
      const std::int64_t length = s.context + static_cast<std::int64_t>(s.tokens.size());
      if (length > 40) s.context = 0;  // start over, as a new sequence
      if (s.context == 0) s.id = next_id++, s.table.clear();
      while (static_cast<std::int64_t>(s.table.size()) < blocks_for(s.context + static_cast<std::int64_t>(s.tokens.size()), bs))
        s.table.push_back(next_block++ % 1000);
      // A sliding window of 8 keys: leading blocks wholly before it turn null.
      for (std::int64_t k = 0; k < (s.context - 8 + 1) / bs && k < s.context / bs; ++k) s.table[static_cast<std::size_t>(k)] = kv::null_block;
      if (draw(0, 30) == 0 && !s.table.empty())  // copy-on-write of the block the first new token writes
        s.table[static_cast<std::size_t>(s.context / bs)] = next_block++ % 1000;
    }
    std::vector<sequence> live;
    std::int64_t tokens = 0;
    for (const live_seq& s : seqs) {
      live.push_back({.tokens = s.tokens, .context = s.context, .block_table = s.table, .id = s.id});
      tokens += static_cast<std::int64_t>(s.tokens.size());
    }
    const std::int64_t n_rows = std::max<std::int64_t>(static_cast<std::int64_t>(live.size()), draw(1, 8));
    const std::int64_t n_tokens = std::max(tokens, static_cast<std::int64_t>(draw(1, 40)));
    const std::int64_t width = draw(0, 4) == 0 ? 16 : 12;
    const std::uint64_t before = p.version();
    p.update(live, n_rows, std::max(n_tokens, n_rows), width, bs);
    REQUIRE(p.version() == before + 1);
    check_equals_restage(p, live, bs);
    const auto copies = tracker.plan(p);
    const staged_changes c = p.changes();
    incremental += copies.size() < 6 || c.block_tables.size() > 1 ? 1 : 0;
    for (const upload_tracker::copy& cp : copies) {
      auto apply = [&](auto& device, auto host) {
        for (std::int64_t i = cp.elements.from; i < cp.elements.to; ++i) device[static_cast<std::size_t>(i)] = host[static_cast<std::size_t>(i)];
      };
      switch (cp.what) {
        case upload_tracker::array::token_ids: apply(d_tok, p.token_ids()); break;
        case upload_tracker::array::positions: apply(d_pos, p.positions()); break;
        case upload_tracker::array::slot_mapping: apply(d_slot, p.slot_mapping()); break;
        case upload_tracker::array::query_start: apply(d_qs, p.query_start()); break;
        case upload_tracker::array::seq_lens: apply(d_len, p.seq_lens()); break;
        case upload_tracker::array::block_tables: apply(d_tab, p.block_tables()); break;
      }
    }
    auto prefix = [](const auto& device, auto host) {
      return std::equal(host.begin(), host.end(), device.begin());
    };
    REQUIRE(prefix(d_tok, p.token_ids()));
    REQUIRE(prefix(d_pos, p.positions()));
    REQUIRE(prefix(d_slot, p.slot_mapping()));
    REQUIRE(prefix(d_qs, p.query_start()));
    REQUIRE(prefix(d_len, p.seq_lens()));
    REQUIRE(prefix(d_tab, p.block_tables()));
    moved += static_cast<std::int64_t>(live.size());
    for (live_seq& s : seqs) s.context += static_cast<std::int64_t>(s.tokens.size());
  }
  CHECK(moved > 3000);
  CHECK(incremental > 1000);
}

namespace {

struct served {
  std::map<std::uint64_t, std::vector<kv::token_id>> outputs;
  engine_stats stats;
  rungs::serving::scheduler_stats scheduler;
  std::int64_t uploaded = 0, steps = 0;
};

// Random requests through an engine: arrivals at random steps, prompts and outputs of random
// length, a pool small enough to preempt, token budgets small enough to chunk prefills.
template <class Engine>
served serve_random(Engine& e, std::uint32_t seed, std::int32_t max_len) {
  std::mt19937 rng(seed);
  auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  row_sampler hook;
  served r;
  std::uint64_t next = 1;
  for (int step = 0; step < 400 || !e.idle_queues(); ++step) {
    if (step < 400)
      for (int a = draw(0, 2) == 0 ? draw(1, 3) : 0; a > 0; --a) {
        const std::int32_t prompt = draw(1, max_len / 2);
        const std::int32_t output = draw(1, max_len - prompt);
        e.submit({.id = next, .prompt = std::vector<kv::token_id>(static_cast<std::size_t>(prompt), static_cast<kv::token_id>(next % 50 + 1)),
                  .max_output_tokens = output});
        ++next;
      }
    if (e.idle_queues()) continue;
    const engine_step& s = e.step(hook);
    ++r.steps;
    r.uploaded += e.runner().backend().uploaded_bytes();
    if (s.ran())
      for (const auto& f : s.events->finished) r.outputs[f.id] = f.output;
    REQUIRE(step < 5000);
  }
  r.stats = e.stats();
  r.scheduler = e.scheduler().stats();
  return r;
}

// The same requests served with a full restage every step: the same tokens, and a device copy
// kept by the changed ranges copies less. The run went through preemption and replays.
void check_against_full(const served& checked, const served& full) {
  CHECK(checked.outputs == full.outputs);
  CHECK(checked.outputs.size() > 50);
  CHECK(checked.scheduler.preemptions > 0);
  CHECK(checked.stats.replays > 100);
  CHECK(checked.uploaded < full.uploaded);
}

}  // namespace

TEST_CASE("the engine's persistent staging equals a full restage after every step: a vLLM ladder, sliding window, preemption") {
  // Ladder 1, 2, 4, 8 of tokens: mixed steps of up to 12 tokens (chunked prefill) go above the
  // top eagerly; lazy capture runs each bucket eagerly twice first; a window of 6 keys releases
  // blocks; 24 blocks of 4 tokens for up to 8 sequences of up to 32 tokens preempt.
  auto run = [](staging_policy staging, std::int32_t window, std::uint32_t seed) {
    // A window frees blocks as sequences grow: a smaller pool still preempts.
    const std::int32_t blocks = window > 0 ? 12 : 24;
    toy_model model(tiny_model.block_size, blocks);
    engine<token_ladder, largest_first, lazy, kv::free_list_allocator, host_backend> e(
        token_ladder{{1, 2, 4, 8}},
        kv::free_list_allocator({.num_blocks = blocks, .block_size = tiny_model.block_size, .max_sequences = 8,
                                 .max_model_len = 32, .sliding_window = window}),
        host_backend(std::ref(model)),
        {.timing = lazy{.eager_uses = 2},
         .scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 12, .admit_whole_prompt = false},
         .routing = step_routing::single, .model = tiny_model, .staging = staging});
    return serve_random(e, seed, 32);
  };
  for (std::int32_t window : {0, 6}) {
    for (std::uint32_t seed : {1u, 2u, 3u}) {
      CAPTURE(window, seed);
      const served checked = run(staging_policy::checked, window, seed);  // throws at the first difference
      check_against_full(checked, run(staging_policy::full, window, seed));
      CHECK(checked.stats.eager_steps(eager_reason::above_top) > 0);
      CHECK(checked.stats.eager_steps(eager_reason::not_captured) > 0);
    }
  }
}

TEST_CASE("the engine's persistent staging equals a full restage after every step: Gaudi grids, failed captures") {
  // Prompt (bs x seq) and decode (bs x seq) grids routed by phase: widths 2, 4 and 8 blocks
  // change with the longest sequence; every third capture fails (eager); prompts of more than
  // 4 sequences or 32 tokens go above the grid.
  auto run = [](staging_policy staging, std::int32_t window, std::uint32_t seed) {
    const std::int32_t blocks = window > 0 ? 12 : 20;
    toy_model model(tiny_model.block_size, blocks);
    using space = phased_buckets<grid, grid>;
    host_backend::options sim{.simulate = simulated_capture{.fail = [](std::size_t i, const bucket&) {
      return i % 3 == 2 ? std::optional<std::string>("injected") : std::nullopt;
    }}};
    engine<space, by_phase<>, startup, kv::free_list_allocator, host_backend> e(
        space(grid{phase::prompt, {1, 2, 4}, {8, 16, 32}}, grid{phase::decode, {1, 2, 4, 8}, {8, 16, 32}}),
        kv::free_list_allocator({.num_blocks = blocks, .block_size = tiny_model.block_size, .max_sequences = 8,
                                 .max_model_len = 32, .sliding_window = window}),
        host_backend(std::ref(model), sim),
        {.scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 16, .admit_whole_prompt = false},
         .model = tiny_model, .staging = staging});
    return serve_random(e, seed, 32);
  };
  for (std::int32_t window : {0, 5}) {
    for (std::uint32_t seed : {4u, 5u}) {
      CAPTURE(window, seed);
      const served checked = run(staging_policy::checked, window, seed);
      check_against_full(checked, run(staging_policy::full, window, seed));
      CHECK(checked.stats.eager_steps(eager_reason::failed) > 0);
    }
  }
}

// A hybrid model's further groups' tables (backend.hpp, group_table_copy): the mirror a device
// copy equals, and the runs of entries an upload copies. 4 rows x width 3 in a mirror of 12
// entries per group; the staged batch has 2 real sequences.
TEST_CASE("group_table_copy writes a group's tables whole once, then only the entries that changed") {
  ints t1{11}, t2{21}, b1{3, 9}, b2{4};
  std::vector<sequence> live{{.tokens = t1, .context = 5, .block_table = b1, .id = 1},
                             {.tokens = t2, .context = 2, .block_table = b2, .id = 2}};
  padded_batch p;
  p.stage(live, 4, 4, 3, 4);
  ints g0a{3, 9}, g0b{4}, g1a{7, 8}, g1b{5};
  std::vector<std::span<const std::int32_t>> spans{g0a, g0b, g1a, g1b};
  const group_tables t{.groups = 2, .rows = 2, .tables = spans};
  group_table_copy copy(2, 4);
  ints mirror(12, -5);  // whatever the buffer held: the first write overwrites all of it
  using run = std::pair<std::int64_t, std::int64_t>;
  std::vector<run> runs;
  auto add = [&](std::int64_t at, std::int64_t n) { runs.emplace_back(at, n); };
  copy.write(mirror.data(), 12, p, t, "test", add);
  CHECK(runs == std::vector<run>{{0, 12}});
  CHECK(mirror == ints{7, 8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0});
  runs.clear();
  copy.write(mirror.data(), 12, p, t, "test", add);  // nothing changed
  CHECK(runs.empty());
  // Sequence 0's first block leaves the window (null: 0 on the device), sequence 1 gains one.
  g1a[0] = kv::null_block;
  ints g1b2{5, 6};
  spans[3] = g1b2;
  copy.write(mirror.data(), 12, p, t, "test", add);
  CHECK(runs == std::vector<run>{{0, 1}, {4, 1}});
  CHECK(mirror == ints{0, 8, 0, 5, 6, 0, 0, 0, 0, 0, 0, 0});
  // One sequence left: row 1's held entries go back to 0.
  runs.clear();
  p.stage(std::span<const sequence>(live).first(1), 4, 4, 3, 4);
  std::vector<std::span<const std::int32_t>> one{g0a, g1a};
  copy.write(mirror.data(), 12, p, group_tables{.groups = 2, .rows = 1, .tables = one}, "test", add);
  CHECK(runs == std::vector<run>{{3, 2}});
  CHECK(mirror == ints{0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // Another width moves every row: the whole mirror again.
  runs.clear();
  p.stage(std::span<const sequence>(live).first(1), 2, 4, 4, 4);
  copy.write(mirror.data(), 12, p, group_tables{.groups = 2, .rows = 1, .tables = one}, "test", add);
  CHECK(runs == std::vector<run>{{0, 12}});
  // Forgotten (a failed step): whole again.
  runs.clear();
  copy.forget();
  copy.write(mirror.data(), 12, p, group_tables{.groups = 2, .rows = 1, .tables = one}, "test", add);
  CHECK(runs == std::vector<run>{{0, 12}});
  // Real rows without their tables, and a batch past the mirror, are refused.
  CHECK_THROWS_WITH(copy.write(mirror.data(), 12, p, std::nullopt, "test", add),
                    "test: a step of 1 sequences was given no group tables (options::groups = 2; the engine stages "
                    "them through stage_groups)");
  p.stage(std::span<const sequence>(live).first(1), 4, 4, 4, 4);
  CHECK_THROWS_WITH(copy.write(mirror.data(), 12, p, group_tables{.groups = 2, .rows = 1, .tables = one}, "test", add),
                    "test: a staged batch of 4 rows x 4 entries outgrew its group tables (4 rows, 12 entries)");
}

// host_backend counts the further groups' entries as cuda_backend uploads them
// (cuda_backend_test's hybrid case): two backends run the same batches, one with
// options::groups = 2; the difference of their uploaded_bytes() is the group's bytes.
TEST_CASE("host_backend's uploaded_bytes counts a hybrid model's group tables as a device copy takes them") {
  auto forward = [](const host_step&) {};
  // `one` is never handed group tables (options::groups = 0: none staged, one group); `learn`
  // takes the count from stage_groups, so its captures count nothing of group 1.
  host_backend one(forward), two(forward, {.groups = 2}), learn(forward);
  const backend_setup setup{.slots = 1, .seqs = 4, .tokens = 4, .width = 3, .row_width = 1};
  one.setup(setup);
  two.setup(setup);
  learn.setup(setup);
  padded_batch dummy;
  dummy.stage({}, 4, 4, 3, 4);
  const bucket b{.dims = {4, 1, 1}};
  REQUIRE(one.capture(0, b, dummy).ok);
  REQUIRE(two.capture(0, b, dummy).ok);
  REQUIRE(learn.capture(0, b, dummy).ok);
  CHECK(two.uploaded_bytes() - one.uploaded_bytes() == 12 * 4);  // the capacity, all padding
  CHECK(learn.uploaded_bytes() == one.uploaded_bytes());
  ints t1{11}, t2{21}, b1{3, 9}, b2{4};
  std::vector<sequence> live{{.tokens = t1, .context = 5, .block_table = b1, .id = 1},
                             {.tokens = t2, .context = 2, .block_table = b2, .id = 2}};
  padded_batch p;
  p.stage(live, 4, 4, 3, 4);
  ints g1a{7, 8}, g1b{5};
  std::vector<std::span<const std::int32_t>> spans{b1, b2, g1a, g1b};
  auto step = [&](std::int64_t want, std::int64_t learned) {
    two.stage_groups(group_tables{.groups = 2, .rows = 2, .tables = spans});
    learn.stage_groups(group_tables{.groups = 2, .rows = 2, .tables = spans});
    one.replay(0, p);
    two.replay(0, p);
    learn.replay(0, p);
    CHECK(two.uploaded_bytes() - one.uploaded_bytes() == want);
    CHECK(learn.uploaded_bytes() - one.uploaded_bytes() == learned);
  };
  step(3 * 4, 12 * 4);  // over the capture's padding: 7, 8 and 5 (learn: the whole capacity)
  step(0, 0);           // unchanged
  g1a[0] = kv::null_block;
  step(4, 4);           // one entry
  CHECK_THROWS_WITH(two.stage_groups(group_tables{.groups = 3, .rows = 0, .tables = {}}),
                    "host_backend: the allocator stages 3 attention groups; options::groups = 2 (the forward reads that "
                    "many block tables)");
  CHECK_THROWS_WITH(host_backend(forward, {.groups = -1}),
                    "host_backend: options::groups = -1 must be at least 1, or 0 for the count stage_groups hands over");
}
