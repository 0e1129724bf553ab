// Tests on the real public traces in the workspace's shared/data folder (not copied into the
// repository: see its README for sources and licenses). RUNGS_TRACE_DATA_DIR is the CMake
// option RUNGS_TRACE_DATA_DIR (default: ../shared/data beside the source tree). Without the
// files the test exits 77 (CTest: skipped) after saying where it looked.
#include <rungs/planning/fleet.hpp>
#include <rungs/planning/prefix_study.hpp>
#include <rungs/serving/workload.hpp>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace rungs;

namespace {
const std::string dir = RUNGS_TRACE_DATA_DIR;
const std::string azure = dir + "/azure-llm-2023-conv.csv";
const std::string mooncake = dir + "/mooncake-fast25-synthetic.jsonl";
}  // namespace

int main(int argc, char** argv) {
  for (const std::string& f : {azure, mooncake})
    if (!std::filesystem::exists(f)) {
      std::fprintf(stderr,
                   "trace_data_test: %s is missing: the public traces live in the workspace's shared/data "
                   "(see its README); configure with -DRUNGS_TRACE_DATA_DIR=DIR to point at them. Skipped.\n",
                   f.c_str());
      return 77;
    }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("the Azure conversation hour reads natively") {
  const auto rows = serving::read_trace(azure);
  REQUIRE(rows.size() == 19366);
  CHECK(rows.front().arrival == 0);
  CHECK(rows.front().prompt_tokens == 374);
  CHECK(rows.front().output_tokens == 44);
  // 2023-11-16 18:15:46.6805900 to 19:14:08.4025270
  CHECK(rows.back().arrival == Approx(3501.7219370).epsilon(1e-12));
}

TEST_CASE("the Mooncake synthetic trace: the FAST'25 prefix-cache curve on rungs' allocator") {
  const auto rows = serving::read_trace(mooncake);
  REQUIRE(rows.size() == 3993);
  CHECK(planning::default_study_block_size(rows) == 512);
  const std::int64_t capacities[] = {1'000'000, 3'000'000, 10'000'000, 50'000'000};
  const auto p = planning::prefix_cache_study(rows, capacities, 512);
  // An independent exact replay under the same semantics (issue 16): 14.2%, 30.9%, 56.7%,
  // 64.0%, within half a point.
  CHECK(p[0].hit_rate() == Approx(0.142).margin(0.005));
  CHECK(p[1].hit_rate() == Approx(0.309).margin(0.005));
  CHECK(p[2].hit_rate() == Approx(0.567).margin(0.005));
  CHECK(p[3].hit_rate() == Approx(0.640).margin(0.005));
  for (const auto& point : p) CHECK(point.too_large == 0);
}

TEST_CASE("the Mooncake trace's first 400 requests on 4 replicas: prefix-affinity finds more cached prefixes") {
  auto rows = serving::read_trace(mooncake);
  rows.resize(400);
  planning::simulation_config c;
  c.prefix_caching = true;
  c.max_model_len = 131072;
  c.kv_bytes = std::int64_t{32} << 30;  // 262,144 tokens per replica: the longest requests fit
  c.record_steps = false;
  const planning::fleet_result rr = planning::simulate_fleet(c, rows, 4);
  const planning::fleet_result pa = planning::simulate_fleet(c, rows, 4, {.kind = planning::router::prefix_affinity});
  CHECK(rr.rejected == pa.rejected);
  CHECK(pa.total.scheduler.prefix_hit_tokens > rr.total.scheduler.prefix_hit_tokens);
  // Both served every request that could run, on all four replicas.
  CHECK(rr.total.scheduler.finished == 400 - rr.rejected);
  CHECK(pa.total.scheduler.finished == 400 - pa.rejected);
  for (const planning::simulation_result& r : pa.replicas) CHECK(!r.requests.empty());
}
