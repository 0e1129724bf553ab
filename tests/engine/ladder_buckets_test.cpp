// rungs' ladders and Gaudi grids as the engine's bucket spaces.
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/ladder.hpp>
#include <rungs/ladder/gaudi_buckets.hpp>

#include <catch2/catch.hpp>
#include <sstream>

#include "../ladder/gaudi_logs.hpp"  // the documents' serving configurations

using namespace rungs::engine;

namespace {
std::string str(const bucket& b) {
  std::ostringstream os;
  os << to_string(b.ph)[0] << b;
  return os.str();
}
batch_key decode_key(std::int64_t seqs, std::int64_t max_context = 1, std::int64_t blocks = 0) {
  return {.ph = phase::decode, .seqs = seqs, .tokens = seqs, .max_query = 1, .max_context = max_context, .blocks = blocks};
}
const char* no_env(const char*) { return nullptr; }
}  // namespace

TEST_CASE("ladder_buckets: vLLM's 67 capture sizes, looked up by the ladder's own table") {
  ladder_buckets<rungs::ladder> b(rungs::ladder{rungs::CaptureSizes::vllm(512)});
  static_assert(bucket_space<decltype(b)>);
  REQUIRE(b.size() == 67);
  auto i = b.find(decode_key(33));
  REQUIRE(i);
  CHECK(b.at(*i) == bucket{.dims = {40, 0, 0}, .rank = 1, .ph = phase::decode, .shape = {40, 40, 0}});
  CHECK(b.find(decode_key(512)) == std::optional<std::size_t>(66));
  CHECK_FALSE(b.find(decode_key(513)));  // above the top rung: eager
  // A mixed batch looks up by its tokens: 5 sequences with 60 new tokens pad to 64.
  CHECK(b.at(*b.find({.ph = phase::decode, .seqs = 5, .tokens = 60, .max_query = 40, .max_context = 90})).batch() == 64);
  CHECK_FALSE(b.find({.ph = phase::prompt, .seqs = 1, .tokens = 1}));  // another phase's batch
}

TEST_CASE("ladder_buckets over a static_ladder has a static size") {
  using space = ladder_buckets<rungs::static_ladder<rungs::CaptureSizes::vllm(512)>>;
  static_assert(static_bucket_space<space>);
  static_assert(space::static_size == 67);
  static_assert(!static_bucket_space<ladder_buckets<rungs::ladder>>);
  space s{{}};
  CHECK(s.at(*s.find(decode_key(3))).batch() == 4);
}

TEST_CASE("gaudi_buckets: the linear document's 24 prompt and 48 decode buckets") {
  const rungs::gaudi::serving_config serving = rungs_test::linear_doc();
  auto plan = rungs::gaudi::linear_buckets(rungs::gaudi::read_bucket_config(serving, rungs::gaudi::strategy::linear, no_env), serving);
  auto space = gaudi_buckets(plan);
  REQUIRE(space.size() == 72);
  CHECK(str(space.at(0)) == "p(1, 128)");
  CHECK(str(space.at(24)) == "d(1, 128)");
  // The document's example: 3 prompts of up to 412 tokens run as the (4, 512) prompt bucket,
  // then decode in the (4, 512) decode bucket until a sequence passes 512 tokens.
  auto p = space.find({.ph = phase::prompt, .seqs = 3, .tokens = 1100, .max_query = 412, .max_context = 412});
  REQUIRE(p);
  CHECK(str(space.at(*p)) == "p(4, 512)");
  CHECK(space.at(*p).shape == graph_shape{4, 2048, 512});
  auto d = space.find(decode_key(3, 413));
  REQUIRE(d);
  CHECK(str(space.at(*d)) == "d(4, 512)");
  CHECK(space.at(*d).shape == graph_shape{4, 4, 512});
  CHECK(str(space.at(*space.find(decode_key(3, 513)))) == "d(4, 640)");
  CHECK(str(space.at(*space.find(decode_key(2, 513)))) == "d(2, 640)");
  CHECK_FALSE(space.find(decode_key(5, 100)));     // more sequences than any bucket
  CHECK_FALSE(space.find(decode_key(1, 2049)));    // longer than any bucket
}

TEST_CASE("gaudi_buckets: the exponential document's 3-D buckets") {
  const rungs::gaudi::serving_config serving = rungs_test::exponential_doc();
  auto plan = rungs::gaudi::exponential_buckets(rungs::gaudi::read_bucket_config(serving, std::nullopt, no_env), serving);
  auto space = gaudi_buckets(plan);
  REQUIRE(space.size() == 36 + 42);
  // Decode buckets bound the KV blocks the whole batch reads: 3 sequences of 300, 200 and 700
  // tokens read 3 + 2 + 6 = 11 blocks: (4, 1, 128).
  auto d = space.find(decode_key(3, 700, 11));
  REQUIRE(d);
  CHECK(str(space.at(*d)) == "d(4, 1, 128)");
  CHECK(space.at(*d).shape == graph_shape{4, 4, 128 * 128});
  CHECK(str(space.at(*space.find(decode_key(1, 1024, 1500)))) == "d(1, 1, 1792)");
  // A prompt of 200 new tokens after a cached prefix of 2 blocks: (1, 256, 2), whose graph
  // holds 256 tokens of sequences up to 256 + 2 * 128 long.
  auto p = space.find({.ph = phase::prompt, .seqs = 1, .tokens = 200, .max_query = 200, .max_context = 456,
                       .max_prefix = 256, .blocks = 4});
  REQUIRE(p);
  CHECK(str(space.at(*p)) == "p(1, 256, 2)");
  CHECK(space.at(*p).shape == graph_shape{1, 256, 512});
}
