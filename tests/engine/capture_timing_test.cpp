// Exact capture sequences of every timing policy, under several orders, on scripted batches.
#include <rungs/engine/capture_timing.hpp>
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
template <class Order, class Timing>
using test_engine = graph_runner<token_ladder, Order, Timing, host_backend>;

struct script_result {
  std::vector<std::string> captures;  // capture_log lines
  std::vector<std::string> runs;      // per step: "rung:run" or "eager"
};

// Runs `batches` (decode steps of n sequences), signalling idle after the steps listed.
template <class Order, class Timing>
script_result run_script(Timing timing, std::vector<std::int64_t> batches, std::vector<std::int64_t> idle_after = {},
                         std::vector<std::int64_t> rungs = {1, 2, 4, 8}, host_backend::options backend = {}) {
  toy_model model;
  test_engine<Order, Timing> e(token_ladder{rungs}, host_backend(std::ref(model), std::move(backend)),
                               {.timing = timing, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  script_result r;
  e.observe(capture_log{&r.captures});
  batch_builder bb;
  e.start();
  for (std::size_t s = 0; s < batches.size(); ++s) {
    auto res = e.step(bb.make(batches[s], 2));
    r.runs.push_back(res.bucket ? std::to_string(rungs[*res.bucket]) + ":" + std::string(to_string(res.run)) : "eager");
    for (std::int64_t i : idle_after)
      if (i == static_cast<std::int64_t>(s)) e.idle();
  }
  return r;
}

using strings = std::vector<std::string>;
}  // namespace

TEST_CASE("startup captures every bucket before the first step, in capture order") {
  auto lf = run_script<largest_first>(startup{}, {3, 1, 9});
  CHECK(lf.captures == strings{"startup:8", "startup:4", "startup:2", "startup:1"});
  CHECK(lf.runs == strings{"4:replay", "1:replay", "eager"});
  auto mt = run_script<min_tokens>(startup{}, {3});
  CHECK(mt.captures == strings{"startup:1", "startup:2", "startup:4", "startup:8"});
  auto lo = run_script<ladder_order>(startup{}, {3}, {}, {1, 2, 8, 16});
  CHECK(lo.captures == strings{"startup:1", "startup:2", "startup:8", "startup:16"});
}

TEST_CASE("delayed captures the step's bucket, else the next uncaptured one; one per step; then stops") {
  auto r = run_script<largest_first>(delayed{}, {3, 3, 1, 5, 2, 9, 2});
  CHECK(r.captures == strings{"step0:4", "step1:8", "step2:1", "step3:2"});
  CHECK(r.runs == strings{"4:replay", "4:replay", "1:replay", "8:replay", "2:replay", "eager", "2:replay"});

  // An eager step (above the top rung) still advances the capture sequence.
  auto above = run_script<largest_first>(delayed{}, {9, 9, 1});
  CHECK(above.captures == strings{"step0:8", "step1:4", "step2:1"});
  CHECK(above.runs == strings{"eager", "eager", "1:replay"});

  // min_tokens order changes what the spare captures are.
  auto mt = run_script<min_tokens>(delayed{}, {3, 3, 3});
  CHECK(mt.captures == strings{"step0:4", "step1:1", "step2:2"});
}

TEST_CASE("delayed can capture the largest bucket at startup") {
  auto r = run_script<min_tokens>(delayed{.largest_at_startup = true}, {3, 3, 1, 5, 2});
  CHECK(r.captures == strings{"startup:8", "step0:4", "step1:1", "step2:2"});
  CHECK(r.runs == strings{"4:replay", "4:replay", "1:replay", "8:replay", "2:replay"});
}

TEST_CASE("lazy captures only buckets that steps use, optionally after eager uses") {
  auto r = run_script<largest_first>(lazy{}, {3, 3, 1, 9, 3});
  CHECK(r.captures == strings{"step0:4", "step2:1"});
  CHECK(r.runs == strings{"4:replay", "4:replay", "1:replay", "eager", "4:replay"});

  auto patient = run_script<largest_first>(lazy{.eager_uses = 2}, {3, 3, 1, 3, 3, 1, 1});
  CHECK(patient.captures == strings{"step3:4", "step6:1"});
  CHECK(patient.runs ==
        strings{"4:eager", "4:eager", "1:eager", "4:replay", "4:replay", "1:eager", "1:replay"});
}

TEST_CASE("idle captures in order only on idle signals, never inside a step") {
  auto r = run_script<largest_first>(idle{}, {3, 3, 5, 3, 1}, {1, 2});
  CHECK(r.captures == strings{"idle2:8", "idle3:4"});
  CHECK(r.runs == strings{"4:eager", "4:eager", "8:replay", "4:replay", "1:eager"});
}

TEST_CASE("idle signals respect their capture count and time budget") {
  toy_model model;
  host_backend::options sim{.simulate = simulated_capture{.seconds = 0.5}};
  test_engine<largest_first, idle> e(token_ladder{{1, 2, 4, 8}}, host_backend(std::ref(model), sim),
                                     {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  CHECK(e.idle({.max_captures = 2}) == 2);  // 8 and 4
  CHECK(e.idle({.max_captures = 5, .seconds = 0.9}) == 1);  // 0.5 s each: only one fits 0.9 s
  CHECK(e.idle({.max_captures = 5, .seconds = 0.4}) == 0);  // expected 0.5 s > 0.4 s
  CHECK(e.idle({.max_captures = 5}) == 1);
  CHECK(e.queue().settled());
  CHECK(e.idle({.max_captures = 5}) == 0);
  CHECK(e.stats().captures == 4);
  CHECK(e.stats().capture_seconds == Approx(2.0));
}

namespace {
// A user-defined timing: capture a bucket the second time in a row a step uses it.
struct repeat_twice {
  std::string_view name() const { return "repeat-twice"; }
  std::optional<std::size_t> at_startup(const capture_queue&) const { return {}; }
  std::optional<std::size_t> during_step(const capture_queue& q, std::optional<std::size_t> b) const {
    if (b && q.pending(*b) && q.uses(*b) >= 2) return b;
    return {};
  }
  std::optional<std::size_t> when_idle(const capture_queue&) const { return {}; }
};
}  // namespace

TEST_CASE("a user-defined timing plugs in through the capture_timing concept") {
  static_assert(capture_timing<repeat_twice>);
  static_assert(!capture_timing<largest_first>);
  auto r = run_script<largest_first>(repeat_twice{}, {3, 1, 3});
  CHECK(r.captures == strings{"step2:4"});
}

TEST_CASE("parse_timing reads every name timing_names lists, with default parameters") {
  CHECK(parse_timing("startup").name() == "startup");
  CHECK(parse_timing("delayed").name() == "delayed");
  CHECK(parse_timing("lazy").name() == "lazy");
  CHECK(parse_timing("idle").name() == "idle");
  CHECK(std::get<lazy>(parse_timing("lazy").policy()).eager_uses == lazy{}.eager_uses);
  CHECK_THROWS_WITH(parse_timing("eager"), "capture timing 'eager' is not one of startup, delayed, lazy, idle");
  CHECK_THROWS_AS(parse_timing("Startup"), std::invalid_argument);
}
