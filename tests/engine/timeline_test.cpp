// rungs-plan timeline: exact output, run in-process through rungs::plan::run.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"

namespace {
struct result {
  int status;
  std::string out, err;
};
result plan(std::vector<std::string_view> args) {
  args.insert(args.begin(), "timeline");
  std::ostringstream out, err;
  int s = rungs::plan::run(args, out, err);
  return {s, out.str(), err.str()};
}
}  // namespace

TEST_CASE("timeline --json: delayed capture on the 64 capture-sizes ladder") {
  auto r = plan({"--timing", "delayed", "--json", "--batches", "3,3,1,9,600,2", "capture-sizes", "64"});
  CHECK(r.status == 0);
  CHECK(r.out ==
        "{\"startup\": [], \"steps\": ["
        "{\"batch\": 3, \"rung\": 4, \"captured\": [4], \"run\": \"replay\"}, "
        "{\"batch\": 3, \"rung\": 4, \"captured\": [64], \"run\": \"replay\"}, "
        "{\"batch\": 1, \"rung\": 1, \"captured\": [1], \"run\": \"replay\"}, "
        "{\"batch\": 9, \"rung\": 16, \"captured\": [16], \"run\": \"replay\"}, "
        "{\"batch\": 600, \"rung\": \"eager\", \"captured\": [56], \"run\": \"eager\"}, "
        "{\"batch\": 2, \"rung\": 2, \"captured\": [2], \"run\": \"replay\"}]}\n");
}

TEST_CASE("timeline --json: startup, lazy and idle timings, orders") {
  auto s = plan({"--timing", "startup", "--order", "min-tokens", "--json", "--batches", "3", "capture-sizes", "16"});
  CHECK(s.out ==
        "{\"startup\": [1, 2, 4, 8, 16], \"steps\": [{\"batch\": 3, \"rung\": 4, \"captured\": [], \"run\": \"replay\"}]}\n");
  auto l = plan({"--timing", "lazy", "--json", "--batches", "3,4,17", "capture-sizes", "16"});
  CHECK(l.out ==
        "{\"startup\": [], \"steps\": [{\"batch\": 3, \"rung\": 4, \"captured\": [4], \"run\": \"replay\"}, "
        "{\"batch\": 4, \"rung\": 4, \"captured\": [], \"run\": \"replay\"}, "
        "{\"batch\": 17, \"rung\": \"eager\", \"captured\": [], \"run\": \"eager\"}]}\n");
  // Idle captures happen after the listed steps, one per signal, and are listed as "idle".
  auto i = plan({"--timing", "idle", "--idle-after", "0,0,1", "--json", "--batches", "3,16,2", "capture-sizes", "16"});
  CHECK(i.out ==
        "{\"startup\": [], \"steps\": [{\"batch\": 3, \"rung\": 4, \"captured\": [], \"run\": \"eager\", \"idle\": [16, 8]}, "
        "{\"batch\": 16, \"rung\": 16, \"captured\": [], \"run\": \"replay\", \"idle\": [4]}, "
        "{\"batch\": 2, \"rung\": 2, \"captured\": [], \"run\": \"eager\"}]}\n");
}

TEST_CASE("timeline: a budget that fits only some graphs, as a table") {
  auto r = plan({"--timing", "startup", "--budget", "1000", "--graph-cost", "100:10", "--batches", "3,64",
                 "capture-sizes", "64"});
  CHECK(r.status == 0);
  CHECK(r.out ==
        "timeline: timing startup, order largest-first, 11 rungs (capture-sizes 64), budget 1000 bytes at 100 + 10/token\n"
        "startup: captured [64, 16], skipped (budget) [56, 48, 40, 32, 24, 8, 4, 2, 1]\n"
        "step  batch  rung   run                  captured\n"
        "0     3      4      eager (refused)      -\n"
        "1     64     64     replay               -\n"
        "summary: 2 steps, 1 replayed, 1 eager; 2 of 11 rungs captured, 9 skipped by the budget; graph memory 1000 of "
        "1000 bytes\n");
}

TEST_CASE("timeline rejects bad arguments with one line and status 2") {
  auto bad = [](std::vector<std::string_view> args) {
    auto r = plan(std::move(args));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    return r.err;
  };
  CHECK(bad({"--batches", "1", "capture-sizes", "8"}) == "rungs-plan: error: --timing startup|delayed|lazy|idle is required\n");
  CHECK(bad({"--timing", "soon", "--batches", "1", "capture-sizes", "8"}) ==
        "rungs-plan: error: --timing = 'soon' is not one of startup, delayed, lazy, idle\n");
  CHECK(bad({"--timing", "lazy", "--order", "random", "--batches", "1", "capture-sizes", "8"}) ==
        "rungs-plan: error: --order = 'random' is not one of largest-first, max-bs, min-tokens\n");
  CHECK(bad({"--timing", "lazy", "--batches", "1,0", "capture-sizes", "8"}) ==
        "rungs-plan: error: --batches: 0 must be positive\n");
  CHECK(bad({"--timing", "lazy", "--batches", "1,x", "capture-sizes", "8"}) ==
        "rungs-plan: error: --batches = 'x' is not an integer\n");
  CHECK(bad({"--timing", "lazy", "--budget", "100", "--batches", "1", "capture-sizes", "8"}) ==
        "rungs-plan: error: --budget and --graph-cost go together: the budget is checked against each graph's cost\n");
  CHECK(bad({"--timing", "lazy", "--budget", "100", "--graph-cost", "5", "--batches", "1", "capture-sizes", "8"}) ==
        "rungs-plan: error: --graph-cost = '5' must be BASE:PER_TOKEN (bytes)\n");
  CHECK(bad({"--timing", "idle", "--idle-after", "3", "--batches", "1,2", "capture-sizes", "8"}) ==
        "rungs-plan: error: --idle-after: step 3 is past the last step (1)\n");
  CHECK(bad({"--timing", "idle", "--batches", "1,2"}) == "rungs-plan: error: expected a LADDER after the options\n");
  CHECK(bad({"--timing", "idle", "--batches", "1", "--frobnicate", "capture-sizes", "8"}) ==
        "rungs-plan: error: unknown option '--frobnicate'\n");
}

TEST_CASE("timeline: sizes, and what would overflow or exhaust memory is refused") {
  auto bad = [](std::vector<std::string_view> args) {
    auto r = plan(std::move(args));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    return r.err;
  };
  auto r = plan({"--timing", "startup", "--budget", "1KiB", "--graph-cost", "100:10", "--batches", "3", "capture-sizes", "64"});
  CHECK(r.status == 0);
  CHECK(r.out.find("budget 1024 bytes at 100 + 10/token") != std::string::npos);
  CHECK(bad({"--timing", "lazy", "--batches", "100000000", "capture-sizes", "8"}) ==
        "rungs-plan: error: --batches: 100000000 must be at most 1048576 (the timeline simulates one KV block per "
        "sequence)\n");
  CHECK(bad({"--timing", "lazy", "--batches", "9223372036854775807", "capture-sizes", "8"}) ==
        "rungs-plan: error: --batches: 9223372036854775807 must be at most 1048576 (the timeline simulates one KV block "
        "per sequence)\n");
  std::string many = "1";
  for (int i = 0; i < 1000000; ++i) many += ",1";
  CHECK(bad({"--timing", "lazy", "--batches", many, "capture-sizes", "8"}) ==
        "rungs-plan: error: --batches has 1000001 items; at most 1000000 are accepted\n");
  CHECK(bad({"--timing", "startup", "--budget", "1", "--graph-cost", "0:4611686018427387904", "--batches", "1",
             "capture-sizes", "8"}) ==
        "rungs-plan: error: --graph-cost: the graphs of the ladder's 4 rungs would take more than 2^63 - 1 bytes (BASE + "
        "PER_TOKEN x rung, summed)\n");
}
