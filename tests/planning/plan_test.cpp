// rungs-plan simulate and fit, run in-process: outputs, bucket files and one-line errors.
#include <rungs/ladder/bucket_file.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../plan_support.hpp"
#include "command.hpp"
#include "json_line.hpp"
#include "ladder_args.hpp"

namespace {
using namespace rungs::plan::test;

const std::string data = RUNGS_TEST_DATA_DIR;
}  // namespace

TEST_CASE("rungs-plan fit: the exact ladder over a values file, and the comparison") {
  const std::string steps = data + "/steps.txt";
  const result r = plan({"fit", "--trace", steps, "--rungs", "3", "--explicit"});
  REQUIRE(r.status == 0);
  // Values 1 2 2 3 5 8 8 8 (37 rows): three rungs, the top at 8: {2, 5, 8} pads 1 + 2 = 3 rows
  // of 40 (7.5%); vLLM's 1 2 4 8 pads 1 + 3 = 4 of 41 (9.76%) with a rung more.
  CHECK(r.out.find("fitted ladder (3 rungs): 2 5 8\n") != std::string::npos);
  CHECK(r.out.find("padded 7.50%") != std::string::npos);
  CHECK(r.out.find("vllm (capture-sizes 8)                 4    9.76%") != std::string::npos);
  CHECK(r.out.find("fewest fitted rungs with at most vLLM's padding: 3") != std::string::npos);
  CHECK(r.out.find("vllm (capture-sizes 8)") != std::string::npos);
  CHECK(r.out.find("explicit 2,5,8\n") != std::string::npos);
  const result j = plan({"fit", "--trace", steps, "--rungs", "3", "--json"});
  CHECK(j.out.starts_with("{\"values\": 8, \"distinct\": 5, \"max\": 8, \"fitted\": {\"rungs\": [2, 5, 8], \"count\": 3, "
                          "\"padded_fraction\": 0.075"));
}

TEST_CASE("rungs-plan fit writes a bucket file the bucket-file reader and the LADDER parser take back") {
  const std::string file = "planning_fit_buckets.txt";
  const result r = plan({"fit", "--trace", data + "/steps.txt", "--rungs", "4", "--write-bucket-file", file, "--explicit"});
  REQUIRE(r.status == 0);
  const auto buckets = rungs::read_bucket_file<1>(file);
  std::vector<rungs::rung_t> rungs;
  for (const auto& b : buckets) rungs.push_back(b[0]);
  CHECK(rungs == std::vector<rungs::rung_t>{2, 3, 5, 8});
  const rungs::ladder l{rungs::Explicit<>{rungs}};
  CHECK(l.lookup(4).rung == 5);
  const std::string word = r.out.substr(r.out.rfind("explicit ") + 9);
  const std::vector<std::string_view> words{"explicit", std::string_view(word).substr(0, word.size() - 1)};
  CHECK(rungs::plan::parse_ladder(words) == l);
  std::remove(file.c_str());
}

TEST_CASE("rungs-plan fit on a simulated workload and on a 2-D grid") {
  const result r = plan({"fit", "--chat", "4", "--turns", "2", "--rungs", "4"});
  REQUIRE(r.status == 0);
  CHECK(r.out.starts_with("fit: "));
  CHECK(r.out.find("steps of a simulated workload (8 requests)") != std::string::npos);
  const std::string grid = "planning_grid_values.txt";
  {
    std::FILE* f = std::fopen(grid.c_str(), "w");
    std::fputs("1 100\n2 300\n4 120\n4 500\n", f);
    std::fclose(f);
  }
  const result g = plan({"fit", "--trace", grid, "--rungs", "2"});
  REQUIRE(g.status == 0);
  CHECK(g.out.find("fitted grid (") != std::string::npos);
  std::remove(grid.c_str());
}

TEST_CASE("rungs-plan simulate: the blog's experiment as a table and as JSON") {
  const result r = plan({"simulate", "--chat", "12"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("max waiting for KV blocks                       1\n") != std::string::npos);
  const result j = plan({"simulate", "--chat", "10", "--timing", "all", "--json", "--ladder", "capture-sizes", "64"});
  REQUIRE(j.status == 0);
  CHECK(j.out.find("\"timing\": \"startup\"") != std::string::npos);
  CHECK(j.out.find("\"timing\": \"idle\"") != std::string::npos);
  CHECK(j.out.find("\"max_waiting_for_blocks\": 0") != std::string::npos);
  const result t = plan({"simulate", "--trace", data + "/chat.csv", "--prefix-caching"});
  CHECK(t.status == 0);
  CHECK(t.out.starts_with("simulate: 3 requests;"));
  // vLLM v1's admission on the first chunk: the blog's 14 chats preempt 131 times, not 2.
  const result whole = plan({"simulate", "--chat", "14"});
  const result chunk = plan({"simulate", "--chat", "14", "--admit-first-chunk"});
  REQUIRE(chunk.status == 0);
  CHECK(chunk.out.find(", admission on the first chunk\n") != std::string::npos);
  CHECK(whole.out.find("preemptions                                     2\n") != std::string::npos);
  CHECK(chunk.out.find("preemptions                                   131\n") != std::string::npos);
}

TEST_CASE("rungs-plan simulate and fit: bad input is one line naming the flag and the rule, exit 2") {
  check_usage(plan({"simulate"}), "a workload is needed: --trace FILE or --chat N");
  check_usage(plan({"simulate", "--chat", "0"}), "--chat = 0 must be positive");
  check_usage(plan({"simulate", "--chat", "2", "--timing", "soon"}),
              "--timing = 'soon' is not one of startup, delayed, lazy, idle, all");
  check_usage(plan({"simulate", "--chat", "2", "--block-size", "24"}), "--block-size = 24 is not one of 8, 16, 32, 64, 128");
  check_usage(plan({"simulate", "--chat", "2", "--kv-memory", "7X"}),
              "--kv-memory = '7X' is not a size (bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)");
  check_usage(plan({"simulate", "--turns", "3"}),
              "--turns, --prompt-tokens, --output-tokens, --jitter, --think, --interval and --seed describe --chat's "
              "workload: add --chat N");
  check_usage(plan({"simulate", "--chat", "2", "--step-cost", "1,2"}),
              "--step-cost takes WEIGHTS_S,PER_TOKEN_S,PER_CONTEXT_TOKEN_S,EAGER_S (4 numbers), got 2");
  check_usage(plan({"simulate", "--chat", "2", "--ladder", "linear", "1", "0", "8"}),
              "linear ladder: step = 0 must be positive");
  check_usage(plan({"simulate", "--trace", data + "/steps.txt"}),
              data + "/steps.txt:2: unknown column '1' (a CSV trace starts with a header: "
                     "arrival,prompt_tokens,output_tokens[,conversation,turn,think,hash_ids], or Azure's "
                     "TIMESTAMP,ContextTokens,GeneratedTokens)");
  check_usage(plan({"simulate", "--chat", "2", "--plot", "out.svg"}), "--plot = 'out.svg' must name a .png file");
  check_usage(plan({"fit", "--trace", data + "/steps.txt"}), "fit needs exactly one budget: --rungs K or --graph-memory BYTES");
  check_usage(plan({"fit", "--trace", data + "/steps.txt", "--rungs", "0"}), "--rungs = 0 must be positive");
  check_usage(plan({"fit", "--trace", data + "/steps.txt", "--rungs", "2", "--top", "4"}),
              "ladder fit: top = 4 must not be below the largest value 8");
  check_usage(plan({"fit", "--trace", data + "/steps.txt", "--graph-memory", "1K"}),
              "ladder fit: graph memory = 1024 bytes does not hold the top rung's graph (25231360 bytes)");
}

namespace {
// One run's report from simulate --json.
rungs::cli::json simulate_json(std::initializer_list<std::string_view> args) {
  std::vector<std::string_view> v{"simulate", "--json"};
  v.insert(v.end(), args);
  std::ostringstream out, err;
  REQUIRE(rungs::plan::run(v, out, err) == 0);
  return rungs::cli::json::parse(out.str())["runs"][0];
}
}  // namespace

TEST_CASE("rungs-plan simulate: the eager steps' parts add up, in the table and in --json") {
  const rungs::cli::json r = simulate_json({"--chat", "14", "--graph-memory", "100MiB"});
  const std::int64_t eager = r["eager_steps"];
  CHECK(eager > 0);
  CHECK(r["eager_refused"].get<std::int64_t>() > 0);  // the 100 MiB budget refused most rungs
  CHECK(r["eager_not_captured"].get<std::int64_t>() + r["eager_above_top"].get<std::int64_t>() +
            r["eager_refused"].get<std::int64_t>() + r["eager_failed"].get<std::int64_t>() ==
        eager);
  const result t = plan({"simulate", "--chat", "14", "--graph-memory", "100MiB"});
  CHECK(t.out.find("  of which refused by the budget") != std::string::npos);
  CHECK(t.out.find("  of which failed captures") != std::string::npos);
}

TEST_CASE("rungs-plan simulate --order: smallest first captures the decode rungs a small budget holds") {
  const rungs::cli::json largest = simulate_json({"--chat", "14", "--graph-memory", "100MiB"});
  const rungs::cli::json smallest = simulate_json({"--chat", "14", "--graph-memory", "100MiB", "--order", "min-tokens"});
  // Largest first spends the budget on 512, 504, 496: every decode step (at most 14 tokens) runs eagerly.
  CHECK(largest["eager_steps"] == largest["steps"]);
  // Smallest first fits rungs 1, 2, 4 and 8 in the budget (4 x 24 MiB + 15 token rows x 8 KiB =
  // 96.1 MiB; rung 16 would need 24 MiB more): the decode steps of at most 8 sequences replay,
  // those of 9-14 sequences are refused by the budget.
  CHECK(smallest["graphs"] == 4);
  CHECK(smallest["graph_mib"] == 96.1);
  CHECK(smallest["eager_steps"].get<std::int64_t>() < largest["eager_steps"].get<std::int64_t>());
  CHECK(smallest["eager_refused"].get<std::int64_t>() > 0);
  CHECK(simulate_json({"--chat", "2", "--order", "ladder"})["steps"].get<std::int64_t>() > 0);
  const result r = plan({"simulate", "--chat", "2", "--order", "max-bs"});
  CHECK(r.out.find("rungs, captured max-bs)") != std::string::npos);
  check_usage(plan({"simulate", "--chat", "2", "--order", "random"}),
              "--order = 'random' is not one of largest-first, max-bs, min-tokens, ladder, by-phase");
}

TEST_CASE("rungs-plan simulate --no-chunked-prefill with the defaults: a step holds a whole prompt") {
  const result r = plan({"simulate", "--chat", "2", "--no-chunked-prefill"});
  CHECK(r.err == "");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("separate prefill steps") != std::string::npos);
  // Given explicitly, a too small budget is still refused.
  check_usage(plan({"simulate", "--chat", "2", "--no-chunked-prefill", "--max-num-batched-tokens", "2048"}),
              "--max-num-batched-tokens = 2048 must be at least --max-model-len = 8192 with --no-chunked-prefill");
}

TEST_CASE("rungs-plan simulate: values that would wrap, overflow or exhaust memory are refused") {
  check_usage(plan({"simulate", "--chat", "2", "--seed", "-1"}), "--seed = -1 must not be negative");
  check_usage(plan({"simulate", "--chat", "2", "--step-cost", "1e308,0,0,0"}), "--step-cost = 1e308 must lie in [0, 1e+06]");
  check_usage(plan({"simulate", "--chat", "2", "--step-cost", "inf,0,0,0"}), "--step-cost = 'inf' is not a number");
  check_usage(plan({"simulate", "--chat", "2", "--think", "nan"}), "--think = 'nan' is not a number");
  check_usage(plan({"simulate", "--chat", "2", "--graph-cost", "1e19,0"}),
              "--graph-cost = '1e19' is not a size (bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)");
  check_usage(plan({"simulate", "--chat", "2", "--graph-cost", "0,1000000000000000000"}),
              "--graph-cost: the graphs of the ladder's 67 rungs would take more than 2^63 - 1 bytes (BASE + PER_TOKEN x "
              "rung, summed)");
  check_usage(plan({"fit", "--trace", data + "/steps.txt", "--rungs", "2", "--graph-cost", "0,4611686018427387904"}),
              "--graph-cost: the graphs of the ladder's 4 rungs would take more than 2^63 - 1 bytes (BASE + PER_TOKEN x "
              "rung, summed)");
  check_usage(plan({"simulate", "--chat", "100000", "--turns", "100000"}),
              "--chat 100000 x --turns 100000 = 10000000000 requests; at most 1000000 are simulated");
  check_usage(plan({"simulate", "--chat", "2", "--prompt-tokens", "2147483647"}),
              "--prompt-tokens = 2147483647 is longer than --max-model-len = 8192: no turn could run");
  check_usage(plan({"simulate", "--chat", "2", "--chat", "3"}), "--chat given twice");
}

TEST_CASE("rungs-plan fit: a fitted grid is a Gaudi bucket file, a fitted ladder a LADDER file") {
  const std::string grid = "planning_fit_grid_values.txt", grid_file = "planning_fit_grid_buckets.txt";
  {
    std::FILE* f = std::fopen(grid.c_str(), "w");
    std::fputs("1 100\n2 300\n4 120\n4 500\n", f);
    std::fclose(f);
  }
  REQUIRE(plan({"fit", "--trace", grid, "--rungs", "2", "--write-bucket-file", grid_file}).status == 0);
  const result b = plan({"buckets", "--file", grid_file});
  CHECK(b.err == "");
  CHECK(b.status == 0);
  CHECK(b.out.find("prompt buckets [bs, query, num_blocks]: [(4, ") != std::string::npos);
  const std::string ladder_file = "planning_fit_ladder.txt";
  REQUIRE(plan({"fit", "--trace", data + "/steps.txt", "--rungs", "3", "--write-bucket-file", ladder_file}).status == 0);
  check_ok(plan({"range", "file", ladder_file}), "2 5 8\n");
  check_ok(plan({"lookup", "4", "file", ladder_file}), "5 (padding 1, 20.0%)\n");
  for (const std::string& f : {grid, grid_file, ladder_file}) std::remove(f.c_str());
}

TEST_CASE("rungs-plan simulate --dp: the lockstep against independent ranks, by hand (data_parallel_test's trace)") {
  const std::string path = "plan_dp_test.csv";
  {
    std::ofstream f(path);
    f << "arrival,prompt_tokens,output_tokens\n0,6,2\n0,3,4\n0,2,1\n";
  }
  const std::initializer_list<std::string_view> args = {"simulate", "--trace", path.c_str(), "--ladder", "explicit",
                                                         "4,8,16", "--step-cost", "0.01,0.002,0,0.005", "--capture-cost",
                                                         "0,0", "--graph-cost", "0,0", "--dp", "2"};
  const result r = plan(args);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("; 2 data-parallel ranks in lockstep\n") != std::string::npos);
  // 4 lockstep steps on 2 ranks; rank 0 runs 2 of them on padding only. Token rows: 8 4 4 4
  // per rank in lockstep; 8 4 (rank 0) and 4 4 4 4 (rank 1) independently. 7 output tokens
  // by 46 ms against 40 ms; request 2's first token at 16 ms against 10 (TTFT mean 16 against
  // (16 + 10 + 16) / 3 = 14 ms).
  CHECK(r.out.find("\ndata parallel: 2 ranks, 4 steps in lockstep (capture timing startup), against the same ranks "
                   "stepping independently\n"
                   "all ranks                            lockstep  independent      change\n"
                   "rank-steps                                  8            6          +2\n"
                   "  of which dummy (padding only)             2            0          +2\n"
                   "token rows computed                        40           28         +12\n"
                   "  of which padding (%)                  62.50        46.43      +16.07\n"
                   "padded sequence rows in replays            33           21         +12\n"
                   "last request done (s)                    0.05         0.04       +0.01\n"
                   "output tokens / s                       152.2        175.0       -22.8\n"
                   "TTFT mean (s)                           0.016        0.014      +0.002\n"
                   "TTFT p99 (s)                            0.016        0.016       0.000\n"
                   "ITL mean (ms)                           10.00        10.00        0.00\n"
                   "ITL p99 (ms)                            10.00        10.00        0.00\n"
                   "\nrank  requests  dummy steps  token rows  TTFT p99 (s)  ITL p99 (ms)  last done (s)\n"
                   "   0         2            2          20         0.016         10.00           0.05\n"
                   "   1         1            0          20         0.016         10.00           0.05\n") !=
        std::string::npos);
  std::vector<std::string_view> json_args(args);
  json_args.push_back("--json");
  std::ostringstream out, err;
  const result j{rungs::plan::run(json_args, out, err), out.str(), err.str()};
  REQUIRE(j.status == 0);
  CHECK(j.out.find("\"data_parallel\": {\"ranks\": 2, \"steps\": 4, \"lockstep\": {\"rank_steps\": 8, \"dummy_steps\": 2, "
                   "\"tokens_run\": 40, \"padded_percent\": 62.5, ") != std::string::npos);
  CHECK(j.out.find("\"independent\": {\"rank_steps\": 6, \"dummy_steps\": 0, \"tokens_run\": 28, ") != std::string::npos);
  CHECK(j.out.find("\"per_rank\": {\"requests\": [2, 1], \"dummy_steps\": [2, 0], \"tokens_run\": [20, 20], ") !=
        std::string::npos);
  CHECK(j.out.ends_with(", \"dp\": 2}\n"));
  check_usage(plan({"simulate", "--chat", "2", "--dp", "0"}), "--dp = 0 must be positive");
  check_usage(plan({"simulate", "--chat", "2", "--dp", "257"}), "--dp = 257 must be at most 256");
  check_usage(plan({"simulate", "--chat", "2", "--dp", "2", "--replicas", "2"}),
              "--dp N ranks share the trace as replicas do: give --dp or --replicas, not both");
  check_usage(plan({"simulate", "--chat", "2", "--dp", "2", "--no-chunked-prefill"}),
              "--dp: data-parallel ranks run one bucket per step in lockstep, which needs chunked prefill: leave out "
              "--no-chunked-prefill");
  check_usage(plan({"simulate", "--chat", "2", "--dp", "2", "--plot", "x.png"}),
              "--plot draws one replica's steps: leave out --dp");
  std::remove(path.c_str());
}

TEST_CASE("rungs-plan simulate and fit on Gaudi's grids and on vLLM V1's dispatch key") {
  // Two chats of one turn (150 prompt, 350 output tokens each, --jitter 0): one step prefills
  // both prompts, 349 steps decode both; every bucket is captured at startup, so none runs eagerly.
  const result g = plan({"simulate", "--chat", "2", "--turns", "1", "--jitter", "0", "--ladder", "gaudi-linear",
                         "--no-chunked-prefill"});
  REQUIRE(g.status == 0);
  CHECK(g.out.find("ladder gaudi-linear (Gaudi's prompt and decode grids, captured prompt min-tokens, decode max-bs)") !=
        std::string::npos);
  const rungs::cli::json gj = simulate_json({"--chat", "2", "--turns", "1", "--jitter", "0", "--ladder",
                                             "gaudi-exponential", "--no-chunked-prefill"});
  CHECK(gj["steps"].get<std::int64_t>() == 1 + 349);
  CHECK(gj["eager_steps"].get<std::int64_t>() == 0);

  const result d = plan({"simulate", "--chat", "2", "--turns", "1", "--jitter", "0", "--ladder", "vllm-v1", "512",
                         "--dispatch"});
  REQUIRE(d.status == 0);
  CHECK(d.out.find("ladder vllm-v1 512 (") != std::string::npos);
  CHECK(d.out.find("rungs, dispatch key, captured largest-first)") != std::string::npos);
  const rungs::cli::json dj =
      simulate_json({"--chat", "2", "--turns", "1", "--jitter", "0", "--ladder", "vllm-v1", "512", "--dispatch"});
  CHECK(dj["steps"].get<std::int64_t>() == 1 + 349);  // the 300 prompt tokens fit one 2048-token step
  CHECK(dj["eager_steps"].get<std::int64_t>() == 0);

  CHECK(plan({"fit", "--chat", "2", "--turns", "1", "--rungs", "4", "--ladder", "gaudi-linear"}).status == 0);

  check_usage(plan({"simulate", "--chat", "2", "--ladder", "gaudi-linear", "--dispatch"}),
              "--dispatch applies to 1-D ladders only; --ladder gaudi-linear has Gaudi's own grids");
  check_usage(plan({"simulate", "--chat", "2", "--ladder", "gaudi-file"}), "--ladder gaudi-file takes PATH (1 word), got 0");
  check_usage(plan({"simulate", "--chat", "2", "--ladder", "gaudi-cubic"}),
              "--ladder = 'gaudi-cubic' is not one of gaudi-linear, gaudi-exponential, gaudi-file");
  // The demo's names of the capture flags work here too.
  CHECK(plan({"simulate", "--chat", "2", "--capture-order", "max-bs", "--capture-timing", "lazy"}).status == 0);
}

// simulate_test's hybrid case at 4 KiB per token and layer (8 KV heads of 128, fp16): pages of
// 2 layers x 16 tokens = 128 KiB, 64 of them in 8 MiB. Peak 9 pages (1.125 MiB) against 7
// full blocks x 4 layers x 64 KiB (1.75 MiB); over the steps 309 pages against 229 x 2 full
// blocks' worth: 1 - 309 / 458 = 32.5% saved. --layers takes rungs-plan kv's spelling and
// presets; a pattern names its groups in the description.
TEST_CASE("rungs-plan simulate --layers: a hybrid model's KV against all-full attention") {
  const std::string file = "planning_hybrid_trace.csv";
  std::ofstream(file) << "arrival,prompt_tokens,output_tokens\n0,64,40\n";
  const result r = plan({"simulate", "--trace", file, "--layers", "full:2,sliding16:2", "--kv-heads", "8", "--head-dim",
                         "128", "--dtype", "fp16", "--kv-memory", "8MiB", "--watermark", "0"});
  REQUIRE(r.status == 0);
  CHECK(r.out.starts_with("simulate: 1 requests; 64 KV blocks of 16 tokens;"));
  CHECK(r.out.find("; layers full:2 sliding16:2\n") != std::string::npos);
  CHECK(r.out.find("peak KV held (MiB)                             1.1\n") != std::string::npos);
  CHECK(r.out.find("peak KV if every layer were full (MiB)         1.8\n") != std::string::npos);
  CHECK(r.out.find("KV saved vs all-full (%)                      32.5\n") != std::string::npos);
  const rungs::cli::json j = simulate_json({"--trace", file, "--layers", "full:2,sliding16:2", "--kv-heads", "8",
                                            "--head-dim", "128", "--kv-memory", "8MiB", "--watermark", "0"});
  CHECK(j["kv_saved_percent"] == 32.5);
  // Every layer full: no hybrid rows.
  const result full = plan({"simulate", "--trace", file, "--layers", "4", "--kv-heads", "8", "--head-dim", "128",
                            "--kv-memory", "8MiB", "--watermark", "0"});
  REQUIRE(full.status == 0);
  CHECK(full.out.find("KV saved") == std::string::npos);
  CHECK(full.out.starts_with("simulate: 1 requests; 32 KV blocks of 16 tokens;"));
  // The preset: gpt-oss-20b's 24 layers.
  CHECK(plan({"simulate", "--trace", file, "--layers", "gpt-oss-20b", "--kv-heads", "8", "--head-dim", "64"})
            .out.find("; layers full:12 sliding128:12\n") != std::string::npos);
  check_usage(plan({"simulate", "--trace", file, "--layers", "full:2,sliding16"}),
              "--layers: 'sliding16' is not KIND:LAYERS with KIND full, slidingW or chunkedC");
  check_usage(plan({"simulate", "--trace", file, "--layers", "sliding16:4"}),
              "simulate: the layer groups have no full-attention group; the saving is measured against its blocks");
  check_usage(plan({"simulate", "--trace", file, "--layers", "gpt-oss-20b", "--replicas", "2"}),
              "--layers with a pattern measures one replica's KV: leave out --replicas and --dp");
  std::remove(file.c_str());
}
