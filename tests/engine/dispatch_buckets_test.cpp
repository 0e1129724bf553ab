// vLLM V1's dispatch key (num_tokens, uniform_decode[, has_lora]) as a bucket space, alone
// and through the engine on the host backend: exact buckets, lookups and capture sequences.
#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
using strings = std::vector<std::string>;
constexpr std::int64_t MiB = 1 << 20;

std::string str(const bucket& b) {
  std::ostringstream os;
  os << to_string(b.ph)[0] << b;
  return os.str();
}
strings all(const dispatch_buckets& s) {
  strings out;
  for (std::size_t i = 0; i < s.size(); ++i) out.push_back(str(s.at(i)));
  return out;
}
batch_key key(std::int64_t seqs, std::int64_t tokens, std::int64_t max_query, bool lora = false) {
  return {.ph = phase::decode, .seqs = seqs, .tokens = tokens, .max_query = max_query, .max_context = tokens,
          .has_lora = lora};
}
// The space the engine uses: the phase comes from the batch.
std::optional<std::string> lookup(const dispatch_buckets& s, batch_key k) {
  k.ph = s.phase_of(k);
  auto i = s.find(k);
  if (!i) return std::nullopt;
  return str(s.at(*i));
}

// vLLM 0.33's default sizes for max_num_seqs = 4, one speculative token: 1 2 4 8 16.
const rungs::ladder four_seqs_k1{rungs::VllmCaptureSizes{.max_num_seqs = 4, .max_num_batched_tokens = 8192, .spec_tokens = 1}};
}  // namespace

TEST_CASE("dispatch_buckets: uniform-decode graphs are the capture sizes rounded to 1 + k, within max_num_seqs") {
  const dispatch_buckets s(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4});
  static_assert(bucket_space<dispatch_buckets>);
  CHECK(all(s) == strings{"d(1, 2)", "d(2, 2)", "d(4, 2)", "p1", "p2", "p4", "p8", "p16"});
  CHECK(s.at(2).shape == graph_shape{4, 8, 0, 2});  // 4 request rows of exactly 2 new tokens
  CHECK(s.at(7).shape == graph_shape{4, 16, 0});  // mixed: no more than max_num_seqs request rows
  CHECK(s.decode_graphs() == 3);
  CHECK(s.mixed_graphs() == 5);

  // vLLM 0.33's defaults for max_num_seqs = 8, k = 2 (1 2 3 4 6 8 12 16 24 32 40 48): rounded
  // to multiples of 3 and kept up to 8 requests (24 tokens).
  const dispatch_buckets k2(rungs::ladder{rungs::VllmCaptureSizes{8, 8192, 2}}, {.spec_tokens = 2, .max_num_seqs = 8});
  const strings k2_all = all(k2);
  CHECK(strings(k2_all.begin(), k2_all.begin() + 6) ==
        strings{"d(1, 3)", "d(2, 3)", "d(3, 3)", "d(4, 3)", "d(6, 3)", "d(8, 3)"});
  CHECK(k2.mixed_graphs() == 12);
}

TEST_CASE("dispatch_buckets: a batch is uniform decode only when every sequence has exactly 1 + k tokens") {
  const dispatch_buckets s(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4});
  CHECK(lookup(s, key(3, 6, 2)) == "d(4, 2)");  // 3 x 2 tokens: the 4-request FULL graph
  CHECK(lookup(s, key(1, 2, 2)) == "d(1, 2)");
  CHECK(lookup(s, key(3, 3, 1)) == "p4");       // 3 decodes of 1 token (no draft): not uniform
  CHECK(lookup(s, key(2, 5, 4)) == "p8");       // a prefill chunk of 4 and a decode of 1: mixed
  CHECK(lookup(s, key(1, 10, 10)) == "p16");    // a prefill
  CHECK(lookup(s, key(1, 17, 17)) == std::nullopt);  // above the largest size: eager
  CHECK(s.phase_of(key(3, 6, 2)) == phase::decode);
  CHECK(s.phase_of(key(3, 3, 1)) == phase::prompt);
  // A caller that says "decode" for a mixed batch gets no graph rather than a wrong one.
  CHECK_FALSE(s.find(key(3, 3, 1)));

  // Sizes whose rounding stops short of max_num_seqs * q: a wider uniform batch takes a
  // mixed graph (vLLM lists FULL before PIECEWISE for the same token count).
  const dispatch_buckets short_decode(rungs::ladder{rungs::Explicit{1, 2, 4, 8, 16}}, {.spec_tokens = 2, .max_num_seqs = 8});
  CHECK(all(short_decode) == strings{"d(1, 3)", "d(2, 3)", "d(3, 3)", "p1", "p2", "p4", "p8", "p16"});
  CHECK(lookup(short_decode, key(3, 9, 3)) == "d(3, 3)");
  CHECK(lookup(short_decode, key(4, 12, 3)) == "p16");
  CHECK(short_decode.phase_of(key(4, 12, 3)) == phase::prompt);
  // More sequences than max_num_seqs fit no graph's request rows.
  CHECK(lookup(short_decode, key(9, 9, 1)) == std::nullopt);
}

TEST_CASE("dispatch_buckets: a batch with a prefill is never a uniform decode, whatever its shape") {
  const dispatch_buckets s(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4});
  // Two fresh prompts of exactly 1 + k = 2 tokens: the shape of two decodes with one draft.
  batch_key prompts = key(2, 4, 2);
  prompts.has_prefill = true;
  CHECK(s.phase_of(prompts) == phase::prompt);
  CHECK(lookup(s, prompts) == "p4");
  CHECK(s.dispatch(prompts) == dispatch_decision{runtime_mode::piecewise, 5, 4, 4});
  CHECK(s.dispatch(key(2, 4, 2)) == dispatch_decision{runtime_mode::full, 1, 2, 4});
  // Through key_of: a sequence marked prefill makes the batch one.
  const std::int32_t t[2] = {7, 8};
  const std::int32_t table[1] = {0};
  std::vector<sequence> seqs{{.tokens = t, .context = 5, .block_table = table},
                             {.tokens = t, .context = 0, .block_table = table, .prefill = true}};
  CHECK(key_of(phase::decode, seqs, 16).has_prefill);
  seqs[1].prefill = false;
  CHECK_FALSE(key_of(phase::decode, seqs, 16).has_prefill);
}

// vLLM's cudagraph_mode, sizes 1 2 4 8 16 with one speculative token (q = 2), max_num_seqs 4.
// Batches: A = 3 decodes of 2 tokens (uniform), B = 2 prompts of 2 tokens (a prefill of the
// uniform shape), C = a 10-token prefill, D = 17 tokens (above every size).
TEST_CASE("dispatch_buckets: each cudagraph mode's graphs, runtime mode and padded shape") {
  batch_key a = key(3, 6, 2), b = key(2, 4, 2), c = key(1, 10, 10), d = key(1, 17, 17);
  b.has_prefill = c.has_prefill = d.has_prefill = true;
  const auto space = [](cudagraph_mode m) {
    return dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4, .mode = m});
  };
  const dispatch_decision eager_d{runtime_mode::none, std::nullopt, 1, 17};
  SECTION("none: no graph, every batch eager at its own shape") {
    const dispatch_buckets s = space(cudagraph_mode::none);
    CHECK(s.size() == 0);
    CHECK(s.dispatch(a) == dispatch_decision{runtime_mode::none, std::nullopt, 3, 6});
    CHECK(s.dispatch(c) == dispatch_decision{runtime_mode::none, std::nullopt, 1, 10});
  }
  SECTION("piecewise: mixed graphs only; uniform decodes use them") {
    const dispatch_buckets s = space(cudagraph_mode::piecewise);
    CHECK(all(s) == strings{"p1", "p2", "p4", "p8", "p16"});
    CHECK(s.dispatch(a) == dispatch_decision{runtime_mode::piecewise, 3, 4, 8});
    CHECK(s.dispatch(b) == dispatch_decision{runtime_mode::piecewise, 2, 4, 4});
    CHECK(s.dispatch(c) == dispatch_decision{runtime_mode::piecewise, 4, 4, 16});
    CHECK(s.dispatch(d) == eager_d);
  }
  SECTION("full: the mixed sizes as FULL graphs; uniform decodes reuse them") {
    const dispatch_buckets s = space(cudagraph_mode::full);
    CHECK(all(s) == strings{"p1", "p2", "p4", "p8", "p16"});
    CHECK(s.dispatch(a) == dispatch_decision{runtime_mode::full, 3, 4, 8});
    CHECK(s.dispatch(c) == dispatch_decision{runtime_mode::full, 4, 4, 16});
    CHECK(s.dispatch(d) == eager_d);
  }
  SECTION("full_decode_only: FULL decode graphs; prefills and mixed batches eager") {
    const dispatch_buckets s = space(cudagraph_mode::full_decode_only);
    CHECK(all(s) == strings{"d(1, 2)", "d(2, 2)", "d(4, 2)"});
    CHECK(s.dispatch(a) == dispatch_decision{runtime_mode::full, 2, 4, 8});
    CHECK(s.dispatch(b) == dispatch_decision{runtime_mode::none, std::nullopt, 2, 4});
    CHECK(s.dispatch(c) == dispatch_decision{runtime_mode::none, std::nullopt, 1, 10});
    CHECK(s.dispatch(key(5, 10, 2)) == dispatch_decision{runtime_mode::none, std::nullopt, 5, 10});  // > 4 requests
  }
  SECTION("full_and_piecewise (vLLM's default): FULL decode graphs, PIECEWISE mixed graphs") {
    const dispatch_buckets s = space(cudagraph_mode::full_and_piecewise);
    CHECK(all(s) == strings{"d(1, 2)", "d(2, 2)", "d(4, 2)", "p1", "p2", "p4", "p8", "p16"});
    CHECK(s.dispatch(a) == dispatch_decision{runtime_mode::full, 2, 4, 8});
    CHECK(s.dispatch(b) == dispatch_decision{runtime_mode::piecewise, 5, 4, 4});
    CHECK(s.dispatch(c) == dispatch_decision{runtime_mode::piecewise, 7, 4, 16});
    CHECK(s.dispatch(d) == eager_d);
    CHECK(s.mode_of(0) == runtime_mode::full);
    CHECK(s.mode_of(3) == runtime_mode::piecewise);
    CHECK(dispatch_options{}.mode == cudagraph_mode::full_and_piecewise);
  }
  CHECK(parse_cudagraph_mode("full_decode_only") == cudagraph_mode::full_decode_only);
  CHECK(parse_cudagraph_mode("FULL") == std::nullopt);
  CHECK(to_string(cudagraph_mode::full_and_piecewise) == "full_and_piecewise");
  CHECK(to_string(runtime_mode::piecewise) == "PIECEWISE");
}

TEST_CASE("dispatch_buckets: has_lora doubles the graphs when specialised, else one set serves both") {
  const dispatch_buckets s(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4, .specialize_lora = true});
  CHECK(s.size() == 16);
  CHECK(s.lora_cases() == 2);
  CHECK(all(s) == strings{"d(1, 2, 0)", "d(2, 2, 0)", "d(4, 2, 0)", "p(1, 1, 0)", "p(2, 1, 0)", "p(4, 1, 0)",
                          "p(8, 1, 0)", "p(16, 1, 0)", "d(1, 2, 1)", "d(2, 2, 1)", "d(4, 2, 1)", "p(1, 1, 1)",
                          "p(2, 1, 1)", "p(4, 1, 1)", "p(8, 1, 1)", "p(16, 1, 1)"});
  CHECK(lookup(s, key(3, 6, 2)) == "d(4, 2, 0)");
  CHECK(lookup(s, key(3, 6, 2, true)) == "d(4, 2, 1)");
  CHECK(lookup(s, key(1, 10, 10, true)) == "p(16, 1, 1)");
  const dispatch_buckets shared(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4});
  CHECK(lookup(shared, key(3, 6, 2, true)) == "d(4, 2)");
}

TEST_CASE("dispatch_buckets: bad options are named") {
  CHECK_THROWS_WITH(dispatch_buckets(four_seqs_k1, {.spec_tokens = -1, .max_num_seqs = 4}),
                    "dispatch buckets: spec_tokens = -1 must not be negative");
  CHECK_THROWS_WITH(dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 0}),
                    "dispatch buckets: max_num_seqs = 0 must be in 1 .. 2147483647");
  CHECK_THROWS_WITH(dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4,
                                                    .mode = static_cast<cudagraph_mode>(9)}),
                    "dispatch buckets: mode = 9 is not a cudagraph_mode (none, piecewise, full, full_decode_only, "
                    "full_and_piecewise)");
}

TEST_CASE("step kinds: prefill, mixed, uniform decode") {
  CHECK(kind_of(1, 0, 26) == step_kind::prefill);  // a 26-token prompt is not a decode
  CHECK(kind_of(1, 3, 29) == step_kind::mixed);
  CHECK(kind_of(0, 4, 4) == step_kind::uniform_decode);
  CHECK(kind_of(0, 4, 8, 2) == step_kind::uniform_decode);
  CHECK(kind_of(0, 4, 6, 2) == step_kind::mixed);  // some decodes without their drafts
  CHECK(to_string(step_kind::uniform_decode) == "uniform decode");
}

namespace {
template <class Order, class Timing>
using dispatch_engine = graph_runner<dispatch_buckets, Order, Timing, host_backend>;
using both_largest_first = by_phase<largest_first, largest_first>;
}  // namespace

TEST_CASE("the engine on the dispatch key: capture sequence across both spaces, then each kind of step") {
  toy_model model;
  strings log;
  dispatch_engine<both_largest_first, startup> e(dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4}),
                                                 host_backend(std::ref(model)),
                                                 {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.observe(capture_log{&log});
  e.start();
  CHECK(log == strings{"startup:16", "startup:8", "startup:4", "startup:2", "startup:1", "startup:(4, 2)",
                       "startup:(2, 2)", "startup:(1, 2)"});
  batch_builder bb;
  // The caller's phase is not needed: the space reads the kind off the batch.
  auto prefill = e.step(bb.make(1, 0, 10));
  CHECK(prefill.run == run_kind::replay);
  CHECK(str(e.at(*prefill.bucket)) == "p16");
  auto decode = e.step(bb.make(3, 10, 2));
  CHECK(decode.run == run_kind::replay);
  CHECK(str(e.at(*decode.bucket)) == "d(4, 2)");
  auto no_drafts = e.step(bb.make(3, 12, 1));
  CHECK(str(e.at(*no_drafts.bucket)) == "p4");
  CHECK(e.stats().replays == 3);
  CHECK(e.stats().padded_rows == 3 + 1 + 1);  // 1 of 4 mixed rows, 1 of 4 decode rows, 1 of 4
}

TEST_CASE("the engine on the dispatch key: LoRA graphs and the budget split across the spaces") {
  toy_model model;
  strings log;
  // 1 MiB per cost unit: tokens for mixed graphs, requests for decode graphs. Mixed graphs
  // get 37.5% of 40 MiB (15 MiB), decode graphs 25 MiB.
  host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = 0, .per_unit = MiB}}};
  dispatch_engine<both_largest_first, startup> e(
      dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4, .specialize_lora = true}),
      host_backend(std::ref(model), sim),
      {.budget = {.bytes = 40 * MiB, .prompt_ratio = 0.375}, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.observe(capture_log{&log});
  e.start();
  // Mixed graphs first, within 15 MiB: the first 16-token graph is admitted on trust (no
  // estimate yet) and released at its measured 16 MiB; then 8 + 4 + 2 + 1 without adapters fit
  // and each twin with adapters would pass 15. Every decode graph fits its share (4 + 4 + 2 +
  // 2 + 1 + 1 = 14 MiB). Then the refused mixed graphs try the pooled leftover (40 - 29 =
  // 11 MiB): 16 no, 16 no, 8 yes (37), 4 no (41), 2 yes (39), 1 yes (40).
  CHECK(log == strings{"startup:(16, 1, 0):released", "startup:(16, 1, 1):refused", "startup:(8, 1, 0)",
                       "startup:(8, 1, 1):refused",   "startup:(4, 1, 0)",          "startup:(4, 1, 1):refused",
                       "startup:(2, 1, 0)",           "startup:(2, 1, 1):refused",  "startup:(1, 1, 0)",
                       "startup:(1, 1, 1):refused",   "startup:(4, 2, 0)",          "startup:(4, 2, 1)",
                       "startup:(2, 2, 0)",           "startup:(2, 2, 1)",          "startup:(1, 2, 0)",
                       "startup:(1, 2, 1)",           "startup:(16, 1, 0):refused", "startup:(16, 1, 1):refused",
                       "startup:(8, 1, 1)",           "startup:(4, 1, 1):refused",  "startup:(2, 1, 1)",
                       "startup:(1, 1, 1)"});
  CHECK(e.ledger().used(phase::prompt) == 26 * MiB);
  CHECK(e.ledger().used(phase::decode) == 14 * MiB);
  batch_builder bb;
  auto seqs = bb.make(3, 10, 2);
  std::vector<sequence> with_adapter(seqs.begin(), seqs.end());
  with_adapter[1].lora = true;
  auto r = e.step(with_adapter);
  CHECK(r.run == run_kind::replay);
  CHECK(str(e.at(*r.bucket)) == "d(4, 2, 1)");
  CHECK(str(e.at(*e.step(seqs).bucket)) == "d(4, 2, 0)");
}

TEST_CASE("the engine on the dispatch key: the forward sees each graph's uniform query length") {
  toy_model model;
  std::vector<std::int64_t> queries;  // batch.query of every forward run (captures' warm-ups included)
  auto forward = [&](const host_step& s) {
    queries.push_back(s.batch.query);
    model(s);
  };
  dispatch_engine<both_largest_first, startup> e(dispatch_buckets(four_seqs_k1, {.spec_tokens = 1, .max_num_seqs = 4}),
                                                 host_backend(forward),
                                                 {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  e.start();
  // Five mixed graphs declare nothing; the three uniform-decode graphs declare 1 + 1 tokens.
  CHECK(queries == std::vector<std::int64_t>{0, 0, 0, 0, 0, 2, 2, 2});
  queries.clear();
  batch_builder bb;
  e.step(bb.make(3, 10, 2));   // uniform decode: replays (4, 2)
  e.step(bb.make(1, 0, 10));   // a prompt: replays the 16-token graph
  e.step(bb.make(3, 12, 1));   // decodes without their drafts: mixed, replays 4
  e.step(bb.make(2, 0, 9));    // 18 tokens, above the top: eager in the live shape
  CHECK(queries == std::vector<std::int64_t>{2, 0, 0, 0});
}

TEST_CASE("staging for a uniform-query graph refuses a sequence with another query length") {
  batch_builder bb;
  padded_batch staged;
  CHECK_THROWS_WITH(staged.stage(bb.make(2, 4, 1), 4, 8, 4, 4, 0, 2),
                    "sequence 0 has 1 new tokens; a graph of uniform query length 2 takes exactly that many per sequence");
  staged.stage(bb.make(2, 4, 2), 4, 8, 4, 4, 0, 2);
  CHECK(staged.query() == 2);
  CHECK(staged.view().query == 2);
  CHECK(staged.shape() == staged_shape{4, 8, 4, 2});
  CHECK_THROWS_WITH(staged.stage(bb.make(1, 4, 2), 4, 8, 4, 4, 0, -1), "query = -1 must not be negative");
}
