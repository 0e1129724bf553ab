// Tests of the serving demo (examples/serve/): the tokens produced through the scheduler, the
// engine (buckets, padding, replays, eager steps), the paged KV cache (prefix hits, preemption
// by recompute) equal those of the plain unbatched loop, for several policy combinations,
// each through the demo's own command-line path; the same seed gives the same tokens; bad
// flags are reported naming the flag. Every run is on the virtual clock, so that no result
// depends on the machine's speed (a loaded machine once never idled under the wall clock).
#include <catch2/catch.hpp>

#include <rungs/engine/rank_sync.hpp>

#include <algorithm>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "options.hpp"
#include "reference_loop.hpp"
#include "report.hpp"
#include "run.hpp"

using namespace demo;

namespace {

struct served {
  run_setup setup;
  serve_result result;
  std::string log;
};

// The demo's path from flags to a finished run on the host backend, on the virtual clock.
served serve_flags(std::vector<std::string_view> args) {
  args.insert(args.end(), {"--clock", "virtual"});
  const demo_options o = parse_options(args);
  served s{resolve(o, backend_kind::host, host_backend_info(o.seed)), {}, {}};
  std::ostringstream log;
  s.result = serve_host(s.setup, log, false);
  s.log = log.str();
  return s;
}

// Every turn's tokens against the plain loop, chat by chat (history = earlier prompts and the
// plain loop's own answers).
void require_plain_loop_tokens(const served& s) {
  const host_decoder<tiny_model> model(s.setup.model);
  std::map<serving::session_id, std::vector<token_id>> conversations;
  std::int64_t compared = 0;
  for (std::size_t i = 0; i < s.setup.requests.size(); ++i) {
    const demo_request& d = s.setup.requests[i];
    std::vector<token_id> standalone;
    std::vector<token_id>& c = d.row.conversation != 0 ? conversations[d.row.conversation] : standalone;
    c.insert(c.end(), d.prompt.begin(), d.prompt.end());
    const std::vector<token_id> expected =
        plain_generate(model, c, d.row.output_tokens, s.setup.groups.empty() ? nullptr : &s.setup.attention);
    INFO("request " << i + 1 << ", chat " << d.row.conversation << ", turn " << d.row.turn);
    REQUIRE(s.result.requests[i].output == expected);
    c.insert(c.end(), expected.begin(), expected.end());
    compared += static_cast<std::int64_t>(expected.size());
  }
  REQUIRE(compared > 0);
}

// A handful of short chats in a pool too small for them all: admission waits, decodes run out
// of blocks, the newest running request is preempted and recomputed.
const std::vector<std::string_view> tight = {"--chats", "4", "--turns", "3", "--input-tokens", "12", "--output-tokens",
                                             "20", "--kv-blocks", "10", "--max-num-seqs", "4",
                                             "--max-num-batched-tokens", "256", "--verify", "0"};

std::vector<std::string_view> with(std::vector<std::string_view> base, std::initializer_list<std::string_view> more) {
  base.insert(base.end(), more);
  return base;
}

}  // namespace

TEST_CASE("Gaudi prompt/decode buckets, startup capture, prefix caching: tokens equal the plain loop") {
  const served s = serve_flags(tight);
  const eng::engine_stats& e = s.result.engine;
  CHECK(s.result.scheduler.preemptions > 0);           // the tiny pool forced recompute
  CHECK(s.result.scheduler.recomputed_tokens > 0);
  CHECK(s.result.scheduler.prefix_hit_tokens > 0);     // later turns hit their history
  CHECK(e.replays > 0);
  CHECK(e.padded_tokens > 0);                          // padded rows ran through the graphs
  CHECK(s.result.max_waiting > 0);
  require_plain_loop_tokens(s);
}

TEST_CASE("vLLM capture sizes, chunked prefill, lazy capture: tokens equal the plain loop") {
  // A 24-token step budget splits prompts into chunks; steps above 8 tokens run eagerly.
  const served s = serve_flags(with(tight, {"--ladder", "vllm", "--chunked-prefill", "--max-num-batched-tokens", "24",
                                            "--max-capture-size", "8", "--capture-timing", "lazy", "--eager-uses", "1"}));
  const eng::engine_stats& e = s.result.engine;
  CHECK(e.eager_steps(eng::eager_reason::above_top) > 0);
  CHECK(e.eager_steps(eng::eager_reason::not_captured) > 0);  // lazy: first use of a bucket
  CHECK(e.replays > 0);
  CHECK(s.result.scheduler.preemptions > 0);
  bool mixed = false;
  for (const step_record& r : s.result.steps) mixed |= r.phase == serving::step_phase::mixed;
  CHECK(mixed);
  require_plain_loop_tokens(s);
}

TEST_CASE("free-list allocator, delayed capture with the largest bucket first: tokens equal the plain loop") {
  const served s =
      serve_flags(with(tight, {"--allocator", "free-list", "--capture-timing", "delayed", "--largest-at-startup"}));
  CHECK(s.result.scheduler.prefix_hit_tokens == 0);  // nothing is cached without prefix caching
  CHECK(s.result.scheduler.preemptions > 0);
  CHECK(s.result.engine.captures > 0);
  require_plain_loop_tokens(s);
}

TEST_CASE("Gaudi exponential buckets, idle capture while chats think: tokens equal the plain loop") {
  const served s = serve_flags(with(tight, {"--ladder", "gaudi-exponential", "--capture-timing", "idle", "--think",
                                            "0.05", "--max-model-len", "160"}));
  CHECK(s.result.idle_periods > 0);
  CHECK(s.result.idle_captures > 0);
  CHECK(s.result.engine.eager_steps(eng::eager_reason::not_captured) > 0);  // before the first idle period
  require_plain_loop_tokens(s);
}

// A gpt-oss-style hybrid model (--layers full:1,sliding16:1): layer 0 full attention, layer 1
// a window of 16 keys, both groups' blocks from one pool of 1-layer pages
// (kv::hybrid_allocator), the sliding layer reading its own group's tables. The tokens equal
// the plain loop's with the window applied to a contiguous cache, and differ from the
// all-full model's (so the window is applied: the chats run past 16 tokens); the log states
// the saving against all-full attention.
TEST_CASE("--layers: a hybrid model serves, tokens equal the windowed plain loop, the saving printed") {
  const std::vector<std::string_view> base = {"--chats", "4", "--turns", "3", "--input-tokens", "12", "--output-tokens",
                                              "20", "--max-num-seqs", "4", "--max-num-batched-tokens", "256",
                                              "--verify", "0"};
  const served hybrid = serve_flags(with(base, {"--kv-blocks", "24", "--layers", "full:1,sliding16:1"}));
  REQUIRE(hybrid.setup.groups.size() == 2);
  CHECK(hybrid.setup.attention.window == std::vector<int>{0, 16});
  CHECK(hybrid.setup.attention.group == std::vector<int>{0, 1});
  CHECK(hybrid.setup.block_bytes * 2 == rungs::kv::bytes_per_block(tiny_model.kv(), tiny_model.block_size));  // 1-layer pages
  CHECK(hybrid.result.scheduler.prefix_hit_tokens > 0);  // later turns hit their history in both groups
  CHECK(hybrid.result.engine.replays > 0);
  require_plain_loop_tokens(hybrid);
  INFO(hybrid.log);
  CHECK(hybrid.log.find("Hybrid KV (--layers full:1 sliding16:1): peak ") != std::string::npos);
  CHECK(hybrid.log.find("% less over the run\n") != std::string::npos);
  // The same chats with both layers full attention give other tokens.
  const served full = serve_flags(with(base, {"--kv-blocks", "12"}));
  require_plain_loop_tokens(full);
  bool differs = false;
  for (std::size_t i = 0; i < full.result.requests.size(); ++i)
    differs = differs || full.result.requests[i].output != hybrid.result.requests[i].output;
  CHECK(differs);
}

TEST_CASE("the virtual clock: serving time is the modeled cost of the steps and captures") {
  // One 12-token prompt and 3 output tokens; capture sizes 1, 2, 4, 8 captured at startup.
  const served s = serve_flags({"--chats", "1", "--turns", "1", "--input-tokens", "12", "--output-tokens", "3",
                                "--jitter", "0", "--ladder", "vllm", "--max-capture-size", "8", "--verify", "0"});
  const virtual_costs c;
  CHECK(c.step_seconds == 0.002);  // the values the expectations below are worked out with
  CHECK(c.token_seconds == 5e-5);
  CHECK(c.capture_seconds == 0.005);
  CHECK(c.capture_seconds_per_unit == 1e-5);
  // 4 captures of 0.005 s plus 1e-5 s per token of their rungs (1 + 2 + 4 + 8).
  CHECK(s.result.startup_captures == 4);
  CHECK(s.result.startup_seconds == Approx(0.02015).epsilon(1e-12));
  // The prefill (12 tokens, above the top rung: eager) samples the first token, then two
  // decodes of 1 token replay rung 1.
  REQUIRE(s.result.steps.size() == 3);
  CHECK(s.result.steps[0].runs.at(0).run == eng::run_kind::eager);
  CHECK(s.result.steps[0].end == Approx(0.0026).epsilon(1e-12));
  CHECK(s.result.steps[1].runs.at(0).run == eng::run_kind::replay);
  CHECK(s.result.steps[1].end == Approx(0.00465).epsilon(1e-12));
  CHECK(s.result.steps[2].end == Approx(0.0067).epsilon(1e-12));
  CHECK(s.result.end_seconds == Approx(0.0067).epsilon(1e-12));
  CHECK(s.result.requests.at(0).first_token == Approx(0.0026).epsilon(1e-12));
  CHECK(s.result.idle_periods == 0);
}

TEST_CASE("the virtual clock: the same flags give the same times, idle periods included") {
  const auto times = [] {
    const served s = serve_flags(with(tight, {"--capture-timing", "idle", "--think", "0.05"}));
    std::vector<double> t;
    for (const step_record& r : s.result.steps) t.push_back(r.end);
    for (const request_record& r : s.result.requests) t.push_back(r.first_token);
    t.push_back(static_cast<double>(s.result.idle_periods));
    t.push_back(static_cast<double>(s.result.idle_captures));
    return t;
  };
  const std::vector<double> a = times();
  CHECK(a.back() > 0);  // idle captures happened
  CHECK(times() == a);
}

namespace {

// The run of `args` on `ranks` data-parallel ranks, one thread each (serve_demo_dp's serving
// with simulated_ranks in place of MPI): each rank serves its share (share_of) through
// serve_host, its loop and engine synced through the group.
std::vector<served> serve_ranks(std::vector<std::string_view> args, int ranks) {
  args.insert(args.end(), {"--clock", "virtual", "--verify", "0"});
  const demo_options o = parse_options(args);
  const run_setup all = resolve(o, backend_kind::host, host_backend_info(o.seed));
  eng::simulated_ranks group(ranks);
  std::vector<served> out(static_cast<std::size_t>(ranks));
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      served& s = out[static_cast<std::size_t>(r)];
      eng::simulated_ranks::handle h = group.rank(r);
      s.setup = share_of(all, r, ranks).setup;
      s.setup.ranks = h;
      std::ostringstream log;
      try {
        s.result = serve_host(s.setup, log, false);
      } catch (const std::exception& e) {  // never leave the other ranks waiting
        errors[static_cast<std::size_t>(r)] = e.what();
        h.abort(e.what());
      }
      s.setup.ranks = {};  // h ends with this thread
      s.log = log.str();
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) REQUIRE(e.empty());
  return out;
}

std::vector<serving::session_id> chats_of(const served& s) {
  std::vector<serving::session_id> c;
  for (const demo_request& d : s.setup.requests)
    if (c.empty() || c.back() != d.row.conversation) c.push_back(d.row.conversation);
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

}  // namespace

TEST_CASE("data-parallel ranks (run_setup::ranks): lockstep, dummy batches, tokens as one rank's") {
  // 3 chats of 2 turns on 4 ranks: chat k goes to rank k - 1, and rank 3, with no request at
  // all, runs only dummy batches. The ranks' shares differ in length (--jitter 0.25), so ranks
  // 0 to 2 also run dummies once their chat is done.
  for (const std::string_view top : {"", "8"}) {
    std::vector<std::string_view> flags = {"--chats", "3", "--turns", "2", "--input-tokens", "8", "--output-tokens", "10",
                                           "--max-num-seqs", "2", "--max-model-len", "64"};
    // Default: Gaudi's buckets. 8: a vLLM ladder up to 8 tokens, so prefills run eagerly (each
    // rank in the agreed shape, dummies too).
    if (!top.empty()) flags.insert(flags.end(), {"--ladder", "vllm", "--max-capture-size", top});
    const std::vector<served> ranks = serve_ranks(flags, 4);
    INFO("--max-capture-size " << top);
    CHECK(chats_of(ranks[0]) == std::vector<serving::session_id>{1});
    CHECK(chats_of(ranks[1]) == std::vector<serving::session_id>{2});
    CHECK(chats_of(ranks[2]) == std::vector<serving::session_id>{3});
    CHECK(ranks[3].setup.requests.empty());
    for (const served& s : ranks) {
      CHECK(s.result.scheduler.preemptions == 0);
      // Every rank steps in every iteration: a step of its own, or a dummy for the others.
      CHECK(s.result.engine.steps == ranks[0].result.engine.steps);
      CHECK(s.result.steps.size() + static_cast<std::size_t>(s.result.dummy_steps) ==
            ranks[0].result.steps.size() + static_cast<std::size_t>(ranks[0].result.dummy_steps));
      CHECK(s.result.end_seconds == ranks[0].result.end_seconds);
      if (!s.setup.requests.empty()) require_plain_loop_tokens(s);
    }
    CHECK(ranks[3].result.steps.empty());
    CHECK(ranks[3].result.dummy_steps > 0);
    CHECK(ranks[3].result.engine.real_tokens == 0);
    if (!top.empty()) CHECK(ranks[3].result.engine.eager_steps() > 0);
  }
}

TEST_CASE("the demo's verify() compares against the plain loop and catches a wrong token") {
  served s = serve_flags(tight);
  std::ostringstream log;
  REQUIRE(verify(s.setup, s.result, 4, log));
  token_id& t = s.result.requests[5].output.at(3);
  t = (t + 1) % s.setup.model.vocab;
  REQUIRE_FALSE(verify(s.setup, s.result, 4, log));
  CHECK(log.str().find("request 6") != std::string::npos);
}

TEST_CASE("the tokens depend on the KV cache's content: a changed history changes the answer") {
  // Guards the comparisons above against a model whose output ignores its context.
  const host_decoder<tiny_model> model(model_config{.seed = 3});
  std::vector<token_id> context(40);
  for (std::size_t i = 0; i < context.size(); ++i) context[i] = static_cast<token_id>(1 + (i * 37) % 500);
  const std::vector<token_id> a = plain_generate(model, context, 16);
  context[5] = context[5] + 1;  // one token early in the history
  const std::vector<token_id> b = plain_generate(model, context, 16);
  CHECK(a != b);
}

TEST_CASE("the same seed gives the same token stream; another seed another") {
  const auto run = [](std::string_view seed) {
    return make_report(serve_flags(with(tight, {"--seed", seed})).result).digest;
  };
  const std::uint64_t a = run("7");
  CHECK(run("7") == a);
  CHECK(run("8") != a);
}

TEST_CASE("bad flags are one error naming the flag") {
  const auto error_of = [](std::vector<std::string_view> args) -> std::string {
    try {
      const demo_options o = parse_options(args);
      (void)resolve(o, backend_kind::host, host_backend_info(o.seed));
    } catch (const usage_error& e) {
      return e.what();
    }
    return "";
  };
  const auto mentions = [](const std::string& message, std::string_view flag) {
    INFO(message);
    CHECK(message.find(flag) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  };
  mentions(error_of({"--capture-timing", "eventually"}), "--capture-timing");
  mentions(error_of({"--capture-order", "random"}), "--capture-order");
  mentions(error_of({"--allocator", "buddy"}), "--allocator");
  mentions(error_of({"--ladder", "fibonacci"}), "--ladder");
  mentions(error_of({"--kv-blocks", "0"}), "--kv-blocks");
  mentions(error_of({"--memory", "1MiB"}), "--memory");                 // the weights alone are 1.63 MiB
  mentions(error_of({"--memory", "lots"}), "--memory");
  mentions(error_of({"--kv-blocks", "3"}), "--kv-blocks");              // no room for the longest chat
  mentions(error_of({"--kv-blocks", "100000"}), "--kv-blocks");         // more than --memory holds
  mentions(error_of({"--max-model-len", "16"}), "--max-model-len");     // shorter than a chat
  mentions(error_of({"--chats"}), "--chats");                           // missing value
  mentions(error_of({"--chats", "-3"}), "--chats");
  mentions(error_of({"--turns", "two"}), "--turns");
  mentions(error_of({"--no-such-flag"}), "--no-such-flag");
  mentions(error_of({"--ladder", "gaudi-file"}), "--bucket-file");
  mentions(error_of({"--max-num-batched-tokens", "64"}), "--max-num-batched-tokens");  // below max_model_len, no chunking
  mentions(error_of({"--clock", "sundial"}), "--clock");
  try {
    (void)resolve(parse_options({"--clock", "virtual"}), backend_kind::cuda, host_backend_info(1));
    FAIL("the CUDA backend accepted the virtual clock");
  } catch (const usage_error& e) {
    mentions(e.what(), "--clock virtual");
  }
  mentions(error_of({"--layers", "gpt-oss-20b"}), "--layers: the pattern has 24 layers; the host model has 2");
  mentions(error_of({"--layers", "full:1,chunked32:1"}), "not chunked local attention");
  mentions(error_of({"--layers", "sliding16:2"}), "--layers: the pattern has no full-attention layer");
  CHECK(error_of({"--layers", "2"}).empty());  // a count: every layer full, as without --layers
  CHECK(error_of({"--chats", "2", "--turns=2"}).empty());
}
