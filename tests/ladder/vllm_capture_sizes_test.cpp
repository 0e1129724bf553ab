#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/static_ladder.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>

#include <catch2/catch.hpp>
#include <sstream>

#include "rungs_of.hpp"
#include "vllm_data.hpp"

using rungs::gpu_family;
using rungs::VllmCaptureSizes;
using rungs_test::rungs_list;

namespace {
rungs_list rungs_of(const VllmCaptureSizes& p) { return rungs_test::rungs_of(p); }
}  // namespace

TEST_CASE("vLLM 0.33 capture sizes: the issue's examples") {
  CHECK(rungs_of({.max_num_seqs = 3, .max_num_batched_tokens = 8192}) == rungs_list{1, 2, 3, 4});
  CHECK(rungs_of({.max_num_seqs = 33, .max_num_batched_tokens = 8192}) ==
        rungs_list{1, 2, 4, 8, 16, 24, 32, 33, 40, 48, 56, 64});
  const rungs_list k1 = rungs_of({.max_num_seqs = 33, .max_num_batched_tokens = 8192, .spec_tokens = 1});
  CHECK(k1 == rungs_list{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 66, 72, 80, 88, 96, 104, 112, 120, 128});
  const rungs_list k3 = rungs_of({.max_num_seqs = 33, .max_num_batched_tokens = 8192, .spec_tokens = 3});
  CHECK(std::count(k3.begin(), k3.end(), 132) == 1);
  CHECK(k3.back() == 256);  // the cap 33 * 4 * 2 = 264 is off the 16-stride: cut back to 256
}

TEST_CASE("vLLM 0.33 capture sizes: the ceiling, the token budget and an off-stride budget") {
  // 512 requests: cap min(1024, 512) = 512 on sm90; on sm100 the cap is 1024.
  CHECK(rungs_of({.max_num_seqs = 512, .max_num_batched_tokens = 8192}).back() == 512);
  CHECK(rungs_of({.max_num_seqs = 512, .max_num_batched_tokens = 8192, .device = gpu_family::sm100}).back() == 1024);
  CHECK(rungs_of({.max_num_seqs = 512, .max_num_batched_tokens = 8192, .device = gpu_family::sm100}).size() == 83);
  // A budget of 100 tokens: the grid stops at 96 and 100 itself is a size.
  CHECK(rungs_of({.max_num_seqs = 256, .max_num_batched_tokens = 100}) ==
        rungs_list{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 100});
  // max_num_seqs above the budget: no decode size beyond it.
  CHECK(rungs_of({.max_num_seqs = 128, .max_num_batched_tokens = 64}).back() == 64);
}

TEST_CASE("vLLM 0.33 capture sizes: every case recorded from vLLM's own function") {
  const auto cases = rungs_test::read_vllm_cases("vllm_0_33_capture_sizes.txt");
  REQUIRE(cases.size() == 11 * 7 * 3 * 2);
  for (const auto& c : cases) {
    INFO(c.line);
    CHECK(rungs_of(c.config) == c.sizes);
  }
}

namespace {
constexpr VllmCaptureSizes issue_33_k1{.max_num_seqs = 33, .max_num_batched_tokens = 8192, .spec_tokens = 1};
using decode_graphs = rungs::static_ladder<issue_33_k1>;
}  // namespace

TEST_CASE("vLLM 0.33 capture sizes at compile time, through the same code") {
  STATIC_REQUIRE(decode_graphs::size() == 20);
  STATIC_REQUIRE(decode_graphs::lookup(65).rung == 66);
  STATIC_REQUIRE(decode_graphs::top() == 128);
  STATIC_REQUIRE(rungs::static_ladder<VllmCaptureSizes{3, 8192}>::top() == 4);
  const rungs::ladder run_time{issue_33_k1};
  CHECK(rungs_list(run_time.rungs().begin(), run_time.rungs().end()) ==
        rungs_list(decode_graphs::values.begin(), decode_graphs::values.end()));
}

TEST_CASE("vLLM 0.33 capture sizes: bad inputs are named") {
  CHECK_THROWS_WITH(rungs_of({.max_num_seqs = 0, .max_num_batched_tokens = 8192}),
                    "vllm capture sizes: max_num_seqs = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({.max_num_seqs = 8, .max_num_batched_tokens = -1}),
                    "vllm capture sizes: max_num_batched_tokens = -1 must be positive");
  CHECK_THROWS_WITH(rungs_of({.max_num_seqs = 8, .max_num_batched_tokens = 64, .spec_tokens = -2}),
                    "vllm capture sizes: spec_tokens = -2 must not be negative");
  // Huge inputs do not overflow: the ceiling bounds every size.
  CHECK(rungs_of({.max_num_seqs = rungs::max_rung, .max_num_batched_tokens = rungs::max_rung,
                  .spec_tokens = rungs::max_rung - 1})
            .back() == 512);
  std::ostringstream os;
  os << issue_33_k1;
  CHECK(os.str() == "VllmCaptureSizes{.max_num_seqs = 33, .max_num_batched_tokens = 8192, .spec_tokens = 1, "
                    ".device = sm90}");
}
