// Warp-level instructions (sim/executor/warp.cpp) and special registers: vote, match and
// activemask, CUDA's rule for partial warps and exited lanes, %lanemask_*, WARP_SZ, %smid,
// %nsmid, %dynamic_smem_size, %clock64. [op:...] tags: see ops_test.cpp.
#include <catch2/catch.hpp>

#include "eval.hpp"

using namespace rungs_sim_test;
namespace sim = rungs::sim;

TEST_CASE("vote.sync: all, any, uni and ballot over the lanes of the mask",
          "[op:vote.sync.all.pred][op:vote.sync.any.pred][op:vote.sync.uni.pred][op:vote.sync.ballot.b32]") {
  const auto vote = [](const std::string& body, unsigned threads) {
    buffers b(threads);
    b.run(kernel("", body + "\n  st.global.u32 [%rd_out], %r2;\n"), threads);
    return b.out;
  };
  // ballot of lane % 3 == 0: lanes 0, 3, ..., 30.
  auto out = vote("  rem.u32 %r1, %lane, 3;\n  setp.eq.u32 %p1, %r1, 0;\n  vote.sync.ballot.b32 %r2, %p1, -1;", 32);
  CHECK(out == std::vector<std::uint32_t>(32, 0x49249249u));
  out = vote("  setp.eq.u32 %p1, %lane, 5;\n  vote.sync.any.pred %p2, %p1, -1;\n  selp.u32 %r2, 1, 0, %p2;", 32);
  CHECK(out == std::vector<std::uint32_t>(32, 1));
  out = vote("  setp.eq.u32 %p1, %lane, 5;\n  vote.sync.all.pred %p2, !%p1, -1;\n  selp.u32 %r2, 1, 0, %p2;", 32);
  CHECK(out == std::vector<std::uint32_t>(32, 0));
  out = vote("  setp.lt.u32 %p1, %lane, 32;\n  vote.sync.uni.pred %p2, %p1, -1;\n  selp.u32 %r2, 1, 0, %p2;", 32);
  CHECK(out == std::vector<std::uint32_t>(32, 1));
  // Two half-warp masks vote separately.
  out = vote("  setp.lt.u32 %p3, %lane, 16;\n  selp.u32 %r3, 0xffff, 0xffff0000, %p3;\n"
             "  setp.eq.u32 %p1, %lane, 20;\n  vote.sync.ballot.b32 %r2, %p1, %r3;", 32);
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == (l < 16 ? 0u : 0x100000u));
  // A partial warp (40 threads: lanes 8..31 of warp 1 are absent): a full mask names the lanes
  // that exist.
  out = vote("  setp.lt.u32 %p1, %lane, 32;\n  vote.sync.ballot.b32 %r2, %p1, -1;", 40);
  for (unsigned t = 0; t < 40; ++t) CHECK(out[t] == (t < 32 ? 0xffffffffu : 0xffu));
}

TEST_CASE("vote with .sync after the mode (CUB's inline PTX) is the same instruction",
          "[op:vote.ballot.sync.b32][op:vote.any.sync.pred]") {
  buffers b(32);
  b.run(kernel("", "  rem.u32 %r1, %lane, 3;\n  setp.eq.u32 %p1, %r1, 0;\n  vote.ballot.sync.b32 %r2, %p1, -1;\n"
                   "  vote.any.sync.pred %p2, %p1, -1;\n  selp.u32 %r3, 1, 0, %p2;\n  add.u32 %r2, %r2, %r3;\n"
                   "  st.global.u32 [%rd_out], %r2;\n"),
        32);
  // 0x49249249 (lanes 0, 3, ..., 30) + 1 (some lane votes true) in every lane.
  CHECK(b.out == std::vector<std::uint32_t>(32, 0x4924924au));
}

TEST_CASE("match.sync: the lanes holding the same value; match.all's predicate",
          "[op:match.any.sync.b32][op:match.all.sync.b32][op:match.any.sync.b64]") {
  buffers b(32);
  b.run(kernel("", "  shr.u32 %r1, %lane, 2;\n  match.any.sync.b32 %r2, %r1, -1;\n  st.global.u32 [%rd_out], %r2;\n"), 32);
  for (unsigned l = 0; l < 32; ++l) CHECK(b.out[l] == 0xfu << (l / 4 * 4));
  buffers c(32);
  c.run(kernel("", "  cvt.u64.u32 %rd1, %lane;\n  shr.u64 %rd1, %rd1, 4;\n  shl.b64 %rd1, %rd1, 40;\n"
                   "  match.any.sync.b64 %r2, %rd1, -1;\n  st.global.u32 [%rd_out], %r2;\n"),
        32);
  for (unsigned l = 0; l < 32; ++l) CHECK(c.out[l] == (l < 16 ? 0xffffu : 0xffff0000u));
  buffers d(32);
  d.run(kernel("", "  match.all.sync.b32 %r2|%p1, 7, -1;\n  selp.u32 %r3, 100, 0, %p1;\n  add.u32 %r2, %r2, %r3;\n"
                   "  st.global.u32 [%rd_out], %r2;\n"),
        32);
  CHECK(d.out == std::vector<std::uint32_t>(32, 0xffffffffu + 100u));
  buffers e(32);
  e.run(kernel("", "  match.all.sync.b32 %r2|%p1, %lane, -1;\n  selp.u32 %r3, 100, 0, %p1;\n  add.u32 %r2, %r2, %r3;\n"
                   "  st.global.u32 [%rd_out], %r2;\n"),
        32);
  CHECK(e.out == std::vector<std::uint32_t>(32, 0));
}

TEST_CASE("redux.sync: add, min, max (signed and unsigned), and, or, xor over the lanes of the mask",
          "[op:redux.sync.add.u32][op:redux.sync.min.s32][op:redux.sync.max.u32][op:redux.sync.and.b32]"
          "[op:redux.sync.or.b32][op:redux.sync.xor.b32][op:redux.sync.max.s32][op:redux.sync.min.u32]") {
  const auto redux = [](const std::string& op, const std::string& mask, unsigned threads = 32) {
    buffers b(threads);
    // Values: lane l holds l - 3 (so lanes 0..2 are negative as s32, huge as u32).
    b.run(kernel("", "  sub.u32 %r1, %lane, 3;\n  " + op + " %r2, %r1, " + mask + ";\n  st.global.u32 [%rd_out], %r2;\n"),
          threads);
    return b.out;
  };
  CHECK(redux("redux.sync.add.u32", "-1") == std::vector<std::uint32_t>(32, 496 - 96));  // sum(0..31) - 3 * 32
  CHECK(redux("redux.sync.min.s32", "-1") == std::vector<std::uint32_t>(32, 0xfffffffdu));
  CHECK(redux("redux.sync.max.s32", "-1") == std::vector<std::uint32_t>(32, 28u));
  CHECK(redux("redux.sync.min.u32", "-1") == std::vector<std::uint32_t>(32, 0u));
  CHECK(redux("redux.sync.max.u32", "-1") == std::vector<std::uint32_t>(32, 0xffffffffu));
  // Lanes 4..7 (values 1..4): and = 0, or = 7, xor = 1^2^3^4 = 4; other lanes leave out 0xdeadbeef.
  buffers c(32);
  c.run(kernel("", "  sub.u32 %r1, %lane, 3;\n  shr.u32 %r4, %lane, 2;\n  setp.ne.u32 %p1, %r4, 1;\n  @%p1 bra $L_out;\n"
                   "  redux.sync.and.b32 %r2, %r1, 0xf0;\n  redux.sync.or.b32 %r5, %r1, 0xf0;\n"
                   "  redux.sync.xor.b32 %r6, %r1, 0xf0;\n  shl.b32 %r5, %r5, 8;\n  shl.b32 %r6, %r6, 16;\n"
                   "  or.b32 %r2, %r2, %r5;\n  or.b32 %r2, %r2, %r6;\n  st.global.u32 [%rd_out], %r2;\n$L_out:\n"),
        32);
  for (unsigned l = 0; l < 32; ++l) CHECK(c.out[l] == (l / 4 == 1 ? 0x040700u : 0xdeadbeefu));
  // In a partial warp (40 threads) a full mask sums the 8 lanes that exist: 5 + 6 + ... + 12 = 68
  // minus 3 * 8 for warp 1 (lanes 0..7 hold -3..4): -3-2-1+0+1+2+3+4 = 4.
  const auto partial = redux("redux.sync.add.u32", "-1", 40);
  for (unsigned t = 32; t < 40; ++t) CHECK(partial[t] == 4u);
}

TEST_CASE("activemask: the lanes converged at the instruction", "[op:activemask.b32]") {
  buffers b(32);
  b.run(kernel("", R"(
  setp.lt.u32 %p1, %lane, 10;
  @%p1 bra $L_low;
  activemask.b32 %r2;
  bra.uni $L_join;
$L_low:
  activemask.b32 %r2;
$L_join:
  st.global.u32 [%rd_out], %r2;
)"),
        32);
  for (unsigned l = 0; l < 32; ++l) CHECK(b.out[l] == (l < 10 ? 0x3ffu : 0xfffffc00u));
}

TEST_CASE("partial warps: __shfl_up_sync(0xffffffff, ...) in a 120-thread block scans exactly",
          "[op:shfl.sync.up.b32]") {
  // NVIDIA's shfl_scan pattern: lane l adds lane l - i for i = 1, 2, 4, 8, 16 when l >= i; the
  // last warp has lanes 0..23 only, and none reads an absent lane.
  std::string body = "  ld.global.u32 %r1, [%rd_in];\n";
  for (int i = 1; i < 32; i *= 2) {
    body += "  shfl.sync.up.b32 %r2|%p1, %r1, " + std::to_string(i) + ", 0, -1;\n  @%p1 add.u32 %r1, %r1, %r2;\n";
  }
  body += "  st.global.u32 [%rd_out], %r1;\n";
  for (std::uint64_t seed : {1, 2}) {
    buffers b(120);
    b.run(kernel("", body), 120, {.seed = seed});
    for (unsigned t = 0; t < 120; ++t) {
      const unsigned first = t / 32 * 32;
      CHECK(b.out[t] == (first + t) * (t - first + 1) / 2);
    }
  }
  // A lane reading an absent one gets undefined bits, not an alarm (CUB reads and discards them).
  buffers c(16);
  CHECK_NOTHROW(c.run(kernel("", "  shfl.sync.bfly.b32 %r2, %lane, 16, 31, -1;\n"), 16));
}

TEST_CASE("special registers: %lanemask_*, WARP_SZ, %smid, %nsmid, %nwarpid, %dynamic_smem_size, %clock64",
          "[op:mov.u32][op:mov.u64]") {
  buffers b(32);
  b.run(kernel("", "  mov.u32 %r1, %lanemask_lt;\n  mov.u32 %r2, %lanemask_le;\n  mov.u32 %r3, %lanemask_eq;\n"
                   "  mov.u32 %r4, %lanemask_ge;\n  mov.u32 %r5, %lanemask_gt;\n"
                   "  xor.b32 %r6, %r1, %r2;\n  setp.ne.u32 %p1, %r6, %r3;\n  add.u32 %r7, %r3, %r5;\n"
                   "  setp.ne.u32 %p2, %r7, %r4;\n  or.pred %p1, %p1, %p2;\n  selp.u32 %r1, 0xbad, %r1, %p1;\n"
                   "  st.global.u32 [%rd_out], %r1;\n"),
        32);
  for (unsigned l = 0; l < 32; ++l) CHECK(b.out[l] == (1u << l) - 1);
  CHECK(eval32("mov.u32 %d, WARP_SZ", 0) == 32u);
  CHECK(eval32("mov.u32 %d, %nsmid", 0) == 132u);
  CHECK(eval32("mov.u32 %d, %nwarpid", 0) == 64u);
  CHECK(eval32("mov.u32 %d, %reserved_smem_offset_begin", 0) == 0u);
  CHECK(eval32("mov.u32 %d, %total_smem_size", 0) == 0u);
  // %smid: CTA c runs on SM c mod 132.
  const std::string smid = kernel("", "  mov.u32 %r1, %smid;\n  mov.u32 %r2, %ctaid.x;\n  setp.eq.u32 %p1, %r2, 133;\n"
                                      "  @%p1 st.global.u32 [%rd_out], %r1;\n");
  buffers s(1);
  s.run(smid, 1, {}, 134);
  CHECK(s.out[0] == 1u);
  // %dynamic_smem_size: the launch's dynamic shared bytes.
  const std::string dyn = ptx_module(R"(
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 k_out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [k_out];
  mov.u32 %r1, %dynamic_smem_size;
  mov.u32 %r2, %total_smem_size;
  st.global.u32 [%rd1], %r1;
  st.global.u32 [%rd1+4], %r2;
  ret;
}
)");
  std::vector<std::uint32_t> out(2, 0);
  host_memory mem;
  mem.add(out);
  const auto m = sim::load_ptx(dyn, "dyn.ptx");
  std::uint32_t* p = out.data();
  void* args[] = {&p};
  sim::launch(*m, "k", {1, 1, 1}, {1, 1, 1}, 96, args, mem, {});
  CHECK(out[0] == 96u);
  CHECK(out[1] == 96u);
  // %clock64 grows while the kernel runs.
  CHECK(eval64("mov.u64 %la, %clock64; add.u64 %lb, %la, 1; mov.u64 %lc, %clock64; sub.u64 %ld, %lc, %la", 0) > 0u);
  CHECK(eval32("mov.u32 %a, %clock; mov.u32 %b, %clock; setp.gt.u32 %p, %b, %a; selp.u32 %d, 1, 0, %p", 0) == 1u);
  CHECK(eval64("mov.u64 %la, %globaltimer; mov.u64 %lb, %globaltimer; sub.u64 %ld, %lb, %la", 0) > 0u);
}
