// Ladders and grids from fuzzed parameters: a ladder_error, or a ladder whose rungs ascend
// and whose lookup of any size is the smallest rung at least that size (eager above the top),
// and grids whose lookup is the covering bucket with the fewest tokens, first listed on ties.
#include <rungs/ladder.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "fuzz.hpp"

namespace {
using rungs::rung_t;

rung_t any_rung(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<rung_t>(-2, 5000) : in.ConsumeIntegral<rung_t>();
}

std::optional<rungs::ladder> make_ladder(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 8)) {
    case 0: return rungs::ladder{rungs::Linear{any_rung(in), any_rung(in), any_rung(in)}};
    case 1: return rungs::ladder{rungs::Exponential{any_rung(in), any_rung(in), any_rung(in), any_rung(in)}};
    case 2: return rungs::ladder{rungs::Pow2{any_rung(in), any_rung(in)}};
    case 3: return rungs::ladder{rungs::CaptureSizes::vllm(any_rung(in))};
    case 4: return rungs::ladder{rungs::CaptureSizes::sglang(any_rung(in))};
    case 5: return rungs::ladder{rungs::CaptureSizes::trtllm(any_rung(in))};
    case 6: {
      const rungs::VllmCaptureSizes v{any_rung(in), any_rung(in), any_rung(in),
                                      in.ConsumeBool() ? rungs::gpu_family::sm100 : rungs::gpu_family::sm90};
      return rungs::ladder{v};
    }
    case 7:
      return rungs::ladder{rungs::SequenceParallel{
          rungs::SpecDecodeRounded{rungs::TokenBudget{rungs::CaptureSizes::vllm(any_rung(in)), any_rung(in)}, any_rung(in)},
          any_rung(in)}};
    default: {
      std::vector<rung_t> list(in.ConsumeIntegralInRange<std::size_t>(0, 40));
      for (rung_t& r : list) r = any_rung(in);
      return rungs::ladder{rungs::Explicit<std::dynamic_extent>{list}};
    }
  }
}

void check_ladder(const rungs::ladder& l, FuzzedDataProvider& in) {
  const auto r = l.rungs();
  RUNGS_FUZZ_CHECK(!r.empty() && r.front() > 0, "empty ladder or non-positive rung");
  RUNGS_FUZZ_CHECK(std::adjacent_find(r.begin(), r.end(), std::greater_equal<>()) == r.end(), "rungs not ascending");
  for (int k = 0; k < 16 && in.remaining_bytes() > 0; ++k) {
    const rung_t n = any_rung(in);
    const rungs::rung_lookup got = l.lookup(n);
    const auto it = std::lower_bound(r.begin(), r.end(), n);
    if (n > l.top()) {
      RUNGS_FUZZ_CHECK(got.eager() && got.rung == n, "above the top rung must be eager");
    } else if (n >= 0) {
      RUNGS_FUZZ_CHECK(!got.eager() && got.rung == *it && got.index == it - r.begin(), "not the smallest covering rung");
    }
  }
}

// A bucket value: mostly valid (small, or anything up to the largest rung), sometimes not.
rung_t grid_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return in.ConsumeIntegral<rung_t>();
    case 1: return in.ConsumeIntegralInRange<rung_t>(0, rungs::max_rung);
    default: return in.ConsumeIntegralInRange<rung_t>(0, 512);
  }
}

template <std::size_t D>
void check_grid(FuzzedDataProvider& in) {
  std::vector<rungs::bucket<D>> buckets(in.ConsumeIntegralInRange<std::size_t>(0, 24));
  for (auto& b : buckets)
    for (std::size_t d = 0; d < D; ++d) b[d] = grid_value(in);
  const rung_t block_size = grid_value(in);
  std::optional<rungs::bucket_grid<D>> grid;
  try {
    grid.emplace(buckets, block_size);
  } catch (const rungs::ladder_error&) {
    return;
  }
  for (int k = 0; k < 8 && in.remaining_bytes() > 0; ++k) {
    rungs::bucket<D> q{};
    for (std::size_t d = 0; d < D; ++d) q[d] = in.ConsumeIntegralInRange<rung_t>(0, rungs::max_rung);
    std::optional<rungs::bucket_lookup<D>> found;
    try {
      found = grid->lookup(q);
    } catch (const rungs::ladder_error&) {  // a request whose token count does not fit 64 bits
      continue;
    }
    const rungs::bucket_lookup<D>& got = *found;
    std::optional<std::size_t> best;  // brute force: fewest tokens, then listing order
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      bool covers = true;
      for (std::size_t d = 0; d < D; ++d) covers = covers && buckets[i][d] >= q[d];
      if (covers && (!best || grid->tokens(buckets[i]) < grid->tokens(buckets[*best]))) best = i;
    }
    RUNGS_FUZZ_CHECK(got.eager() == !best, "eager exactly when no bucket covers");
    if (best) RUNGS_FUZZ_CHECK(got.index == static_cast<std::int32_t>(*best), "not the cheapest covering bucket");
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0:
      try {
        const std::optional<rungs::ladder> l = make_ladder(in);
        check_ladder(*l, in);
      } catch (const rungs::ladder_error&) {
      }
      break;
    case 1: check_grid<2>(in); break;
    default: check_grid<3>(in); break;
  }
  return 0;
}
