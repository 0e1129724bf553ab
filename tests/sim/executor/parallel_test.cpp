// Blocks in parallel (schedule::threads; sim/executor/parallel.cpp, docs/sim.md "Blocks in
// parallel"): the same seed gives the same results, traffic and findings on any number of
// threads; blocks that touch each other's global words run again one at a time, global memory
// restored first; kernels whose code lets blocks communicate never run in parallel.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace rungs_sim_test;
namespace sim = rungs::sim;

namespace {

// Each thread swaps its id into a shared slot (atom.shared.exch) once the slot holds 0xffffffff,
// and stores what it got back to out[block * ntid + tid]: a chain that follows the order the
// schedule ran the warps in, so it differs from seed to seed.
const std::string exchange_chain = kernel("  .shared .align 4 .b8 slot[4];\n  .reg .b32 %cta;\n", R"(
  mov.u32 %cta, %ctaid.x;
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_wait;
  mov.u32 %r1, -1;
  st.shared.u32 [slot], %r1;
$L_wait:
  bar.sync 0;
  atom.shared.exch.b32 %r2, [slot], %tid;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %cta, %r3, %tid;
  mul.wide.u32 %rd1, %r4, 4;
  ld.param.u64 %rd2, [k_out];
  add.s64 %rd2, %rd2, %rd1;
  st.global.u32 [%rd2], %r2;
)");

struct outcome {
  std::vector<std::uint32_t> out, in;
  sim::launch_result r;
  std::string finding;
  std::uint64_t out_sectors = 0;  // the 32-byte sectors `out` spans (its alignment varies)
};

outcome launch(const std::string& text, std::size_t words, unsigned block, unsigned grid, std::uint64_t seed,
               unsigned threads) {
  buffers b(words);
  sim::schedule s;
  s.seed = seed;
  s.threads = threads;
  outcome o;
  try {
    o.r = b.run(text, block, s, grid);
  } catch (const sim::sim_error& e) {
    // (Addresses differ from launch to launch: each has buffers of its own.)
    o.finding = std::regex_replace(e.what(), std::regex("0x[0-9a-f]+"), "0x?");
  }
  o.out = b.out;
  o.in = b.in;
  const auto first = reinterpret_cast<std::uint64_t>(b.out.data());
  o.out_sectors = (first + words * 4 - 1) / 32 - first / 32 + 1;
  return o;
}

}  // namespace

TEST_CASE("blocks in parallel: a seed gives the same schedule, results and traffic on any number of threads") {
  constexpr unsigned kBlock = 64, kGrid = 16;
  std::set<std::vector<std::uint32_t>> seen;
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    INFO("seed " << seed);
    const outcome one = launch(exchange_chain, kBlock * kGrid, kBlock, kGrid, seed, 1);
    REQUIRE(one.finding.empty());
    CHECK(one.r.threads == 1);
    CHECK(one.r.global.sectors_written == one.out_sectors);
    // Each block's chain: every thread got the id of the thread before it, the first 0xffffffff.
    for (unsigned b = 0; b < kGrid; ++b) {
      std::vector<std::uint32_t> got(one.out.begin() + b * kBlock, one.out.begin() + (b + 1) * kBlock);
      std::sort(got.begin(), got.end());
      CHECK(got.back() == 0xffffffffu);
      CHECK(std::set<std::uint32_t>(got.begin(), got.end() - 1).size() == kBlock - 1);
      CHECK(got[kBlock - 2] < kBlock);
    }
    seen.insert(one.out);
    for (const unsigned threads : {2u, 4u}) {
      INFO(threads << " threads");
      const outcome many = launch(exchange_chain, kBlock * kGrid, kBlock, kGrid, seed, threads);
      REQUIRE(many.finding.empty());
      CHECK(many.r.threads == threads);
      CHECK_FALSE(many.r.ran_again_serially);
      CHECK(many.out == one.out);
      CHECK(many.r.warp_instructions == one.r.warp_instructions);
      CHECK(many.r.global.bytes_written == one.r.global.bytes_written);
      CHECK(many.r.global.bytes_read == one.r.global.bytes_read);
      CHECK(many.r.global.sectors_written == many.out_sectors);  // every block's stores counted once
      CHECK(many.r.global.sectors_read == one.r.global.sectors_read);
    }
  }
  CHECK(seen.size() > 1);  // the chains do follow the schedule
}

TEST_CASE("blocks in parallel: blocks that write each other's words run again one at a time, memory restored first") {
  // Each block adds 1 to its own 64 words of `in` (a read-modify-write: run twice without the
  // restore, they would hold i + 2), then thread 0 writes its block index to out[0], a word every
  // block writes: which block wins depends on the blocks' order, the seed's.
  const std::string text = kernel("  .reg .b32 %cta;\n", R"(
  mov.u32 %cta, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %cta, %r3, %tid;
  mul.wide.u32 %rd1, %r4, 4;
  ld.param.u64 %rd2, [k_in];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %r5, [%rd2];
  add.u32 %r5, %r5, 1;
  st.global.u32 [%rd2], %r5;
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_end;
  ld.param.u64 %rd3, [k_out];
  st.global.u32 [%rd3], %cta;
$L_end:
)");
  std::set<std::uint32_t> winners;
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    INFO("seed " << seed);
    const outcome one = launch(text, 64 * 8, 64, 8, seed, 1);
    const outcome many = launch(text, 64 * 8, 64, 8, seed, 4);
    REQUIRE(one.finding.empty());
    REQUIRE(many.finding.empty());
    CHECK(many.r.ran_again_serially);
    CHECK(many.r.threads == 1);
    CHECK(many.out == one.out);
    for (std::uint32_t i = 0; i < 64 * 8; ++i) CHECK(many.in[i] == i + 1);
    CHECK(many.r.warp_instructions == one.r.warp_instructions);
    winners.insert(one.out[0]);
  }
  CHECK(winners.size() > 1);  // the last writer does follow the seed's order of blocks
}

TEST_CASE("blocks in parallel: a finding is the one of the seed's order, on any number of threads") {
  // Block b stores to its word, then reads block b+1's word without a fence: the missing-fence
  // check reports the first block (in the seed's order) that reads a word already written.
  const std::string fence = kernel("  .reg .b32 %cta;\n", R"(
  mov.u32 %cta, %ctaid.x;
  ld.param.u64 %rd2, [k_out];
  mul.wide.u32 %rd1, %cta, 4;
  add.s64 %rd3, %rd2, %rd1;
  st.global.u32 [%rd3], %cta;
  add.u32 %r1, %cta, 1;
  and.b32 %r1, %r1, 7;
  mul.wide.u32 %rd1, %r1, 4;
  add.s64 %rd3, %rd2, %rd1;
  ld.global.u32 %r2, [%rd3];
)");
  // Block 5 alone races on shared memory (two warps store to one word, no barrier).
  const std::string race = kernel("  .shared .align 4 .b8 w[4];\n  .reg .b32 %cta;\n", R"(
  mov.u32 %cta, %ctaid.x;
  setp.ne.s32 %p1, %cta, 5;
  @%p1 bra $L_end;
  st.shared.u32 [w], %tid;
$L_end:
)");
  std::set<std::string> fence_findings;
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    INFO("seed " << seed);
    const outcome one = launch(fence, 8, 1, 8, seed, 1), many = launch(fence, 8, 1, 8, seed, 4);
    CHECK_THAT(one.finding, Catch::Contains("never published"));
    CHECK(many.finding == one.finding);
    CHECK(many.out == one.out);
    fence_findings.insert(one.finding);
    const outcome r1 = launch(race, 64, 64, 8, seed, 1), r4 = launch(race, 64, 64, 8, seed, 4);
    CHECK_THAT(r1.finding, Catch::Contains("shared-memory race") && Catch::Contains("of block (5,0,0)"));
    CHECK(r4.finding == r1.finding);
  }
  CHECK(fence_findings.size() > 1);  // which block reads first follows the seed
}

TEST_CASE("blocks in parallel: kernels whose code lets blocks communicate run one block at a time") {
  // Each body runs in 2 blocks of 32 threads; the result's thread count, and whether the blocks
  // ran in parallel first (never, for the code the executor keeps serial).
  const auto threads_used = [](const std::string& body) {
    buffers b(64);
    sim::schedule s;
    s.threads = 4;
    s.race_check = false;  // (the bodies' ordering is not the point here)
    const sim::launch_result r = b.run(kernel("  .shared .align 4 .b8 c[4];\n", body), 32, s, 2);
    return std::pair{r.threads, r.ran_again_serially};
  };
  const std::pair parallel{2u, false}, serial{1u, false};
  CHECK(threads_used("  ld.global.u32 %r1, [%rd_in];\n") == parallel);  // 2 blocks: 2 threads
  CHECK(threads_used("  atom.global.add.u32 %r1, [%rd_out], 1;\n") == serial);
  CHECK(threads_used("  red.global.add.u32 [%rd_out], 1;\n") == serial);
  CHECK(threads_used("  ld.volatile.global.u32 %r1, [%rd_in];\n") == serial);
  CHECK(threads_used("  ld.acquire.gpu.global.u32 %r1, [%rd_in];\n") == serial);
  CHECK(threads_used("  membar.gl;\n") == serial);
  CHECK(threads_used("  fence.sc.sys;\n") == serial);
  CHECK(threads_used("  mov.u64 %rd1, %clock64;\n") == serial);
  // Block-local synchronisation keeps them in parallel: shared atomics, cta fences.
  CHECK(threads_used("  st.shared.u32 [c], 0;\n  bar.sync 0;\n  atom.shared.add.u32 %r1, [c], 1;\n  membar.cta;\n") ==
        parallel);
  // Blocks that store to the same words (out[tid] in both) run in parallel, then again one at a time.
  CHECK(threads_used("  st.global.u32 [%rd_out], %tid;\n") == std::pair{1u, true});
}
