// Tests of include/rungs/planning/disaggregated.hpp (prefill and decode pools, the KV link, the
// search) and of the scheduler's transferred tokens it rests on, on traces checked by hand.
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/disaggregated.hpp>
#include <rungs/serving/scheduler.hpp>

#include <catch2/catch.hpp>

#include "tiny_config.hpp"

#include <numeric>
#include <vector>

using namespace rungs;
using serving::trace_request;

namespace {
using planning::test::tiny;  // tiny_config.hpp: max(10 ms, 2 ms per token row of the bucket)
// The default geometry's 128 KiB of KV a token at 1000 tokens a second: 1 ms a token, + 1 ms.
constexpr planning::kv_link ms_per_token{.bytes_per_second = 131072.0 * 1000, .latency_seconds = 0.001};

std::vector<kv::token_id> tokens(kv::token_id first, std::int32_t n) {
  std::vector<kv::token_id> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}
}  // namespace

TEST_CASE("scheduler: transferred tokens are admitted with their blocks and not computed") {
  serving::scheduler s(kv::free_list_allocator({.num_blocks = 8, .block_size = 4, .max_sequences = 4, .max_model_len = 32}),
                       {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  // 6 prompt tokens and the first output token; the 6 came with their KV.
  s.submit({.id = 1, .prompt = tokens(100, 7), .max_output_tokens = 2, .transferred_tokens = 6});
  const serving::scheduled_step& a = s.schedule();
  REQUIRE(a.entries.size() == 1);
  CHECK(a.entries[0].first == 6);
  CHECK(a.entries[0].count == 1);
  CHECK(a.entries[0].decode);  // one token after KV computed elsewhere
  CHECK(a.entries[0].samples);
  CHECK(a.sequences[0].context == 6);
  CHECK(a.sequences[0].block_table.size() == 2);  // 7 tokens in blocks of 4
  CHECK(a.tokens == 1);
  CHECK(s.stats().transferred_tokens == 6);
  CHECK(s.stats().computed_tokens == 1);
  const std::vector<kv::token_id> first{500};
  CHECK(s.commit(first).first_token == std::vector<serving::request_id>{1});
  const serving::scheduled_step& b = s.schedule();
  CHECK(b.entries[0].first == 7);
  CHECK(b.entries[0].decode);
  const std::vector<kv::token_id> second{501};
  CHECK(s.commit(second).finished.size() == 1);
  CHECK_THROWS_WITH(s.submit({.id = 2, .prompt = tokens(1, 3), .transferred_tokens = 3}),
                    "scheduler: request 2: transferred_tokens = 3 must be in [0, 3): at least the last prompt token "
                    "is computed, to sample from");
  CHECK_THROWS_WITH(s.submit({.id = 2, .prompt = tokens(1, 3), .transferred_tokens = -1}),
                    Catch::Contains("transferred_tokens = -1 must be in [0, 3)"));
}

TEST_CASE("disaggregated 1:1: TTFT on the prefill replica, KV over the link, decode on the other, by hand") {
  // A: 6 prompt tokens and 3 outputs at 0; B: 3 and 2 at 0.1.
  const std::vector<trace_request> trace = {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 3},
                                            {.arrival = 0.1, .prompt_tokens = 3, .output_tokens = 2}};
  const planning::disaggregated_result r =
      planning::simulate_disaggregated(tiny(), trace, {.prefill = 1, .decode = 1, .link = ms_per_token});
  // Prefill: A's 6 tokens in bucket 8 (16 ms), first token at 0.016; idle; B's 3 in bucket 4
  // (10 ms) from 0.1: first token at 0.110.
  CHECK(r.requests[0].first_token == Approx(0.016).margin(1e-12));
  CHECK(r.requests[1].first_token == Approx(0.110).margin(1e-12));
  CHECK(r.ttft.max == Approx(0.016).margin(1e-12));
  CHECK(r.ttft.mean == Approx(0.013).margin(1e-12));
  // Links: A's 6 tokens 1 + 6 ms (at 0.023), B's 3 tokens 1 + 3 ms (at 0.114).
  CHECK(r.prefill.transfer_seconds[0] == Approx(0.007).margin(1e-12));
  CHECK(r.prefill.kv_ready[0] == Approx(0.023).margin(1e-12));
  CHECK(r.prefill.kv_ready[1] == Approx(0.114).margin(1e-12));
  CHECK(r.prefill.transfer_bytes == 9 * 131072);
  // Decode: A from 0.023 computes its first token (bucket 4: 10 ms), second token at 0.033,
  // third at 0.043, done; B from 0.114, its second token at 0.124, done.
  REQUIRE(r.decode_trace.size() == 2);
  CHECK(r.decode_trace[0].prompt_tokens == 7);
  CHECK(r.decode_trace[0].transferred_tokens == 6);
  CHECK(r.decode_trace[0].output_tokens == 2);
  CHECK(r.requests[0].finished == Approx(0.043).margin(1e-12));
  CHECK(r.requests[1].finished == Approx(0.124).margin(1e-12));
  CHECK(r.requests[0].output_tokens == 3);
  CHECK(r.requests[1].output_tokens == 2);
  // Inter-token gaps: the handoffs 0.017 (A) and 0.014 (B), then A's 0.010.
  CHECK(r.handoff.count == 2);
  CHECK(r.handoff.max == Approx(0.017).margin(1e-12));
  CHECK(r.itl.count == 3);
  CHECK(r.itl.mean == Approx(0.041 / 3).margin(1e-12));
  CHECK(r.itl.p50 == Approx(0.014).margin(1e-12));
  CHECK(r.transfer.mean == Approx(0.0055).margin(1e-12));
  // Both pools as one: 2 prefill steps + 3 decode steps, 5 output tokens, the last at 0.124.
  CHECK(r.total.engine.steps == 5);
  CHECK(r.total.output_tokens == 5);
  CHECK(r.total.end_seconds == Approx(0.124).margin(1e-12));
  CHECK(r.total.scheduler.computed_tokens == 9 + 3);  // the prompts, then one token per decode step
  CHECK(r.total.rejected == 0);
  CHECK(r.total.ttft.p99 == r.ttft.p99);
  CHECK(r.decode.replicas.front().scheduler.transferred_tokens == 9);
}

TEST_CASE("disaggregated: one prefill replica's link sends one transfer at a time; two replicas, two links") {
  const std::vector<trace_request> trace = {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 3},
                                            {.arrival = 0, .prompt_tokens = 3, .output_tokens = 2}};
  // One prefill replica: 9 tokens in bucket 16 (32 ms); A's transfer 0.032 -> 0.039, B's waits
  // for it: 0.039 -> 0.043.
  const planning::prefill_pool_result one =
      planning::simulate_prefill_pool(tiny(), trace, {.prefill = 1, .decode = 1, .link = ms_per_token});
  CHECK(one.kv_ready[0] == Approx(0.039).margin(1e-12));
  CHECK(one.kv_ready[1] == Approx(0.043).margin(1e-12));
  // Two (round-robin): A alone in bucket 8 (0.016 + 7 ms), B in bucket 4 (0.010 + 4 ms).
  const planning::prefill_pool_result two =
      planning::simulate_prefill_pool(tiny(), trace, {.prefill = 2, .decode = 1, .link = ms_per_token});
  CHECK(two.kv_ready[0] == Approx(0.023).margin(1e-12));
  CHECK(two.kv_ready[1] == Approx(0.014).margin(1e-12));
  // A request of one output token ends on the prefill replica: no transfer.
  const planning::disaggregated_result single = planning::simulate_disaggregated(
      tiny(), {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 1}}, {.link = ms_per_token});
  CHECK(single.decode_trace.empty());
  CHECK(single.requests[0].finished == Approx(0.016).margin(1e-12));
  CHECK(single.itl.count == 0);
}

TEST_CASE("disaggregated: what it refuses") {
  const std::vector<trace_request> chat = {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 3, .conversation = 7, .turn = 1}};
  CHECK_THROWS_WITH(planning::simulate_disaggregated(tiny(), chat, {}),
                    Catch::StartsWith("disaggregate: trace request 1 is turn 1 of conversation 7"));
  const std::vector<trace_request> one = {{.arrival = 0, .prompt_tokens = 6, .output_tokens = 3}};
  CHECK_THROWS_WITH(planning::simulate_disaggregated(tiny(), one, {.prefill = 0, .decode = 1}),
                    "disaggregate: 0:1: each pool needs 1 to 4096 replicas");
  CHECK_THROWS_WITH(planning::simulate_disaggregated(tiny(), one, {.link = {.bytes_per_second = 0}}),
                    Catch::StartsWith("disaggregate: link bandwidth = 0"));
  CHECK_THROWS_AS(planning::simulate_disaggregated(
                      tiny(), one, {.decode_router = {.kind = planning::router::prefix_affinity}}),
                  std::invalid_argument);
  CHECK(planning::kv_link_preset("infiniband-400g")->bytes_per_second == 50e9);
  CHECK(!planning::kv_link_preset("ethernet"));
}

TEST_CASE("disaggregated search: the fewest prefill replicas for the TTFT bound, then the fewest decode replicas") {
  // Four requests of 8 prompt tokens and 4 outputs at 0: one prefill replica runs 32 tokens
  // (eager above 16: 64 ms + 5 ms), so every TTFT is 0.069; two run 16 each (32 ms).
  std::vector<trace_request> trace(4, trace_request{.arrival = 0, .prompt_tokens = 8, .output_tokens = 4});
  const planning::service_objective ttft{{.metric = planning::slo_metric::ttft_max, .seconds = 0.05}};
  const planning::disaggregated_search_result s =
      planning::search_disaggregated(tiny(), trace, ttft, {.link = ms_per_token}, 8);
  REQUIRE(s.split);
  CHECK(*s.split == std::pair<std::int32_t, std::int32_t>{2, 1});
  // Tried: P = 1 (0.069, misses), P = 2 (0.032, meets), then D = 1 with P = 2 (meets).
  REQUIRE(s.tried.size() == 3);
  CHECK(s.tried[0].prefill == 1);
  CHECK(s.tried[0].decode == 0);
  CHECK(s.tried[0].ttft.max == Approx(0.069).margin(1e-12));
  CHECK(!s.tried[0].met);
  CHECK(s.tried[1].ttft.max == Approx(0.032).margin(1e-12));
  CHECK(s.tried[2].decode == 1);
  CHECK(s.tried[2].met);
  REQUIRE(s.chosen);
  CHECK(s.chosen->plan.prefill == 2);
  CHECK(s.chosen->ttft.max == Approx(0.032).margin(1e-12));
  CHECK_THROWS_WITH(planning::search_disaggregated(tiny(), trace, {}, {}), "fleet search: the objective has no bound");
}
