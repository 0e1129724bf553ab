#include <rungs/engine/batch.hpp>

#include <catch2/catch.hpp>
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
