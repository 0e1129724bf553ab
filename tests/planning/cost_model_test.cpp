// Tests of include/rungs/planning/cost_model.hpp: the roofline, its presets, checked arithmetic.
#include <rungs/planning/cost_model.hpp>

#include <catch2/catch.hpp>

using namespace rungs::planning;

TEST_CASE("cost model: the blog-4090 preset keeps today's step formula") {
  const cost_model c;
  // max(1/60, 512 x 1.5e-4) + 1000 x 1.3e-7, replayed: no overhead.
  CHECK(c.step_seconds(512, 1000, true) == Approx(0.0768 + 1.3e-4));
  // Memory-bound and eager: 1/60 + 1000 x 1.3e-7 + 6 ms.
  CHECK(c.step_seconds(8, 1000, false) == Approx(1.0 / 60 + 1.3e-4 + 0.006));
  CHECK(c.graph_memory(512) == (std::int64_t{28} << 20));
}

TEST_CASE("cost model: the roofline of Llama-3-8B on an H100 SXM, and of Llama-3-70B at TP 8") {
  const cost_presets p;
  const model_spec& m8 = p.model("llama-3-8b");
  // 32 layers x (2 x 4096 x 4096 + 2 x 4096 x 1024 + 3 x 4096 x 14336) + 128256 x 4096.
  CHECK(m8.layer_parameters() == 218'103'808);
  CHECK(m8.step_parameters() == 7'504'658'432);
  CHECK(m8.parameters() == 8'029'995'008);  // the published 8.03 B
  const cost_model c = roofline_cost(p.gpu("h100-sxm"), m8, 1);
  const double bandwidth = 3.35e12 * 0.9;
  CHECK(c.weights_seconds == Approx(7'504'658'432.0 * 2 / bandwidth));   // 4.98 ms
  CHECK(c.seconds_per_token == Approx(2 * 7'504'658'432.0 / 989e12));    // 15.2 us
  CHECK(c.seconds_per_context_token == Approx(131072 / bandwidth));      // 128 KiB of K and V
  REQUIRE(c.compute_seconds_per_context_token.has_value());
  CHECK(*c.compute_seconds_per_context_token == Approx(4.0 * 32 * 128 * 32 / 989e12));
  CHECK(c.eager_overhead_seconds == Approx(32 * 12 * 15e-6));
  CHECK(c.graph_overhead_seconds == Approx(32 * 15e-6));
  // A decode step of 64 sequences over 2000 tokens each is memory-bound; 1024 prompt tokens
  // are compute-bound.
  CHECK(c.step_seconds(64, 128'000, true) == Approx(c.weights_seconds + 128'000 * c.seconds_per_context_token + 4.8e-4));
  CHECK(c.step_seconds(1024, 1024, false) ==
        Approx(1024 * c.seconds_per_token + 1024 * *c.compute_seconds_per_context_token + 5.76e-3));

  const model_spec& m70 = p.model("llama-3-70b");
  CHECK(m70.parameters() == 70'552'387'584);  // 70.55 B: 80 x 855638016 + 2 x 128256 x 8192
  const cost_model t8 = roofline_cost(p.gpu("h100-sxm"), m70, 8);
  CHECK(t8.weights_seconds == Approx(69'501'714'432.0 * 2 / 8 / bandwidth));
  CHECK(t8.seconds_per_context_token == Approx(2.0 * 1 * 128 * 2 * 80 / bandwidth));  // one KV head per rank
  CHECK(weight_bytes(m70, 8) == 70'552'387'584 * 2 / 8);
  CHECK(kv_geometry(m70, 16).kv_heads == 1);  // replicated past 8 ranks
  cost_model base;
  base.capture_seconds = 1;
  base.graph_bytes = 5;
  const cost_model kept = roofline_cost(p.gpu("l40s"), m8, 1, base);
  CHECK(kept.capture_seconds == 1);
  CHECK(kept.graph_bytes == 5);
  CHECK(kept.weights_seconds == Approx(7'504'658'432.0 * 2 / (864e9 * 0.9)));
}

TEST_CASE("cost model: refuses what would print inf or overflow, naming the value") {
  cost_model c;
  c.weights_seconds = 1e308;
  CHECK_THROWS_WITH(c.validate(), "cost model: weights_seconds = 1e+308 must be at most 3600 seconds (results must stay finite)");
  c = {};
  c.seconds_per_token = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(c.validate(), "cost model: seconds_per_token = nan must not be negative");
  c = {};
  c.graph_bytes_per_token = std::int64_t{1'000'000'000'000'000'000};
  CHECK_THROWS_WITH(c.graph_memory(512),
                    "cost model: graph memory 25165824 + 1000000000000000000 x 512 bytes is past 2^63 - 1");
  c = {};
  c.graph_bytes = INT64_MAX / 2;
  const rungs::rung_t rungs[] = {1, 2, 4};
  CHECK_THROWS_WITH(c.graph_memory(rungs), "cost model: the graphs of 3 rungs take more than 2^63 - 1 bytes");
  const cost_presets p;
  CHECK_THROWS_WITH(roofline_cost(p.gpu("h100-sxm"), p.model("llama-3-8b"), 3),
                    "tensor-parallel degree = 3 must divide model llama-3-8b's heads = 32");
  CHECK_THROWS_WITH(roofline_cost(p.gpu("h100-sxm"), p.model("qwen2.5-7b"), 14),
                    "tensor-parallel degree = 14 and model qwen2.5-7b's kv_heads = 4: one must divide the other");
  CHECK_THROWS_WITH(p.gpu("b200"), "unknown GPU 'b200' (known: h100-sxm, h200, a100-80gb, l40s)");
}

TEST_CASE("cost model: presets and overrides from a file") {
  cost_presets p;
  read_cost_presets("# a faster H100, and a small model\n"
                    "gpu h100-sxm memory_bandwidth=3.0e12 launch_seconds=5e-6\n"
                    "model tiny layers=2 hidden=64 heads=4 kv_heads=2 head_dim=16 intermediate=128 vocab=100 tied_embeddings=1\n",
                    "presets.txt", p);
  CHECK(p.gpu("h100-sxm").memory_bandwidth == 3.0e12);
  CHECK(p.gpu("h100-sxm").bf16_flops == 989e12);  // kept
  CHECK(p.gpu("h100-sxm").launch_seconds == 5e-6);
  CHECK(p.model("tiny").parameters() == 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128) + 100 * 64);
  CHECK_THROWS_WITH(read_cost_presets("gpu x memory_bandwidth=1e12\n", "f", p),
                    "f:1: gpu x: bf16_flops = 0 must be positive and at most 1e+19");
  CHECK_THROWS_WITH(read_cost_presets("\nmodel m layers=1.5\n", "f", p), "f:2: layers = 1.5 is not an integer in range");
  CHECK_THROWS_WITH(read_cost_presets("gpu h200 colour=red\n", "f", p),
                    Catch::StartsWith("f:1: unknown gpu key 'colour'"));
  CHECK_THROWS_WITH(read_cost_presets("gpu h200 memory_bandwidth=inf\n", "f", p),
                    "f:1: memory_bandwidth = 'inf' is not a finite number");
  CHECK_THROWS_WITH(read_cost_presets("tpu v5\n", "f", p), "f:1: expected 'gpu NAME key=value...' or 'model NAME key=value...'");
}
