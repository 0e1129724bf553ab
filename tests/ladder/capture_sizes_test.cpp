#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <vector>

#include "rungs_of.hpp"

using rungs::CaptureSizes;
using rungs::rung_t;
using rungs_test::rungs_list;

namespace {
rungs_list rungs_of(const CaptureSizes& p) { return rungs_test::rungs_of(p); }
rungs_list every(rung_t from, rung_t step, rung_t to) {  // from, from+step, ... <= to
  rungs_list r;
  for (rung_t v = from; v <= to; v += step) r.push_back(v);
  return r;
}
rungs_list operator+(rungs_list a, const rungs_list& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

TEST_CASE("vLLM capture sizes: 1 2 4, then every 8 (the lab's ladder)") {
  CHECK(rungs_of(CaptureSizes::vllm(64)) == rungs_list{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64});
  const rungs_list r512 = rungs_of(CaptureSizes::vllm(512));
  CHECK(r512.size() == 67);
  CHECK(r512 == rungs_list{1, 2, 4} + every(8, 8, 512));
  CHECK(rungs_of(CaptureSizes::vllm(1)) == rungs_list{1});
  CHECK(rungs_of(CaptureSizes::vllm(3)) == rungs_list{1, 2, 3});
}

TEST_CASE("presets of later vLLM, SGLang and TensorRT-LLM") {
  CHECK(rungs_of(CaptureSizes::vllm_v1(512)) == rungs_list{1, 2, 4} + every(8, 8, 248) + every(256, 16, 512));
  CHECK(rungs_of(CaptureSizes::sglang(1024)) ==
        rungs_list{1, 2, 4, 8, 12} + every(16, 8, 256) + every(272, 16, 512) + every(544, 32, 1024));
  CHECK(rungs_of(CaptureSizes::trtllm(1024)) == rungs_list{1, 2, 4} + every(8, 8, 128) + every(192, 64, 1024));
}

TEST_CASE("an off-stride max is appended as an extra rung, or refused on request") {
  // vLLM with max 42: without the extra rung, batches 41-42 would run eagerly.
  CHECK(rungs_of(CaptureSizes::vllm(42)) == rungs_list{1, 2, 4, 8, 16, 24, 32, 40, 42});
  CHECK(rungs_of(CaptureSizes::sglang(600)).back() == 600);
  CHECK(rungs_of(CaptureSizes::sglang(600)).end()[-2] == 576);
  CHECK_THROWS_WITH(rungs_of(CaptureSizes::from({{1, 1}, {2, 2}, {4, 4}, {8, 8}}, 42, false)),
                    "capture sizes: max = 42 is off the stride (append_off_stride_max is false): use the last rung "
                    "on it, max = 40");
  CHECK(rungs_of(CaptureSizes::from({{1, 1}, {2, 2}, {4, 4}, {8, 8}}, 40, false)).back() == 40);
}

TEST_CASE("custom segments") {
  CHECK(rungs_of(CaptureSizes{.segments = {{4, 4}}, .max = 20}) == rungs_list{4, 8, 12, 16, 20});
  CHECK(rungs_of(CaptureSizes{.segments = {{1, 3}, {10, 5}}, .max = 30}) == rungs_list{1, 4, 7, 10, 15, 20, 25, 30});
  // A segment's run stops below the next start even when off its own stride.
  CHECK(rungs_of(CaptureSizes{.segments = {{1, 4}, {6, 6}}, .max = 12}) == rungs_list{1, 5, 6, 12});
}

TEST_CASE("invalid capture sizes are rejected") {
  CHECK_THROWS_WITH(rungs_of(CaptureSizes::vllm(0)), "capture sizes: max = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of(CaptureSizes{.max = 8}),
                    "capture sizes: segment count = 0 must be positive (give at least one {start, step})");
  CHECK_THROWS_WITH(rungs_of(CaptureSizes{.segments = {{1, 1}, {8, 0}}, .max = 64}),
                    "capture sizes: segment step = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of(CaptureSizes{.segments = {{1, 1}, {0, 0}, {8, 8}}, .max = 64}),
                    "capture sizes: segment start = 8 follows an empty segment {0, 0}, which ends the list");
  CHECK_THROWS_WITH(rungs_of(CaptureSizes{.segments = {{8, 8}, {4, 4}}, .max = 64}),
                    "capture sizes: segment start = 4 must be greater than the previous start = 8");
  CHECK_THROWS_WITH(rungs_of(CaptureSizes{.segments = {{8, 8}}, .max = 4}),
                    "capture sizes: max = 4 must not be below the first segment's start = 8");
  CHECK_THROWS_WITH(CaptureSizes::from({{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}, {7, 7}, {8, 8}, {9, 9}}, 64),
                    "capture sizes: segment count = 9 exceeds the limit of 8 segments");
}

TEST_CASE("capture sizes at compile time") {
  using graphs = rungs::static_ladder<CaptureSizes::vllm(512)>;
  STATIC_REQUIRE(graphs::size() == 67);
  STATIC_REQUIRE(graphs::lookup(33).rung == 40);
  STATIC_REQUIRE(graphs::lookup(33).padding() == 7);
  STATIC_REQUIRE(graphs::lookup(513).eager());
  CHECK(rungs::ladder{CaptureSizes::vllm(8)}.description() ==
        "CaptureSizes{.segments = {{1, 1}, {2, 2}, {4, 4}, {8, 8}}, .max = 8, .append_off_stride_max = true}");
}
