// The executor's parsing, memory spaces, control flow, warp- and CTA-level synchronisation,
// cp.async, adversarial checks (races, uninitialised shared reads, bad global accesses) and
// traffic accounting, on hand-written PTX. [op:...] tags: see ops_test.cpp.
#include <catch2/catch.hpp>

#include <rungs/numeric/float16.hpp>

#include <numeric>
#include <set>

#include "eval.hpp"

using namespace rungs_sim_test;
namespace sim = rungs::sim;


TEST_CASE("entries and parameter sizes/alignments; ld.param of every kind",
          "[op:ld.param.u64][op:ld.param.u32][op:ld.param.v2.u32][op:ld.param.s8][op:ld.param.f32]") {
  const std::string text = ptx_module(R"(
.visible .entry p(.param .u64 p_a, .param .u32 p_b, .param .align 8 .b8 p_s[24], .param .s8 p_c, .param .f32 p_f)
{
  .reg .b32 %r<8>;
  .reg .b16 %rs<2>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p_a];
  ld.param.u32 %r1, [p_b];
  ld.param.v2.u32 {%r2, %r3}, [p_s+8];
  ld.param.s8 %rs1, [p_c];
  cvt.s32.s16 %r4, %rs1;
  ld.param.f32 %f1, [p_f];
  st.global.u32 [%rd1], %r1;
  st.global.u32 [%rd1+4], %r2;
  st.global.u32 [%rd1+8], %r3;
  st.global.u32 [%rd1+12], %r4;
  st.global.f32 [%rd1+16], %f1;
  ret;
}
.visible .entry other() { ret; }
)");
  const auto m = sim::load_ptx(text, "params.ptx");
  CHECK(sim::entries(*m) == std::vector<std::string>{"p", "other"});
  const auto ps = sim::entry_params(*m, "p");
  REQUIRE(ps.size() == 5);
  CHECK((ps[0].size == 8 && ps[0].align == 8 && ps[1].size == 4 && ps[1].align == 4 && ps[2].size == 24 &&
         ps[2].align == 8 && ps[3].size == 1 && ps[3].align == 1 && ps[4].size == 4 && ps[4].align == 4));
  CHECK_THROWS_WITH(sim::entry_params(*m, "nope"), Catch::Contains("no .entry 'nope'"));

  std::vector<std::uint32_t> out(5, 0);
  host_memory mem;
  mem.add(out);
  std::uint64_t a = reinterpret_cast<std::uint64_t>(out.data());
  std::uint32_t b = 77;
  std::uint32_t s[6] = {1, 2, 3, 4, 5, 6};
  std::int8_t c = -3;
  float f = 2.5f;
  void* args[] = {&a, &b, s, &c, &f};
  sim::launch(*m, "p", {1, 1, 1}, {1, 1, 1}, 0, args, mem, {});
  CHECK(out == std::vector<std::uint32_t>{77, 3, 4, static_cast<std::uint32_t>(-3), bits(2.5f)});
}

TEST_CASE("registers sharing a slot: a register some lanes never write reads zeros in fixed order, never another's value") {
  // parse.cpp gives registers whose lives never overlap one slot. %r3 is written only by a
  // guarded mov and %r9 only on one side of a branch, so lanes that skip them read a register
  // nothing wrote: zeros without randomize (garbage with it), never the 99 or 1000 of registers
  // that died before. %r4/%r5 are carried around a loop; %r7/%r8 live inside it.
  const std::string text = ptx_module(R"(
.visible .entry s(.param .u64 s_out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [s_out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 32;
  add.s64 %rd1, %rd1, %rd2;
  mov.u32 %r2, 99;
  st.global.u32 [%rd1], %r2;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 mov.u32 %r3, 5;
  st.global.u32 [%rd1+4], %r3;
  mov.u32 %r4, 0;
  mov.u32 %r5, 0;
$L_loop:
  add.u32 %r6, %r5, 1;
  add.u32 %r4, %r4, %r6;
  mov.u32 %r5, %r6;
  mov.u32 %r7, 1000;
  add.u32 %r8, %r7, %r6;
  setp.lt.u32 %p2, %r5, 4;
  @%p2 bra $L_loop;
  st.global.u32 [%rd1+8], %r4;
  st.global.u32 [%rd1+12], %r8;
  @%p1 bra $L_skip;
  mov.u32 %r9, 7;
$L_skip:
  st.global.u32 [%rd1+16], %r9;
  ret;
}
)");
  const auto m = sim::load_ptx(text, "shared_slots.ptx");
  std::vector<std::uint32_t> out(8 * 32, 0xdeadbeef);
  host_memory mem;
  mem.add(out);
  std::uint64_t a = reinterpret_cast<std::uint64_t>(out.data());
  void* args[] = {&a};
  sim::schedule fixed;
  fixed.randomize = false;
  sim::launch(*m, "s", {1, 1, 1}, {32, 1, 1}, 0, args, mem, fixed);
  for (unsigned t = 0; t < 32; ++t) {
    INFO("thread " << t);
    CHECK(out[8 * t] == 99);
    CHECK(out[8 * t + 1] == (t < 16 ? 5u : 0u));
    CHECK(out[8 * t + 2] == 10);  // 1 + 2 + 3 + 4
    CHECK(out[8 * t + 3] == 1004);
    CHECK(out[8 * t + 4] == (t < 16 ? 0u : 7u));
  }
}

TEST_CASE("a parameter's address in a register (mov.b64 of its name); ld.param.s32 sign-extends into 64 bits",
          "[op:mov.b64][op:ld.param.s32]") {
  // nvcc writes this for a by-value struct parameter read at a computed offset.
  const std::string text = ptx_module(R"(
.visible .entry q(.param .u64 q_out, .param .align 8 .b8 q_s[16])
{
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [q_out];
  mov.b64 %rd2, q_s;
  ld.param.s32 %rd3, [%rd2+8];
  ld.param.s32 %rd4, [%rd2+4];
  st.global.u64 [%rd1], %rd3;
  st.global.u64 [%rd1+8], %rd4;
  ret;
}
)");
  const auto m = sim::load_ptx(text, "param_address.ptx");
  std::vector<std::uint64_t> out(2, 0);
  host_memory mem;
  mem.add(out);
  std::uint64_t a = reinterpret_cast<std::uint64_t>(out.data());
  std::uint32_t s[4] = {1, 0x7fffffffu, static_cast<std::uint32_t>(-7), 4};
  void* args[] = {&a, s};
  sim::launch(*m, "q", {1, 1, 1}, {1, 1, 1}, 0, args, mem, {});
  CHECK(out[0] == static_cast<std::uint64_t>(-7));
  CHECK(out[1] == 0x7fffffffull);
}

TEST_CASE("global loads and stores of every width, vectors, .nc, cvta",
          "[op:ld.global.u32][op:st.global.u32][op:ld.global.v4.u32][op:st.global.v4.u32][op:ld.global.v4.f32]"
          "[op:st.global.v4.f32][op:ld.global.nc.s32][op:ld.global.nc.u32][op:ld.global.f32][op:st.global.f32]"
          "[op:ld.global.u64][op:st.global.u64][op:ld.global.u16][op:st.global.u16][op:cvta.to.global.u64][op:mov.u64][op:mov.u32]"
          "[op:mov.f32][op:mul.wide.u32][op:add.s64]") {
  buffers b(64);
  b.in[5] = 0xfffffff0u;
  const std::string text = kernel("  .reg .b16 %h<2>;\n", R"(
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_end;
  cvta.to.global.u64 %rd1, %rd_in;
  mov.u64 %rd2, %rd_out;
  ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1+16];
  st.global.v4.u32 [%rd2], {%r4, %r3, %r2, %r1};
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+32];
  st.global.v4.f32 [%rd2+16], {%f1, %f2, %f3, %f4};
  ld.global.nc.s32 %r5, [%rd1+20];
  cvt.s64.s32 %rd3, %r5;
  st.global.u64 [%rd2+32], %rd3;
  ld.global.nc.u32 %r6, [%rd1+24];
  st.global.u32 [%rd2+40], %r6;
  ld.global.f32 %f5, [%rd1+28];
  st.global.f32 [%rd2+44], %f5;
  ld.global.u64 %rd4, [%rd1+48];
  st.global.u64 [%rd2+48], %rd4;
  ld.global.u16 %h1, [%rd1+56];
  st.global.u16 [%rd2+56], %h1;
  mov.u32 %r7, 0;
  st.global.u16 [%rd2+58], %h1;
  mov.f32 %f6, 0fBF800000;
  st.global.f32 [%rd2+60], %f6;
$L_end:
)");
  b.run(text, 32);
  CHECK(b.out[0] == 7);
  CHECK(b.out[3] == 4);
  CHECK(b.out[4] == 8);
  CHECK(b.out[7] == 11);
  CHECK(b.out[8] == 0xfffffff0u);
  CHECK(b.out[9] == 0xffffffffu);  // sign-extended .nc.s32 load
  CHECK(b.out[10] == 6);
  CHECK(b.out[11] == 7);
  CHECK(b.out[12] == 12);
  CHECK(b.out[13] == 13);
  CHECK(b.out[14] == 0x000e000eu);  // the lower half of in[14] twice
  CHECK(b.out[15] == 0xbf800000u);
  CHECK(b.out[16] == 0xdeadbeefu);
}

TEST_CASE("shared memory with bar.sync: every thread sees its neighbour's write",
          "[op:bar.sync][op:st.shared.u32][op:ld.shared.u32][op:st.shared.f32][op:ld.shared.f32]"
          "[op:st.shared.v4.f32][op:ld.shared.v4.f32][op:ld.shared.v2.f32][op:ld.shared.v2.u16]"
          "[op:st.shared.v2.f32]") {
  const std::string decl = "  .shared .align 16 .b8 smem[1024];\n  .reg .b16 %h<4>;\n";
  const std::string body = R"(
  mov.u32 %r1, smem;
  shl.b32 %r2, %tid, 2;
  add.s32 %r3, %r1, %r2;
  st.shared.u32 [%r3], %tid;
  cvt.rn.f32.s32 %f1, %tid;
  st.shared.f32 [%r3+256], %f1;
  bar.sync 0;
  add.s32 %r4, %tid, 1;
  and.b32 %r4, %r4, 63;
  shl.b32 %r4, %r4, 2;
  add.s32 %r4, %r1, %r4;
  ld.shared.u32 %r5, [%r4];
  ld.shared.f32 %f2, [%r4+256];
  cvt.rni.s32.f32 %r6, %f2;
  add.s32 %r5, %r5, %r6;
  st.global.u32 [%rd_out], %r5;
  bar.sync 0;
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_end;
  ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [smem+256];
  st.shared.v4.f32 [smem+512], {%f4, %f3, %f2, %f1};
  ld.shared.v2.f32 {%f5, %f6}, [smem+512];
  cvt.rni.s32.f32 %r7, %f5;
  st.global.u32 [%rd_out+256], %r7;
  st.shared.v2.f32 [smem+528], {%f6, %f5};
  ld.shared.f32 %f7, [smem+532];
  cvt.rni.s32.f32 %r9, %f7;
  st.global.u32 [%rd_out+264], %r9;
  ld.shared.v2.u16 {%h1, %h2}, [smem+4];
  mov.b32 %r8, {%h2, %h1};
  st.global.u32 [%rd_out+260], %r8;
$L_end:
)";
  buffers b(128);
  b.run(kernel(decl, body), 64);
  for (unsigned t = 0; t < 64; ++t) CHECK(b.out[t] == 2 * ((t + 1) % 64));
  CHECK(b.out[64] == 3);
  CHECK(b.out[65] == 0x00010000u);
  CHECK(b.out[66] == 3);  // st.shared.v2.f32 put %f5 (3.0) in its second element
  // The same kernel without the first barrier races; the detector names both instructions.
  std::string racy = body;
  racy.replace(racy.find("bar.sync 0;"), 11, "");
  buffers r(128);
  CHECK_THROWS_WITH(r.run(kernel(decl, racy), 64), Catch::Contains("shared-memory race") &&
                                                       Catch::Contains("st.shared.u32 [%r3], %tid") &&
                                                       Catch::Contains("ld.shared.u32 %r5, [%r4]"));
}

TEST_CASE("two- and four-word vectors: ld.shared.v2.u32, st.global.v2.u32, ld.global.v2.u32, st.shared.v4.u32",
          "[op:ld.shared.v2.u32][op:st.global.v2.u32][op:ld.global.v2.u32][op:st.shared.v4.u32]") {
  const std::string decl = "  .shared .align 16 .b8 smem[256];\n";
  const std::string body = R"(
  mov.u32 %r1, smem;
  shl.b32 %r2, %tid, 2;
  add.s32 %r3, %r1, %r2;
  st.shared.u32 [%r3], %tid;
  bar.sync 0;
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_end;
  ld.shared.v2.u32 {%r4, %r5}, [smem+8];
  st.global.v2.u32 [%rd_out+8], {%r5, %r4};
  ld.global.v2.u32 {%r6, %r7}, [%rd_in+16];
  st.shared.v4.u32 [smem+128], {%r7, %r6, %r5, %r4};
  ld.shared.v2.u32 {%r8, %r9}, [smem+128];
  ld.shared.v2.u32 {%r10, %r11}, [smem+136];
  st.global.v2.u32 [%rd_out+16], {%r8, %r9};
  st.global.v2.u32 [%rd_out+24], {%r10, %r11};
$L_end:
)";
  buffers b(8);
  b.run(kernel(decl, body), 32);
  CHECK(b.out[2] == 3);
  CHECK(b.out[3] == 2);
  // in[4], in[5] = 4, 5 loaded in order, stored with smem's 3, 2 as words 0-3 in operand order.
  CHECK(b.out[4] == 5);
  CHECK(b.out[5] == 4);
  CHECK(b.out[6] == 3);
  CHECK(b.out[7] == 2);
  CHECK(b.out[0] == 0xdeadbeefu);
}

TEST_CASE("local memory is per thread", "[op:st.local.u32][op:ld.local.u32]") {
  const std::string text = kernel("  .local .align 4 .b8 depot[8];\n  .reg .b64 %SPL;\n", R"(
  mov.u64 %SPL, depot;
  st.local.u32 [%SPL+4], %tid;
  bar.sync 0;
  ld.local.u32 %r1, [%SPL+4];
  st.global.u32 [%rd_out], %r1;
)");
  buffers b(64);
  b.run(text, 64);
  for (unsigned t = 0; t < 64; ++t) CHECK(b.out[t] == t);
  const std::string bad = kernel("  .local .align 4 .b8 depot[8];\n  .reg .b64 %SPL;\n",
                                 "  mov.u64 %SPL, depot;\n  st.local.u32 [%SPL+8], %tid;\n");
  buffers c(32);
  CHECK_THROWS_WITH(c.run(bad, 32), Catch::Contains("local-memory access at 8"));
}

TEST_CASE("divergent branches reconverge: a full-warp shuffle after an if/else", "[op:bra][op:bra.uni][op:ret]") {
  const std::string text = kernel("", R"(
  and.b32 %r1, %lane, 1;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_even;
  shl.b32 %r2, %lane, 1;
  bra.uni $L_join;
$L_even:
  add.s32 %r2, %lane, 100;
$L_join:
  shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
  st.global.u32 [%rd_out], %r3;
  ret;
)");
  buffers b(64);
  sim::schedule s;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    s.seed = seed;
    b.run(text, 64, s);
    for (unsigned t = 0; t < 64; ++t) {
      const unsigned other = (t % 32) ^ 1;
      CHECK(b.out[t] == ((other & 1) ? 2 * other : other + 100));
    }
  }
}

TEST_CASE("shfl.sync in every mode with clamps, segments and the predicate output",
          "[op:shfl.sync.bfly.b32][op:shfl.sync.down.b32][op:shfl.sync.idx.b32][op:shfl.sync.up.b32]") {
  // value = 10 * lane; each case stores the shuffled value + 1000 * predicate.
  const auto shuffle = [](const std::string& instr) {
    const std::string text = kernel("", "  mul.lo.s32 %r1, %lane, 10;\n  " + instr +
                                            ";\n  selp.b32 %r3, 1000, 0, %p1;\n  add.s32 %r2, %r2, %r3;\n"
                                            "  st.global.u32 [%rd_out], %r2;\n");
    buffers b(32);
    b.run(text, 32);
    return b.out;
  };
  auto out = shuffle("shfl.sync.bfly.b32 %r2|%p1, %r1, 1, 31, -1");
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == 10 * (l ^ 1) + 1000);
  out = shuffle("shfl.sync.bfly.b32 %r2|%p1, %r1, 8, 0x101f, -1");  // width 16: c = (32-16) << 8 | 31
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == 10 * (l ^ 8) + 1000);
  out = shuffle("shfl.sync.down.b32 %r2|%p1, %r1, 4, 31, -1");
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == (l + 4 <= 31 ? 10 * (l + 4) + 1000 : 10 * l));
  out = shuffle("shfl.sync.down.b32 %r2|%p1, %r1, 4, 0x181f, -1");  // width 8
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == ((l % 8) + 4 <= 7 ? 10 * (l + 4) + 1000 : 10 * l));
  out = shuffle("shfl.sync.up.b32 %r2|%p1, %r1, 1, 0, -1");
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == (l >= 1 ? 10 * (l - 1) + 1000 : 0));
  out = shuffle("shfl.sync.idx.b32 %r2|%p1, %r1, 3, 31, -1");
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == 30 + 1000);
  out = shuffle("shfl.sync.idx.b32 %r2|%p1, %r1, 3, 0x101f, -1");  // width 16: lane 3 of each half
  for (unsigned l = 0; l < 32; ++l) CHECK(out[l] == 10 * ((l & 16) + 3) + 1000);
}

TEST_CASE("shfl.sync member masks: divergent half-warps shuffle separately; bad masks are reported",
          "[op:shfl.sync.bfly.b32]") {
  // Lanes < 16 take one path, the others another; each half reduces with its own mask.
  const std::string text = kernel("", R"(
  setp.lt.u32 %p1, %lane, 16;
  @%p1 bra $L_low;
  shfl.sync.bfly.b32 %r2, %lane, 1, 0x101f, 0xffff0000;
  add.s32 %r2, %r2, 500;
  bra.uni $L_join;
$L_low:
  shfl.sync.bfly.b32 %r2, %lane, 2, 0x101f, 0xffff;
$L_join:
  st.global.u32 [%rd_out], %r2;
)");
  buffers b(32);
  b.run(text, 32);
  for (unsigned l = 0; l < 32; ++l) CHECK(b.out[l] == (l < 16 ? (l ^ 2) : (l ^ 1) + 500));

  // A full mask in one half only, the other half exits: CUDA's rule names the non-exited
  // threads of the mask, so the shuffle completes among the lanes still running.
  const std::string exits = kernel("", R"(
  setp.lt.u32 %p1, %lane, 16;
  @!%p1 bra $L_out;
  shfl.sync.bfly.b32 %r2, %lane, 1, 31, -1;
  st.global.u32 [%rd_out], %r2;
$L_out:
  ret;
)");
  for (std::uint64_t seed : {1, 2, 3}) {
    buffers c(32);
    c.run(exits, 32, {.seed = seed});
    for (unsigned l = 0; l < 32; ++l) CHECK(c.out[l] == (l < 16 ? l ^ 1 : 0xdeadbeefu));
  }
  // A live lane named in the mask that never arrives (it waits elsewhere) is still a deadlock.
  const std::string never = kernel("", R"(
  setp.lt.u32 %p1, %lane, 16;
  @!%p1 bra $L_other;
  shfl.sync.bfly.b32 %r2, %lane, 1, 31, -1;
  bra.uni $L_out;
$L_other:
  shfl.sync.bfly.b32 %r2, %lane, 1, 31, 0xffff0000;
  bar.warp.sync -1;
$L_out:
  ret;
)");
  buffers d(32);
  CHECK_THROWS_WITH(d.run(never, 32), Catch::Contains("deadlock"));
  const std::string self = kernel("", "  shfl.sync.bfly.b32 %r2, %lane, 1, 31, 2;\n");
  buffers e(32);
  CHECK_THROWS_WITH(e.run(self, 32), Catch::Contains("does not name the lane itself"));
}

TEST_CASE("bar.sync must be reached by every thread, from converged warps", "[op:bar.sync]") {
  // Half of a warp skips the barrier and exits, or half of the block does.
  const auto skipping = [](const std::string& barrier, const std::string& who) {
    return kernel("", "  setp." + who + R"(;
  @%p1 bra $L_out;
  )" + barrier + R"( 0;
$L_out:
  ret;
)");
  };
  buffers b(32);
  CHECK_THROWS_WITH(b.run(skipping("bar.sync", "lt.u32 %p1, %lane, 16"), 32), Catch::Contains("part of a warp"));
  // barrier.sync lets a warp's lanes arrive apart, but every thread must still arrive.
  buffers apart(32);
  CHECK_THROWS_WITH(apart.run(skipping("barrier.sync", "lt.u32 %p1, %lane, 16"), 32), Catch::Contains("exited"));
  for (const char* barrier : {"bar.sync", "barrier.sync"}) {
    buffers c(64);
    CHECK_THROWS_WITH(c.run(skipping(barrier, "ge.u32 %p1, %tid, 32"), 64), Catch::Contains("exited"));
  }
}

TEST_CASE("barrier.sync (not .aligned): a warp's lanes may reach barrier 0 apart, at different instructions",
          "[op:barrier.sync][op:barrier.sync.aligned]") {
  // Odd and even lanes each write their word, wait at their own barrier, and read their
  // neighbour's: ordered by the barrier, so no race; odd lanes read 2, even lanes 1.
  const auto text = [](const std::string& barrier) {
    return kernel("  .shared .align 4 .b8 smem[256];\n", R"(
  mov.u32 %r4, smem;
  mov.u32 %r7, %tid.x;
  shl.b32 %r1, %r7, 2;
  add.s32 %r1, %r1, %r4;
  xor.b32 %r2, %r7, 1;
  shl.b32 %r2, %r2, 2;
  add.s32 %r2, %r2, %r4;
  and.b32 %r5, %r7, 1;
  setp.eq.u32 %p1, %r5, 1;
  @%p1 bra $L_odd;
  mov.u32 %r6, 2;
  st.shared.u32 [%r1], %r6;
  )" + barrier + R"( 0;
  ld.shared.u32 %r3, [%r2];
  bra $L_end;
$L_odd:
  mov.u32 %r6, 1;
  st.shared.u32 [%r1], %r6;
  )" + barrier + R"( 0;
  ld.shared.u32 %r3, [%r2];
$L_end:
  st.global.u32 [%rd_out], %r3;
)");
  };
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    buffers b(64);
    b.run(text("barrier.sync"), 64, {.seed = seed});
    for (unsigned t = 0; t < 64; ++t) CHECK(b.out[t] == (t % 2 ? 2u : 1u));
  }
  // The aligned forms require the whole warp at one instruction.
  buffers aligned(64);
  CHECK_THROWS_WITH(aligned.run(text("barrier.sync.aligned"), 64), Catch::Contains("part of a warp"));
  buffers bar(64);
  CHECK_THROWS_WITH(bar.run(text("bar.sync"), 64), Catch::Contains("part of a warp"));
  // Apart or not, every thread must arrive: "bar.sync must be reached by every thread".
}

TEST_CASE("generic addresses of shared memory: cvta.shared and cvta.to.shared; generic ld/st/atom checked as shared",
          "[op:cvta.shared.u64][op:cvta.to.shared.u64]") {
  // Each thread writes tid + 100 through a generic pointer to its shared word, adds 1 to a
  // shared counter with a generic atomic, then reads its neighbour's word through the shared
  // address cvta.to.shared gives back, and the counter after the barrier.
  const auto text = [](const std::string& between) {
    return kernel("  .shared .align 4 .b8 smem[260];\n", R"(
  mov.u32 %r7, %tid.x;
  mov.u64 %rd1, smem;
  cvta.shared.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r7, 4;
  add.s64 %rd4, %rd2, %rd3;
  add.s32 %r1, %r7, 100;
  st.u32 [%rd4], %r1;
  mov.u32 %r2, 1;
  atom.add.u32 %r3, [%rd2+256], %r2;
)" + between + R"(
  xor.b32 %r4, %r7, 1;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd2, %rd5;
  cvta.to.shared.u64 %rd7, %rd6;
  cvt.u32.u64 %r5, %rd7;
  ld.shared.u32 %r6, [%r5];
  ld.u32 %r8, [%rd2+256];
  add.s32 %r6, %r6, %r8;
  st.global.u32 [%rd_out], %r6;
)");
  };
  buffers ok(64);
  // The counter starts as garbage: clear it first (thread 0, then a barrier).
  const std::string cleared = [&] {
    std::string t = text("  bar.sync 0;\n");
    const std::string first = "  mov.u32 %r7, %tid.x;\n";
    t.replace(t.find(first), first.size(),
              first + "  setp.eq.u32 %p1, %r7, 0;\n  mov.u32 %r9, 0;\n  @%p1 st.shared.u32 [smem+256], %r9;\n  bar.sync 0;\n");
    return t;
  }();
  ok.run(cleared, 64);
  for (unsigned t = 0; t < 64; ++t) CHECK(ok.out[t] == (t ^ 1) + 100 + 64);
  // Without the barrier, the neighbour's word written through a generic pointer is a race,
  // found as on a shared access.
  std::string racy = cleared;
  racy.replace(racy.rfind("  bar.sync 0;\n"), 14, "");
  buffers r(64);
  CHECK_THROWS_WITH(r.run(racy, 64), Catch::Contains("shared-memory race"));
  // A generic pointer past the CTA's shared bytes is a shared bounds finding.
  std::string past = cleared;
  past.replace(past.find("st.u32 [%rd4], %r1;"), 19, "st.u32 [%rd4+1024], %r1;");
  buffers p(64);
  CHECK_THROWS_WITH(p.run(past, 64), Catch::Contains("outside the block's 260 bytes"));
}

TEST_CASE("same-warp shared accesses need bar.warp.sync (Volta+ independent thread scheduling)",
          "[op:bar.warp.sync]") {
  const auto text = [](const std::string& sync) {
    return kernel("  .shared .align 4 .b8 smem[128];\n",
                  "  mov.u32 %r4, smem;\n  shl.b32 %r1, %lane, 2;\n  add.s32 %r1, %r1, %r4;\n"
                  "  st.shared.u32 [%r1], %lane;\n" + sync +
                  "  xor.b32 %r2, %lane, 1;\n  shl.b32 %r2, %r2, 2;\n  add.s32 %r2, %r2, %r4;\n"
                  "  ld.shared.u32 %r3, [%r2];\n  st.global.u32 [%rd_out], %r3;\n");
  };
  buffers ok(32);
  ok.run((text("  bar.warp.sync -1;\n")), 32);
  for (unsigned l = 0; l < 32; ++l) CHECK(ok.out[l] == (l ^ 1));
  buffers racy(32);
  CHECK_THROWS_WITH(racy.run((text("")), 32), Catch::Contains("shared-memory race"));
  // A shuffle is not a memory fence: it does not order the shared accesses either.
  buffers shfl(32);
  CHECK_THROWS_WITH(shfl.run((text("  shfl.sync.bfly.b32 %r9, %lane, 1, 31, -1;\n")), 32),
                    Catch::Contains("shared-memory race"));
}

// The race and initialisation checks are per byte, also where the shadow keeps a word's records
// once (executor: shadow_word): byte stores of distinct threads into one word do not race, a word
// read of them needs the barrier, a byte never written is named, and a word written whole after
// byte stores is checked as a whole again.
TEST_CASE("byte stores into shared words: checked per byte", "[op:st.shared.u8][op:ld.shared.u32]") {
  const auto text = [](const std::string& odd_guard, const std::string& sync) {
    return kernel("  .shared .align 4 .b8 smem[64];\n", R"(
  and.b32 %r1, %tid, 1;
  setp.ne.s32 %p1, %r1, 0;
  mov.u32 %r5, smem;
  add.s32 %r6, %r5, %tid;
  )" + odd_guard + R"(st.shared.u8 [%r6], %tid;
)" + sync + R"(
  and.b32 %r2, %tid, 15;
  shl.b32 %r2, %r2, 2;
  add.s32 %r2, %r2, %r5;
  ld.shared.u32 %r3, [%r2];
  st.global.u32 [%rd_out], %r3;
  bar.sync 0;
  setp.ne.s32 %p2, %tid, 3;
  @%p2 bra $L_skip;
  st.shared.u32 [smem+8], %tid;
$L_skip:
  bar.sync 0;
  ld.shared.u32 %r4, [smem+8];
  st.global.u32 [%rd_out+256], %r4;
)");
  };
  buffers ok(128);
  ok.run(text("", "  bar.sync 0;"), 64);
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned k = 4 * (t % 16);
    CHECK(ok.out[t] == (k | (k + 1) << 8 | (k + 2) << 16 | (k + 3) << 24));
    CHECK(ok.out[64 + t] == 3);
  }
  sim::schedule races_only;  // the race, whichever access the schedule runs first
  races_only.uninitialized_check = false;
  buffers racy(128);
  CHECK_THROWS_WITH(racy.run(text("", ""), 64, races_only), Catch::Contains("shared-memory race") &&
                                                     Catch::Contains("st.shared.u8 [%r6], %tid") &&
                                                     Catch::Contains("ld.shared.u32 %r3, [%r2]"));
  buffers holes(128);
  CHECK_THROWS_WITH(holes.run(text("@!%p1 ", "  bar.sync 0;"), 64), Catch::Contains("never-written shared byte 1"));
}

TEST_CASE("reads of never-written shared memory are reported", "[op:ld.shared.u32]") {
  const std::string text = kernel("  .shared .align 4 .b8 smem[128];\n", R"(
  setp.ne.s32 %p1, %lane, 0;
  @%p1 bra $L_read;
  st.shared.u32 [smem], %lane;
$L_read:
  bar.sync 0;
  ld.shared.u32 %r1, [smem+4];
  st.global.u32 [%rd_out], %r1;
)");
  buffers b(32);
  CHECK_THROWS_WITH(b.run(text, 32), Catch::Contains("never-written shared byte 4"));
  sim::schedule off;
  off.uninitialized_check = false;
  buffers c(32);
  CHECK_NOTHROW(c.run(text, 32, off));
}

namespace {
// Each thread copies in[4 tid .. 4 tid + 4) (16 bytes) to shared with cp.async (zero-filled
// when tid >= valid), waits, syncs, and writes the neighbour's first word plus the sum of the
// 4 words it copied itself.
std::string cp_async_kernel(const std::string& between_issue_and_wait, const std::string& after_barrier = "") {
  return kernel("  .shared .align 16 .b8 smem[2048];\n  .reg .b32 %valid;\n", R"(
  ld.param.u64 %rd_t, [k_in];
  mul.wide.u32 %rd1, %tid, 16;
  add.s64 %rd1, %rd_t, %rd1;
  shl.b32 %r1, %tid, 4;
  mov.u32 %r2, smem;
  add.s32 %r2, %r2, %r1;
  setp.lt.u32 %p1, %tid, 48;
  selp.b32 %valid, 16, 0, %p1;
  cp.async.cg.shared.global [%r2], [%rd1], 16, %valid;
  cp.async.commit_group;
)" + between_issue_and_wait + R"(
  cp.async.wait_group 0;
  bar.sync 0;
)" + after_barrier + R"(
  add.s32 %r3, %tid, 1;
  and.b32 %r3, %r3, 63;
  shl.b32 %r3, %r3, 4;
  mov.u32 %r4, smem;
  add.s32 %r3, %r3, %r4;
  ld.shared.u32 %r5, [%r3];
  ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r2];
  add.s32 %r6, %r6, %r7;
  add.s32 %r6, %r6, %r8;
  add.s32 %r6, %r6, %r9;
  shl.b32 %r6, %r6, 16;
  add.s32 %r5, %r5, %r6;
  st.global.u32 [%rd_out], %r5;
)");
}
}  // namespace

TEST_CASE("cp.async lands (or zero-fills) by its wait_group, at random moments under a seed; its traffic",
          "[op:cp.async.cg.shared.global][op:cp.async.commit_group][op:cp.async.wait_group][op:ld.shared.v4.u32]") {
  for (std::uint64_t seed : {0u, 1u, 2u, 3u, 4u}) {
    buffers b(256);
    sim::schedule s;
    s.seed = seed;
    s.randomize = seed != 0;
    const auto r = b.run(cp_async_kernel(""), 64, s);
    // 48 copies of 16 bytes read (the 16 zero-filled ones read nothing), in their sectors.
    const auto first = reinterpret_cast<std::uint64_t>(b.in.data());
    CHECK(r.global.async_bytes_read == 48 * 16);
    CHECK(r.global.async_sectors_read == (first + 48 * 16 - 1) / 32 - first / 32 + 1);
    for (unsigned t = 0; t < 64; ++t) {
      const unsigned n = (t + 1) % 64;
      const unsigned neighbour = n < 48 ? 4 * n : 0;
      const unsigned own = t < 48 ? 16 * t + 6 : 0;
      CHECK(b.out[t] == neighbour + (own << 16));
    }
  }
  // Reading the destination before the wait: the issuing thread itself.
  buffers early(256);
  CHECK_THROWS_WITH(early.run(cp_async_kernel("  ld.shared.u32 %r10, [%r2];\n"), 64),
                    Catch::Contains("before the cp.async.wait_group"));
  // Writing another thread's destination after the barrier (a stage reused too early).
  buffers reuse(256);
  sim::schedule s;
  s.seed = 9;
  CHECK_THROWS_WITH(
      reuse.run(cp_async_kernel("", "  setp.eq.s32 %p2, %tid, 0;\n  @%p2 st.shared.u32 [smem+16], %tid;\n"), 64, s),
      Catch::Contains("shared-memory race"));
  // A global source outside every allocation.
  const std::string oob = kernel("  .shared .align 16 .b8 smem[16];\n",
                                 "  cp.async.cg.shared.global [smem], [%rd_in+4096], 16, 16;\n  cp.async.wait_all;\n");
  buffers o(16);
  CHECK_THROWS_WITH(o.run(oob, 1), Catch::Contains("outside every live allocation") && Catch::Contains("PTX line"));
}

TEST_CASE("cp.async issued before the barrier that frees its stage is a race (the agent's pipeline defect)",
          "[op:cp.async.cg.shared.global]") {
  // Thread t reads stage word t, then (wrongly) the next copy into the same stage is issued by
  // thread t^1 before the barrier that ends everyone's reads.
  const std::string text = kernel("  .shared .align 16 .b8 smem[1024];\n", R"(
  shl.b32 %r1, %tid, 4;
  mov.u32 %r2, smem;
  add.s32 %r2, %r2, %r1;
  st.shared.u32 [%r2], %tid;
  bar.sync 0;
  ld.shared.u32 %r3, [%r2];
  xor.b32 %r4, %tid, 1;
  shl.b32 %r4, %r4, 4;
  mov.u32 %r5, smem;
  add.s32 %r4, %r4, %r5;
  ld.param.u64 %rd_t, [k_in];
  cp.async.cg.shared.global [%r4], [%rd_t], 16, 16;
  cp.async.commit_group;
  bar.sync 0;
  cp.async.wait_group 0;
  bar.sync 0;
)");
  for (std::uint64_t seed : {0u, 5u, 6u}) {
    buffers b(64);
    sim::schedule s;
    s.seed = seed;
    s.randomize = seed != 0;
    CHECK_THROWS_WITH(b.run(text, 64, s), Catch::Contains("shared-memory race") && Catch::Contains("cp.async"));
  }
}

TEST_CASE("global accesses outside live allocations and misaligned accesses are reported") {
  buffers b(32);
  const std::string text = kernel("", "  ld.global.u32 %r1, [%rd_in+128];\n  st.global.u32 [%rd_out], %r1;\n");
  CHECK_THROWS_WITH(b.run(text, 1), Catch::Contains("outside every live allocation") &&
                                        Catch::Contains("kernel k") && Catch::Contains("PTX line") &&
                                        Catch::Contains("thread (0,0,0) of block (0,0,0)"));
  const std::string misaligned = kernel("", "  ld.global.u32 %r1, [%rd_in+2];\n");
  CHECK_THROWS_WITH(b.run(misaligned, 1), Catch::Contains("misaligned global access"));
}

TEST_CASE("unknown constructs: parse errors name the line; unimplemented opcodes fail when executed") {
  // Parsing is per kernel: the module loads, the kernel with the construct is refused, naming
  // kernel, PTX line and construct, and launching it fails with that message.
  const auto refused = [](const std::string& text) {
    const auto m = sim::load_ptx(text, "bad.ptx");
    return sim::refusal(*m, "k");
  };
  CHECK_THAT(refused(ptx_module(".visible .entry k()\n{\n  mov.u32 %r1, 0;\n}\n")),
             Catch::Contains("kernel k") && Catch::Contains("bad.ptx") && Catch::Contains("line 7") &&
                 Catch::Contains("unknown register"));
  CHECK_THAT(refused(ptx_module(".visible .entry k()\n{\n  bra $L_nowhere;\n}\n")), Catch::Contains("unknown label"));
  // A statement without ';' cannot be told from the next one: the module is refused.
  CHECK_THROWS_WITH(sim::load_ptx(ptx_module(".visible .entry k()\n{\n  ret\n}\n"), "bad.ptx"), Catch::Contains("line 7"));
  CHECK_THAT(refused(ptx_module(".visible .entry k()\n{\n  .frobnicate 3;\n}\n")), Catch::Contains("unsupported directive"));
  const auto body = [](const std::string& b) { return ptx_module(".visible .entry k()\n{\n" + b + "\n}\n"); };
  CHECK_THAT(refused(body(".reg .b32 %r<3>;\nadd.s32 %r1, [%r2], 1;")), Catch::Contains("address operand outside ld/st"));
  CHECK_THAT(refused(body(".reg .b32 %r<3>;\nadd.s32 %r1, {%r2, %r2}, 1;")),
             Catch::Contains("vector operand where the instruction takes a scalar"));
  CHECK_THAT(refused(body(".reg .b32 %r<3>;\nld.global.v4.u32 {%r1, %r2}, [%r0];")), Catch::Contains("vector width mismatch"));
  CHECK_THAT(refused(body(".reg .b32 %r<99999999>;")), Catch::Contains("registers"));
  CHECK_THAT(refused(body(".shared .b8 s[999999999];")), Catch::Contains("too large"));
  CHECK_THAT(refused(body(".reg .b32 %r<99999999999999999999999>;")), Catch::Contains("malformed number"));
  // An unbalanced module is still refused as a whole.
  CHECK_THROWS_WITH(sim::load_ptx(ptx_module(".visible .entry k()\n{\n  ret;\n"), "bad.ptx"), Catch::Contains("bad.ptx"));
  // brkpt is not implemented: the module loads, the launch fails naming the instruction.
  const std::string text = kernel("", "  setp.eq.s32 %p1, %tid, 1;\n  @%p1 brkpt;\n");
  buffers b(32);
  CHECK_NOTHROW(b.run(text, 1));  // thread 1 does not exist: never executed
  CHECK_THROWS_WITH(b.run(text, 2), Catch::Contains("not implemented") && Catch::Contains("brkpt"));
}

TEST_CASE("parsing is per kernel: a construct the executor cannot parse refuses only its kernel, at its launch") {
  // Kernel `bad` reads an unknown special register; `good` in the same module runs.
  const std::string text = ptx_module(R"(
.visible .entry bad(.param .u64 bad_out)
{
  .reg .b32 %r<2>;
  mov.u32 %r1, %frobnicate;
  ret;
}
.visible .entry good(.param .u64 good_out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [good_out];
  mov.u32 %r1, 42;
  st.global.u32 [%rd1], %r1;
  ret;
}
)");
  const auto m = sim::load_ptx(text, "mixed.ptx");
  CHECK(sim::entries(*m) == std::vector<std::string>{"bad", "good"});
  CHECK(sim::refusal(*m, "good").empty());
  CHECK(sim::refusal(*m, "bad") == "kernel bad cannot run: PTX module 'mixed.ptx' line 9: unknown register '%frobnicate': "
                                   "`mov.u32 %r1, %frobnicate`");
  CHECK(sim::entry_params(*m, "bad").size() == 1);
  std::vector<std::uint32_t> out(1, 0);
  host_memory mem;
  mem.add(out);
  std::uint32_t* p = out.data();
  void* args[] = {&p};
  sim::launch(*m, "good", {1, 1, 1}, {1, 1, 1}, 0, args, mem, {});
  CHECK(out[0] == 42);
  CHECK_THROWS_WITH(sim::launch(*m, "bad", {1, 1, 1}, {1, 1, 1}, 0, args, mem, {}),
                    Catch::Equals(sim::refusal(*m, "bad")));
}

TEST_CASE("traffic: bytes requested and distinct 32-byte sectors per launch") {
  const std::string text = kernel("", R"(
  mul.wide.u32 %rd1, %tid, 16;
  ld.param.u64 %rd2, [k_in];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd2];
  ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd2];
  st.global.u32 [%rd_out], %r1;
)");
  buffers b(256);
  const auto r = b.run(text, 64);
  // Sectors are 32-byte aligned in the address space; the buffers need not be.
  const auto sectors = [](const void* p, std::uint64_t bytes) {
    const auto a = reinterpret_cast<std::uint64_t>(p);
    return (a + bytes - 1) / 32 - a / 32 + 1;
  };
  CHECK(r.global.bytes_read == 2 * 64 * 16);
  CHECK(r.global.sectors_read == sectors(b.in.data(), 64 * 16));
  // Per warp instruction: each warp's 512 contiguous bytes; the re-read counted again.
  CHECK(r.global.sector_reads_total ==
        2 * (sectors(b.in.data(), 512) + sectors(b.in.data() + 128, 512)));
  CHECK(r.global.bytes_written == 64 * 4);
  CHECK(r.global.sectors_written == sectors(b.out.data(), 64 * 4));
  CHECK(r.warp_instructions > 0);
}

TEST_CASE("grids: every CTA runs once, in any order, with its own shared memory and ids") {
  const std::string text = kernel("  .shared .align 4 .b8 smem[4];\n  .reg .b32 %cta;\n", R"(
  mov.u32 %cta, %ctaid.x;
  setp.ne.s32 %p1, %tid, 0;
  @%p1 bra $L_wait;
  st.shared.u32 [smem], %cta;
$L_wait:
  bar.sync 0;
  ld.shared.u32 %r1, [smem];
  mov.u32 %r2, %ntid.x;
  mad.lo.s32 %r3, %cta, %r2, %tid;
  mul.wide.u32 %rd1, %r3, 4;
  ld.param.u64 %rd2, [k_out];
  add.s64 %rd2, %rd2, %rd1;
  st.global.u32 [%rd2], %r1;
)");
  buffers b(4 * 40);
  sim::schedule s;
  s.seed = 11;
  b.run(text, 40, s, 4);
  for (unsigned i = 0; i < 160; ++i) CHECK(b.out[i] == i / 40);
}

TEST_CASE("dynamic shared memory starts after the static shared memory, aligned") {
  const std::string text = ptx_module(R"(
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 .ptr .global .align 4 k_out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  .shared .align 4 .b8 fixed[20];
  mov.u32 %r1, dyn;
  mov.u32 %r2, fixed;
  st.shared.u32 [dyn+60], %r1;
  ld.shared.u32 %r3, [%r1+60];
  ld.param.u64 %rd1, [k_out];
  st.global.u32 [%rd1], %r1;
  st.global.u32 [%rd1+4], %r2;
  st.global.u32 [%rd1+8], %r3;
  ret;
}
)");
  const auto m = sim::load_ptx(text, "dyn.ptx");
  std::vector<std::uint32_t> out(3, 0);
  host_memory mem;
  mem.add(out);
  std::uint64_t a = reinterpret_cast<std::uint64_t>(out.data());
  void* args[] = {&a};
  sim::launch(*m, "k", {1, 1, 1}, {1, 1, 1}, 64, args, mem, {});
  CHECK(out == std::vector<std::uint32_t>{32, 0, 32});  // 20 static bytes, then 16-byte alignment
  CHECK_THROWS_WITH(sim::launch(*m, "k", {1, 1, 1}, {1, 1, 1}, 60, args, mem, {}),
                    Catch::Contains("outside the block's 92 bytes"));
}

TEST_CASE("a seed reproduces its schedule: same findings, same messages") {
  // Lane 0 of each warp writes a word its neighbour warp reads without a barrier: a race whose
  // report depends on which warp runs first.
  const std::string text = kernel("  .shared .align 4 .b8 smem[64];\n", R"(
  shr.u32 %r1, %tid, 5;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, smem;
  add.s32 %r2, %r2, %r3;
  setp.ne.s32 %p1, %lane, 0;
  @%p1 bra $L_end;
  st.shared.u32 [%r2], %tid;
  add.s32 %r4, %r1, 1;
  and.b32 %r4, %r4, 3;
  shl.b32 %r4, %r4, 2;
  add.s32 %r4, %r4, %r3;
  ld.shared.u32 %r5, [%r4];
$L_end:
)");
  const auto message = [&](std::uint64_t seed) {
    buffers b(128);
    sim::schedule s;
    s.seed = seed;
    s.uninitialized_check = false;
    try {
      b.run(text, 128, s);
    } catch (const sim::sim_error& e) {
      return std::string(e.what());
    }
    return std::string("no finding");
  };
  std::set<std::string> seen;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::string m = message(seed);
    CHECK_THAT(m, Catch::Contains("shared-memory race"));
    CHECK(message(seed) == m);
    seen.insert(m);
  }
  CHECK(seen.size() > 1);  // different seeds, different orders
}

// ---- tensor-core instructions ----------------------------------------------------------
namespace {

// One warp: 512 bytes of `in` go to shared memory (lane l copies bytes [16 l, 16 l + 16)), then
// `body` runs with %base = the shared tile and %lane; %o0..%o3 are stored to out[4 l ..].
std::string tile_kernel(const std::string& body) {
  return ptx_module(R"(
.visible .entry k(.param .u64 k_out, .param .u64 k_in)
{
  .reg .b32 %lane, %base, %addr, %v<4>, %o<4>;
  .reg .b64 %rd<8>;
  .reg .pred %p<2>;
  .shared .align 16 .b8 tile[512];
  ld.param.u64 %rd1, [k_out];
  ld.param.u64 %rd2, [k_in];
  mov.u32 %lane, %laneid;
  mul.wide.u32 %rd3, %lane, 16;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%rd4];
  mov.u32 %base, tile;
  shl.b32 %addr, %lane, 4;
  add.s32 %addr, %base, %addr;
  st.shared.v4.u32 [%addr], {%v0, %v1, %v2, %v3};
  bar.sync 0;
  mov.u32 %o0, 0;
  mov.u32 %o1, 0;
  mov.u32 %o2, 0;
  mov.u32 %o3, 0;
)" + body + R"(
  add.s64 %rd5, %rd1, %rd3;
  st.global.v4.u32 [%rd5], {%o0, %o1, %o2, %o3};
  ret;
}
)");
}

}  // namespace

TEST_CASE("ldmatrix.m8n8.x1/x2/x4 (.trans): lanes 8j..8j+7 address matrix j's rows; lane l gets row l/4, "
          "columns 2(l%4), +1",
          "[op:ldmatrix.sync.aligned.m8n8.x1.shared.b16][op:ldmatrix.sync.aligned.m8n8.x2.shared.b16]"
          "[op:ldmatrix.sync.aligned.m8n8.x4.shared.b16][op:ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16]"
          "[op:ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16][op:ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16]") {
  // Four 8x8 matrices of b16, row-major one after the other: element (j, r, c) = 3 (64 j + 8 r + c) + 1.
  std::vector<std::uint16_t> in(256);
  for (unsigned e = 0; e < 256; ++e) in[e] = static_cast<std::uint16_t>(3 * e + 1);
  auto value = [&](unsigned j, unsigned r, unsigned c) { return std::uint32_t{in[64 * j + 8 * r + c]}; };
  for (const bool trans : {false, true}) {
    for (const unsigned n : {1u, 2u, 4u}) {
      // Lane l addresses row l of the 32 (matrix l / 8, row l % 8); lanes past 8 n give an
      // address outside shared memory, which must not be used.
      std::string regs = n == 1 ? "%o0" : n == 2 ? "{%o0, %o1}" : "{%o0, %o1, %o2, %o3}";
      const std::string body = "  setp.lt.u32 %p1, %lane, " + std::to_string(8 * n) +
                               ";\n  selp.b32 %addr, %addr, 1048560, %p1;\n  ldmatrix.sync.aligned.m8n8.x" +
                               std::to_string(n) + (trans ? ".trans" : "") + ".shared.b16 " + regs + ", [%addr];";
      std::vector<std::uint32_t> out(128, 0xdeadbeefu);
      host_memory mem;
      mem.add(in);
      mem.add(out);
      INFO("x" << n << (trans ? ".trans" : ""));
      run(tile_kernel(body), "k", {1, 1, 1}, {32, 1, 1}, mem, {}, out.data(), in.data());
      for (unsigned l = 0; l < 32; ++l) {
        for (unsigned j = 0; j < 4; ++j) {
          const unsigned row = l / 4, col = 2 * (l % 4);
          const std::uint32_t want = j >= n ? 0u
                                     : trans ? value(j, col, row) | value(j, col + 1, row) << 16
                                             : value(j, row, col) | value(j, row, col + 1) << 16;
          CHECK(out[4 * l + j] == want);
        }
      }
      // By hand: lane 5's register 0 holds row 1, columns 2 and 3 (elements 10, 11: 31, 34), or
      // with .trans column 1, rows 2 and 3 (elements 17, 25: 52, 76).
      CHECK(out[20] == (trans ? 0x004c0034u : 0x0022001fu));
      if (n == 4 && !trans) CHECK(out[22] == 0x01a2019fu);  // register 2: matrix 2, elements 138, 139
    }
  }
}

TEST_CASE("mma.m16n8k16 and m16n8k8 .row.col.f32.{f16,bf16}: D = A B + C in the ISA's fragment layout, fed by ldmatrix",
          "[op:mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32]"
          "[op:mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32]"
          "[op:mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32]"
          "[op:mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32]") {
  // m16n8k8 takes the first 8 columns of A (a0, a1) and rows of B (b0), so the same loads
  // serve it; its D sums k < 8.
  // A (16x16, row-major) and B^T (8x16: B col-major) in shared memory, loaded the way
  // FlashInfer and CUTLASS do: ldmatrix.x4 with lane l at A's row l % 16, columns 8 (l / 16)..
  // gives a0..a3; ldmatrix.x2 with lane l at B^T's row l % 8, columns 8 (l / 8 % 2).. gives
  // b0, b1. C and D: c0, c1 = C[g][2t, 2t+1] and c2, c3 = C[g + 8][2t, 2t+1] (g = l / 4, t = l % 4),
  // read from and written to a row-major 16x8 f32 matrix. Small integers make every result exact.
  const std::string body_template = R"(
  and.b32 %v0, %lane, 15;
  shl.b32 %v0, %v0, 5;
  shr.u32 %v1, %lane, 4;
  shl.b32 %v1, %v1, 4;
  add.s32 %v0, %v0, %v1;
  add.s32 %addr, %base, %v0;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%addr];
  and.b32 %v0, %lane, 7;
  shl.b32 %v0, %v0, 5;
  shr.u32 %v1, %lane, 3;
  and.b32 %v1, %v1, 1;
  shl.b32 %v1, %v1, 4;
  add.s32 %v0, %v0, %v1;
  add.s32 %addr, %base, %v0;
  add.s32 %addr, %addr, 512;
  ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %b1}, [%addr];
  shr.u32 %v0, %lane, 2;
  shl.b32 %v0, %v0, 3;
  and.b32 %v1, %lane, 3;
  shl.b32 %v1, %v1, 1;
  add.s32 %v0, %v0, %v1;
  mul.wide.u32 %rd6, %v0, 4;
  add.s64 %rd7, %rd_c, %rd6;
  ld.global.v2.f32 {%c0, %c1}, [%rd7];
  ld.global.v2.f32 {%c2, %c3}, [%rd7+256];
  MMA
  add.s64 %rd7, %rd_d, %rd6;
  st.global.v2.f32 [%rd7], {%c0, %c1};
  st.global.v2.f32 [%rd7+256], {%c2, %c3};
)";
  const std::string kernel_text = ptx_module(R"(
.visible .entry k(.param .u64 k_d, .param .u64 k_ab, .param .u64 k_c)
{
  .reg .b32 %lane, %base, %addr, %v<4>, %a<4>, %b<2>;
  .reg .f32 %c<4>;
  .reg .b64 %rd<8>, %rd_c, %rd_d;
  .reg .pred %p<2>;
  .shared .align 16 .b8 tile[768];
  ld.param.u64 %rd_d, [k_d];
  ld.param.u64 %rd2, [k_ab];
  ld.param.u64 %rd_c, [k_c];
  mov.u32 %lane, %laneid;
  mov.u32 %base, tile;
  mul.wide.u32 %rd3, %lane, 16;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%rd4];
  shl.b32 %addr, %lane, 4;
  add.s32 %addr, %base, %addr;
  st.shared.v4.u32 [%addr], {%v0, %v1, %v2, %v3};
  setp.lt.u32 %p1, %lane, 16;
  @%p1 ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%rd4+512];
  @%p1 st.shared.v4.u32 [%addr+512], {%v0, %v1, %v2, %v3};
  bar.sync 0;
BODY
  ret;
}
)");
  auto a_of = [](int r, int k) { return static_cast<double>((r * 16 + k) % 13 - 6); };
  auto b_of = [](int k, int n) { return static_cast<double>((k * 8 + n) % 7 - 3); };
  auto c_of = [](int r, int n) { return r * 8 + n + 0.5; };
  for (const bool bf : {false, true}) for (const int kdim : {16, 8}) {
    INFO((bf ? "bf16" : "f16") << " k" << kdim);
    std::vector<std::uint16_t> ab(384);  // A row-major [16][16], then B^T [8][16]
    auto narrow = [&](double x) {
      const auto f = static_cast<float>(x);
      return bf ? rungs::detail::bf16_bits_from_float(f) : rungs::detail::f16_bits_from_float(f);
    };
    for (int r = 0; r < 16; ++r) for (int k = 0; k < 16; ++k) ab[static_cast<std::size_t>(r * 16 + k)] = narrow(a_of(r, k));
    for (int n = 0; n < 8; ++n) for (int k = 0; k < 16; ++k) ab[static_cast<std::size_t>(256 + n * 16 + k)] = narrow(b_of(k, n));
    std::vector<float> c(128), d(128, std::nanf(""));
    for (int r = 0; r < 16; ++r) for (int n = 0; n < 8; ++n) c[static_cast<std::size_t>(r * 8 + n)] = static_cast<float>(c_of(r, n));
    std::string text = kernel_text;
    std::string body = body_template;
    body.replace(body.find("MMA"), 3,
                 kdim == 16 ? "mma.sync.aligned.m16n8k16.row.col.f32.TYPE.TYPE.f32 {%c0, %c1, %c2, %c3}, "
                              "{%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};"
                            : "mma.sync.aligned.m16n8k8.row.col.f32.TYPE.TYPE.f32 {%c0, %c1, %c2, %c3}, "
                              "{%a0, %a1}, {%b0}, {%c0, %c1, %c2, %c3};");
    for (std::size_t at; (at = body.find("TYPE")) != std::string::npos;) body.replace(at, 4, bf ? "bf16" : "f16");
    text.replace(text.find("BODY"), 4, body);
    host_memory mem;
    mem.add(ab);
    mem.add(c);
    mem.add(d);
    run(text, "k", {1, 1, 1}, {32, 1, 1}, mem, {}, d.data(), ab.data(), c.data());
    for (int r = 0; r < 16; ++r) {
      for (int n = 0; n < 8; ++n) {
        double want = c_of(r, n);
        for (int k = 0; k < kdim; ++k) want += a_of(r, k) * b_of(k, n);
        INFO("D[" << r << "][" << n << "]");
        CHECK(d[static_cast<std::size_t>(r * 8 + n)] == static_cast<float>(want));
      }
    }
    // By hand: D[0][0] = 0.5 + sum_k (k % 13 - 6)(k % 7 - 3) = 0.5 + 40 (lane 0's d0); D[1][2] =
    // 10.5 + sum_k ((16 + k) % 13 - 6)((8k + 2) % 7 - 3) = 10.5 - 12 (lane 5's d0). k < 8:
    // D[0][0] = 0.5 + (18 + 10 + 4 + 0 - 2 - 2 + 0 - 3) = 25.5, D[1][2] = 10.5 + (3 + 0 - 1 + 0 + 3 - 6 - 6 - 4) = -0.5.
    CHECK(d[0] == (kdim == 16 ? 40.5f : 25.5f));
    CHECK(d[10] == (kdim == 16 ? -1.5f : -0.5f));
  }
}

// A wmma GEMM tile: A (m x k) row-major, B (k x n) column-major, C (m x n) row-major, all in
// global memory; D = A B + C stored row-major. Small integers make every product and sum exact.
namespace {
std::string wmma_kernel(const std::string& shape, const std::string& ab, const std::string& cd, int a_regs, int b_regs,
                        int c_regs, const std::string& mma_types, const std::string& c_reg_type) {
  const auto list = [](const char* name, int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += (i ? ", %" : "%") + std::string(name) + std::to_string(i);
    return s + "}";
  };
  return ptx_module(".visible .entry k(.param .u64 k_d, .param .u64 k_a, .param .u64 k_b, .param .u64 k_c)\n{\n"
                    "  .reg .b32 %a<" + std::to_string(a_regs) + ">, %b<" + std::to_string(b_regs) + ">;\n"
                    "  .reg ." + c_reg_type + " %c<" + std::to_string(c_regs) + ">, %d<" + std::to_string(c_regs) + ">;\n"
                    "  .reg .b64 %rd<5>;\n"
                    "  ld.param.u64 %rd1, [k_a];\n  ld.param.u64 %rd2, [k_b];\n  ld.param.u64 %rd3, [k_c];\n"
                    "  ld.param.u64 %rd4, [k_d];\n"
                    "  wmma.load.a.sync.aligned.row." + shape + ".global." + ab + " " + list("a", a_regs) + ", [%rd1];\n"
                    "  wmma.load.b.sync.aligned.col." + shape + ".global." + ab + " " + list("b", b_regs) + ", [%rd2];\n"
                    "  wmma.load.c.sync.aligned.row." + shape + ".global." + cd + " " + list("c", c_regs) + ", [%rd3];\n"
                    "  wmma.mma.sync.aligned.row.col." + shape + "." + mma_types + " " + list("d", c_regs) + ", " +
                    list("a", a_regs) + ", " + list("b", b_regs) + ", " + list("c", c_regs) + ";\n"
                    "  wmma.store.d.sync.aligned.row." + shape + ".global." + cd + " [%rd4], " + list("d", c_regs) + ";\n"
                    "  ret;\n}\n");
}
}  // namespace

TEST_CASE("wmma.load/mma/store: the warp-wide matrix API over f16, bf16, tf32 and s8, row- and column-major",
          "[op:wmma.load.a.sync.aligned.row.m16n16k16.global.f16][op:wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32]"
          "[op:wmma.mma.sync.aligned.row.col.m32n8k16.f32.bf16.bf16.f32][op:wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32]"
          "[op:wmma.mma.sync.aligned.row.col.m8n32k16.s32.s8.s8.s32.satfinite]") {
  const auto a_of = [](int r, int k) { return (r * 7 + k * 3) % 11 - 5; };
  const auto b_of = [](int k, int n) { return (k * 5 + n) % 9 - 4; };
  const auto c_of = [](int r, int n) { return r - 2 * n; };
  struct form {
    const char* shape; int m, n, k; const char* ab; int a_regs, b_regs; const char* mma;
  };
  for (const form f : {form{"m16n16k16", 16, 16, 16, "f16", 8, 8, "f32.f32"},
                       form{"m32n8k16", 32, 8, 16, "bf16", 8, 2, "f32.bf16.bf16.f32"},
                       form{"m16n16k8", 16, 16, 8, "tf32", 4, 4, "f32.tf32.tf32.f32"}}) {
    INFO(f.shape << " " << f.ab);
    const std::string ab = f.ab;
    std::vector<std::uint16_t> a16, b16;
    std::vector<float> a32, b32;
    for (int r = 0; r < f.m; ++r) for (int k = 0; k < f.k; ++k) {
      const auto x = static_cast<float>(a_of(r, k));
      if (ab == "f16") a16.push_back(rungs::detail::f16_bits_from_float(x));
      else if (ab == "bf16") a16.push_back(rungs::detail::bf16_bits_from_float(x));
      else a32.push_back(x + (r == 0 && k == 0 ? 0x1p-20f * x : 0.0f));  // tf32 ignores the low 13 bits
    }
    for (int n = 0; n < f.n; ++n) for (int k = 0; k < f.k; ++k) {  // column-major: column n's k elements
      const auto x = static_cast<float>(b_of(k, n));
      if (ab == "f16") b16.push_back(rungs::detail::f16_bits_from_float(x));
      else if (ab == "bf16") b16.push_back(rungs::detail::bf16_bits_from_float(x));
      else b32.push_back(x);
    }
    std::vector<float> c, d(static_cast<std::size_t>(f.m * f.n), std::nanf(""));
    for (int r = 0; r < f.m; ++r) for (int n = 0; n < f.n; ++n) c.push_back(static_cast<float>(c_of(r, n)));
    host_memory mem;
    if (ab == "tf32") mem.add(a32), mem.add(b32);
    else mem.add(a16), mem.add(b16);
    mem.add(c);
    mem.add(d);
    const std::string text = wmma_kernel(f.shape, f.ab, "f32", f.a_regs, f.b_regs, 8, f.mma, "f32");
    const void* pa = ab == "tf32" ? static_cast<const void*>(a32.data()) : a16.data();
    const void* pb = ab == "tf32" ? static_cast<const void*>(b32.data()) : b16.data();
    const auto result = run(text, "k", {1, 1, 1}, {32, 1, 1}, mem, {}, d.data(), pa, pb, c.data());
    // Traffic as ld/st count it: each lane's element bytes (f16 A and B fragments hold every
    // element twice: 8 registers of 2 for a 16 x 16 matrix), distinct sectors once per launch.
    const auto sectors = [](const void* p, std::uint64_t bytes) {
      const auto a = reinterpret_cast<std::uint64_t>(p);
      return (a + bytes - 1) / 32 - a / 32 + 1;
    };
    const std::uint64_t esize = ab == "tf32" ? 4 : 2, a_bytes = esize * f.m * f.k, b_bytes = esize * f.k * f.n;
    const std::uint64_t cd_bytes = 4 * std::uint64_t(f.m * f.n);
    CHECK(result.global.bytes_read == (ab == "f16" ? 2 : 1) * (a_bytes + b_bytes) + cd_bytes);
    CHECK(result.global.bytes_written == cd_bytes);
    const std::uint64_t read_sectors = sectors(pa, a_bytes) + sectors(pb, b_bytes) + sectors(c.data(), cd_bytes);
    CHECK(result.global.sectors_read == read_sectors);
    CHECK(result.global.sector_reads_total == read_sectors);
    CHECK(result.global.sectors_written == sectors(d.data(), cd_bytes));
    for (int r = 0; r < f.m; ++r) {
      for (int n = 0; n < f.n; ++n) {
        int want = c_of(r, n);
        for (int k = 0; k < f.k; ++k) want += a_of(r, k) * b_of(k, n);
        INFO("D[" << r << "][" << n << "]");
        CHECK(d[static_cast<std::size_t>(r * f.n + n)] == static_cast<float>(want));
      }
    }
    // By hand: D[0][0] = 0 + sum_k ((3k) % 11 - 5)((5k) % 9 - 4); k < 8: (-5)(-4) + (-2)(1) + (1)(-3)
    // + (4)(2) + (-4)(-2) + (-1)(3) + (2)(-1) + (5)(4) = 46; k 8..15 add (-3)(0) + (0)(-4) + (3)(1) + (-5)(-3)
    // + (-2)(2) + (1)(-2) + (4)(3) + (-4)(-1) = 28.
    CHECK(d[0] == (f.k == 16 ? 74.0f : 46.0f));
  }
  // s8 with .satfinite: 16 products of 127 x 127 = 258064 over C = 2^31 - 1 - 100000 pass 2^31 - 1.
  std::vector<std::int8_t> a(8 * 16, 127), b(16 * 32, 127);
  std::vector<std::int32_t> c(8 * 32, 2147483647 - 100000), d(8 * 32, 0);
  for (const bool sat : {true, false}) {
    host_memory mem;
    mem.add(a), mem.add(b), mem.add(c), mem.add(d);
    const std::string text = wmma_kernel("m8n32k16", "s8", "s32", 1, 4, 8, std::string("s32.s8.s8.s32") + (sat ? ".satfinite" : ""), "b32");
    run(text, "k", {1, 1, 1}, {32, 1, 1}, mem, {}, d.data(), a.data(), b.data(), c.data());
    CHECK(d[0] == (sat ? 2147483647 : -2147325585));  // 2^31 - 1 - 100000 + 258064, wrapped
    CHECK(d[255] == d[0]);
  }
}

TEST_CASE("wmma: the whole warp, one address for it, the fragment's register count; other forms refused by name") {
  // Lanes that give different addresses break the ISA's rule: a finding.
  const auto text = [](const std::string& form, const std::string& fragment) {
    return ptx_module(R"(
.visible .entry k(.param .u64 k_a)
{
  .reg .b32 %a<8>, %lane;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [k_a];
  mov.u32 %lane, %laneid;
  mul.wide.u32 %rd2, %lane, 2;
  add.s64 %rd1, %rd1, %rd2;
  wmma.load.a.sync.aligned.row.)" + form + " " + fragment + R"(, [%rd1];
  ret;
}
)");
  };
  const std::string eight = "{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}";
  std::vector<std::uint16_t> a(16 * 16 + 64, 0x3c00);
  host_memory mem;
  mem.add(a);
  CHECK_THROWS_WITH(run(text("m16n16k16.global.f16", eight), "k", {1, 1, 1}, {32, 1, 1}, mem, {}, a.data()),
                    Catch::Contains("the ISA requires one for the whole warp"));
  // A fragment of the wrong size fails at parsing, naming the count; an unimplemented form (the
  // sub-byte s4) is refused by name when executed.
  CHECK_THROWS_WITH(run(text("m16n16k16.global.f16", "{%a0, %a1, %a2, %a3, %a4, %a5, %a6}"), "k", {1, 1, 1}, {32, 1, 1},
                        mem, {}, a.data()),
                    Catch::Contains("needs 8 registers"));
  CHECK_THROWS_WITH(run(text("m8n8k32.global.s4", "{%a0}"), "k", {1, 1, 1}, {32, 1, 1}, mem, {}, a.data()),
                    Catch::Contains("wmma form"));
}

TEST_CASE("mma and ldmatrix (.sync.aligned) must be executed by the whole warp, converged") {
  const std::string body = "  setp.lt.u32 %p1, %lane, 16;\n"
                           "  @%p1 ldmatrix.sync.aligned.m8n8.x1.shared.b16 %o0, [%addr];";
  std::vector<std::uint16_t> in(256, 1);
  std::vector<std::uint32_t> out(128);
  host_memory mem;
  mem.add(in);
  mem.add(out);
  CHECK_THROWS_WITH(run(tile_kernel(body), "k", {1, 1, 1}, {32, 1, 1}, mem, {}, out.data(), in.data()),
                    Catch::Contains("executed by lanes 0xffff of the warp: .sync.aligned needs all 32 lanes, "
                                    "converged at PTX line 28 `@%p1 ldmatrix.sync.aligned.m8n8.x1.shared.b16"));
}

TEST_CASE("a block waiting for another block is a finding, not a hang (blocks run one at a time)") {
  // Block 1 spins until block 0 has set a flag in global memory (in[0]).
  const std::string text = kernel("", R"(
  ld.param.u64 %rd1, [k_in];
  mov.u32 %r1, %ctaid.x;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra $L_set;
$L_spin:
  ld.volatile.global.u32 %r2, [%rd1];
  setp.eq.u32 %p2, %r2, 0;
  @%p2 bra $L_spin;
  bra.uni $L_end;
$L_set:
  st.volatile.global.u32 [%rd1], 1;
$L_end:
)");
  sim::schedule in_order;
  in_order.randomize = false;  // block 0 runs first: block 1 finds the flag set
  in_order.cta_instruction_limit = 10000;
  buffers a(32);
  a.in[0] = 0;
  CHECK_NOTHROW(a.run(text, 1, in_order, 2));
  // In a seeded random block order, block 1 sometimes runs first and never finishes: the finding.
  int overruns = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    sim::schedule random;
    random.seed = seed;
    random.cta_instruction_limit = 10000;
    buffers b(32);
    b.in[0] = 0;
    try {
      b.run(text, 1, random, 2);
      CHECK(b.in[0] == 1u);
    } catch (const sim::sim_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("block (1,0,0) ran past 10000 warp instructions"));
      ++overruns;
    }
  }
  CHECK(overruns > 0);
  CHECK(overruns < 16);
  // In launch order (as a GPU dispatches blocks), block 1 always finds block 0's flag.
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    sim::schedule launch_order;
    launch_order.seed = seed;
    launch_order.blocks_in_launch_order = true;
    launch_order.cta_instruction_limit = 10000;
    buffers b(32);
    b.in[0] = 0;
    CHECK_NOTHROW(b.run(text, 1, launch_order, 2));
  }
}

TEST_CASE("bar.red: __syncthreads_count, _and and _or give every thread the block's reduction",
          "[op:bar.red.popc.u32][op:bar.red.and.pred][op:bar.red.or.pred]") {
  const std::string text = kernel("", R"(
  rem.u32 %r1, %tid, 3;
  setp.eq.u32 %p1, %r1, 0;
  bar.red.popc.u32 %r2, 0, %p1;
  setp.lt.u32 %p2, %tid, 64;
  bar.red.and.pred %p3, 0, %p2;
  selp.u32 %r3, 1, 0, %p3;
  setp.eq.u32 %p4, %tid, 63;
  bar.red.or.pred %p5, 0, %p4;
  selp.u32 %r4, 1, 0, %p5;
  bar.red.and.pred %p6, 0, !%p4;
  selp.u32 %r6, 1, 0, %p6;
  mad.lo.u32 %r5, %r2, 1000, %r6;
  mad.lo.u32 %r5, %r3, 100, %r5;
  mad.lo.u32 %r5, %r4, 10, %r5;
  st.global.u32 [%rd_out], %r5;
)");
  for (const std::uint64_t seed : {1u, 2u}) {
    sim::schedule s;
    s.seed = seed;
    buffers full(64);
    full.run(text, 64, s);  // 22 multiples of 3 in 0..63; all below 64; thread 63 exists
    CHECK(full.out == std::vector<std::uint32_t>(64, 22110));
    buffers partial(60);
    partial.run(text, 60, s);  // a partial last warp: 20 multiples of 3 in 0..59; no thread 63
    CHECK(partial.out == std::vector<std::uint32_t>(60, 20101));
  }
}

TEST_CASE("nanosleep: a back-off in a spin-wait; it takes no time here, the other warps still run",
          "[op:nanosleep.u32]") {
  // Thread 0 clears a flag in shared memory; after a barrier warp 1 sets it and warp 0 spins on it
  // with a growing back-off (CUB's decoupled look-back waits this way). Every seed's schedule
  // ends the spin, whichever warp it runs first; the operand may be an immediate or a register.
  const std::string text = kernel("  .shared .u32 flag;\n", R"(
  setp.ne.u32 %p1, %tid, 0;
  @%p1 bra $L_cleared;
  mov.u32 %r1, 0;
  st.volatile.shared.u32 [flag], %r1;
$L_cleared:
  bar.sync 0;
  setp.ne.u32 %p1, %tid, 32;
  @%p1 bra $L_wait;
  mov.u32 %r1, 7;
  st.volatile.shared.u32 [flag], %r1;
  bra $L_done;
$L_wait:
  setp.ge.u32 %p2, %tid, 32;
  @%p2 bra $L_done;
  nanosleep.u32 0;
  mov.u32 %r3, 32;
$L_spin:
  ld.volatile.shared.u32 %r2, [flag];
  setp.eq.u32 %p3, %r2, 7;
  @%p3 bra $L_seen;
  nanosleep.u32 %r3;
  shl.b32 %r3, %r3, 1;
  min.u32 %r3, %r3, 1000000;
  bra $L_spin;
$L_seen:
  st.global.u32 [%rd_out], %r2;
$L_done:
)");
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    INFO("seed " << seed);
    buffers b(64);
    b.run(text, 64, {.seed = seed});
    for (unsigned t = 0; t < 64; ++t) CHECK(b.out[t] == (t < 32 ? 7u : 0xdeadbeefu));
  }
  // Other forms are refused by name.
  buffers b(32);
  CHECK_THROWS_WITH(b.run(kernel("", "  nanosleep.u64 5;\n"), 32),
                    Catch::Contains("not implemented") && Catch::Contains("nanosleep form 'nanosleep.u64'"));
}

TEST_CASE("prefetch: a cache hint with no effect, not checked (a GPU does not fault on one)",
          "[op:prefetch.global.L2][op:prefetch.global.L1][op:prefetchu.L1]") {
  buffers b(32);
  b.run(kernel("", "  prefetch.global.L2 [%rd_in];\n  prefetch.global.L1 [%rd_in+1048576];\n  prefetchu.L1 [%rd_in];\n"
                   "  prefetch.global.L2::evict_last [%rd_in];\n  ld.global.u32 %r1, [%rd_in];\n"
                   "  st.global.u32 [%rd_out], %r1;\n"),
        32);
  for (unsigned t = 0; t < 32; ++t) CHECK(b.out[t] == t);
}
