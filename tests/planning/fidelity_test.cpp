// Tests of include/rungs/planning/fidelity.hpp and rungs/serving/benchmark_workload.hpp: the
// benchmark workloads, the cost profiles' terms, reading published figures and replaying one.
#include <rungs/planning/fidelity.hpp>

#include <catch2/catch.hpp>

#include <cmath>

using namespace rungs;
using namespace rungs::planning;

TEST_CASE("benchmark workload: fixed lengths, all at once or a Poisson process") {
  serving::benchmark_workload w{.requests = 3, .rate = 0, .lengths = serving::benchmark_lengths::fixed, .input_mean = 100,
                                .output_mean = 7};
  const std::vector<serving::trace_request> all = serving::generate_benchmark(w);
  REQUIRE(all.size() == 3);
  for (const serving::trace_request& r : all) {
    CHECK(r.arrival == 0);
    CHECK(r.prompt_tokens == 100);
    CHECK(r.output_tokens == 7);
    CHECK(r.conversation == 0);
  }
  w.requests = 20000;
  w.rate = 4;
  const std::vector<serving::trace_request> timed = serving::generate_benchmark(w);
  CHECK(timed.front().arrival == 0);
  for (std::size_t k = 1; k < timed.size(); ++k) REQUIRE(timed[k].arrival > timed[k - 1].arrival);
  // 19999 exponential gaps of mean 0.25 s: their mean within 2% (the standard error is 0.7%).
  CHECK(timed.back().arrival / 19999 == Approx(0.25).epsilon(0.02));
  CHECK(serving::generate_benchmark(w) == timed);  // the same seed, the same workload
  w.rate = -1;
  CHECK_THROWS_WITH(serving::generate_benchmark(w), "benchmark workload: rate = -1.000000 must be in [0, 10^6] requests/s");
}

TEST_CASE("benchmark workload: ShareGPT-like lengths pass the benchmarks' filter with the published means") {
  const serving::benchmark_workload w{.requests = 1200, .rate = 4, .input_mean = 224.2, .output_mean = 189.1};
  const std::vector<serving::trace_request> rows = serving::generate_benchmark(w);
  REQUIRE(rows.size() == 1200);
  double in = 0, out = 0;
  std::int32_t longest = 0;
  for (const serving::trace_request& r : rows) {
    REQUIRE(r.prompt_tokens >= 4);
    REQUIRE(r.output_tokens >= 4);
    REQUIRE(r.prompt_tokens <= 1024);
    REQUIRE(r.prompt_tokens + r.output_tokens <= 2048);
    in += r.prompt_tokens;
    out += r.output_tokens;
    longest = std::max(longest, r.prompt_tokens);
  }
  CHECK(in / 1200 == Approx(224.2).epsilon(1e-3));
  CHECK(out / 1200 == Approx(189.1).epsilon(1e-3));
  CHECK(longest > 900);  // a heavy tail, as ShareGPT's
  serving::benchmark_workload bad = w;
  bad.input_mean = 600;
  CHECK_THROWS_WITH(serving::generate_benchmark(bad),
                    "benchmark workload: sharegpt input_mean = 600.000000 must be in [4, 512] (prompts are at most 1024 tokens)");
}

TEST_CASE("cost profile: datasheet adds nothing; calibrated adds CPU overheads and tensor parallelism's all-reduces") {
  const cost_presets p;
  const gpu_spec& h100 = p.gpu("h100-sxm");
  const model_spec& m70 = p.model("llama-3-70b");
  const cost_model plain = roofline_cost(h100, m70, 4);
  const cost_model datasheet = roofline_cost(h100, m70, 4, {}, cost_profile_named("datasheet"));
  CHECK(datasheet.weights_seconds == plain.weights_seconds);
  CHECK(datasheet.step_overhead_seconds == 0);
  CHECK(datasheet.overhead_seconds_per_token == 0);
  CHECK(datasheet.step_seconds(64, 1000, true) == plain.step_seconds(64, 1000, true));

  const cost_profile q{.name = "q", .bandwidth_efficiency = 0.5, .compute_efficiency = 0.25, .step_seconds = 1e-3,
                       .seconds_per_sequence = 2e-6, .link_efficiency = 0.5, .allreduce_seconds = 1e-5};
  const cost_model c = roofline_cost(h100, m70, 4, {}, q);
  CHECK(c.weights_seconds == Approx(69'501'714'432.0 * 2 / 4 / (3.35e12 * 0.5)));
  CHECK(c.seconds_per_token == Approx(2 * 69'501'714'432.0 / 4 / (989e12 * 0.25)));
  // 2 x 80 all-reduces a step: 10 us each, and 2 x 3/4 of 8192 x 2 bytes per token row at
  // 225 GB/s (half of 450).
  CHECK(c.step_overhead_seconds == Approx(1e-3 + 160 * 1e-5));
  CHECK(c.overhead_seconds_per_token == Approx(160 * 1.5 * 16384 / 225e9));
  CHECK(c.overhead_seconds_per_sequence == 2e-6);
  // Added to a step, replayed or eager: 8 token rows of 3 sequences.
  CHECK(c.step_seconds(8, 0, true, 3) == Approx(c.weights_seconds + c.graph_overhead_seconds + c.step_overhead_seconds +
                                                 8 * c.overhead_seconds_per_token + 3 * 2e-6));
  // One rank: no all-reduce.
  const cost_model one = roofline_cost(h100, p.model("llama-3-8b"), 1, {}, q);
  CHECK(one.step_overhead_seconds == Approx(1e-3));
  CHECK(one.overhead_seconds_per_token == 0);

  gpu_spec no_link = h100;
  no_link.link_bandwidth = 0;
  CHECK_THROWS_WITH(roofline_cost(no_link, m70, 4, {}, q),
                    "gpu h100-sxm: link_bandwidth = 0, but cost profile q prices tensor parallelism's all-reduces: give "
                    "the GPU a link_bandwidth");
  cost_profile bad = q;
  bad.compute_efficiency = 1.5;
  CHECK_THROWS_WITH(roofline_cost(h100, m70, 4, {}, bad), "cost profile q: compute_efficiency = 1.5 must be in (0, 1]");
  CHECK_THROWS_WITH(cost_profile_named("fast"), "unknown cost profile 'fast' (known: datasheet, calibrated)");
}

namespace {
const char* header =
    "id,split,engine,gpu,model,tp,dataset,requests,rate,input_mean,output_mean,chunked_prefill,max_batched_tokens,"
    "max_num_seqs,graph_max_bs,max_model_len,memory_fraction,metric,published,replayed,source,note\n";
}

TEST_CASE("published figures: read, with errors naming the line and the value") {
  const std::string text = std::string("# a comment\n") + header +
                           "a,fit,e,h100-sxm,llama-3-8b,1,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,ttft_p50_ms,12.5,yes,"
                           "https://example.org/x,a note, with a comma\n"
                           "b,held-out,e,h100-sxm,llama-3-8b,1,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,tpot_p50_ms,7,no,"
                           "https://example.org/x,why not\n";
  const std::vector<published_figure> f = read_published(text, "p.csv");
  REQUIRE(f.size() == 2);
  CHECK(f[0].id == "a");
  CHECK(f[0].fit);
  CHECK(f[0].metric == fidelity_metric::ttft_p50);
  CHECK(f[0].value == 12.5);
  CHECK(f[0].run.workload.rate == 0);
  CHECK(f[0].note == "a note, with a comma");
  CHECK(f[0].line == 3);
  CHECK(f[0].run_key == f[1].run_key);
  CHECK_FALSE(f[1].fit);
  CHECK_FALSE(f[1].replayed);

  CHECK_THROWS_WITH(read_published("id,split\n", "p.csv"), "p.csv:1: expected 22 columns, found 2");
  CHECK_THROWS_WITH(read_published(std::string(header) + "a,fit,e,g,m,1,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,ttft,1,yes,https://x,n\n", "p.csv"),
                    "p.csv:2: metric = 'ttft' is not one of output_throughput, ttft_p50_ms, itl_p50_ms, tpot_p50_ms");
  CHECK_THROWS_WITH(read_published(std::string(header) + "a,fit,e,g,m,0,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,ttft_p50_ms,1,yes,https://x,n\n", "p.csv"),
                    "p.csv:2: tp = '0' is not a number in [1, 1024]");
  CHECK_THROWS_WITH(read_published(std::string(header) + "a,fit,e,g,m,1,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,ttft_p50_ms,1,yes,http://x,n\n", "p.csv"),
                    "p.csv:2: source = 'http://x' must be an https:// URL");
  const std::string row = "a,fit,e,g,m,1,fixed,1,inf,100,3,0,8192,256,256,4096,0.9,ttft_p50_ms,1,yes,https://x,n\n";
  CHECK_THROWS_WITH(read_published(std::string(header) + row + row, "p.csv"), "p.csv:3: id 'a' is already used on line 2");
  CHECK_THROWS_WITH(read_published("", "p.csv"), "p.csv:0: no header line (22 columns: id,split,...)");
}

TEST_CASE("replay: one request's TTFT, ITL, TPOT and throughput are its steps' costs") {
  // One request of 100 prompt tokens and 3 outputs, alone: an eager prefill step (separate
  // prefill steps have no graphs), then two decode steps replayed at rung 1, over 101 and 102
  // tokens of context.
  const published_run run{.engine = "e", .gpu = "h100-sxm", .model = "llama-3-8b",
                          .workload = {.requests = 1, .rate = 0, .lengths = serving::benchmark_lengths::fixed,
                                       .input_mean = 100, .output_mean = 3},
                          .max_batched_tokens = 8192};
  const cost_presets p;
  const cost_profile& profile = cost_profile_named("calibrated");
  const cost_model c = replay_config(run, p, profile).cost;
  const double prefill = c.step_seconds(100, 100, false, 1), d1 = c.step_seconds(1, 101, true, 1),
               d2 = c.step_seconds(1, 102, true, 1);
  const replayed_run r = replay(run, p, profile);
  CHECK(r[fidelity_metric::ttft_p50] == Approx(prefill * 1e3));
  CHECK(r[fidelity_metric::itl_p50] == Approx(d1 * 1e3));  // the lower of two gaps (rank ceil(n / 2))
  CHECK(r[fidelity_metric::tpot_p50] == Approx((d1 + d2) / 2 * 1e3));
  CHECK(r[fidelity_metric::output_throughput] == Approx(3 / (prefill + d1 + d2)));
}
