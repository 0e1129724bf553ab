// Tests of include/rungs/serving/scheduler.hpp on hand-checkable traces: exact admissions,
// queue lengths, preemptions and the tokens each step computes.
#include <rungs/engine.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/serving/scheduler.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

using namespace rungs;
using namespace rungs::serving;

namespace {

// Samples 1000, 1001, ... so every output token is recognisable: execute(plan) for a step the
// test commits itself, sample() as the engine's hook (one counter for both).
struct counting_executor {
  token_id next = 1000;
  std::vector<token_id> out;
  std::span<const token_id> execute(const scheduled_step& s) {
    out.clear();
    for (const step_entry& e : s.entries)
      if (e.samples) out.push_back(next++);
    return out;
  }
  void sample(const scheduled_step& plan, std::span<const std::size_t> entries, std::span<const float>,
              std::span<token_id> tokens) {
    // Counted in the scheduler's order, whatever rows the engine gave the entries (it keeps
    // each sequence in its row of the last step: batch_rows).
    std::vector<std::size_t> by_entry(entries.size());
    std::iota(by_entry.begin(), by_entry.end(), std::size_t{0});
    std::sort(by_entry.begin(), by_entry.end(), [&](std::size_t a, std::size_t b) { return entries[a] < entries[b]; });
    for (std::size_t k : by_entry) tokens[k] = plan.entries[entries[k]].samples ? next++ : 0;
  }
};

// The library's serving loop over the scheduler: the engine, with a forward that computes
// nothing (rows carry nothing, as in a cost model) and the whole step in one runner step; the
// executor's sample() counts in the scheduler's order.
template <class Allocator>
struct loop {
  using engine_type = rungs::engine::engine<rungs::engine::ladder_buckets<rungs::ladder>, rungs::engine::largest_first,
                                            rungs::engine::lazy, Allocator, rungs::engine::host_backend>;
  engine_type e;
  loop(Allocator&& blocks, scheduler_options options)
      : e(rungs::engine::ladder_buckets<rungs::ladder>(rungs::ladder{CaptureSizes::vllm(8)}), std::move(blocks),
          rungs::engine::host_backend([](const rungs::engine::host_step&) {}),
          {.scheduler = options, .routing = rungs::engine::step_routing::single}) {}
  scheduler<Allocator>& sched() { return e.scheduler(); }
  /// engine::step: the step's events, empty when nothing ran.
  step_events step(counting_executor& x) {
    const rungs::engine::engine_step& r = e.step(x);
    return r.ran() ? *r.events : step_events{};
  }
};

std::vector<token_id> iota_tokens(token_id first, std::int32_t n) {
  std::vector<token_id> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct entry_view {
  request_id id;
  std::int32_t first, count;
  bool decode, samples;
  friend bool operator==(const entry_view&, const entry_view&) = default;
};
std::vector<entry_view> entries(const scheduled_step& s) {
  std::vector<entry_view> v;
  for (const step_entry& e : s.entries) v.push_back({e.request, e.first, e.count, e.decode, e.samples});
  return v;
}

}  // namespace

TEST_CASE("scheduler: admission, preemption by recompute and requeue at the head, exactly") {
  // 5 blocks of 4 tokens; three requests of 8 prompt tokens (2 blocks) and 3 outputs.
  loop<kv::free_list_allocator> l(kv::free_list_allocator({.num_blocks = 5, .block_size = 4, .max_sequences = 8, .max_model_len = 16}),
                                  {.max_num_seqs = 8, .max_num_batched_tokens = 64});
  scheduler<kv::free_list_allocator>& s = l.sched();
  for (request_id id : {1, 2, 3}) s.submit({.id = id, .prompt = iota_tokens(static_cast<token_id>(id * 100), 8), .max_output_tokens = 3});
  counting_executor x;

  // Step 1: r1 and r2 take 2 blocks each; r3 needs 2 of the 1 left and waits.
  const scheduled_step* p = &s.schedule();
  CHECK(entries(*p) == std::vector<entry_view>{{1, 0, 8, false, true}, {2, 0, 8, false, true}});
  CHECK(p->phase == step_phase::prefill);
  CHECK(p->admitted == std::vector<request_id>{1, 2});
  CHECK(p->sequences[1].tokens.front() == 200);
  CHECK(p->sequences[1].block_table.size() == 2);
  CHECK(s.waiting() == 1);
  CHECK(p->stopped == admission_stop::kv_blocks);
  CHECK(p->waiting_for_blocks());
  CHECK(s.commit(x.execute(*p)).first_token == std::vector<request_id>{1, 2});

  // Step 2: r1's 9th token needs a 3rd block (the last free one); r2's then finds none and,
  // being the most recent, preempts itself: freed, requeued ahead of r3.
  p = &s.schedule();
  CHECK(entries(*p) == std::vector<entry_view>{{1, 8, 1, true, true}});
  CHECK(p->preempted == std::vector<request_id>{2});
  CHECK(p->stopped == admission_stop::preemption);
  CHECK(std::vector<request_id>(s.waiting_queue().begin(), s.waiting_queue().end()) == std::vector<request_id>{2, 3});
  CHECK(s.blocks().metrics().live_blocks == 3);
  (void)s.commit(x.execute(*p));

  // Step 3: r2 must now recompute 9 tokens (3 blocks), only 2 are free: r1 decodes alone.
  p = &s.schedule();
  CHECK(entries(*p) == std::vector<entry_view>{{1, 9, 1, true, true}});
  CHECK(p->admitted.empty());
  const step_events& done = s.commit(x.execute(*p));
  REQUIRE(done.finished.size() == 1);
  CHECK(done.finished[0].id == 1);
  CHECK(done.finished[0].output == std::vector<token_id>{1000, 1002, 1003});
  CHECK(s.blocks().metrics().live_blocks == 0);

  // Step 4: r2 recomputes its prompt and its first output (9 tokens), r3 prefills (8): 5 blocks.
  p = &s.schedule();
  CHECK(entries(*p) == std::vector<entry_view>{{2, 0, 9, false, true}, {3, 0, 8, false, true}});
  CHECK(p->stopped == admission_stop::none);
  CHECK(p->sequences[0].tokens.back() == 1001);
  CHECK(s.waiting() == 0);
  (void)s.commit(x.execute(*p));
  CHECK(s.stats().preemptions == 1);
  CHECK(s.stats().recomputed_tokens == 8);  // r2 had computed its 8 prompt tokens before

  // Run to the end: r2 needs no 4th block (11 tokens), r3's 10th token needs a 3rd: none is
  // free, so r3 (the most recent) preempts itself again and finishes after r2.
  std::vector<request_id> order;
  while (!s.idle()) {
    const step_events e = l.step(x);
    for (const finished_request& f : e.finished) order.push_back(f.id);
  }
  CHECK(order == std::vector<request_id>{2, 3});
  CHECK(s.stats().preemptions == 2);
  CHECK(s.stats().finished == 3);
  CHECK(s.blocks().metrics().live_blocks == 0);
}

TEST_CASE("scheduler: abort_step takes a step back: its requests requeued in step order, its blocks freed") {
  // 8 blocks of 4 tokens; r1 and r2 prefill 6 tokens each (2 blocks each), r3 waits for step 2.
  loop<kv::free_list_allocator> l(kv::free_list_allocator({.num_blocks = 8, .block_size = 4, .max_sequences = 8, .max_model_len = 16}),
                                  {.max_num_seqs = 2, .max_num_batched_tokens = 64});
  scheduler<kv::free_list_allocator>& s = l.sched();
  for (request_id id : {1, 2, 3}) s.submit({.id = id, .prompt = iota_tokens(static_cast<token_id>(id * 100), 6), .max_output_tokens = 2});
  counting_executor x;
  CHECK_THROWS_WITH(s.abort_step(), "scheduler: abort_step() without a scheduled step");
  (void)s.commit(x.execute(s.schedule()));  // step 1: r1 and r2 prefill, 4 blocks live
  CHECK(s.blocks().metrics().live_blocks == 4);

  // Step 2 decodes r1 and r2 (7th token: still in their 2nd block) and fails on the device.
  const scheduled_step& p = s.schedule();
  CHECK(entries(p) == std::vector<entry_view>{{1, 6, 1, true, true}, {2, 6, 1, true, true}});
  CHECK(s.abort_step() == std::vector<request_id>{1, 2});
  CHECK(p.preempted == std::vector<request_id>{1, 2});
  CHECK(std::vector<request_id>(s.waiting_queue().begin(), s.waiting_queue().end()) == std::vector<request_id>{1, 2, 3});
  CHECK(s.running() == 0);
  CHECK(s.blocks().metrics().live_blocks == 0);
  CHECK(s.stats().aborted_steps == 1);
  CHECK(s.stats().steps == 1);
  CHECK(s.check_consistency() == "");
  CHECK_THROWS_WITH(s.commit(std::vector<token_id>{1, 2}), "scheduler: commit() without a scheduled step");

  // The retry recomputes r1 and r2 from scratch (6 prompt tokens and the first output each):
  // the tokens they had stay theirs, nothing is sampled twice.
  const scheduled_step& q = s.schedule();
  CHECK(entries(q) == std::vector<entry_view>{{1, 0, 7, false, true}, {2, 0, 7, false, true}});
  CHECK(q.sequences[0].tokens.back() == 1000);
  CHECK(q.sequences[1].tokens.back() == 1001);
  std::vector<request_id> order;
  for (const finished_request& f : s.commit(x.execute(q)).finished) order.push_back(f.id);
  while (!s.idle())
    for (const finished_request& f : l.step(x).finished) order.push_back(f.id);
  CHECK(order == std::vector<request_id>{1, 2, 3});
  CHECK(s.stats().finished == 3);
  CHECK(s.blocks().metrics().live_blocks == 0);
  CHECK(s.check_consistency() == "");
}

TEST_CASE("scheduler: chunked prefill within the token budget, decodes first") {
  kv::free_list_allocator blocks({.num_blocks = 64, .block_size = 4, .max_sequences = 8, .max_model_len = 64});
  scheduler s(std::move(blocks), {.max_num_seqs = 8, .max_num_batched_tokens = 10});
  s.submit({.id = 1, .prompt = iota_tokens(0, 4), .max_output_tokens = 5});
  s.submit({.id = 2, .prompt = iota_tokens(0, 25), .max_output_tokens = 2});
  counting_executor x;
  auto next = [&] {
    const scheduled_step& p = s.schedule();
    std::vector<entry_view> v = entries(p);
    (void)s.commit(x.execute(p));
    return v;
  };
  CHECK(next() == std::vector<entry_view>{{1, 0, 4, false, true}, {2, 0, 6, false, false}});
  CHECK(next() == std::vector<entry_view>{{1, 4, 1, true, true}, {2, 6, 9, false, false}});
  CHECK(next() == std::vector<entry_view>{{1, 5, 1, true, true}, {2, 15, 9, false, false}});
  CHECK(next() == std::vector<entry_view>{{1, 6, 1, true, true}, {2, 24, 1, false, true}});
  const scheduled_step& last = s.schedule();
  CHECK(last.phase == step_phase::decode);
  CHECK_THROWS_WITH(s.schedule(), "scheduler: schedule() called twice without commit()");
  const step_events& e = s.commit(x.execute(last));
  CHECK(e.finished.size() == 2);
  CHECK(s.idle());
  // A third request behind a full step waits for room in the step, not for blocks.
  s.submit({.id = 3, .prompt = iota_tokens(0, 10), .max_output_tokens = 1});
  s.submit({.id = 4, .prompt = iota_tokens(0, 4), .max_output_tokens = 1});
  const scheduled_step& full = s.schedule();
  CHECK(full.stopped == admission_stop::token_budget);
  CHECK_FALSE(full.waiting_for_blocks());
  (void)s.commit(x.execute(full));
}

TEST_CASE("scheduler: without chunked prefill, prefill steps pause decoding (vLLM v0)") {
  kv::free_list_allocator blocks({.num_blocks = 64, .block_size = 4, .max_sequences = 8, .max_model_len = 32});
  scheduler s(std::move(blocks), {.max_num_seqs = 8, .max_num_batched_tokens = 32, .chunked_prefill = false});
  counting_executor x;
  s.submit({.id = 1, .prompt = iota_tokens(0, 20), .max_output_tokens = 3});
  s.submit({.id = 2, .prompt = iota_tokens(0, 20), .max_output_tokens = 3});
  const scheduled_step& a = s.schedule();  // only r1 fits the 32-token budget whole
  CHECK(entries(a) == std::vector<entry_view>{{1, 0, 20, false, true}});
  (void)s.commit(x.execute(a));
  const scheduled_step& b = s.schedule();  // r2's prefill pauses r1's decoding
  CHECK(entries(b) == std::vector<entry_view>{{2, 0, 20, false, true}});
  CHECK(b.phase == step_phase::prefill);
  (void)s.commit(x.execute(b));
  const scheduled_step& c = s.schedule();
  CHECK(entries(c) == std::vector<entry_view>{{1, 20, 1, true, true}, {2, 20, 1, true, true}});
  (void)s.commit(x.execute(c));
  CHECK_THROWS_WITH(scheduler(kv::free_list_allocator({.num_blocks = 64, .block_size = 4, .max_sequences = 8, .max_model_len = 32}),
                              {.max_num_batched_tokens = 16, .chunked_prefill = false}),
                    "scheduler: max_num_batched_tokens = 16 must be at least max_model_len = 32 without chunked "
                    "prefill (a whole prompt is computed in one step)");
}

TEST_CASE("scheduler: reserving max_model_len per request admits pool / max_model_len requests") {
  // 20 blocks of 4 tokens, max_model_len 16 (4 blocks): 5 requests at once, however short.
  loop<kv::free_list_allocator> l(kv::free_list_allocator({.num_blocks = 20, .block_size = 4, .max_sequences = 16, .max_model_len = 16}),
                                  {.max_num_seqs = 16, .max_num_batched_tokens = 64, .reserve_max_model_len = true});
  scheduler<kv::free_list_allocator>& s = l.sched();
  for (request_id id = 1; id <= 7; ++id) s.submit({.id = id, .prompt = iota_tokens(0, 3), .max_output_tokens = 2});
  counting_executor x;
  const scheduled_step& a = s.schedule();
  CHECK(a.admitted.size() == 5);
  CHECK(s.waiting() == 2);
  CHECK(s.blocks().metrics().live_blocks == 20);
  (void)s.commit(x.execute(a));
  while (!s.idle()) (void)l.step(x);
  CHECK(s.stats().preemptions == 0);
}

TEST_CASE("scheduler: a chat session's turns extend one conversation and reuse its cached blocks") {
  loop<kv::prefix_caching_allocator<>> l(kv::prefix_caching_allocator<>({.num_blocks = 32, .block_size = 4, .max_sequences = 4, .max_model_len = 64}),
                                         {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  scheduler<kv::prefix_caching_allocator<>>& s = l.sched();
  counting_executor x;
  s.submit({.id = 1, .prompt = iota_tokens(0, 6), .max_output_tokens = 3, .session = 7});
  CHECK_THROWS_WITH(s.submit({.id = 2, .prompt = iota_tokens(0, 2), .max_output_tokens = 1, .session = 7}),
                    "scheduler: session 7 already has a turn in flight");
  while (!s.idle()) (void)l.step(x);
  // The conversation: 6 prompt tokens, then 1000 1001 1002.
  std::vector<token_id> conv = iota_tokens(0, 6);
  conv.insert(conv.end(), {1000, 1001, 1002});
  CHECK(std::vector<token_id>(s.conversation_tokens(7).begin(), s.conversation_tokens(7).end()) == conv);
  s.submit({.id = 2, .prompt = {50, 51}, .max_output_tokens = 2, .session = 7});
  const scheduled_step& t2 = s.schedule();
  // 11 tokens; the first 8 (two full blocks, written by turn 1) come from the prefix cache.
  CHECK(entries(t2) == std::vector<entry_view>{{2, 8, 3, false, true}});
  CHECK(t2.sequences[0].context == 8);
  CHECK(s.stats().prefix_hit_tokens == 8);
  CHECK(s.tokens(2).size() == 11);
  (void)s.commit(x.execute(t2));
}

TEST_CASE("scheduler: requests that can never be served are refused at submit") {
  kv::free_list_allocator blocks({.num_blocks = 4, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
  scheduler s(std::move(blocks), {.max_num_batched_tokens = 64});
  CHECK_THROWS_WITH(s.submit({.id = 1, .prompt = iota_tokens(0, 30), .max_output_tokens = 3}),
                    "scheduler: request 1 needs 33 tokens (prompt and history 30 + output 3), more than max_model_len = 32");
  CHECK_THROWS_WITH(s.submit({.id = 1, .prompt = iota_tokens(0, 16), .max_output_tokens = 1}),
                    "scheduler: request 1 needs 5 KV blocks (+ watermark 0), more than the pool's 4");
  CHECK_THROWS_WITH(s.submit({.id = 1, .prompt = {}, .max_output_tokens = 1}), "scheduler: request 1 has an empty prompt");
  s.submit({.id = 1, .prompt = {1}, .max_output_tokens = 1});
  CHECK_THROWS_WITH(s.submit({.id = 1, .prompt = {1}, .max_output_tokens = 1}), "scheduler: request 1 is already queued");
}

TEST_CASE("scheduler: admitting on the first chunk (vLLM v1) starts long prompts sooner, at the risk of preemption") {
  // 6 blocks of 4 tokens, 12 tokens per step. r1: 8 prompt tokens, 6 outputs; r2: 20 prompt
  // tokens (5 blocks), 1 output.
  struct trace {
    std::vector<std::vector<entry_view>> steps;
    std::vector<admission_stop> stops;
    scheduler_stats stats;
  };
  auto run = [](bool whole_prompt) {
    kv::free_list_allocator blocks({.num_blocks = 6, .block_size = 4, .max_sequences = 4, .max_model_len = 32});
    scheduler s(std::move(blocks), {.max_num_seqs = 4, .max_num_batched_tokens = 12, .admit_whole_prompt = whole_prompt});
    s.submit({.id = 1, .prompt = iota_tokens(0, 8), .max_output_tokens = 6});
    s.submit({.id = 2, .prompt = iota_tokens(100, 20), .max_output_tokens = 1});
    counting_executor x;
    trace t;
    while (!s.idle()) {
      const scheduled_step& p = s.schedule();
      t.steps.push_back(entries(p));
      t.stops.push_back(p.stopped);
      (void)s.commit(x.execute(p));
    }
    t.stats = s.stats();
    return t;
  };
  const trace whole = run(true), chunk = run(false);
  using steps = std::vector<std::vector<entry_view>>;
  // Whole prompt: r2's 5 blocks never fit beside r1's (4 free at first, then fewer) until r1
  // finishes after its 6th output.
  CHECK(whole.steps == steps{{{1, 0, 8, false, true}}, {{1, 8, 1, true, true}}, {{1, 9, 1, true, true}},
                             {{1, 10, 1, true, true}}, {{1, 11, 1, true, true}}, {{1, 12, 1, true, true}},
                             {{2, 0, 12, false, false}}, {{2, 12, 8, false, true}}});
  CHECK(whole.stops.front() == admission_stop::kv_blocks);
  CHECK(whole.stats.preemptions == 0);
  CHECK(whole.stats.admitted == 2);
  // First chunk: r2 starts in step 1 with the budget's last 4 tokens (1 block). Step 2: r1's
  // token 8 takes a 3rd block, r2's next 11 tokens need 3 of the 2 left: r2, the most recent,
  // preempts itself. Step 3 readmits it for 11 tokens (3 blocks, the last free); step 4 it
  // needs 2 more and preempts itself again; step 5 readmits it; step 6 r1's token 12 needs a
  // block and preempts r2. r1 finishes; r2 recomputes from scratch: no step saved, 26 tokens
  // recomputed.
  CHECK(chunk.steps == steps{{{1, 0, 8, false, true}, {2, 0, 4, false, false}},
                             {{1, 8, 1, true, true}},
                             {{1, 9, 1, true, true}, {2, 0, 11, false, false}},
                             {{1, 10, 1, true, true}},
                             {{1, 11, 1, true, true}, {2, 0, 11, false, false}},
                             {{1, 12, 1, true, true}},
                             {{2, 0, 12, false, false}},
                             {{2, 12, 8, false, true}}});
  CHECK(chunk.stops[1] == admission_stop::preemption);
  CHECK(chunk.stats.preemptions == 3);
  CHECK(chunk.stats.admitted == 5);
  CHECK(chunk.stats.recomputed_tokens == 4 + 11 + 11);
}
