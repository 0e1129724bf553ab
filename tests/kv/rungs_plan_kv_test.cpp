// `rungs-plan kv`, run in-process: exact output and exit codes.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"

namespace {
struct outcome {
  int status;
  std::string out, err;
};
outcome run(std::vector<std::string_view> args) {
  args.insert(args.begin(), "kv");
  std::ostringstream out, err;
  const int status = rungs::plan::run(args, out, err);
  return {status, out.str(), err.str()};
}
const std::vector<std::string_view> mistral = {"--layers", "32", "--kv-heads", "8", "--head-dim",
                                               "128", "--dtype", "fp16", "--block-size", "16"};
std::vector<std::string_view> with(std::vector<std::string_view> base,
                                   std::initializer_list<std::string_view> more) {
  base.insert(base.end(), more);
  return base;
}
}  // namespace

TEST_CASE("rungs-plan kv: the blog's Mistral-7B chat figures") {
  const outcome r = run(with(mistral, {"--kv-memory", "7GiB", "--tokens-per-request", "5000",
                                       "--max-model-len", "8192"}));
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out ==
        "bytes_per_token: 131072\n"
        "block_size: 16\n"
        "bytes_per_block: 2097152\n"
        "kv_memory_bytes: 7516192768\n"
        "num_blocks: 3584\n"
        "token_capacity: 57344\n"
        "tokens_per_request: 5000\n"
        "blocks_per_request: 313\n"
        "concurrent_requests: 11\n"
        "max_model_len: 8192\n"
        "blocks_per_max_model_len: 512\n"
        "concurrent_requests_at_max_model_len: 7\n"
        "naive_concurrent_requests: 7\n");
}

TEST_CASE("rungs-plan kv: sizes in decimal and binary units, or plain bytes") {
  const auto blocks = [](std::string_view size) {
    const outcome r = run(with(mistral, {"--kv-memory", size}));
    REQUIRE(r.status == 0);
    const auto at = r.out.find("num_blocks: ");
    return r.out.substr(at + 12, r.out.find('\n', at) - at - 12);
  };
  CHECK(blocks("7GiB") == "3584");
  CHECK(blocks("7GB") == "3337");  // 7e9 / 2 MiB
  CHECK(blocks("7516192768") == "3584");
  CHECK(blocks("7168MiB") == "3584");
  CHECK(blocks("2097152B") == "1");
  CHECK(blocks("2MB") == "0");  // 2e6 bytes < one 2 MiB block
  CHECK(blocks("0.5TiB") == "262144");
  CHECK(blocks("7G") == "3584");  // a bare letter is the binary unit
  CHECK(blocks("7168M") == "3584");
  CHECK(blocks("7340032K") == "3584");
}

TEST_CASE("rungs-plan kv: the Gaudi rule from free memory") {
  const outcome r = run({"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype",
                         "bf16", "--block-size", "128", "--free-memory", "79.16GiB",
                         "--memory-utilization", "0.5", "--graph-reserved", "0.4"});
  CHECK(r.status == 0);
  CHECK(r.out ==
        "bytes_per_token: 131072\n"
        "block_size: 128\n"
        "bytes_per_block: 16777216\n"
        "kv_memory_bytes: 25499220836\n"
        "num_blocks: 1519\n"
        "token_capacity: 194432\n");
}

TEST_CASE("rungs-plan kv: bad input is one line on stderr and exit status 2") {
  const auto error = [](std::vector<std::string_view> args) {
    const outcome r = run(std::move(args));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    return r.err;
  };
  CHECK(error(with(mistral, {})) ==
        "rungs-plan: error: kv: give exactly one of --kv-memory and --free-memory\n");
  CHECK(error(with(mistral, {"--kv-memory", "7GiB", "--free-memory", "80GiB"})) ==
        "rungs-plan: error: kv: give exactly one of --kv-memory and --free-memory\n");
  CHECK(error(with(mistral, {"--kv-memory", "7XB"})) ==
        "rungs-plan: error: --kv-memory = '7XB' is not a size (bytes, or a number with B, KB, MB, "
        "GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)\n");
  CHECK(error(with(mistral, {"--kv-memory", "-7GiB"})) ==
        "rungs-plan: error: --kv-memory = '-7GiB' is not a size (bytes, or a number with B, KB, "
        "MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)\n");
  CHECK(error(with(mistral, {"--kv-memory", "0GiB"})) ==
        "rungs-plan: error: --kv-memory = '0GiB' must be positive\n");
  CHECK(error({"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype", "int4",
               "--block-size", "16", "--kv-memory", "7GiB"}) ==
        "rungs-plan: error: --dtype = 'int4' is not one of fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, fp32\n");
  CHECK(error({"--kv-heads", "8", "--head-dim", "128", "--dtype", "fp16", "--block-size", "16",
               "--kv-memory", "7GiB"}) == "rungs-plan: error: kv: --layers is required\n");
  CHECK(error(with(mistral, {"--kv-memory", "7GiB", "--block-size", "32"})) ==
        "rungs-plan: error: kv: --block-size given twice\n");
  CHECK(error(with(mistral, {"--kv-memory", "7GiB", "--turbo", "1"})) ==
        "rungs-plan: error: kv: unknown option '--turbo' (try 'rungs-plan --help')\n");
  CHECK(error(with(mistral, {"--kv-memory"})) ==
        "rungs-plan: error: kv: --kv-memory needs a value\n");
  CHECK(error(with(mistral, {"--kv-memory", "7GiB", "--tokens-per-request", "0"})) ==
        "rungs-plan: error: --tokens-per-request = 0 must be positive\n");
  CHECK(error(with(mistral, {"--kv-memory", "7GiB", "--graph-reserved", "0.1"})) ==
        "rungs-plan: error: kv: --memory-utilization and --graph-reserved need --free-memory\n");
  CHECK(error(with(mistral, {"--free-memory", "80GiB", "--graph-reserved", "1.5"})) ==
        "rungs-plan: error: graph_reserved_mem = 1.5 must be in [0, 1)\n");
}

TEST_CASE("rungs-plan kv: --name=value works too") {
  const outcome r = run({"--layers=32", "--kv-heads=8", "--head-dim=128", "--dtype=fp8",
                         "--block-size=16", "--kv-memory=7GiB"});
  CHECK(r.status == 0);
  CHECK(r.out.find("bytes_per_token: 65536\n") != std::string::npos);
  CHECK(r.out.find("num_blocks: 7168\n") != std::string::npos);
  // Both fp8 formats are one byte, as "fp8" (fp8_e4m3) is.
  for (const char* fp8 : {"--dtype=fp8_e4m3", "--dtype=fp8_e5m2"}) {
    const outcome f = run({"--layers=32", "--kv-heads=8", "--head-dim=128", fp8, "--block-size=16", "--kv-memory=7GiB"});
    CHECK(f.status == 0);
    CHECK(f.out == r.out);
  }
}

TEST_CASE("one size syntax: exact, rounded to the nearest byte, bounded") {
  using rungs::cli::size;
  CHECK(size("x", "7GiB") == 7516192768);
  CHECK(size("x", "7G") == 7516192768);
  CHECK(size("x", "7GB") == 7000000000);
  CHECK(size("x", "1.5K") == 1536);
  CHECK(size("x", "0.0005KB") == 1);  // 0.5 byte rounds up
  CHECK(size("x", "0.0004KB") == 0);
  CHECK(size("x", "79.16GiB") == 84997402788);  // 84997402787.84
  CHECK(size("x", "9223372036854775807") == 9223372036854775807);
  CHECK(size("x", "8388607TiB") == 9223370937343148032);  // 2^63 - 2^40
  const auto error = [](std::string_view text) {
    try {
      (void)size("--budget", text);
    } catch (const rungs::cli::usage_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("9223372036854775808") == "--budget = '9223372036854775808' is out of range (at most 2^63 - 1 bytes)");
  CHECK(error("8388608TiB") == "--budget = '8388608TiB' is out of range (at most 2^63 - 1 bytes)");
  CHECK(error("1e19") == "--budget = '1e19' is not a size (bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
                         "K, M, G, T)");
  CHECK(error("7g").find("is not a size") != std::string::npos);
  CHECK(error(".5G").find("is not a size") != std::string::npos);
  CHECK(error("5.G").find("is not a size") != std::string::npos);
  CHECK(error("inf").find("is not a size") != std::string::npos);
  CHECK(error("").find("is not a size") != std::string::npos);
}

// Hybrid models. A small pattern by hand: block 4, one KV head of 1 fp32 element: 8 bytes per
// token and layer, 32 per block and layer. 20 tokens: full 5 blocks; chunked 8 (two whole
// blocks per chunk) 2; sliding 5: ceil(4 / 4) + 1 = 2. Hybrid 32 x (5 + 2 + 2 x 2) = 352
// bytes; all full 32 x 4 x 5 = 640; saved 288 / 640 = 45.0%; 1024 / 352 = 2 requests.
TEST_CASE("rungs-plan kv --layers PATTERN: what windowed layers save over all-full attention") {
  const outcome r = run({"--layers", "full:1,chunked8:1,sliding5:2", "--kv-heads", "1", "--head-dim", "1", "--dtype",
                         "fp32", "--block-size", "4", "--kv-memory", "1024", "--tokens-per-request", "20"});
  CHECK(r.err == "");
  CHECK(r.out ==
        "layer_groups: full:1 chunked8:1 sliding5:2\n"
        "bytes_per_token: 32\n"
        "block_size: 4\n"
        "bytes_per_block: 128\n"
        "kv_memory_bytes: 1024\n"
        "num_blocks: 8\n"
        "token_capacity: 32\n"
        "tokens_per_request: 20\n"
        "blocks_per_request: 5\n"
        "concurrent_requests: 1\n"
        "hybrid_bytes_per_request: 352\n"
        "all_full_bytes_per_request: 640\n"
        "memory_saved_percent: 45.0\n"
        "hybrid_concurrent_requests: 2\n");
  // A count is still all full attention: no hybrid lines.
  const outcome plain = run(with(mistral, {"--kv-memory", "7GiB", "--tokens-per-request", "5000"}));
  CHECK(plain.out.find("hybrid") == std::string::npos);
}

// gpt-oss-20b (config.json: 24 layers alternating sliding_attention with sliding_window 128 and
// full_attention; 8 KV heads of 64), bf16: 2 x 8 x 64 x 2 = 2048 bytes per token and layer,
// 32 KiB per 16-token block and layer. 8192 tokens: full 12 x 512 blocks, sliding 12 x
// (ceil(127 / 16) + 1 = 9): 6252 x 32 KiB = 204865536 bytes, against 24 x 512 x 32 KiB =
// 402653184 (49.1% saved). 40 GiB: 209 such requests against 106 all-full.
TEST_CASE("rungs-plan kv --layers gpt-oss-20b and the other presets") {
  const outcome r = run({"--layers", "gpt-oss-20b", "--kv-heads", "8", "--head-dim", "64", "--dtype", "bf16",
                         "--block-size", "16", "--kv-memory", "40GiB", "--max-model-len", "8192"});
  CHECK(r.err == "");
  CHECK(r.out ==
        "layer_groups: full:12 sliding128:12\n"
        "bytes_per_token: 49152\n"
        "block_size: 16\n"
        "bytes_per_block: 786432\n"
        "kv_memory_bytes: 42949672960\n"
        "num_blocks: 54613\n"
        "token_capacity: 873808\n"
        "max_model_len: 8192\n"
        "blocks_per_max_model_len: 512\n"
        "concurrent_requests_at_max_model_len: 106\n"
        "naive_concurrent_requests: 106\n"
        "hybrid_bytes_at_max_model_len: 204865536\n"
        "all_full_bytes_at_max_model_len: 402653184\n"
        "memory_saved_percent_at_max_model_len: 49.1\n"
        "hybrid_concurrent_requests_at_max_model_len: 209\n");
  const auto groups = [](std::string_view preset) {
    const outcome o = run({"--layers", preset, "--kv-heads", "8", "--head-dim", "64", "--dtype", "bf16", "--block-size",
                           "16", "--kv-memory", "1GiB"});
    return o.out.substr(0, o.out.find('\n'));
  };
  CHECK(groups("gpt-oss-120b") == "layer_groups: full:18 sliding128:18");
  CHECK(groups("gemma-3-27b") == "layer_groups: full:10 sliding1024:52");
}

TEST_CASE("rungs-plan kv --layers: bad patterns are named") {
  const auto error = [](std::string_view layers) {
    return run({"--layers", layers, "--kv-heads", "1", "--head-dim", "1", "--dtype", "fp32", "--block-size", "4",
                "--kv-memory", "1024"})
        .err;
  };
  CHECK(error("llama") ==
        "rungs-plan: error: --layers = 'llama' is not a layer count, a pattern of KIND:LAYERS with KIND full, slidingW "
        "or chunkedC (full:12,sliding128:12), or a preset (gpt-oss-20b, gpt-oss-120b, gemma-3-27b)\n");
  CHECK(error("full:2,window8:2") ==
        "rungs-plan: error: --layers: 'window8:2' is not KIND:LAYERS with KIND full, slidingW or chunkedC\n");
  CHECK(error("full:2,full:3") == "rungs-plan: error: --layers: 'full' is given twice\n");
  CHECK(error("full:0") == "rungs-plan: error: --layers full layers = 0 must be positive\n");
  CHECK(error("sliding0:4") == "rungs-plan: error: --layers sliding span = 0 must be positive\n");
}
