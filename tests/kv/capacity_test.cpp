#include <rungs/kv/capacity.hpp>

#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>

using namespace rungs::kv;

namespace {
constexpr std::int64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
}

TEST_CASE("the paged-KV blog's Mistral-7B figures") {
  // 32 layers, 8 KV heads (the only count that gives the blog's 0.125 MB), head dim 128, fp16.
  const kv_shape mistral{.layers = 32, .kv_heads = 8, .head_dim = 128,
                         .bytes_per_element = bytes_per_element(rungs::dtype::fp16)};
  CHECK(bytes_per_token(mistral) == 128 * KiB);  // 0.125 MiB
  CHECK(bytes_per_block(mistral, 16) == 2 * MiB);
  const std::int64_t blocks = blocks_for_memory(7 * GiB, bytes_per_block(mistral, 16));
  CHECK(blocks == 3584);
  const std::int64_t per_chat = blocks_per_request(10 * (150 + 350), 16);
  CHECK(per_chat == 313);
  CHECK(concurrent_requests(blocks, per_chat) == 11);
  CHECK(naive_concurrent_requests(7 * GiB, 8192, bytes_per_token(mistral)) == 7);
}

TEST_CASE("the Gaudi rule: 79.16 GiB free, utilization 0.5, 0.4 for graphs -> 1519 blocks") {
  // 128 KiB per token (e.g. Llama-3-8B in bf16: 2*32*8*128*2), 128-token blocks: 16 MiB.
  const kv_shape llama3_8b{.layers = 32, .kv_heads = 8, .head_dim = 128,
                           .bytes_per_element = bytes_per_element(rungs::dtype::bf16)};
  const std::int64_t block = bytes_per_block(llama3_8b, 128);
  CHECK(block == 16 * MiB);
  const auto free_mem = static_cast<std::int64_t>(std::llround(79.16 * double(GiB)));
  const std::int64_t kv =
      kv_memory(gaudi_memory{.free_bytes = free_mem, .gpu_memory_utilization = 0.5,
                             .graph_reserved_mem = 0.4});
  CHECK(kv == static_cast<std::int64_t>(std::floor(double(free_mem) * 0.5 * 0.6)));
  CHECK(blocks_for_memory(kv, block) == 1519);
  // The log's rounded "23.75 GiB for KV" would give 1520: the rule starts from free memory.
  CHECK(blocks_for_memory(static_cast<std::int64_t>(23.75 * double(GiB)), block) == 1520);
  // With the defaults (0.9, 0.1): 79.16 * 0.81 GiB.
  CHECK(blocks_for_memory(kv_memory(gaudi_memory{.free_bytes = free_mem}), block) == 4103);
}

TEST_CASE("the vLLM rule subtracts what the profiling run measured") {
  const std::int64_t kv = kv_memory(vllm_memory{.total_bytes = 80 * GiB,
                                                .gpu_memory_utilization = 0.9,
                                                .weights_bytes = 15 * GiB,
                                                .peak_activation_bytes = GiB,
                                                .non_torch_bytes = GiB / 2});
  CHECK(kv == 72 * GiB - 15 * GiB - GiB - GiB / 2);
  CHECK(blocks_for_memory(kv, 2 * MiB) == 28416);
  CHECK_THROWS_WITH(kv_memory(vllm_memory{.total_bytes = 16 * GiB, .weights_bytes = 15 * GiB}),
                    Catch::Contains("no memory left for the KV cache"));
}

TEST_CASE("memory rules at the ends of int64: no wrap-around, no out-of-range conversion") {
  constexpr std::int64_t max = INT64_MAX;
  CHECK(kv_memory(vllm_memory{.total_bytes = max, .gpu_memory_utilization = 1.0}) == max);
  CHECK(kv_memory(gaudi_memory{.free_bytes = max, .gpu_memory_utilization = 1.0, .graph_reserved_mem = 0}) == max);
  CHECK_THROWS_WITH(kv_memory(vllm_memory{.total_bytes = GiB, .weights_bytes = max, .peak_activation_bytes = max}),
                    "no memory left for the KV cache: usable 966367641 bytes, weights + activations + non-torch "
                    "more than 2^63 - 1 bytes");
  CHECK_THROWS_WITH(kv_memory(vllm_memory{.total_bytes = GiB, .weights_bytes = -GiB}),
                    "weights_bytes = -1073741824 must not be negative");
  CHECK_THROWS_AS(kv_memory(vllm_memory{.total_bytes = GiB, .non_torch_bytes = -1}), std::invalid_argument);
  CHECK_THROWS_WITH(bytes_per_token({.layers = max, .kv_heads = 2, .head_dim = 1}),
                    "KV cache size overflows 64 bits: 2 x 9223372036854775807");
}

TEST_CASE("fp8 and fp32 element sizes; bad shapes are configuration errors") {
  CHECK(bytes_per_element(rungs::dtype::fp8) == 1);
  CHECK(bytes_per_element(rungs::dtype::fp8_e5m2) == 1);
  // "fp8" keeps parsing, as fp8_e4m3 (dtype::fp8 is the same value); names round-trip.
  CHECK(rungs::parse_dtype("fp8") == rungs::dtype::fp8_e4m3);
  CHECK(rungs::dtype::fp8 == rungs::dtype::fp8_e4m3);
  CHECK(rungs::parse_dtype("fp8_e5m2") == rungs::dtype::fp8_e5m2);
  for (rungs::dtype t : {rungs::dtype::fp32, rungs::dtype::fp16, rungs::dtype::bf16, rungs::dtype::fp8_e4m3,
                         rungs::dtype::fp8_e5m2})
    CHECK(rungs::parse_dtype(rungs::name(t)) == t);
  CHECK(rungs::name(rungs::dtype::fp8) == "fp8_e4m3");
  CHECK_FALSE(rungs::parse_dtype("e4m3").has_value());
  CHECK(bytes_per_element(rungs::dtype::fp32) == 4);
  CHECK(rungs::parse_dtype("bf16") == rungs::dtype::bf16);
  CHECK_FALSE(rungs::parse_dtype("int4").has_value());
  CHECK_THROWS_WITH(bytes_per_token(kv_shape{.layers = 0, .kv_heads = 8, .head_dim = 128}),
                    "layers = 0 must be positive");
  CHECK_THROWS_WITH(bytes_per_block(kv_shape{.layers = 1, .kv_heads = 1, .head_dim = 1}, 0),
                    "block_size = 0 must be positive");
  CHECK_THROWS_WITH(kv_memory(gaudi_memory{.free_bytes = GiB, .graph_reserved_mem = 1.0}),
                    "graph_reserved_mem = 1 must be in [0, 1)");
  CHECK_THROWS_WITH(kv_memory(gaudi_memory{.free_bytes = GiB, .gpu_memory_utilization = 1.5}),
                    "gpu_memory_utilization = 1.5 must be in (0, 1]");
  CHECK_THROWS_AS(bytes_per_token(kv_shape{.layers = std::int64_t{1} << 40,
                                           .kv_heads = std::int64_t{1} << 20, .head_dim = 128}),
                  std::invalid_argument);
  CHECK_THROWS_AS(blocks_for_memory(-1, 16), std::invalid_argument);
}
