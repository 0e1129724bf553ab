#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/static_ladder.hpp>
#include <rungs/ladder/transforms.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>

#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

#include "rungs_of.hpp"
#include "vllm_data.hpp"

using rungs::CaptureList;
using rungs::CaptureSizes;
using rungs::Explicit;
using rungs::SequenceParallel;
using rungs::SpecDecodeRounded;
using rungs::TokenBudget;
using rungs::VllmCaptureSizes;
using rungs_test::rungs_list;
using rungs_test::rungs_of;

TEST_CASE("sequence parallelism keeps the multiples of tp_size (vLLM 0.11's filter)") {
  CHECK(rungs_of(SequenceParallel{CaptureSizes::vllm(64), 2}) == rungs_list{2, 4, 8, 16, 24, 32, 40, 48, 56, 64});
  CHECK(rungs_of(SequenceParallel{CaptureSizes::vllm(64), 16}) == rungs_list{16, 32, 48, 64});
  CHECK(rungs_of(SequenceParallel{VllmCaptureSizes{3, 8192}, 3}) == rungs_list{3});
  CHECK(rungs_of(SequenceParallel{CaptureSizes::vllm(64), 1}) == rungs_of(CaptureSizes::vllm(64)));
  CHECK_THROWS_WITH(rungs_of(SequenceParallel{Explicit{1, 2, 4}, 3}),
                    "sequence parallel: tp_size = 3 divides no rung of the ladder, the largest of which is rung = 4");
  CHECK_THROWS_WITH(rungs_of(SequenceParallel{Explicit{1, 2, 4}, 0}), "sequence parallel: tp_size = 0 must be positive");
}

TEST_CASE("speculative decoding rounds up to multiples of 1 + k within the top rung (vLLM 0.33)") {
  // Hand-checked, and the same lists vLLM 0.33's adjust_cudagraph_sizes_for_spec_decode gives.
  CHECK(rungs_of(SpecDecodeRounded{Explicit{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72}, 4}) ==
        rungs_list{5, 10, 20, 25, 35, 40, 50, 60, 65});
  CHECK(rungs_of(SpecDecodeRounded{Explicit{3, 7}, 1}) == rungs_list{4});   // 8 is past the top, 7
  CHECK(rungs_of(SpecDecodeRounded{Explicit{5}, 2}) == rungs_list{3});      // 6 > 5: the query length alone
  CHECK(rungs_of(SpecDecodeRounded{Explicit{1, 2, 4}, 0}) == rungs_list{1, 2, 4});
  CHECK_THROWS_WITH(rungs_of(SpecDecodeRounded{Explicit{1, 2}, 3}),
                    "spec-decode rounding: decode query length (1 + spec_tokens) = 4 exceeds the largest rung rung = 2");
  CHECK_THROWS_WITH(rungs_of(SpecDecodeRounded{Explicit{1, 2}, -1}),
                    "spec-decode rounding: spec_tokens = -1 must not be negative");
}

TEST_CASE("speculative-decoding rounding of vLLM 0.33's defaults: every recorded case") {
  const auto defaults = rungs_test::read_vllm_cases("vllm_0_33_capture_sizes.txt");
  const auto rounded = rungs_test::read_vllm_cases("vllm_0_33_spec_rounded.txt");
  REQUIRE(rounded.size() == 11 * 7 * 2 * 2);
  for (const auto& c : rounded) {
    INFO(c.line);
    CHECK(rungs_of(SpecDecodeRounded{c.config, c.config.spec_tokens}) == c.sizes);
  }
  // The rounding only ever moves sizes up to the next multiple: spot-check the input side.
  CHECK(defaults.size() == 11 * 7 * 3 * 2);
}

TEST_CASE("user lists: de-duplicated, sorted and filtered to the token budget (vLLM 0.33)") {
  CHECK(rungs_of(TokenBudget{CaptureList{8, 4, 4, 2, 1, 1000, 512, 16}, 256}) == rungs_list{1, 2, 4, 8, 16});
  CHECK(rungs_of(CaptureList{48, 24, 24, 7}) == rungs_list{7, 24, 48});
  CHECK(rungs_of(TokenBudget{CaptureList{std::vector<rungs::rung_t>{48, 24, 24, 7, 3}}, 20}) == rungs_list{3, 7});
  // Composed as the V1 runner does with one speculative token: [3, 7] -> [4].
  CHECK(rungs_of(SpecDecodeRounded{TokenBudget{CaptureList{48, 24, 24, 7, 3}, 20}, 1}) == rungs_list{4});
  // Any ladder takes a budget.
  CHECK(rungs_of(TokenBudget{rungs::Linear{2, 32, 256}, 100}) == rungs_list{2, 4, 8, 16, 32, 64, 96});
  CHECK_THROWS_WITH(rungs_of(TokenBudget{CaptureList{8, 16}, 4}),
                    "token budget: max_num_batched_tokens = 4 is below the smallest rung = 8");
  CHECK_THROWS_WITH(rungs_of(CaptureList{std::vector<rungs::rung_t>{}}), "capture list: size count = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of(CaptureList{4, 0, 2}), "capture list: values[1] = 0 must be positive");
}

namespace {
constexpr auto sp_decode = SequenceParallel{SpecDecodeRounded{VllmCaptureSizes{33, 8192, 1}, 1}, 4};
}

TEST_CASE("transforms at compile time, through the same code") {
  using l = rungs::static_ladder<sp_decode>;
  STATIC_REQUIRE(l::front() == 4);
  STATIC_REQUIRE(l::lookup(65).rung == 72);
  STATIC_REQUIRE(rungs::static_ladder<TokenBudget{CaptureList{64, 8, 8, 1}, 32}>::size() == 2);
  const rungs::ladder run_time{sp_decode};
  CHECK(rungs_list(run_time.rungs().begin(), run_time.rungs().end()) == rungs_list(l::values.begin(), l::values.end()));
  std::ostringstream os;
  os << SequenceParallel{TokenBudget{CaptureList{8, 4}, 64}, 2};
  CHECK(os.str() == "SequenceParallel{TokenBudget{CaptureList{8, 4}, .max_num_batched_tokens = 64}, .tp_size = 2}");
}
