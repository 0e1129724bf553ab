#include <rungs/ladder/gaudi_buckets.hpp>

#include "gaudi_logs.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using namespace rungs::gaudi;
using namespace rungs_test;
using rungs::bucket;

namespace {
const char* no_env(const char*) { return nullptr; }

template <std::size_t D>
std::string listing(const rungs::bucket_grid<D>& g) {
  std::ostringstream os;
  print_bucket_list<D>(os, g.buckets());
  return os.str();
}

/// file_buckets() over a bucket file at `path` holding `text` (written, read, removed).
bucket_plan<3> plan_from_file(const std::string& path, const std::string& text, const serving_config& s = {}) {
  {
    std::ofstream f(path);
    f << text;
  }
  struct remover {
    const std::string& path;
    ~remover() { std::remove(path.c_str()); }
  } removed{path};
  bucket_config c;
  c.strategy = strategy::file;
  c.file = path;
  return file_buckets(c, s);
}

}  // namespace

TEST_CASE("linear strategy: the 24 prompt and 48 decode buckets of the linear document") {
  const auto plan = linear_buckets(read_bucket_config(linear_doc(), strategy::linear, no_env), linear_doc());
  CHECK(plan.prompt.size() == 24);
  CHECK(plan.decode.size() == 48);
  CHECK(listing(plan.prompt) == linear_prompt_log);
  CHECK(listing(plan.decode) == linear_decode_log);
  CHECK(plan.prompt_omitted == 0);
  std::ostringstream log;
  write_log(log, plan);
  CHECK(log.str() == linear_doc_log());
}

TEST_CASE("exponential strategy: the 36 prompt and 42 decode buckets of the exponential document") {
  const auto plan = exponential_buckets(read_bucket_config(exponential_doc(), std::nullopt, no_env), exponential_doc());
  CHECK(plan.prompt.size() == 36);
  CHECK(plan.decode.size() == 42);
  CHECK(listing(plan.prompt) == exponential_prompt_log);
  CHECK(listing(plan.decode) == exponential_decode_log);
  std::ostringstream log;
  write_log(log, plan);
  CHECK(log.str() == exponential_doc_log());
}

TEST_CASE("the exponential listing holds for every pool of 5761 to 5790 blocks and any budget >= 1024") {
  for (rungs::rung_t blocks : {5761, 5777, 5790}) {
    serving_config s = exponential_doc();
    s.num_blocks = blocks;
    s.max_num_batched_tokens = 1024;
    const auto plan = exponential_buckets(read_bucket_config(s, std::nullopt, no_env), s);
    CHECK(listing(plan.prompt) == exponential_prompt_log);
    CHECK(listing(plan.decode) == exponential_decode_log);
  }
  serving_config s = exponential_doc();
  s.num_blocks = 5760;  // 5760 / 128 = 45 exactly: the top rung would be 5760
  CHECK(listing(exponential_buckets(read_bucket_config(s, std::nullopt, no_env), s).decode) != exponential_decode_log);
}

TEST_CASE("the document's example batches land where the document says") {
  const auto plan = exponential_buckets(read_bucket_config(exponential_doc(), std::nullopt, no_env), exponential_doc());
  // 3 sequences decoding at 412 blocks -> (4, 1, 512); one finishes -> (2, 1, 512); past 512 -> (4, 1, 640).
  CHECK(plan.decode.lookup({3, 1, 412}).chosen == bucket<3>{4, 1, 512});
  CHECK(plan.decode.lookup({2, 1, 412}).chosen == bucket<3>{2, 1, 512});
  CHECK(plan.decode.lookup({4, 1, 513}).chosen == bucket<3>{4, 1, 640});
  CHECK(plan.decode.lookup({5, 1, 128}).eager());
  CHECK(plan.prompt.lookup({1, 412, 0}).chosen == bucket<3>{1, 512, 0});
  CHECK(plan.prompt.lookup({1, 200, 3}).chosen == bucket<3>{1, 256, 3});
  CHECK(plan.prompt.lookup({1, 900, 1}).eager());  // 1024 + 128 would exceed max_model_len
}

TEST_CASE("filters: token budget and model length") {
  serving_config s = exponential_doc();
  s.max_num_batched_tokens = 512;
  const auto plan = exponential_buckets(read_bucket_config(s, std::nullopt, no_env), s);
  for (const bucket<3>& b : plan.prompt.buckets()) CHECK(b[0] * (b[1] + b[2] * 128) <= 512);
  CHECK(plan.prompt.size() == 4 + 3 + 2 + 1);  // (1,128,0..3) (1,256,0..2) (1,384,0..1) (1,512,0)
  CHECK(plan.prompt_omitted == 36 - 10);

  serving_config no_prefix = exponential_doc();
  no_prefix.prefix_caching = false;
  const auto flat = exponential_buckets(read_bucket_config(no_prefix, std::nullopt, no_env), no_prefix);
  CHECK(listing(flat.prompt) ==
        "[(1, 128, 0), (1, 256, 0), (1, 384, 0), (1, 512, 0), (1, 640, 0), (1, 768, 0), (1, 896, 0), (1, 1024, 0)]");

  serving_config lin = linear_doc();
  lin.max_num_batched_tokens = 2048;
  lin.max_model_len = 768;
  const auto lp = linear_buckets(read_bucket_config(lin, strategy::linear, no_env), lin);
  for (const bucket<2>& b : lp.prompt.buckets()) CHECK((b[0] * b[1] <= 2048 && b[1] <= 768));
  CHECK(lp.prompt.size() == 6 + 6 + 4);
  CHECK(lp.prompt_omitted == 24 - 16);
  std::ostringstream log;
  write_log(log, lp);
  CHECK(log.str().find("Omitted 8 prompt buckets above the token budget (max_num_batched_tokens=2048) or "
                       "max_model_len (768)\n") != std::string::npos);
}

TEST_CASE("a bad range names the variables that set it") {
  serving_config s = linear_doc();
  bucket_config c = read_bucket_config(s, strategy::linear, no_env);
  c.decode_bs.step = 0;
  CHECK_THROWS_WITH(linear_buckets(c, s),
                    "decode bs buckets (VLLM_DECODE_BS_BUCKET_*): linear ladder: step = 0 must be positive");
  bucket_config e = read_bucket_config(s, strategy::exponential, no_env);
  e.decode_seq.limit = 0;
  CHECK_THROWS_WITH(exponential_buckets(e, s),
                    "decode block buckets (VLLM_DECODE_BLOCK_BUCKET_*): exponential ladder: limit = 0 must be positive");
}

TEST_CASE("file strategy: query 1 is decode, listings sorted and unique, JSON output") {
  const auto plan = plan_from_file(
      "rungs_gaudi_buckets_test.txt",
      "# sample\n(1, 2048, 0)\n(1, [256, 512], [0, 4])\n(64, 1, 1024)\n(32, 1, 512)\n(1, 1, 256)\n(1, 2048, 0)\n");
  CHECK(listing(plan.prompt) == "[(1, 256, 0), (1, 256, 4), (1, 512, 0), (1, 512, 4), (1, 2048, 0)]");
  CHECK(listing(plan.decode) == "[(1, 1, 256), (32, 1, 512), (64, 1, 1024)]");
  std::ostringstream log, json;
  write_log(log, plan);
  write_json(json, plan);
  CHECK(log.str() == "Reading buckets from file: rungs_gaudi_buckets_test.txt\n"
                     "Generated 5 prompt buckets [bs, query, num_blocks]: [(1, 256, 0), (1, 256, 4), (1, 512, 0), "
                     "(1, 512, 4), (1, 2048, 0)]\n"
                     "Generated 3 decode buckets [bs, query, num_blocks]: [(1, 1, 256), (32, 1, 512), (64, 1, 1024)]\n");
  CHECK(json.str() == "{\"prompt\": [[1, 256, 0], [1, 256, 4], [1, 512, 0], [1, 512, 4], [1, 2048, 0]], "
                      "\"decode\": [[1, 1, 256], [32, 1, 512], [64, 1, 1024]]}\n");
}

TEST_CASE("the buckets of a phase are counted before they are generated, against max_grid_buckets") {
  // Prefix caching with block size 1: one prompt bucket per context length. 7 batch sizes
  // (1 to 64) x the sum over the 22 query rungs q of (2097152 - q + 1) context lengths.
  const serving_config s{.block_size = 1, .max_model_len = 2097152, .num_blocks = 1024, .prefix_caching = true};
  const bucket_config c = read_bucket_config(s, std::nullopt, no_env);
  const rungs::ladder queries{rungs::Exponential{c.prompt_seq.min, c.prompt_seq.step, c.prompt_seq.max, c.prompt_seq.limit}};
  CHECK(queries.size() == 22);
  std::uint64_t contexts = 0;
  for (rungs::rung_t q : queries.rungs()) contexts += static_cast<std::uint64_t>(2097152 - q + 1);
  CHECK(contexts == 41943063);
  CHECK_THROWS_WITH(exponential_buckets(c, s),
                    "gaudi exponential buckets: prompt buckets = 293601441 exceeds the limit of 1048576 buckets "
                    "per grid (rungs::max_grid_buckets)");

  // Linear: 65536 x 65536 rungs would be 2^32 prompt buckets.
  serving_config big{.max_num_seqs = 65536, .max_model_len = 65536};
  bucket_config lc = read_bucket_config(big, strategy::linear, no_env);
  lc.prompt_bs = {1, 1, 65536, 0};
  lc.prompt_seq = {1, 1, 65536, 0};
  CHECK_THROWS_WITH(linear_buckets(lc, big),
                    "gaudi linear buckets: prompt buckets = 4294967296 exceeds the limit of 1048576 buckets per "
                    "grid (rungs::max_grid_buckets)");
  lc.prompt_bs = {1, 1, 4, 0};
  lc.decode_bs = {1, 1, 65536, 0};
  lc.decode_seq = {1, 1, 32, 0};
  CHECK_THROWS_WITH(linear_buckets(lc, big),
                    "gaudi linear buckets: decode buckets = 2097152 exceeds the limit of 1048576 buckets per "
                    "grid (rungs::max_grid_buckets)");
  // A budget that keeps few of the 2^32 candidates: only the kept ones are generated.
  lc.prompt_bs = {1, 1, 65536, 0};
  lc.decode_bs = {1, 1, 4, 0};
  big.max_num_batched_tokens = 4096;
  const auto kept = linear_buckets(lc, big);
  std::uint64_t expected = 0;  // seq <= 4096 / bs for each bs
  for (std::uint64_t b = 1; b <= 4096; ++b) expected += 4096 / b;
  CHECK(kept.prompt.size() == expected);
  CHECK(kept.prompt_omitted == 65536ull * 65536ull - expected);
}

TEST_CASE("counting the kept buckets agrees with filtering every candidate") {
  serving_config s{.max_num_seqs = 300, .block_size = 16, .max_model_len = 250, .max_num_batched_tokens = 1000,
                   .prefix_caching = true};
  bucket_config lc = read_bucket_config(s, strategy::linear, no_env);
  lc.prompt_bs = {1, 1, 300, 0};
  lc.prompt_seq = {1, 1, 300, 0};
  const auto lp = linear_buckets(lc, s);
  std::vector<bucket<2>> want;
  for (rungs::rung_t b = 1; b <= 300; ++b)
    for (rungs::rung_t q = 1; q <= 300; ++q)
      if (b * q <= 1000 && q <= 250) want.push_back({b, q});
  CHECK(std::vector<bucket<2>>(lp.prompt.buckets().begin(), lp.prompt.buckets().end()) == want);
  CHECK(lp.prompt_omitted == 300 * 300 - want.size());

  bucket_config ec = read_bucket_config(s, strategy::exponential, no_env);
  ec.prompt_bs = {1, 1, 64, 7};
  ec.prompt_seq = {16, 16, 400, 9};
  const auto ep = exponential_buckets(ec, s);
  std::vector<bucket<3>> want3;
  std::size_t candidates = 0;
  const rungs::ladder bs{rungs::Exponential{1, 1, 64, 7}}, queries{rungs::Exponential{16, 16, 400, 9}};
  for (rungs::rung_t b : bs.rungs())
    for (rungs::rung_t q : queries.rungs()) {
      const rungs::rung_t max_ctx = q <= 250 ? (250 - q) / 16 : 0;
      for (rungs::rung_t ctx = 0; ctx <= max_ctx; ++ctx, ++candidates)
        if (b * (q + ctx * 16) <= 1000 && q <= 250) want3.push_back({b, q, ctx});
    }
  CHECK(std::vector<bucket<3>>(ep.prompt.buckets().begin(), ep.prompt.buckets().end()) == want3);
  CHECK(ep.prompt_omitted == candidates - want3.size());
  CHECK(want3.size() > 10);
}

TEST_CASE("a 3-D bucket whose tokens pass int64 is an error, from a file or a Gaudi configuration") {
  CHECK_THROWS_WITH(plan_from_file("rungs_gaudi_overflow_test.txt", "(2147483647, 2147483647, 2147483647)\n",
                                   {.block_size = 128}),
                    "bucket grid: buckets[0] = (2147483647, 2147483647, 2147483647) with block_size 128 processes "
                    "more than 2^63 - 1 tokens (batch * (query + context_blocks * block_size) must fit 64 bits)");
  // Block size 2^30 with 2^20 KV blocks: decode bucket (8, 1, 2^30) needs 8 * (1 + 2^60) tokens.
  const serving_config g{.block_size = 1 << 30, .num_blocks = 1 << 20};
  CHECK_THROWS_WITH(exponential_buckets(read_bucket_config(g, std::nullopt, no_env), g),
                    "bucket grid: buckets[7] = (8, 1, 1073741824) with block_size 1073741824 processes more than "
                    "2^63 - 1 tokens (batch * (query + context_blocks * block_size) must fit 64 bits)");
}
