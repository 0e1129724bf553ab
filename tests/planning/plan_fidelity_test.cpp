// rungs-plan fidelity, run in-process: the table of benchmarks/fidelity/table.md (predicted
// against published, in docs/planning.md and benchmarks/RESULTS.md) is reproduced exactly from
// benchmarks/fidelity/published.csv; and its errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "../plan_support.hpp"
#include "command.hpp"

using namespace rungs::plan::test;

TEST_CASE("rungs-plan fidelity: benchmarks/fidelity/table.md is what the published figures replay to") {
  const std::string dir = RUNGS_FIDELITY_DIR;
  std::ifstream f(dir + "/table.md", std::ios::binary);
  REQUIRE(f);
  std::ostringstream table;
  table << f.rdbuf();
  // The committed table is the command's output; regenerate it with
  //   rungs-plan fidelity --published benchmarks/fidelity/published.csv > benchmarks/fidelity/table.md
  // when the simulator or the calibrated profile changes on purpose.
  const std::string published = dir + "/published.csv";
  check_ok(plan({"fidelity", "--published", published}), table.str());
}

TEST_CASE("rungs-plan fidelity --json: the profile, each replayed row with its source, the medians") {
  const result j = plan({"fidelity", "--published", std::string(RUNGS_FIDELITY_DIR) + "/published.csv", "--profile",
                         "datasheet", "--json"});
  REQUIRE(j.status == 0);
  CHECK(j.err == "");
  CHECK(j.out.starts_with("{\"profile\": \"datasheet\", \"constants\": \"bandwidth_efficiency=gpu compute_efficiency=gpu "
                          "step_seconds=0 seconds_per_sequence=0 link_efficiency=0 allreduce_seconds=0\", \"rows\": "
                          "[{\"id\": \"sgl-8b-a100-r4-ttft\", \"metric\": \"ttft_p50_ms\", \"published\": 31.98, "));
  CHECK(j.out.find("\"source\": \"https://github.com/sgl-project/sglang/issues/1639\"}]") != std::string::npos);
  CHECK(j.out.find("\"median_abs_error\": {\"output_throughput\": {\"held_out\": ") != std::string::npos);
  CHECK(j.out.ends_with("\"fit_count\": 10}}}\n"));
}

TEST_CASE("rungs-plan fidelity: errors name the flag and the value") {
  check_usage(plan({"fidelity", "--published", "no-such-file.csv"}), "--published no-such-file.csv: cannot open");
  const std::string path = "plan_fidelity_test.csv";
  {
    std::ofstream out(path);
    out << "id,split\n";
  }
  check_usage(plan({"fidelity", "--published", path}), "plan_fidelity_test.csv:1: expected 22 columns, found 2");
  check_usage(plan({"fidelity", "--published", std::string(RUNGS_FIDELITY_DIR) + "/published.csv", "--profile", "fast"}),
              "unknown cost profile 'fast' (known: datasheet, calibrated)");
  check_usage(plan({"simulate", "--chat", "1", "--cost-profile", "calibrated"}),
              "--cost-profile applies to the roofline: add --gpu NAME --model NAME");
  check_usage(plan({"simulate", "--chat", "1", "--gpu", "h100-sxm", "--model", "llama-3-8b", "--cost-profile", "fast"}),
              "--cost-profile: unknown cost profile 'fast' (known: datasheet, calibrated)");
}
