// rungs-plan's ladder commands, run in-process: exact stdout, stderr and exit status.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../plan_support.hpp"
#include "command.hpp"
#include "gaudi_logs.hpp"
#include "ladder_args.hpp"
#include "vllm_data.hpp"

namespace {
using namespace rungs::plan::test;

// Sets an environment variable for one scope (the planner reads VLLM_* itself).
struct scoped_env {
  std::string name;
  scoped_env(std::string n, const char* value) : name(std::move(n)) { ::setenv(name.c_str(), value, 1); }
  ~scoped_env() { ::unsetenv(name.c_str()); }
};

const std::string data = RUNGS_TEST_DATA_DIR;
}  // namespace

TEST_CASE("rungs-plan range prints the rungs on one line") {
  check_ok(plan({"range", "linear", "2", "32", "64"}), "2 4 8 16 32 64\n");
  check_ok(plan({"range", "linear", "128", "128", "512"}), "128 256 384 512\n");
  check_ok(plan({"range", "linear", "3", "32", "100"}), "3 6 12 24 32 64 96 100\n");
  check_ok(plan({"range", "exponential", "128", "128", "2048", "10"}), "128 256 384 512 640 768 896 1152 1536 2048\n");
  check_ok(plan({"range", "exponential", "128", "128", "5777", "14"}),
           "128 256 384 512 640 768 896 1024 1408 1792 2432 3328 4352 5888\n");
  check_ok(plan({"range", "capture-sizes", "64"}), "1 2 4 8 16 24 32 40 48 56 64\n");
  check_ok(plan({"range", "sglang", "24"}), "1 2 4 8 12 16 24\n");
  check_ok(plan({"range", "trtllm", "256"}),
           "1 2 4 8 16 24 32 40 48 56 64 72 80 88 96 104 112 120 128 192 256\n");
  check_ok(plan({"range", "vllm-v1", "288"}),
           "1 2 4 8 16 24 32 40 48 56 64 72 80 88 96 104 112 120 128 136 144 152 160 168 176 184 192 200 208 216 "
           "224 232 240 248 256 272 288\n");
  check_ok(plan({"range", "pow2", "1", "64"}), "1 2 4 8 16 32 64\n");
  check_ok(plan({"range", "explicit", "1,2,4,8,12"}), "1 2 4 8 12\n");
}

TEST_CASE("rungs-plan capture-sizes MAX is vLLM's ladder") {
  check_ok(plan({"capture-sizes", "64"}), "1 2 4 8 16 24 32 40 48 56 64\n");
  const result r = plan({"capture-sizes", "512"});
  std::ostringstream expected;
  expected << "1 2 4";
  for (int s = 8; s <= 512; s += 8) expected << " " << s;
  check_ok(r, expected.str() + "\n");
  check_ok(plan({"capture-sizes", "42"}), "1 2 4 8 16 24 32 40 42\n");
  check_usage(plan({"capture-sizes"}), "capture-sizes takes MAX (1 word), got 0");
  check_usage(plan({"capture-sizes", "0"}), "capture sizes: max = 0 must be positive");
}

TEST_CASE("rungs-plan capture-sizes --max-num-seqs: vLLM 0.33's defaults, every recorded case") {
  check_ok(plan({"capture-sizes", "--max-num-seqs", "3", "--max-num-batched-tokens", "8192"}), "1 2 3 4\n");
  check_ok(plan({"capture-sizes", "--max-num-seqs", "33", "--max-num-batched-tokens", "8192", "--spec-tokens", "1"}),
           "1 2 4 8 16 24 32 40 48 56 64 66 72 80 88 96 104 112 120 128\n");
  const auto cases = rungs_test::read_vllm_cases("vllm_0_33_capture_sizes.txt");
  REQUIRE(cases.size() == 462);
  for (const auto& c : cases) {
    INFO(c.line);
    const rungs::VllmCaptureSizes& v = c.config;
    const std::string n = std::to_string(v.max_num_seqs), t = std::to_string(v.max_num_batched_tokens),
                      k = std::to_string(v.spec_tokens), device = v.device == rungs::gpu_family::sm100 ? "sm100" : "sm90";
    const std::vector<std::string_view> args{"capture-sizes", "--max-num-seqs", n, "--max-num-batched-tokens", t,
                                             "--spec-tokens", k, "--device", device};
    std::ostringstream out, err, expected;
    for (std::size_t i = 0; i < c.sizes.size(); ++i) expected << (i ? " " : "") << c.sizes[i];
    expected << "\n";
    CHECK(rungs::plan::run(args, out, err) == 0);
    CHECK(err.str() == "");
    CHECK(out.str() == expected.str());
  }
}

TEST_CASE("rungs-plan capture-sizes --max-num-seqs: bad input is one line, status 2") {
  check_usage(plan({"capture-sizes", "--max-num-seqs", "8"}),
              "--max-num-batched-tokens is required with --max-num-seqs");
  check_usage(plan({"capture-sizes", "--max-num-batched-tokens", "64"}),
              "--max-num-seqs is required with --max-num-batched-tokens, --spec-tokens or --device");
  check_usage(plan({"capture-sizes", "64", "--max-num-seqs", "8", "--max-num-batched-tokens", "64"}),
              "capture-sizes takes MAX or --max-num-seqs, not both");
  check_usage(plan({"capture-sizes", "--max-num-seqs", "8", "--max-num-batched-tokens", "64", "--device", "sm80"}),
              "--device = 'sm80' is not one of sm90, sm100");
  check_usage(plan({"capture-sizes", "--max-num-seqs", "0", "--max-num-batched-tokens", "64"}),
              "--max-num-seqs = 0 must be positive");
  check_usage(plan({"capture-sizes", "--max-num-seqs", "8", "--max-num-batched-tokens", "64", "--spec-tokens", "-1"}),
              "--spec-tokens = -1 must not be negative");
  check_usage(plan({"capture-sizes", "--max-num-seqs", "3000000000", "--max-num-batched-tokens", "64"}),
              "vllm capture sizes: max_num_seqs = 3000000000 exceeds the largest supported rung 2147483647");
}

TEST_CASE("rungs-plan dispatch: the graphs of vLLM V1's dispatch key and their memory") {
  // Sizes 1 2 4 8 16; decode graphs at 2 4 8 tokens (1, 2, 4 requests of 2 tokens). Memory:
  // 8 graphs x 24 MiB + (14 + 31) token rows x 8 KiB = 192.3515625 MiB per LoRA case.
  check_ok(plan({"dispatch", "--max-num-seqs", "4", "--max-num-batched-tokens", "8192", "--spec-tokens", "1"}),
           "capture sizes: 1 2 4 8 16\n"
           "uniform-decode graphs: 3 (tokens 2 4 8)\n"
           "mixed graphs: 5 (tokens 1 2 4 8 16)\n"
           "LoRA cases: 1\n"
           "graphs: 8\n"
           "graph memory: 192.4 MiB (24 MiB + 8 KiB per token row, each graph)\n");
  check_ok(plan({"dispatch", "--max-num-seqs", "4", "--max-num-batched-tokens", "8192", "--spec-tokens", "1",
                 "--specialize-lora"}),
           "capture sizes: 1 2 4 8 16\n"
           "uniform-decode graphs: 3 (tokens 2 4 8)\n"
           "mixed graphs: 5 (tokens 1 2 4 8 16)\n"
           "LoRA cases: 2\n"
           "graphs: 16\n"
           "graph memory: 384.7 MiB (24 MiB + 8 KiB per token row, each graph)\n");
  // Without speculative decoding the decode graphs are the sizes up to max_num_seqs: 1 2 3.
  check_ok(plan({"dispatch", "--max-num-seqs", "3", "--max-num-batched-tokens", "8192"}),
           "capture sizes: 1 2 3 4\n"
           "uniform-decode graphs: 3 (tokens 1 2 3)\n"
           "mixed graphs: 4 (tokens 1 2 3 4)\n"
           "LoRA cases: 1\n"
           "graphs: 7\n"
           "graph memory: 168.1 MiB (24 MiB + 8 KiB per token row, each graph)\n");
  check_usage(plan({"dispatch", "--max-num-batched-tokens", "64"}),
              "--max-num-seqs is required with --max-num-batched-tokens, --spec-tokens or --device");
}

// vLLM's cudagraph modes on the sizes above (1 2 4 8 16, decode graphs at 2 4 8 tokens).
// Memory: 24 MiB per graph + 8 KiB per token row.
TEST_CASE("rungs-plan dispatch --mode and --batch: each mode's graph lists, and how one batch runs") {
  const std::vector<std::string_view> base{"dispatch", "--max-num-seqs", "4", "--max-num-batched-tokens", "8192",
                                           "--spec-tokens", "1"};
  const auto with = [&](std::initializer_list<std::string_view> more) {
    std::vector<std::string_view> v = base;
    v.insert(v.end(), more);
    std::ostringstream out, err;
    const int status = rungs::plan::run(v, out, err);
    return result{status, out.str(), err.str()};
  };
  // 3 graphs x 24 MiB + 14 token rows x 8 KiB = 72.109375 MiB.
  check_ok(with({"--mode", "full_decode_only"}),
           "capture sizes: 1 2 4 8 16\n"
           "uniform-decode graphs: 3 (tokens 2 4 8)\n"
           "mixed graphs: 0\n"
           "LoRA cases: 1\n"
           "graphs: 3\n"
           "graph memory: 72.1 MiB (24 MiB + 8 KiB per token row, each graph)\n"
           "mode: full_decode_only (uniform-decode graphs FULL, every other batch eager)\n");
  check_ok(with({"--mode", "none", "--batch", "3,6,2,0"}),
           "capture sizes: 1 2 4 8 16\n"
           "uniform-decode graphs: 0\n"
           "mixed graphs: 0\n"
           "LoRA cases: 1\n"
           "graphs: 0\n"
           "graph memory: 0.0 MiB (24 MiB + 8 KiB per token row, each graph)\n"
           "mode: none (no graphs: every batch eager)\n"
           "batch: 3 requests, 6 tokens, longest query 2, no prefill\n"
           "runtime mode: NONE\n"
           "graph: none\n"
           "padded shape: 3 requests, 6 tokens\n");
  // 5 graphs x 24 MiB + 31 token rows x 8 KiB = 120.2421875 MiB. Three uniform decodes of 2
  // tokens take the 8-token mixed graph (4 request rows).
  check_ok(with({"--mode", "piecewise", "--batch", "3,6,2,0"}),
           "capture sizes: 1 2 4 8 16\n"
           "uniform-decode graphs: 0\n"
           "mixed graphs: 5 (tokens 1 2 4 8 16)\n"
           "LoRA cases: 1\n"
           "graphs: 5\n"
           "graph memory: 120.2 MiB (24 MiB + 8 KiB per token row, each graph)\n"
           "mode: piecewise (mixed graphs PIECEWISE, uniform decodes on them)\n"
           "batch: 3 requests, 6 tokens, longest query 2, no prefill\n"
           "runtime mode: PIECEWISE\n"
           "graph: mixed\n"
           "padded shape: 4 requests, 8 tokens\n");
  // The default mode (full_and_piecewise): the listing is unchanged, the batch lines follow.
  // Two decodes of 2 tokens replay the (2, 2) FULL graph; two fresh 2-token prompts, the same
  // shape, take the 4-token PIECEWISE graph.
  const std::string listing =
      "capture sizes: 1 2 4 8 16\n"
      "uniform-decode graphs: 3 (tokens 2 4 8)\n"
      "mixed graphs: 5 (tokens 1 2 4 8 16)\n"
      "LoRA cases: 1\n"
      "graphs: 8\n"
      "graph memory: 192.4 MiB (24 MiB + 8 KiB per token row, each graph)\n";
  check_ok(with({"--batch", "2,4,2,0"}), listing +
                                             "batch: 2 requests, 4 tokens, longest query 2, no prefill\n"
                                             "runtime mode: FULL\n"
                                             "graph: uniform decode\n"
                                             "padded shape: 2 requests, 4 tokens\n");
  check_ok(with({"--batch", "2,4,2,1"}), listing +
                                             "batch: 2 requests, 4 tokens, longest query 2, with a prefill\n"
                                             "runtime mode: PIECEWISE\n"
                                             "graph: mixed\n"
                                             "padded shape: 4 requests, 4 tokens\n");
  check_ok(with({"--mode", "full_and_piecewise", "--batch", "1,17,17,1"}),
           listing +
               "mode: full_and_piecewise (uniform-decode graphs FULL, mixed graphs PIECEWISE)\n"
               "batch: 1 requests, 17 tokens, longest query 17, with a prefill\n"
               "runtime mode: NONE\n"
               "graph: none\n"
               "padded shape: 1 requests, 17 tokens\n");
  // FULL: the 5 mixed sizes as full graphs: 125829120 + 253952 bytes.
  check_ok(with({"--mode", "full", "--batch", "1,10,10,1", "--json"}),
           R"({"mode": "full", "capture_sizes": [1, 2, 4, 8, 16], )"
           R"("uniform_decode_graphs": {"runtime_mode": "NONE", "tokens": []}, )"
           R"("mixed_graphs": {"runtime_mode": "FULL", "tokens": [1, 2, 4, 8, 16]}, "lora_cases": 1, "graphs": 5, )"
           R"("graph_memory_bytes": 126083072, "batch": {"requests": 1, "tokens": 10, "max_query": 10, )"
           R"("prefill": true, "runtime_mode": "FULL", "graph": "mixed", "padded_requests": 4, "padded_tokens": 16}})"
           "\n");
  // 8 graphs x 24 MiB + 45 token rows x 8 KiB = 201326592 + 368640 bytes.
  check_ok(with({"--json"}),
           R"({"mode": "full_and_piecewise", "capture_sizes": [1, 2, 4, 8, 16], )"
           R"("uniform_decode_graphs": {"runtime_mode": "FULL", "tokens": [2, 4, 8]}, )"
           R"("mixed_graphs": {"runtime_mode": "PIECEWISE", "tokens": [1, 2, 4, 8, 16]}, "lora_cases": 1, )"
           R"("graphs": 8, "graph_memory_bytes": 201695232})"
           "\n");
  check_usage(with({"--mode", "FULL"}),
              "--mode = 'FULL' is not one of none, piecewise, full, full_decode_only, full_and_piecewise");
  check_usage(with({"--batch", "1,2"}),
              "--batch = '1,2' must be REQUESTS,TOKENS,MAX_QUERY,PREFILL (PREFILL 0 or 1)");
  check_usage(with({"--batch", "2,1,1,0"}),
              "--batch: tokens = 1 must be at least requests = 2 (every request has a new token)");
  check_usage(with({"--batch", "2,4,1,0"}),
              "--batch: max query = 1 must be in [ceil(tokens / requests), tokens - requests + 1] = [2, 3]");
  check_usage(with({"--batch", "2,4,2,2"}), "--batch prefill = 2 must be at most 1");
  check_usage(with({"--batch", "0,4,2,0"}), "--batch requests = 0 must be positive");
}

TEST_CASE("rungs-plan lookup: the rung and the padding, or eager") {
  check_ok(plan({"lookup", "33", "capture-sizes", "512"}), "40 (padding 7, 17.5%)\n");
  check_ok(plan({"lookup", "40", "capture-sizes", "512"}), "40 (padding 0, 0.0%)\n");
  check_ok(plan({"lookup", "513", "capture-sizes", "512"}), "eager\n");
  check_ok(plan({"lookup", "3", "linear", "2", "32", "64"}), "4 (padding 1, 25.0%)\n");
  check_ok(plan({"lookup", "1000", "linear", "100", "128", "1000"}), "1000 (padding 0, 0.0%)\n");
  // An empty batch runs no step: no rung (not the first rung at 100% padding).
  check_ok(plan({"lookup", "0", "pow2", "2", "8"}), "none (an empty batch runs nothing)\n");
  check_usage(plan({"lookup"}), "lookup needs N and a LADDER");
  check_usage(plan({"lookup", "-1", "capture-sizes", "8"}), "N = -1 must not be negative");
  check_usage(plan({"lookup", "3x", "capture-sizes", "8"}), "N = '3x' is not an integer");
  check_usage(plan({"lookup", "3"}), "missing LADDER (linear MIN STEP MAX | exponential MIN STEP MAX LIMIT | "
                                     "capture-sizes MAX | vllm-v1 MAX | sglang MAX | trtllm MAX | pow2 MIN MAX | "
                                     "explicit R1,R2,... | file PATH)");
}

TEST_CASE("bad LADDER words: one line, exit 2") {
  check_usage(plan({"range", "linear", "1", "0", "4"}), "linear ladder: step = 0 must be positive");
  check_usage(plan({"range", "linear", "8", "4", "2"}), "linear ladder: min = 8 must not exceed max = 2");
  check_usage(plan({"range", "exponential", "1", "1", "8", "0"}), "exponential ladder: limit = 0 must be positive");
  check_usage(plan({"range", "linear", "1", "2"}), "linear needs MIN STEP MAX (3 words), got 2");
  check_usage(plan({"range", "linear", "1", "x", "4"}), "linear STEP = 'x' is not an integer");
  check_usage(plan({"range", "linear", "1", "2", "4", "8"}), "unexpected '8' after linear ladder");
  check_usage(plan({"range", "geometric", "1"}),
              "unknown ladder 'geometric' (known: linear, exponential, capture-sizes, vllm-v1, sglang, trtllm, pow2, "
              "explicit, file)");
  check_usage(plan({"range", "explicit", "1,4,4"}),
              "explicit ladder: values[2] = 4 must be greater than values[1] = 4 (rungs are strictly increasing)");
  check_usage(plan({"range", "explicit", "1,,4"}), "explicit rung 2 = '' is not an integer");
  check_usage(plan({"range", "linear", "1", "1", "99999999999999999999"}),
              "linear MAX = '99999999999999999999' is out of range");
}

TEST_CASE("parse_ladder reports how many words it used, for commands with more arguments") {
  const std::vector<std::string_view> words{"linear", "2", "32", "64", "--trace", "t.txt"};
  std::size_t consumed = 0;
  const rungs::ladder l = rungs::plan::parse_ladder(words, consumed);
  CHECK(consumed == 4);
  CHECK(l.top() == 64);
  const std::vector<std::string_view> two{"sglang", "512", "exponential", "1", "1", "8", "4"};
  const rungs::ladder a = rungs::plan::parse_ladder(two, consumed);
  CHECK(consumed == 2);
  CHECK(rungs::plan::parse_ladder(std::span(two).subspan(consumed)).size() == 4);
  CHECK(a.size() == 52);
}

TEST_CASE("rungs-plan waste: padding over a trace") {
  check_ok(plan({"waste", "capture-sizes", "64", "--trace", data + "/trace.txt"}),
           "ladder: 11 rungs, 1 to 64\n"
           "batches: 6\n"
           "eager: 1\n"
           "real rows: 141\n"
           "padded rows: 8\n"
           "wasted: 5.4%\n"
           "eager rows: 100\n");
  check_ok(plan({"waste", "--trace", data + "/trace.txt", "explicit", "128"}),
           "ladder: 1 rung, 128 to 128\nbatches: 6\neager: 0\nreal rows: 241\npadded rows: 527\nwasted: 68.6%\n"
           "eager rows: 0\n");
  check_usage(plan({"waste", "capture-sizes", "64"}), "waste needs --trace FILE");
  check_usage(plan({"waste", "capture-sizes", "64", "--trace"}), "--trace needs a FILE");
  check_usage(plan({"waste", "capture-sizes", "64", "--trace", data + "/bad_trace.txt"}),
              "" + data + "/bad_trace.txt:3: batch size = 'x20' is not an integer");
  check_usage(plan({"waste", "capture-sizes", "64", "--trace", "/nonexistent/trace.txt"}),
              "--trace /nonexistent/trace.txt: cannot open: No such file or directory");
}

TEST_CASE("rungs-plan buckets reproduces the linear document's log") {
  check_ok(plan({"buckets", "--strategy", "linear", "--max-num-seqs", "4", "--block-size", "128"}),
           rungs_test::linear_doc_log());
}

TEST_CASE("rungs-plan buckets reproduces the exponential document's log") {
  check_ok(plan({"buckets", "--strategy", "exponential", "--max-num-seqs", "4", "--max-num-prefill-seqs", "1",
                 "--max-model-len", "1024", "--num-blocks", "5777", "--prefix-caching", "--max-num-batched-tokens",
                 "8192"}),
           rungs_test::exponential_doc_log());
  // Exponential is the default strategy, as in vLLM on Gaudi.
  check_ok(plan({"buckets", "--max-num-seqs", "4", "--max-num-prefill-seqs", "1", "--max-model-len", "1024",
                 "--num-blocks", "5777", "--prefix-caching"}),
           rungs_test::exponential_doc_log());
}

TEST_CASE("rungs-plan buckets --json") {
  const result r = plan({"buckets", "--strategy", "linear", "--max-num-seqs", "2", "--json"});
  auto pairs = [](int max_seq) {
    std::ostringstream os;
    for (int bs : {1, 2})
      for (int s = 128; s <= max_seq; s += 128) os << (bs == 1 && s == 128 ? "" : ", ") << "[" << bs << ", " << s << "]";
    return os.str();
  };
  check_ok(r, "{\"prompt\": [" + pairs(1024) + "], \"decode\": [" + pairs(2048) + "]}\n");
}

TEST_CASE("rungs-plan buckets reads the VLLM_* variables") {
  const scoped_env max("VLLM_PROMPT_SEQ_BUCKET_MAX", "512");
  const scoped_env bs("VLLM_DECODE_BS_BUCKET_MAX", "2");
  const scoped_env seq("VLLM_DECODE_SEQ_BUCKET_MAX", "256");
  check_ok(plan({"buckets", "--strategy", "linear", "--max-num-seqs", "4"}),
           "Prompt bucket config (min, step, max_warmup) bs:[1, 32, 4], seq:[128, 128, 512]\n"
           "Generated 12 prompt buckets [bs, seq]: [(1, 128), (1, 256), (1, 384), (1, 512), (2, 128), (2, 256), (2, 384), "
           "(2, 512), (4, 128), (4, 256), (4, 384), (4, 512)]\n"
           "Decode bucket config (min, step, max_warmup) bs:[1, 128, 2], seq:[128, 128, 256]\n"
           "Generated 4 decode buckets [bs, seq]: [(1, 128), (1, 256), (2, 128), (2, 256)]\n");
  {
    const scoped_env off("VLLM_EXPONENTIAL_BUCKETING", "false");  // selects linear without --strategy
    const result r = plan({"buckets", "--max-num-seqs", "4"});
    CHECK(r.status == 0);
    CHECK(r.out.rfind("Prompt bucket config (min, step, max_warmup) bs:", 0) == 0);
  }
  const scoped_env broken("VLLM_PROMPT_BS_BUCKET_STEP", "0");
  check_usage(plan({"buckets", "--strategy", "linear"}),
              "prompt bs buckets (VLLM_PROMPT_BS_BUCKET_*): linear ladder: step = 0 must be positive");
}

TEST_CASE("rungs-plan buckets from a bucket file") {
  const std::string listing =
      "Generated 7 prompt buckets [bs, query, num_blocks]: [(1, 256, 0), (1, 256, 4), (1, 256, 8), (1, 512, 0), "
      "(1, 512, 4), (1, 512, 8), (1, 2048, 0)]\n"
      "Generated 5 decode buckets [bs, query, num_blocks]: [(1, 1, 256), (1, 1, 384), (1, 1, 512), (32, 1, 512), "
      "(64, 1, 1024)]\n";
  check_ok(plan({"buckets", "--file", data + "/buckets.txt"}),
           "Reading buckets from file: " + data + "/buckets.txt\n" + listing);
  {
    const scoped_env file("VLLM_BUCKETING_FROM_FILE", (data + "/buckets.txt").c_str());
    check_ok(plan({"buckets"}), "Reading buckets from file: " + data + "/buckets.txt\n" + listing);
    check_ok(plan({"buckets", "--strategy", "file"}), "Reading buckets from file: " + data + "/buckets.txt\n" + listing);
  }
  check_usage(plan({"buckets", "--file", data + "/bad_buckets.txt"}),
              data + "/bad_buckets.txt:3:16: expected ',' or ')' after a value, found '0'");
  check_usage(plan({"buckets", "--strategy", "file"}),
              "the file strategy needs VLLM_BUCKETING_FROM_FILE to name a bucket file");
  check_usage(plan({"buckets", "--strategy", "linear", "--file", "x.txt"}),
              "--file needs --strategy file (got --strategy linear)");
}

TEST_CASE("rungs-plan buckets: bad arguments") {
  check_usage(plan({"buckets", "--block-size", "0"}), "--block-size = 0 must be positive");
  check_usage(plan({"buckets", "--block-size"}), "--block-size needs a value");
  check_usage(plan({"buckets", "--strategy", "uniform"}), "--strategy 'uniform' is not one of linear, exponential, file");
  check_usage(plan({"buckets", "--max-num-seq", "4"}), "buckets: unknown argument '--max-num-seq'");
}

TEST_CASE("the ladder commands are listed in the help") {
  const result r = plan({"--help"});
  CHECK(r.status == 0);
  for (const char* c : {"rungs-plan range LADDER", "rungs-plan capture-sizes MAX", "rungs-plan lookup N LADDER",
                        "rungs-plan waste LADDER --trace FILE", "rungs-plan buckets [--strategy"})
    CHECK(r.out.find(c) != std::string::npos);
}

TEST_CASE("every command answers --help with exit status 0, and the tool answers --version") {
  for (const rungs::plan::command& c : rungs::plan::commands()) {
    INFO(c.name);
    const result r = plan({c.name, "--help"});
    CHECK(r.status == 0);
    CHECK(r.err == "");
    CHECK(r.out.find("Usage: rungs-plan " + std::string(c.name)) != std::string::npos);
    CHECK(r.out.find("--help") != std::string::npos);
  }
  // The two the issue names: kv said "needs a value", range "unknown ladder".
  CHECK(plan({"kv", "--help"}).out.find("--kv-memory SIZE") != std::string::npos);
  CHECK(plan({"range", "--help"}).out.find("LADDER") != std::string::npos);
  const result v = plan({"--version"});
  check_ok(v, plan({"version"}).out);
  CHECK(v.out.starts_with("rungs-plan "));
  check_usage(plan({"--version", "x"}), "version takes no arguments");
}
