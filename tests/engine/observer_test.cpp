#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/observer.hpp>

#include <catch2/catch.hpp>
#include <functional>
#include <sstream>

#include "support.hpp"

using namespace rungs::engine;
using namespace rungs_test;

namespace {
constexpr std::int64_t MiB = 1 << 20;
using log_engine = graph_runner<token_ladder, largest_first, startup, host_backend>;

log_engine make(toy_model& model, graph_budget budget = {}) {
  host_backend::options sim{.simulate = simulated_capture{
                                .bytes = {.base = 2 * MiB, .per_unit = MiB / 2},
                                .seconds = 0.05,
                                .fail = [](std::size_t, const bucket& b) -> std::optional<std::string> {
                                  if (b.batch() == 1) return "capture invalidated";
                                  return std::nullopt;
                                }}};
  return log_engine(token_ladder{{1, 2, 4}}, host_backend(std::ref(model), sim),
                    {.budget = budget, .max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
}
}  // namespace

TEST_CASE("log_observer writes one line per capture and a summary when not on a terminal") {
  toy_model model;
  std::ostringstream out;
  auto e = make(model, {.bytes = 5 * MiB});
  e.observe(log_observer(out));
  e.start();
  CHECK(out.str() ==
        "[Capture][startup][1/3] bucket 4 (decode): 0.050 s, 4.00 MiB, budget left 1.00 MiB\n"
        "[Capture] warning: the 2 graphs still to capture need ~3.00 MiB, the graph budget has 1.00 MiB left: some "
        "will be skipped and run eagerly\n"
        "[Capture][startup][2/3] bucket 2 (decode): skipped: needs ~2.00 MiB, budget has 1.00 MiB left\n"
        "[Capture][startup][3/3] bucket 1 (decode): failed after 0.050 s (capture invalidated); runs eagerly\n"
        "Graph capturing finished in 0.10 s: 1 captured, 1 failed, 1 refused by budget; took 4.00 MiB, 1.00 MiB of "
        "graph budget left\n");
}

TEST_CASE("log_observer draws a progress bar on a terminal") {
  toy_model model;
  std::ostringstream out;
  auto e = make(model);
  e.observe(log_observer(out, true));
  e.start();
  std::string s = out.str();
  CHECK(s.find("\rCapturing graphs:   0/3 [") == 0);
  CHECK(s.find("\rCapturing graphs:   3/3 [========================================]") != std::string::npos);
  CHECK(s.find("bucket 1 (decode): failed") != std::string::npos);  // failures still get a line
  CHECK(s.find("Graph capturing finished in 0.15 s: 2 captured, 1 failed") != std::string::npos);
}

TEST_CASE("log_observer names the step or idle time of a capture after startup") {
  toy_model model;
  std::ostringstream out;
  host_backend::options sim{.simulate = simulated_capture{.bytes = {.base = MiB, .per_unit = 0}, .seconds = 0.01}};
  graph_runner<token_ladder, largest_first, delayed, host_backend> d(
      token_ladder{{1, 2}}, host_backend(std::ref(model), sim), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  d.observe(log_observer(out));
  batch_builder bb;
  d.step(bb.make(2));
  graph_runner<token_ladder, largest_first, idle, host_backend> i(
      token_ladder{{1, 2}}, host_backend(std::ref(model), sim), {.max_model_len = 16, .shape = run_shape::of(tiny_model, 64)});
  i.observe(log_observer(out));
  i.step(bb.make(2));
  i.idle();
  CHECK(out.str() ==
        "[Capture][step 0] bucket 2 (decode): 0.010 s, 1.00 MiB\n"
        "[Capture][idle before step 1] bucket 2 (decode): 0.010 s, 1.00 MiB\n");
}
