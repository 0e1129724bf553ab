#include <rungs/engine/batch.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

using namespace rungs::engine;

TEST_CASE("key_of summarises a live batch") {
  std::vector<std::int32_t> t1{5}, t2{6, 7, 8}, b{0, 1};
  std::vector<sequence> s{{t1, 4, b}, {t2, 2, b}};
  batch_key k = key_of(phase::prompt, s, 4);
  CHECK(k == batch_key{.ph = phase::prompt, .seqs = 2, .tokens = 4, .max_query = 3, .max_context = 5, .max_prefix = 4,
                       .blocks = 4});
}

TEST_CASE("stage pads sequences and tokens so padding never writes the cache") {
  std::vector<std::int32_t> t1{11}, t2{21, 22}, b1{3, 9}, b2{4};
  std::vector<sequence> s{{t1, 5, b1}, {t2, 0, b2}};
  padded_batch p;
  p.stage(s, 4, 6, 3, 4);
  CHECK(p.seqs() == 4);
  CHECK(p.tokens() == 6);
  CHECK(p.real_seqs() == 2);
  CHECK(p.real_tokens() == 3);
  using v = std::vector<std::int32_t>;
  using w = std::vector<std::int64_t>;
  CHECK(v(p.token_ids().begin(), p.token_ids().end()) == v{11, 21, 22, 0, 0, 0});
  CHECK(v(p.positions().begin(), p.positions().end()) == v{5, 0, 1, 0, 0, 0});
  // Position 5 of sequence 0 is in its second block (9): slot 9 * 4 + 1.
  CHECK(w(p.slot_mapping().begin(), p.slot_mapping().end()) == w{37, 16, 17, -1, -1, -1});
  CHECK(v(p.query_start().begin(), p.query_start().end()) == v{0, 1, 3, 3, 3});
  CHECK(v(p.seq_lens().begin(), p.seq_lens().end()) == v{6, 2, 0, 0});
  CHECK(v(p.block_tables().begin(), p.block_tables().end()) == v{3, 9, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0});
  batch_view view = p.view();
  CHECK(view.seqs == 4);
  CHECK(view.slot_mapping[5] == -1);

  // Restaging a smaller batch in the same buffers leaves no stale rows behind.
  p.stage(std::span<const sequence>(s).first(1), 4, 6, 3, 4);
  CHECK(w(p.slot_mapping().begin(), p.slot_mapping().end()) == w{37, -1, -1, -1, -1, -1});
  CHECK(v(p.seq_lens().begin(), p.seq_lens().end()) == v{6, 0, 0, 0});
}

TEST_CASE("stage rejects batches that do not fit or name blocks outside the pool") {
  std::vector<std::int32_t> t{1, 2, 3}, b{0};
  std::vector<sequence> s{{t, 0, b}, {t, 0, b}};
  padded_batch p;
  CHECK_THROWS_WITH(p.stage(s, 1, 8, 2, 4), "2 sequences do not fit 1 rows");
  CHECK_THROWS_WITH(p.stage(s, 2, 4, 2, 4), "6 tokens do not fit 4 rows");
  CHECK_THROWS_WITH(p.stage(s, 2, 8, 2, 2), "sequence 0: block table has 1 blocks; 3 tokens in blocks of 2 need 2");
  std::vector<std::int32_t> big{5};
  std::vector<sequence> far{{t, 0, big}};
  CHECK_THROWS_WITH(p.stage(far, 2, 8, 2, 4, 4), "sequence 0: block 5 is outside the pool [0, 4)");
  std::vector<std::int32_t> many(20, 1);
  std::vector<std::int32_t> five(5, 0);
  std::vector<sequence> wide{{many, 0, five}};
  CHECK_THROWS_WITH(p.stage(wide, 1, 32, 2, 4), "sequence 0: 20 tokens need 5 blocks, more than the 2 of this shape");
}

TEST_CASE("restaging in the same buffers gives exactly what a fresh batch stages, whatever came before") {
  // Random batches at random shapes and widths, some refused, staged one after another in one
  // padded_batch and each also in a fresh one: every array must be equal.
  std::mt19937 rng(20261124);
  auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  padded_batch reused;
  int refused = 0;
  for (int round = 0; round < 400; ++round) {
    const std::int64_t block_size = 4, width = draw(1, 6), seqs = draw(1, 5), tokens = draw(1, 12);
    const int n = draw(0, static_cast<int>(seqs));
    std::vector<std::vector<std::int32_t>> toks(static_cast<std::size_t>(n)), tables(static_cast<std::size_t>(n));
    std::vector<sequence> live;
    for (int i = 0; i < n; ++i) {
      toks[static_cast<std::size_t>(i)].assign(static_cast<std::size_t>(draw(1, 3)), draw(1, 99));
      const std::int64_t context = draw(0, 16);
      const std::int64_t needed = blocks_for(context + static_cast<std::int64_t>(toks[static_cast<std::size_t>(i)].size()), block_size);
      for (std::int64_t b = 0; b < needed; ++b) tables[static_cast<std::size_t>(i)].push_back(draw(0, 40));  // 40: sometimes outside the pool
      live.push_back({toks[static_cast<std::size_t>(i)], context, tables[static_cast<std::size_t>(i)]});
    }
    padded_batch fresh;
    bool fresh_ok = true, reused_ok = true;
    try {
      fresh.stage(live, seqs, tokens, width, block_size, 40);
    } catch (const std::invalid_argument&) {
      fresh_ok = false;
    }
    try {
      reused.stage(live, seqs, tokens, width, block_size, 40);
    } catch (const std::invalid_argument&) {
      reused_ok = false;
    }
    REQUIRE(fresh_ok == reused_ok);
    if (!fresh_ok) {
      ++refused;
      continue;
    }
    auto same = [](auto a, auto b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); };
    CHECK(same(fresh.token_ids(), reused.token_ids()));
    CHECK(same(fresh.positions(), reused.positions()));
    CHECK(same(fresh.slot_mapping(), reused.slot_mapping()));
    CHECK(same(fresh.query_start(), reused.query_start()));
    CHECK(same(fresh.seq_lens(), reused.seq_lens()));
    CHECK(same(fresh.block_tables(), reused.block_tables()));
    CHECK(fresh.shape() == reused.shape());
  }
  CHECK(refused > 0);
  CHECK(refused < 400);
}
