// Tests of include/rungs/planning/simulate.hpp: the paged-KV blog's experiment at full scale
// (Mistral-7B, 7 GiB of KV), the capture timings through the engine's policies, and a
// hand-checkable multi-turn trace.
#include <rungs/planning/simulate.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <optional>
#include <string>

using namespace rungs;
using namespace rungs::planning;

namespace {
simulation_result blog(std::int32_t chats, bool reserve = false) {
  simulation_config c;  // Mistral-7B geometry, 7 GiB of KV, 16-token blocks
  if (reserve) {
    c.scheduler.reserve_max_model_len = true;
    c.watermark = 0;  // the blog's naive server keeps nothing back
  }
  return simulate(c, serving::generate_chat({.conversations = chats}));
}
}  // namespace

TEST_CASE("the blog's experiment: 10 chats never fill 7 GiB of KV, 12 leave one waiting, 14 about two") {
  const simulation_result ten = blog(10);
  CHECK(ten.num_blocks == 3584);
  CHECK(ten.peak_kv_usage < 0.9);
  CHECK(ten.max_waiting_for_blocks == 0);
  CHECK(ten.scheduler.preemptions == 0);
  CHECK(ten.max_running == 10);

  const simulation_result twelve = blog(12);
  CHECK(twelve.peak_kv_usage > 0.99);
  CHECK(twelve.max_waiting_for_blocks == 1);
  CHECK(twelve.mean_waiting_for_blocks == Approx(1.0));

  const simulation_result fourteen = blog(14);
  CHECK(fourteen.max_waiting_for_blocks >= 2);
  CHECK(fourteen.max_waiting_for_blocks <= 3);
  CHECK(std::lround(fourteen.mean_waiting_for_blocks) == 2);
  CHECK(fourteen.seconds_waiting_for_blocks > twelve.seconds_waiting_for_blocks);

  // Every turn of every chat finished with its 350 tokens.
  for (const request_record& r : fourteen.requests) CHECK(r.output_tokens == 350);
  CHECK(fourteen.requests.back().prompt_tokens == 9 * 500 + 150);  // the 10th turn carries 9 turns of history
}

TEST_CASE("the blog's naive reservation of 8k tokens per request admits 7 at once") {
  const simulation_result naive = blog(14, true);
  CHECK(naive.max_running == 7);
  CHECK(naive.scheduler.preemptions == 0);
}

TEST_CASE("capture timings run the engine's policies: startup, delayed, lazy, idle") {
  // Two bursts of short requests 30 s apart: the gap is idle time.
  std::vector<serving::trace_request> trace;
  for (int i = 0; i < 8; ++i) trace.push_back({.arrival = 0, .prompt_tokens = 20, .output_tokens = 40});
  for (int i = 0; i < 8; ++i) trace.push_back({.arrival = 30, .prompt_tokens = 20, .output_tokens = 40});
  simulation_config c;
  c.ladder = rungs::ladder{CaptureSizes::vllm(64)};  // 11 rungs
  const cost_model& m = c.cost;
  double all_rungs = 0;
  for (rung_t r : c.ladder.rungs()) all_rungs += m.capture_time(r);

  c.timing = engine::startup{};
  const simulation_result startup = simulate(c, trace);
  CHECK(startup.startup_seconds == Approx(all_rungs));
  CHECK(startup.engine.captures == 11);
  CHECK(startup.engine.eager_steps(engine::eager_reason::not_captured) == 0);
  CHECK(startup.ttft_first > all_rungs);  // the first request waited for startup

  c.timing = engine::delayed{};
  const simulation_result delayed = simulate(c, trace);
  CHECK(delayed.startup_seconds == 0);
  CHECK(delayed.engine.captures == 11);  // one per step until all are done
  CHECK(delayed.capture_seconds_in_service == Approx(all_rungs));
  CHECK(delayed.ttft_first < startup.ttft_first);

  c.timing = engine::lazy{};
  const simulation_result lazy = simulate(c, trace);
  CHECK(lazy.engine.captures < 11);  // only the rungs traffic used
  CHECK(lazy.engine.capture_bytes < startup.engine.capture_bytes);

  c.timing = engine::idle{};
  const simulation_result idle = simulate(c, trace);
  CHECK(idle.engine.captures == 11);  // all captured in the 30 s gap
  CHECK(idle.engine.eager_steps(engine::eager_reason::not_captured) > 0);  // the first burst ran eagerly
  CHECK(idle.startup_seconds == 0);
  CHECK(idle.itl.max < startup.itl.max + 1.0);
  // No step waited for a capture: every step of the first burst is eager, none is slower
  // than an eager step of 8 sequences.
  CHECK(idle.ttft_first < delayed.ttft_first + 1e-9);
}

TEST_CASE("a multi-turn trace: the next turn waits for the answer and the think time") {
  std::vector<serving::trace_request> trace{
      {.arrival = 0, .prompt_tokens = 100, .output_tokens = 20, .conversation = 1, .turn = 1},
      {.arrival = 0, .prompt_tokens = 50, .output_tokens = 10, .conversation = 1, .turn = 2, .think = 2.5},
      {.arrival = 0.5, .prompt_tokens = 200, .output_tokens = 30}};
  simulation_config c;
  c.prefix_caching = true;
  c.cost = {.weights_seconds = 0.01, .seconds_per_token = 0, .seconds_per_context_token = 0, .eager_overhead_seconds = 0,
            .capture_seconds = 0, .capture_seconds_per_token = 0, .graph_bytes = 0, .graph_bytes_per_token = 0};
  const simulation_result r = simulate(c, trace);
  // Every step takes 10 ms. Turn 1: prefill step -> first token at 0.01, 19 more steps -> done at 0.20.
  CHECK(r.requests[0].first_token == Approx(0.01));
  CHECK(r.requests[0].finished == Approx(0.20));
  CHECK(r.requests[1].submitted == Approx(2.70));
  CHECK(r.requests[1].prompt_tokens == 100 + 20 + 50);
  CHECK(r.requests[1].ttft() == Approx(0.01));
  CHECK(r.scheduler.prefix_hit_tokens == 112);  // 7 full blocks of turn 1's conversation
  // The standalone request arrived at 0.5 during nothing: admitted at once.
  CHECK(r.requests[2].ttft() == Approx(0.01));
  CHECK(r.itl.mean == Approx(0.01));
  CHECK(r.step_tokens.size() == static_cast<std::size_t>(r.engine.steps));
}

TEST_CASE("simulate refuses what cannot work, naming it") {
  simulation_config c;
  c.block_size = 24;
  CHECK_THROWS_WITH(simulate(c, serving::generate_chat({.conversations = 1})),
                    Catch::Contains("block_size") && Catch::Contains("24"));
  simulation_config d;
  d.max_model_len = 4096;  // 10 turns of 500 tokens do not fit
  d.strict = true;
  CHECK_THROWS_WITH(simulate(d, serving::generate_chat({.conversations = 1})),
                    "simulate: trace request 9 (conversation 1, turn 9): needs 4500 tokens (history 4000 + prompt 150 + "
                    "output 350), more than max_model_len = 4096");
}

TEST_CASE("simulate counts a request that can never run as rejected and goes on") {
  simulation_config c;
  c.max_model_len = 4096;
  // Turn 9 needs 4500 tokens with its history; turn 10 follows the 8 answered turns (4000
  // tokens) and needs 4500 too. The first 8 turns run.
  const simulation_result r = simulate(c, serving::generate_chat({.conversations = 1}));
  CHECK(r.rejected == 2);
  CHECK(r.requests[8].rejected == "needs 4500 tokens (history 4000 + prompt 150 + output 350), more than max_model_len = 4096");
  CHECK(r.requests[9].rejected == r.requests[8].rejected);
  CHECK(r.requests[7].rejected.empty());
  CHECK(r.requests[7].finished > 0);
  CHECK(r.scheduler.finished == 8);
  CHECK(r.ttft.count == 8);  // rejected requests have no time to first token
  CHECK(r.output_tokens == 8 * 350);

  // Issue 14: a 2^31 - 1 token row is refused before its prompt is built (8 GiB), and a
  // request needing more KV blocks than the pool is rejected by the scheduler's rule.
  simulation_config small;
  small.kv_bytes = std::int64_t{64} << 20;  // 512 tokens of 128 KiB: 32 blocks of 16
  const simulation_result h = simulate(small, {{.arrival = 0, .prompt_tokens = 2147483647, .output_tokens = 1},
                                               {.arrival = 0, .prompt_tokens = 1000, .output_tokens = 1},
                                               {.arrival = 1, .prompt_tokens = 100, .output_tokens = 10}});
  CHECK(h.rejected == 2);
  CHECK(h.requests[0].rejected ==
        "needs 2147483648 tokens (history 0 + prompt 2147483647 + output 1), more than max_model_len = 8192");
  CHECK(h.requests[1].rejected == "scheduler: request 2 needs 63 KV blocks (+ watermark 0), more than the pool's 32");
  CHECK(h.requests[2].finished > 1);
  CHECK(h.output_tokens == 10);
}

TEST_CASE("summarize: quantiles are the values of rank ceil(q n)") {
  std::vector<double> v;
  for (int i = 200; i >= 1; --i) v.push_back(i);  // 1 .. 200, reversed
  const latency_summary s = summarize(v);
  CHECK(s.count == 200);
  CHECK(s.mean == 100.5);
  CHECK(s.p50 == 100);
  CHECK(s.p90 == 180);
  CHECK(s.p99 == 198);
  CHECK(s.max == 200);
  const latency_summary one = summarize({7});
  CHECK(one.p50 == 7);
  CHECK(one.p99 == 7);
  CHECK(one.max == 7);
  CHECK(summarize({}).count == 0);
}

namespace {
// Every runner step takes 10 ms; captures and graphs cost nothing.
cost_model ten_ms_steps() {
  return {.weights_seconds = 0.01, .seconds_per_token = 0, .seconds_per_context_token = 0, .eager_overhead_seconds = 0,
          .capture_seconds = 0, .capture_seconds_per_token = 0, .graph_bytes = 0, .graph_bytes_per_token = 0};
}
}  // namespace

TEST_CASE("simulate on Gaudi's linear 2-D grids: prompts and decodes replay their own buckets") {
  // Prompt and decode grids of bs {1, 2} x seq {32, 64} (VLLM_* variables through getenv);
  // separate prefill steps, as Gaudi serves them.
  simulation_config c;
  c.cost = ten_ms_steps();
  c.gaudi = engine::bucket_kind::gaudi_linear;
  c.getenv = [](const char* name) -> std::optional<std::string> {
    const std::string n = name;
    if (n.ends_with("_BS_BUCKET_MIN") || n.ends_with("_BS_BUCKET_STEP")) return "1";
    if (n.ends_with("_BS_BUCKET_MAX")) return "2";
    if (n.ends_with("_SEQ_BUCKET_MIN") || n.ends_with("_SEQ_BUCKET_STEP")) return "32";
    if (n.ends_with("_SEQ_BUCKET_MAX")) return "64";
    return std::nullopt;
  };
  c.scheduler.chunked_prefill = false;
  c.max_model_len = 1024;
  // Two prompts of 20 and 40 tokens, 2 output tokens each: one prefill step of both (bucket
  // [2, 64]: 2 sequences, the longest 40 tokens), one decode step (contexts 21 and 41: [2, 64]).
  const simulation_result r = simulate(c, {{.arrival = 0, .prompt_tokens = 20, .output_tokens = 2},
                                           {.arrival = 0, .prompt_tokens = 40, .output_tokens = 2}});
  CHECK(r.engine.captures == 8);  // 4 prompt and 4 decode buckets at startup
  CHECK(r.engine.steps == 2);
  CHECK(r.engine.replays == 2);
  REQUIRE(r.steps.size() == 2);
  const serving::run_record& prefill = r.steps[0].runs.at(0);
  CHECK(prefill.ph == engine::phase::prompt);
  REQUIRE(prefill.bucket);
  CHECK(prefill.bucket->dims == std::array<std::int64_t, 3>{2, 64, 0});
  CHECK(prefill.replayed());
  const serving::run_record& decode = r.steps[1].runs.at(0);
  CHECK(decode.ph == engine::phase::decode);
  REQUIRE(decode.bucket);
  CHECK(decode.bucket->dims == std::array<std::int64_t, 3>{2, 64, 0});
  CHECK(decode.replayed());
  CHECK(r.requests[0].first_token == Approx(0.01));
  CHECK(r.requests[1].finished == Approx(0.02));
  CHECK(r.end_seconds == Approx(0.02));
}

TEST_CASE("simulate with vLLM V1's dispatch key: mixed steps by token count, uniform decodes in decode graphs") {
  // Capture sizes 1, 2, 4, 8 and max_num_seqs 4: mixed graphs of 1, 2, 4, 8 tokens and
  // uniform-decode graphs of 1, 2, 4 sequences.
  simulation_config c;
  c.cost = ten_ms_steps();
  c.ladder = rungs::ladder{CaptureSizes::vllm(8)};
  c.dispatch = true;
  c.scheduler.max_num_seqs = 4;
  // Prompts of 4 and 2 tokens, 3 output tokens each: the first step prefills both (6 tokens:
  // the mixed graph of 8, 2 padded token rows), then two steps decode both (the uniform-decode
  // graph of 2 sequences).
  const simulation_result r = simulate(c, {{.arrival = 0, .prompt_tokens = 4, .output_tokens = 3},
                                           {.arrival = 0, .prompt_tokens = 2, .output_tokens = 3}});
  CHECK(r.engine.captures == 7);
  CHECK(r.engine.steps == 3);
  CHECK(r.engine.replays == 3);
  REQUIRE(r.steps.size() == 3);
  const serving::run_record& mixed = r.steps[0].runs.at(0);
  REQUIRE(mixed.bucket);
  CHECK(mixed.bucket->ph == engine::phase::prompt);
  CHECK(mixed.bucket->dims[0] == 8);
  CHECK(mixed.padded_tokens() == 2);
  for (std::size_t k : {1u, 2u}) {
    const serving::run_record& d = r.steps[k].runs.at(0);
    REQUIRE(d.bucket);
    CHECK(d.bucket->ph == engine::phase::decode);
    CHECK(d.bucket->dims[0] == 2);  // 2 request rows
    CHECK(d.bucket->shape.query == 1);
    CHECK(d.kind() == engine::step_kind::uniform_decode);
  }
  CHECK(r.requests[0].finished == Approx(0.03));
  CHECK(r.tokens_run == 8 + 2 + 2);
}

TEST_CASE("simulate refuses a dispatch key over Gaudi's grids and a bucket file without gaudi-file") {
  simulation_config c;
  c.gaudi = engine::bucket_kind::gaudi_linear;
  c.dispatch = true;
  CHECK_THROWS_WITH(simulate(c, serving::generate_chat({.conversations = 1})),
                    "simulate: dispatch keys graphs over a 1-D ladder; Gaudi's grids have their own");
  simulation_config d;
  d.bucket_file = "buckets.txt";
  CHECK_THROWS_WITH(simulate(d, serving::generate_chat({.conversations = 1})),
                    "simulate: bucket_file 'buckets.txt' applies to gaudi = gaudi-file");
}

// A hybrid model (simulation_config::layer_groups): 4 layers, 2 full and 2 with a sliding
// window of 16 keys; one KV head of 8, fp16: 32 bytes per token and layer, 512 per 16-token
// block and layer, pages of 2 layers (1024 bytes), 64 pages in 64 KiB. One request: a 64-token
// prompt and 40 output tokens (a prefill step, then decodes at p = 64..102).
//   prefill: both groups take 4 blocks: 8 pages held (8 KiB); all-full: 4 blocks x 4 layers.
//   decode at p: the full group holds ceil((p + 1) / 16) blocks, the sliding group those from
//   (p - 15) / 16 on: at p = 64 blocks 3 and 4 (5 + 2 pages), at p = 79 block 4 only (5 + 1),
//   at p = 96..102 blocks 5 and 6 (7 + 2 = 9 pages, the peak: 9216 bytes; all-full 7 x 4 x 512
//   = 14336). Over the 40 steps: 309 pages (316416 bytes) against 229 full blocks (468992).
TEST_CASE("simulate a hybrid model: the KV it holds against all-full attention") {
  simulation_config c;
  c.model = {.layers = 4, .kv_heads = 1, .head_dim = 8, .bytes_per_element = 2};
  c.layer_groups = {{{}, 2}, {{kv::attention_kind::sliding_window, 16}, 2}};
  c.kv_bytes = 64 * 1024;
  c.watermark = 0;
  const simulation_result r = simulate(c, {{.arrival = 0, .prompt_tokens = 64, .output_tokens = 40}});
  CHECK(r.num_blocks == 64);
  CHECK(r.engine.steps == 40);
  CHECK(r.peak_kv_bytes == 9216);
  CHECK(r.peak_all_full_kv_bytes == 14336);
  CHECK(r.kv_saved == Approx(1.0 - 316416.0 / 468992.0));

  // The same pool with every layer full: 4-layer pages (2048 bytes), 32 of them, and no
  // hybrid figures.
  simulation_config f = c;
  f.layer_groups.clear();
  const simulation_result all = simulate(f, {{.arrival = 0, .prompt_tokens = 64, .output_tokens = 40}});
  CHECK(all.num_blocks == 32);
  CHECK(all.peak_kv_bytes == 0);
  CHECK(all.kv_saved == 0);

  // The groups must sum to the model's layers and include a full-attention group.
  simulation_config bad = c;
  bad.model.layers = 5;
  CHECK_THROWS_WITH(simulate(bad, {{.arrival = 0, .prompt_tokens = 8, .output_tokens = 1}}),
                    "simulate: the layer groups hold 4 layers; model.layers = 5 must be their sum");
  bad = c;
  bad.layer_groups = {{{kv::attention_kind::sliding_window, 16}, 4}};
  bad.model.layers = 4;
  CHECK_THROWS_WITH(simulate(bad, {{.arrival = 0, .prompt_tokens = 8, .output_tokens = 1}}),
                    "simulate: the layer groups have no full-attention group; the saving is measured against its blocks");
}
