// rungs-plan prefix-cache and the trace options of simulate, run in-process.
#include <catch2/catch.hpp>

#include <rungs/kv/capacity.hpp>
#include <rungs/planning/cost_model.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../plan_support.hpp"
#include "command.hpp"
#include "json_line.hpp"

namespace {
using namespace rungs::plan::test;

// Six requests of whole 512-token id blocks (prefix_study_test's hand-checked case).
std::string mooncake_file() {
  const std::string path = "plan_prefix_test.jsonl";
  std::ofstream f(path);
  for (const char* r : {"1024, \"output_length\": 1, \"hash_ids\": [1, 2]", "1024, \"output_length\": 1, \"hash_ids\": [1, 3]",
                        "1024, \"output_length\": 1, \"hash_ids\": [1, 2]", "1536, \"output_length\": 1, \"hash_ids\": [4, 5, 6]",
                        "512, \"output_length\": 1, \"hash_ids\": [4]", "1024, \"output_length\": 1, \"hash_ids\": [1, 3]"})
    f << "{\"timestamp\": 0, \"input_length\": " << r << "}\n";
  return path;
}
}  // namespace

TEST_CASE("rungs-plan prefix-cache: the table, --json, and its errors") {
  const std::string trace = mooncake_file();
  check_ok(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "1536,51200"}),
           "prefix-cache: " + trace + ": 6 requests, blocks of 512 tokens\n"
           "capacity tokens      blocks  hit rate    hit blocks     looked up      hit tokens   evictions  too large\n"
           "           1536           3    44.44%             4             9            2048           2          1\n"
           "          51200         100    50.00%             6            12            3072           0          0\n");
  check_ok(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "51200", "--block-size", "16", "--json"}),
           "[{\"capacity_tokens\": 51200, \"hit_rate\": 0.5, \"block_size\": 16, \"blocks\": 3200, \"hit_blocks\": 192, "
           "\"looked_up_blocks\": 384, \"hit_tokens\": 3072, \"prompt_tokens\": 6144, \"requests\": 6, \"too_large\": 0, "
           "\"evictions\": 0}]\n");
  check_usage(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "100"}),
              "prefix cache study: capacity = 100 tokens holds no block of 512");
  check_usage(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "0"}), "--capacity-tokens = 0 must be positive");
  check_usage(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "1000", "--trace-format", "azure"}),
              "--trace: " + trace + ":1: an Azure trace is CSV, not JSON lines");
  std::remove(trace.c_str());
}

TEST_CASE("rungs-plan prefix-cache --tiers: hits per tier, what they save and what they load") {
  // The case above: 4 hit blocks at 1536 tokens, 6 at 51200, of 12 looked up. A top tier of
  // 1536 tokens and a second of 49664 (51200 together) serve 4 and 2. Llama-3-8B on an H100:
  // 131072 KV bytes a token; prefill (2 x 7504658432 + 4 x 32 x 128 x 32) / 989e12 s a token.
  const std::string trace = mooncake_file();
  const double prefill = (2.0 * 7'504'658'432 + 4.0 * 32 * 128 * 32) / 989e12;
  const result j = plan({"prefix-cache", "--trace", trace, "--tiers", "hbm:1536,dram:49664:1e9", "--gpu", "h100-sxm", "--model",
                         "llama-3-8b", "--json"});
  REQUIRE(j.status == 0);
  const auto doc = rungs::cli::json::parse(j.out);
  CHECK(doc["hit_rate"] == 0.5);
  CHECK(doc["looked_up_blocks"] == 12);
  CHECK(doc["kv_bytes_per_token"] == 131072);
  CHECK(doc["prefill_seconds_per_token"].get<double>() == Approx(prefill));
  const auto& hbm = doc["tiers"][0];
  const auto& dram = doc["tiers"][1];
  CHECK(hbm["hit_blocks"] == 4);
  CHECK(hbm["hit_tokens"] == 2048);
  CHECK(hbm["load_seconds"] == 0.0);
  CHECK(hbm["prefill_seconds_saved"].get<double>() == Approx(2048 * prefill));
  CHECK(dram["hit_blocks"] == 2);
  CHECK(dram["hit_rate"].get<double>() == Approx(2.0 / 12));
  CHECK(dram["load_seconds"].get<double>() == Approx(1024 * 131072 / 1e9));
  CHECK(dram["net_seconds"].get<double>() == Approx(1024 * prefill - 1024 * 131072 / 1e9));
  check_ok(plan({"prefix-cache", "--trace", trace, "--tiers", "hbm:1536,dram:49664:1e9", "--gpu", "h100-sxm", "--model",
                 "llama-3-8b"}),
           "prefix-cache: " + trace + ": 6 requests, blocks of 512 tokens; 131072 KV bytes and 15.18 us of prefill per "
           "token (h100-sxm, llama-3-8b, tp 1)\n"
           "tier          capacity tokens  hit rate   hit tokens  load s  prefill saved s   net s  net per request ms\n"
           "hbm                      1536   33.33%         2048     0.0              0.0     0.0                5.18\n"
           "dram                    49664   16.67%         1024     0.1              0.0    -0.1              -19.78\n"
           "all tiers: hit rate 50.00% of 12 looked-up blocks; 0 requests larger than the whole cache\n");
  check_usage(plan({"prefix-cache", "--trace", trace, "--tiers", "hbm:1536,dram:49664", "--gpu", "h100-sxm", "--model",
                    "llama-3-8b"}),
              "--tiers: 'dram:49664' must be NAME:TOKENS:BYTES_PER_S");
  check_usage(plan({"prefix-cache", "--trace", trace, "--tiers", "hbm:1536"}),
              "--tiers prices loads and prefill with the roofline: add --gpu NAME --model NAME");
  check_usage(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "1536", "--gpu", "h100-sxm"}),
              "--gpu, --model, --tp and --cost-profile price the tiers of --tiers: add --tiers");
  check_usage(plan({"prefix-cache", "--trace", trace, "--capacity-tokens", "1536", "--tiers", "hbm:1536"}),
              "--capacity-tokens excludes --tiers");
  check_usage(plan({"prefix-cache", "--trace", trace}), "--capacity-tokens or --tiers is needed");
  std::remove(trace.c_str());
}

TEST_CASE("rungs-plan simulate --tiers: hits per tier, their load, TTFT percentiles") {
  // simulate_tiers_test's first case through the command line: requests of 33 tokens from id
  // blocks 1, 2, 1, a second apart, on a pool of 4 blocks of 16 (32 KV bytes a token); the
  // third finds one block in the pool and one in dram, loaded in 512 / 51200 s = 10 ms.
  const std::string trace = "plan_tiers_test.jsonl";
  {
    std::ofstream f(trace);
    for (const char* r : {"0, \"input_length\": 33, \"output_length\": 1, \"hash_ids\": [1]",
                          "1000, \"input_length\": 33, \"output_length\": 1, \"hash_ids\": [2]",
                          "2000, \"input_length\": 33, \"output_length\": 1, \"hash_ids\": [1]"})
      f << "{\"timestamp\": " << r << "}\n";
  }
  auto args = [&trace](std::string tiers, std::vector<std::string_view> more = {}) {
    static std::vector<std::string> keep;
    keep.push_back(std::move(tiers));
    std::vector<std::string_view> a = {"simulate", "--trace", trace, "--prefix-caching", "--kv-memory", "2048", "--layers", "1",
                                       "--kv-heads", "1", "--head-dim", "8", "--dtype", "fp16", "--watermark", "0",
                                       "--max-model-len", "64", "--ladder", "explicit", "4,8,16", "--step-cost",
                                       "0.01,0.002,0,0.005", "--capture-cost", "0,0", "--graph-cost", "0,0"};
    if (!keep.back().empty()) {
      a.push_back("--tiers");
      a.push_back(keep.back());
    }
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  auto plan_with = [](const std::vector<std::string_view>& a) {
    std::ostringstream out, err;
    const int status = rungs::plan::run(a, out, err);
    return result{status, out.str(), err.str()};
  };
  const result j = plan_with(args("hbm,dram:64:51200", {"--json"}));
  REQUIRE(j.status == 0);
  const auto doc = rungs::cli::json::parse(j.out);
  const auto& run = doc["runs"][0];
  CHECK(run["tier_looked_up_blocks"] == 6);
  CHECK(run["tiers"][0]["tier"] == "hbm");
  CHECK(run["tiers"][0]["capacity_tokens"] == 64);
  CHECK(run["tiers"][0]["hit_tokens"] == 16);
  CHECK(run["tiers"][1]["hit_tokens"] == 16);
  CHECK(run["tiers"][1]["hit_rate"].get<double>() == Approx(1.0 / 6));
  CHECK(run["tiers"][1]["load_seconds"].get<double>() == Approx(0.01));
  CHECK(run["tier_load_seconds"].get<double>() == Approx(0.01));
  CHECK(run["ttft_p50_seconds"].get<double>() == Approx(0.071));  // of 0.071, 0.071, 0.020
  CHECK(run["prefix_hit_tokens"] == 32);
  const result t = plan_with(args("hbm,dram:64:51200"));
  REQUIRE(t.status == 0);
  CHECK(t.out.find("; tiers hbm 64 tokens (the KV pool) dram 64 tokens at 5.12e-05 GB/s\n") != std::string::npos);
  CHECK(t.out.find("\ntier (startup)    capacity tokens  hit rate   hit tokens    load s\n"
                   "hbm                              64    16.67%           16     0.000\n"
                   "dram                             64    16.67%           16     0.010\n"
                   "all tiers: hit rate 33.33% of 6 looked-up blocks (every admission's)\n") != std::string::npos);
  // Without --tiers the report has none of it.
  const result plain = plan_with(args(""));
  REQUIRE(plain.status == 0);
  CHECK(plain.out.find("tier") == std::string::npos);
  CHECK(plan_with(args("", {"--json"})).out.find("tiers") == std::string::npos);

  check_usage(plan_with(args("hbm:100")), "cache tier hbm: capacity = 100 tokens; the first tier is the replica's KV pool, which "
                                     "holds 64 tokens: give it without a capacity, or exactly that");
  check_usage(plan_with(args("hbm:64:5")), "--tiers: 'hbm:64:5' must be NAME or NAME:TOKENS (the top tier's hits need no load)");
  check_usage(plan_with(args("hbm,dram:64")), "--tiers: 'dram:64' must be NAME:TOKENS:BYTES_PER_S");
  check_usage(plan_with(args("hbm", {"--disaggregate", "1:1"})),
              "--tiers models each replica's own cache, not the KV a prefill pool sends a decode pool: leave out "
              "--disaggregate");
  // On two replicas, each with its own pool and tiers: round-robin sends A and A to replica
  // 0 and B to replica 1, so nothing evicts A and its second turn finds both blocks in HBM.
  const result fleet = plan_with(args("hbm,dram:64:51200", {"--replicas", "2", "--json"}));
  REQUIRE(fleet.status == 0);
  const auto fdoc = rungs::cli::json::parse(fleet.out);
  const auto& frun = fdoc["runs"][0];
  CHECK(frun["tier_looked_up_blocks"] == 6);  // 2 + 2 on replica 0, 2 on replica 1
  CHECK(frun["tiers"][0]["hit_tokens"] == 32);
  CHECK(frun["tiers"][1]["hit_tokens"] == 0);
  CHECK(frun["tier_load_seconds"].get<double>() == 0);
  check_usage(plan({"simulate", "--chat", "2", "--tiers", "hbm"}),
              "--tiers keeps the blocks the prefix cache evicts: add --prefix-caching");
  check_usage(plan({"prefix-cache", "--trace", trace, "--tiers", "hbm,dram:64:1e9", "--gpu", "h100-sxm", "--model",
                    "llama-3-8b"}),
              "--tiers: the top tier 'hbm' needs a capacity, NAME:TOKENS (the study has no KV pool to take it from)");
  std::remove(trace.c_str());
}

TEST_CASE("rungs-plan simulate: rejected requests, --strict, the roofline presets, replicas") {
  // 10 turns of 500 tokens do not fit 4096: turns 9 and 10 are rejected, or --strict stops.
  const result r = plan({"simulate", "--chat", "1", "--max-model-len", "4096"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("rejected requests                               2\n") != std::string::npos);
  const result j = plan({"simulate", "--chat", "1", "--max-model-len", "4096", "--json"});
  CHECK(j.out.find("\"rejected\": 2, ") != std::string::npos);
  CHECK(j.out.find("\"rejected_requests\": [{\"request\": 9, \"reason\": \"needs 4500 tokens (history 4000 + prompt 150 + "
                   "output 350), more than max_model_len = 4096\"}, {\"request\": 10, ") != std::string::npos);
  check_usage(plan({"simulate", "--chat", "1", "--max-model-len", "4096", "--strict"}),
              "simulate: trace request 9 (conversation 1, turn 9): needs 4500 tokens (history 4000 + prompt 150 + output 350), "
              "more than max_model_len = 4096");
  check_usage(plan({"simulate", "--chat", "1", "--trace-format", "azure"}), "--trace-format applies to --trace FILE");

  // --gpu/--model: the roofline, the model's KV geometry and vLLM's KV memory.
  const rungs::planning::cost_presets presets;
  const auto& m = presets.model("mistral-7b");
  const std::int64_t kv = rungs::kv::kv_memory({.total_bytes = 48'000'000'000, .weights_bytes = rungs::planning::weight_bytes(m, 1)});
  const std::int64_t blocks = kv / rungs::kv::bytes_per_block(rungs::planning::kv_geometry(m, 1), 16);
  const result g = plan({"simulate", "--chat", "1", "--gpu", "l40s", "--model", "mistral-7b"});
  CHECK(g.out.rfind("simulate: 10 requests; " + std::to_string(blocks) + " KV blocks of 16 tokens;", 0) == 0);
  CHECK(blocks == 13693);
  const result given = plan({"simulate", "--chat", "1", "--gpu", "l40s", "--model", "mistral-7b", "--kv-memory", "1GiB"});
  CHECK(given.out.rfind("simulate: 10 requests; 512 KV blocks of 16 tokens;", 0) == 0);
  check_usage(plan({"simulate", "--chat", "1", "--gpu", "l40s"}), "--gpu requires --model");
  check_usage(plan({"simulate", "--chat", "1", "--tp", "2"}), "--tp applies to the roofline: add --gpu NAME --model NAME");
  check_usage(plan({"simulate", "--chat", "1", "--gpu", "b200", "--model", "mistral-7b"}),
              "--gpu/--model: unknown GPU 'b200' (known: h100-sxm, h200, a100-80gb, l40s)");
  check_usage(plan({"simulate", "--chat", "1", "--gpu", "h100-sxm", "--model", "llama-3-8b", "--tp", "3"}),
              "--gpu/--model: tensor-parallel degree = 3 must divide model llama-3-8b's heads = 32");

  // Two replicas: the fleet's keys, and per-replica arrays.
  const result f = plan({"simulate", "--chat", "3", "--replicas", "2", "--json"});
  REQUIRE(f.status == 0);
  CHECK(f.out.find("\"replicas\": 2") != std::string::npos);
  CHECK(f.out.find("\"per_replica\": {\"requests\": [20, 10], ") != std::string::npos);  // chats 1 and 3, chat 2
  check_usage(plan({"simulate", "--chat", "3", "--replicas", "0"}), "--replicas = 0 must be positive");
}

TEST_CASE("rungs-plan simulate --router: prefix-affinity finds the cached documents, round-robin does not") {
  // Two documents of 2 x 512 tokens read twice (fleet_test's case): A and B at once, then B', A'.
  const std::string path = "plan_router_test.jsonl";
  {
    std::ofstream f(path);
    f << "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 10, \"hash_ids\": [1, 2]}\n"
         "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 10, \"hash_ids\": [3, 4]}\n"
         "{\"timestamp\": 20000, \"input_length\": 1536, \"output_length\": 10, \"hash_ids\": [3, 4, 6]}\n"
         "{\"timestamp\": 40000, \"input_length\": 1536, \"output_length\": 10, \"hash_ids\": [1, 2, 5]}\n";
  }
  const result pa = plan({"simulate", "--trace", path, "--prefix-caching", "--replicas", "2", "--router",
                          "prefix-affinity", "--json"});
  REQUIRE(pa.status == 0);
  CHECK(pa.out.find("\"router\": \"prefix-affinity\"") != std::string::npos);
  CHECK(pa.out.find("\"prefix_hit_tokens\": 2048") != std::string::npos);  // the fleet
  CHECK(pa.out.find("\"prefix_hit_tokens\": [1024, 1024]") != std::string::npos);  // per replica
  CHECK(pa.out.find("\"requests\": [2, 2]") != std::string::npos);
  const result rr = plan({"simulate", "--trace", path, "--prefix-caching", "--replicas", "2", "--json"});
  REQUIRE(rr.status == 0);
  CHECK(rr.out.find("\"router\": \"round-robin\"") != std::string::npos);
  CHECK(rr.out.find("\"prefix_hit_tokens\": 0,") != std::string::npos);
  const result ll = plan({"simulate", "--trace", path, "--replicas", "2", "--router", "least-loaded"});
  REQUIRE(ll.status == 0);
  CHECK(ll.out.find("; 2 replicas, least-loaded\n") != std::string::npos);
  check_usage(plan({"simulate", "--trace", path, "--replicas", "2", "--router", "prefix-affinity"}),
              "--router prefix-affinity routes by the replicas' prefix caches: add --prefix-caching");
  check_usage(plan({"simulate", "--trace", path, "--replicas", "2", "--max-imbalance", "3"}),
              "--max-imbalance applies to --router prefix-affinity");
  check_usage(plan({"simulate", "--trace", path, "--router", "least-loaded"}),
              "--router and --max-imbalance route between replicas: add --replicas N");
  check_usage(plan({"simulate", "--trace", path, "--replicas", "2", "--router", "random"}),
              "--router = 'random' is not one of round-robin, least-loaded, prefix-affinity");
  check_usage(plan({"simulate", "--trace", path, "--prefix-caching", "--replicas", "2", "--router", "prefix-affinity",
                    "--max-imbalance", "-1"}),
              "--max-imbalance = -1 must not be negative");
  std::remove(path.c_str());
}
