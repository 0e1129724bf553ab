// The run-time façade: any_engine built from an engine_config takes, step by step, exactly the
// steps of the compile-time engine<Buckets, Order, Timing, Allocator, host_backend> written by
// hand for the same policies, for every bucket kind and allocator of the documented set (with
// rungs' CPU reference attention as the forward, so sampled tokens depend on real rows); each
// bad configuration is refused naming the value and the rule.
#include <rungs/engine.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <variant>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace eng = rungs::engine;
namespace kv = rungs::kv;
namespace gaudi = rungs::gaudi;

namespace {

constexpr eng::model_shape model{.dtype = rungs::dtype::bf16, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 16,
                                 .block_size = 16, .num_layers = 1};
constexpr std::int32_t num_blocks = 20;
const eng::graph_cost cost{.base = 1 << 20, .per_unit = 1 << 14};

// Picks each sequence's next token from its output row (a real stack's LM head).
struct sampler {
  void sample(const rungs::serving::scheduled_step&, std::span<const std::size_t> entries, std::span<const float> rows,
              std::span<kv::token_id> out) const {
    for (std::size_t k = 0; k < entries.size(); ++k)
      out[k] = 1 + static_cast<kv::token_id>(std::fabs(rows[k * model.row_width()]) * 1e4f) % 997;
  }
};

// What one engine step did, comparable.
struct run_record {
  eng::phase ph;
  std::int64_t seqs, decodes, tokens;
  std::optional<std::size_t> bucket;
  eng::run_kind run;
  std::optional<eng::eager_reason> reason;
  std::optional<std::size_t> captured;
  friend bool operator==(const run_record&, const run_record&) = default;
};
struct trace {
  std::vector<std::vector<run_record>> steps;
  std::vector<std::vector<kv::token_id>> outputs;  // by request id - 1
  std::int64_t captures = 0, replays = 0, preempted = 0;
};

struct forward_backend {
  eng::reference_forward<model> forward{num_blocks};
  eng::host_backend make() {
    return eng::host_backend(std::ref(forward), {.simulate = eng::simulated_capture{.bytes = cost, .seconds = 0.01},
                                                 .workspace_bytes = eng::reference_forward<model>::workspace_bytes});
  }
};

// Fourteen requests in two conversations' worth of shared prefixes, more than the pool holds at
// once (preemption), the engine told it is idle every third step.
template <class Engine>
trace drive(Engine& e) {
  for (std::uint64_t i = 0; i < 14; ++i) {
    rungs::serving::request r;
    r.id = i + 1;
    r.prompt.assign(32, static_cast<kv::token_id>(7 + i % 2));  // two shared prefixes
    r.prompt.insert(r.prompt.end(), 3 + i * 2, static_cast<kv::token_id>(100 + i));
    r.max_output_tokens = 4 + static_cast<std::int32_t>(i % 5) * 12;
    e.submit(std::move(r));
  }
  trace t;
  t.outputs.resize(14);
  sampler hook;
  for (int n = 0; !e.idle_queues(); ++n) {
    REQUIRE(n < 2000);
    const eng::engine_step& s = e.step(hook);
    std::vector<run_record> runs;
    for (const eng::engine_run& r : s.runs)
      runs.push_back({r.ph, r.seqs, r.decodes, r.tokens, r.bucket, r.run, r.reason, r.captured});
    t.steps.push_back(std::move(runs));
    t.preempted += static_cast<std::int64_t>(s.plan->preempted.size());
    if (s.ran())
      for (const rungs::serving::finished_request& f : s.events->finished) t.outputs[f.id - 1] = f.output;
    if (n % 3 == 2) e.idle({.max_captures = 1});
  }
  t.captures = e.stats().captures;
  t.replays = e.stats().replays;
  return t;
}

// The engine configuration shared by both sides: the pool, the scheduler, the budget.
eng::engine_config base_config() {
  return {.model = model,
          .budget = {.bytes = 64 << 20, .model = cost},
          .kv = {.num_blocks = num_blocks, .block_size = model.block_size, .max_sequences = 8, .max_model_len = 128},
          .scheduler = {.max_num_seqs = 6, .max_num_batched_tokens = 256}};
}

// Runs the same workload through any_engine built from `c` and through engine<...> over
// `space`, and requires every step, token and count to be equal. Returns the trace.
template <class Space, class Order>
trace same_as_compile_time(const eng::engine_config& c, Space space, Order order, eng::step_routing routing) {
  forward_backend fa, fb;
  eng::any_engine<eng::host_backend> a(c, fa.make());
  const trace ta = drive(a);
  auto compile_time = [&]<class Allocator>(std::type_identity<Allocator>) {
    eng::engine<Space, Order, eng::any_timing, Allocator, eng::host_backend> b(
        std::move(space), Allocator(c.kv), fb.make(),
        {.order = order, .timing = c.timing, .budget = c.budget, .scheduler = c.scheduler, .routing = routing, .model = model});
    return drive(b);
  };
  const trace tb = c.allocator == eng::allocator_kind::prefix_caching
                       ? compile_time(std::type_identity<kv::prefix_caching_allocator<>>{})
                       : compile_time(std::type_identity<kv::free_list_allocator>{});
  REQUIRE(ta.steps.size() == tb.steps.size());
  for (std::size_t i = 0; i < ta.steps.size(); ++i) {
    INFO("step " << i);
    REQUIRE(ta.steps[i] == tb.steps[i]);
  }
  REQUIRE(ta.outputs == tb.outputs);
  REQUIRE(ta.captures == tb.captures);
  REQUIRE(ta.replays == tb.replays);
  REQUIRE(ta.preempted == tb.preempted);
  for (const auto& o : ta.outputs) REQUIRE(!o.empty());
  return ta;
}

gaudi::serving_config serving_of(const eng::engine_config& c) { return eng::serving_config_of(c); }

// No VLLM_* variable set, whatever the test process's environment holds.
std::optional<std::string> no_env(const char*) { return std::nullopt; }

}  // namespace

TEST_CASE("any_engine takes the compile-time engine's steps for every bucket kind, allocator and timing") {
  const eng::any_timing timings[] = {eng::startup{}, eng::delayed{.largest_at_startup = true}, eng::lazy{.eager_uses = 1},
                                     eng::idle{}};
  for (const eng::allocator_kind alloc : {eng::allocator_kind::prefix_caching, eng::allocator_kind::free_list}) {
    for (const eng::any_timing& timing : timings) {
      eng::engine_config c = base_config();
      c.allocator = alloc;
      c.timing = timing;
      INFO("allocator " << eng::to_string(alloc) << ", timing " << timing.name());
      {
        // 1-D ladders: single routing, largest-first by default.
        for (const eng::bucket_kind k : {eng::bucket_kind::vllm, eng::bucket_kind::sglang, eng::bucket_kind::trtllm}) {
          INFO("kind " << eng::to_string(k));
          c.buckets = {.kind = k, .max_capture_size = 32};
          const rungs::ladder l = k == eng::bucket_kind::vllm     ? rungs::ladder{rungs::CaptureSizes::vllm(32)}
                                  : k == eng::bucket_kind::sglang ? rungs::ladder{rungs::CaptureSizes::sglang(32)}
                                                                  : rungs::ladder{rungs::CaptureSizes::trtllm(32)};
          const trace t =
              same_as_compile_time(c, eng::ladder_buckets<rungs::ladder>(l), eng::largest_first{}, eng::step_routing::single);
          if (std::holds_alternative<eng::startup>(timing.policy()))  // every rung, before the first step
            CHECK(t.captures == static_cast<std::int64_t>(l.size()));
          CHECK(t.preempted > 0);  // the pool is too small for six running requests
        }
        c.buckets = {.kind = eng::bucket_kind::explicit_rungs, .rungs = {1, 2, 4, 8, 16, 64}};
        same_as_compile_time(c, eng::ladder_buckets<rungs::ladder>(rungs::ladder{rungs::Explicit<>{{1, 2, 4, 8, 16, 64}}}),
                             eng::largest_first{}, eng::step_routing::single);
        // vLLM V1's dispatch key over vLLM's sizes.
        c.buckets = {.kind = eng::bucket_kind::vllm, .max_capture_size = 32, .dispatch = true};
        same_as_compile_time(c, eng::dispatch_buckets(rungs::ladder{rungs::CaptureSizes::vllm(32)}, {.max_num_seqs = 6}),
                             eng::largest_first{}, eng::step_routing::single);
        // Gaudi's linear 2-D grids: by_phase routing and Gaudi's pair of orders by default.
        c.buckets = {.kind = eng::bucket_kind::gaudi_linear, .getenv = no_env};
        const gaudi::serving_config serving = serving_of(c);
        same_as_compile_time(c,
                             eng::gaudi_buckets(gaudi::linear_buckets(
                                 gaudi::read_bucket_config(serving, gaudi::strategy::linear, no_env), serving)),
                             eng::by_phase<>{}, eng::step_routing::by_phase);
      }
    }
  }
}

TEST_CASE("any_engine over Gaudi's exponential and file grids, with an order named in the configuration") {
  const std::string file = "any_engine_test_buckets.txt";
  {
    std::ofstream out(file);
    out << "# prompt (bs, query, context blocks), decode (bs, 1, blocks)\n"
           "([1, 2, 4], [32, 64, 128], 0)\n"
           "([1, 2, 4, 8], 1, [4, 8, 16, 32])\n";
  }
  for (const eng::allocator_kind alloc : {eng::allocator_kind::prefix_caching, eng::allocator_kind::free_list}) {
    INFO("allocator " << eng::to_string(alloc));
    eng::engine_config c = base_config();
    c.allocator = alloc;
    c.timing = eng::delayed{};
    c.order = eng::any_order(eng::min_tokens{});
    c.buckets = {.kind = eng::bucket_kind::gaudi_exponential, .getenv = no_env};
    const gaudi::serving_config serving = serving_of(c);
    same_as_compile_time(c,
                         eng::gaudi_buckets(gaudi::exponential_buckets(
                             gaudi::read_bucket_config(serving, gaudi::strategy::exponential, no_env), serving)),
                         eng::any_order(eng::min_tokens{}), eng::step_routing::by_phase);
    c.buckets = {.kind = eng::bucket_kind::gaudi_file, .bucket_file = file};
    gaudi::bucket_config from_file = gaudi::default_bucket_config(gaudi::strategy::file, serving);
    from_file.file = file;
    const trace t = same_as_compile_time(c, eng::gaudi_buckets(gaudi::file_buckets(from_file, serving)),
                                         eng::any_order(eng::min_tokens{}), eng::step_routing::by_phase);
    // The file's 9 prompt and 16 decode buckets, as the façade built them.
    forward_backend f;
    eng::any_engine<eng::host_backend> e(c, f.make());
    CHECK(e.runner().buckets().size() == 25);
    CHECK(e.runner().buckets().gaudi());
    CHECK(e.runner().at(0) == eng::bucket{.dims = {1, 32, 0}, .rank = 3, .ph = eng::phase::prompt, .shape = {1, 32, 32}});
    CHECK(t.captures > 0);
  }
  std::remove(file.c_str());
}

TEST_CASE("any_engine picks its defaults and says what it built") {
  forward_backend f;
  eng::engine_config c = base_config();
  c.buckets = {.kind = eng::bucket_kind::vllm, .max_capture_size = 32};
  std::ostringstream log;
  eng::any_engine<eng::host_backend> e(c, f.make(), &log);
  CHECK(log.str() == "CUDA graph capture sizes (vllm, tokens per step, 7 rungs): [1, 2, 4, 8, 16, 24, 32]; steps of more "
                     "tokens run eagerly\n");
  CHECK(e.allocator() == eng::allocator_kind::prefix_caching);
  CHECK(e.runner().config().order.name() == "largest-first");
  CHECK(e.runner().config().timing.name() == "startup");
  CHECK(e.num_blocks() == num_blocks);
  CHECK(!e.runner().buckets().keyed_on_batch());

  c.buckets.dispatch = true;
  std::ostringstream dlog;
  forward_backend g;
  eng::any_engine<eng::host_backend> d(c, g.make(), &dlog);
  CHECK(dlog.str().ends_with("Dispatch key (tokens, uniform decode), vLLM V1's: 3 uniform-decode graphs (one new token "
                             "per sequence, up to 6 sequences) and 7 token-count graphs\n"));
  CHECK(d.runner().buckets().keyed_on_batch());

  c.buckets = {.kind = eng::bucket_kind::gaudi_linear, .getenv = no_env};
  forward_backend h;
  eng::any_engine<eng::host_backend> gl(c, h.make());
  CHECK(gl.runner().config().order.name() == "prompt min-tokens, decode max-bs");
  CHECK(gl.runner().buckets().gaudi());

  // A backend made from the bucket space sees every bucket before the engine exists.
  std::size_t seen = 0;
  forward_backend m;
  c.buckets = {.kind = eng::bucket_kind::explicit_rungs, .rungs = {1, 2, 4}};
  eng::any_engine<eng::host_backend> made(c, [&](const eng::any_buckets& space) {
    seen = space.size();
    return m.make();
  });
  CHECK(seen == 3);
}

TEST_CASE("a bad engine configuration is refused, naming the value and the rule") {
  forward_backend f;
  auto build = [&f](eng::engine_config c) { eng::any_engine<eng::host_backend> e(c, f.make()); };
  auto with = [](eng::bucket_config b) {
    eng::engine_config c = base_config();
    c.buckets = std::move(b);
    return c;
  };
  using K = eng::bucket_kind;
  CHECK_THROWS_WITH(build(with({.kind = K::gaudi_linear, .dispatch = true})),
                    "buckets (kind gaudi-linear): dispatch applies to 1-D ladders only (vllm, sglang, trtllm, explicit)");
  CHECK_THROWS_WITH(build(with({.kind = K::vllm, .max_capture_size = 32, .rungs = {1, 2}})),
                    "buckets (kind vllm): rungs apply to kind explicit only");
  CHECK_THROWS_WITH(build(with({.kind = K::gaudi_linear, .bucket_file = "b.txt"})),
                    "buckets (kind gaudi-linear): bucket_file 'b.txt' applies to kinds gaudi-file and explicit only");
  CHECK_THROWS_WITH(build(with({.kind = K::explicit_rungs, .max_capture_size = 8, .rungs = {1, 2}})),
                    "buckets (kind explicit): max_capture_size = 8 applies to kinds vllm, sglang and trtllm only");
  CHECK_THROWS_WITH(build(with({.kind = K::sglang, .max_capture_size = 8, .getenv = no_env})),
                    "buckets (kind sglang): getenv applies to Gaudi's kinds only (their VLLM_* variables)");
  CHECK_THROWS_WITH(build(with({.kind = K::trtllm})), "buckets (kind trtllm): max_capture_size = 0 must be positive");
  CHECK_THROWS_WITH(build(with({.kind = K::explicit_rungs})), "buckets (kind explicit): needs rungs or a bucket_file");
  CHECK_THROWS_WITH(build(with({.kind = K::explicit_rungs, .rungs = {1}, .bucket_file = "b.txt"})),
                    "buckets (kind explicit): takes rungs or a bucket_file, not both");
  CHECK_THROWS_WITH(build(with({.kind = K::gaudi_file})), "buckets (kind gaudi-file): needs a bucket_file");
  CHECK_THROWS_WITH(build(with({.kind = K::gaudi_file, .bucket_file = "/nonexistent/buckets.txt"})),
                    "/nonexistent/buckets.txt: cannot open: No such file or directory");
  CHECK_THROWS_AS(build(with({.kind = K::explicit_rungs, .rungs = {4, 2}})), rungs::ladder_error);
  CHECK_THROWS_WITH(build(with({.kind = K::gaudi_linear,
                                .getenv = [](const char* n) -> std::optional<std::string> {
                                  if (std::string_view(n) == "VLLM_DECODE_BS_BUCKET_STEP") return "many";
                                  return std::nullopt;
                                }})),
                    Catch::Contains("VLLM_DECODE_BS_BUCKET_STEP") && Catch::Contains("many"));

  eng::engine_config single = with({.kind = K::gaudi_exponential, .getenv = no_env});
  single.routing = eng::step_routing::single;
  CHECK_THROWS_WITH(build(single),
                    "engine config: routing single over Gaudi's gaudi-exponential buckets would look prefill chunks up in "
                    "decode buckets; Gaudi's prompt and decode grids need routing by_phase");
  eng::engine_config seqs = with({.kind = K::vllm, .max_capture_size = 8});
  seqs.scheduler.max_num_seqs = 0;
  CHECK_THROWS_WITH(build(seqs), "scheduler: max_num_seqs = 0 must be positive");
  eng::engine_config block = with({.kind = K::vllm, .max_capture_size = 8});
  block.kv.block_size = 32;
  CHECK_THROWS_WITH(build(block), "engine: the allocator's block_size = 32 must equal the model's block_size = 16");

  CHECK(eng::parse_bucket_kind("gaudi-exponential") == K::gaudi_exponential);
  CHECK(eng::parse_bucket_kind("explicit") == K::explicit_rungs);
  CHECK_THROWS_WITH(eng::parse_bucket_kind("gaudi"),
                    "bucket kind 'gaudi' is not one of gaudi-linear, gaudi-exponential, gaudi-file, vllm, sglang, trtllm, explicit");
  CHECK(eng::parse_allocator_kind("free-list") == eng::allocator_kind::free_list);
  CHECK_THROWS_WITH(eng::parse_allocator_kind("lru"), "allocator kind 'lru' is not one of prefix-caching, free-list");
}

TEST_CASE("ranks over any_buckets: Gaudi's phases must align, the dispatch key agrees on mixed") {
  using runner = eng::graph_runner<eng::any_buckets, eng::largest_first, eng::startup, eng::host_backend>;
  auto on_two_ranks = [](auto step) {
    std::vector<std::string> out(2);
    std::thread t0([&] { out[0] = step(0); }), t1([&] { out[1] = step(1); });
    t0.join();
    t1.join();
    return out;
  };
  eng::simulated_ranks group(2);
  const gaudi::serving_config serving{.max_num_seqs = 4, .block_size = 4, .max_model_len = 16};
  auto errors = on_two_ranks([&](int r) {
    rungs_test::toy_model m;
    eng::any_buckets space = eng::make_buckets({.kind = eng::bucket_kind::gaudi_linear, .getenv = no_env}, serving);
    runner e(std::move(space), eng::host_backend(std::ref(m)),
             {.max_model_len = 16, .shape = eng::run_shape::of(rungs_test::tiny_model, 64)});
    auto h = group.rank(r);
    e.sync_with(h);
    rungs_test::batch_builder bb(2);
    try {
      e.step(bb.make(1, 1), r == 0 ? eng::phase::prompt : eng::phase::decode);
    } catch (const std::logic_error& x) {
      return std::string(x.what());
    }
    return std::string("no error");
  });
  const std::string want = "engine: ranks stepped in different phases (prompt and decode) over a bucket space whose "
                           "phases are different graphs; a multi-rank stack must align phases";
  CHECK(errors == std::vector<std::string>{want, want});

  // Dispatch over 1 2 4 8 with 4 sequences: decode graphs (1, 1) (2, 1) (4, 1), then mixed 1 2 4 8.
  // Rank 0 decodes 2 sequences (uniform decode), rank 1 prefills 3 tokens: both pad to mixed 4.
  eng::simulated_ranks dgroup(2);
  auto buckets = on_two_ranks([&](int r) {
    rungs_test::toy_model m;
    eng::any_buckets space = eng::make_buckets({.kind = eng::bucket_kind::explicit_rungs, .rungs = {1, 2, 4, 8}, .dispatch = true},
                                               serving);
    runner e(std::move(space), eng::host_backend(std::ref(m)),
             {.max_model_len = 16, .shape = eng::run_shape::of(rungs_test::tiny_model, 64)});
    auto h = dgroup.rank(r);
    e.sync_with(h);
    rungs_test::batch_builder bb(2);
    const auto res = r == 0 ? e.step(bb.make(2, 3, 1)) : e.step(bb.make(1, 0, 3), eng::phase::prompt);
    std::ostringstream os;
    os << e.at(*res.bucket) << (res.run == eng::run_kind::replay ? " replay" : " eager");
    return os.str();
  });
  CHECK(buckets == std::vector<std::string>{"4 replay", "4 replay"});
}
