// Definedness (sim/executor/definedness.cpp): a read of never-written shared memory gives
// undefined lanes, which are reported where they are used (a store to global or local memory,
// a branch or guard, an address, an atomic), naming the use and the read they come from;
// harmless reads (the value discarded by selp, and.pred or or.pred, or never used) are not.
// uninitialized_at_load reports the read itself; uninitialized_check off reports nothing.
#include "harness.hpp"

#include <catch2/catch.hpp>

namespace sim = rungs::sim;
using rungs_sim_test::buffers;
using rungs_sim_test::kernel;

namespace {
// Lanes 0-3 write smem[lane] = lane + 100; after the barrier every lane reads smem[lane] into
// %r1, so lanes 4-31 hold undefined lanes (the first of them read byte 16). %p1: lane < 4.
std::string undefined_kernel(const std::string& use, const std::string& decls = "") {
  return kernel("  .shared .align 4 .b8 smem[256];\n" + decls, R"(
  setp.lt.u32 %p1, %lane, 4;
  mov.u32 %r9, smem;
  shl.b32 %r8, %lane, 2;
  add.s32 %r7, %r9, %r8;
  add.u32 %r2, %lane, 100;
  @%p1 st.shared.u32 [%r7], %r2;
  bar.sync 0;
  ld.shared.u32 %r1, [%r7];
)" + use);
}

sim::schedule at_load() {
  sim::schedule s;
  s.uninitialized_at_load = true;
  return s;
}
sim::schedule allowed() {
  sim::schedule s;
  s.uninitialized_check = false;
  return s;
}

// The message of the launch's finding ("no finding" when it ran to its end).
std::string finding_of(buffers& b, const std::string& text, const sim::schedule& s = {}) {
  try {
    b.run(text, 32, s);
  } catch (const sim::sim_error& e) {
    return e.what();
  }
  return "no finding";
}

// The finding's two halves: the use (instruction and thread) and the read the value comes from
// (lane 4's read of byte 16, the first undefined lane of undefined_kernel).
void check_finding(const std::string& what, const std::string& use_instr, const std::string& use, unsigned thread) {
  CAPTURE(what);
  CHECK(what.find("use of an undefined value at PTX line") != std::string::npos);
  CHECK(what.find("`" + use_instr + "`, thread (" + std::to_string(thread) + ",0,0) of block (0,0,0): " + use +
                  " comes from a read of never-written shared byte 16 (PTX line") != std::string::npos);
  CHECK(what.find("`ld.shared.u32 %r1, [%r7]`, thread (4,0,0) of block (0,0,0))") != std::string::npos);
}
}  // namespace

// selp and and.pred/or.pred with a defined deciding operand do not depend on the undefined
// source; the undefined value itself goes back to shared memory and is never used.
const std::string kHarmless = R"(
  selp.b32 %r3, %r1, 0, %p1;
  setp.ne.u32 %p2, %r1, 7;
  and.pred %p3, %p1, %p2;
  setp.ge.u32 %p5, %lane, 4;
  or.pred %p4, %p5, %p2;
  st.shared.u32 [%r7+128], %r1;
  st.global.u32 [%rd_out], %r3;
  @%p3 st.global.u32 [%rd_out+128], %r1;
  @!%p4 st.global.u32 [%rd_out+256], %r1;
  bar.sync 0;
  @%p1 ld.shared.u32 %r4, [%r7+128];
  @%p1 st.global.u32 [%rd_out+384], %r4;
)";

TEST_CASE("definedness: a harmless read of never-written shared memory is not a finding",
          "[op:selp.b32][op:and.pred][op:or.pred][op:ld.shared.u32][op:st.shared.u32]") {
  for (const std::uint64_t seed : {1u, 2u}) {
    sim::schedule s;
    s.seed = seed;
    buffers b(128);
    b.run(undefined_kernel(kHarmless), 32, s);
    for (unsigned l = 0; l < 32; ++l) {
      CAPTURE(l);
      CHECK(b.out[l] == (l < 4 ? l + 100 : 0u));                  // selp chose the defined 0
      CHECK(b.out[32 + l] == (l < 4 ? l + 100 : 0xdeadbeefu));    // and.pred: a defined false
      CHECK(b.out[64 + l] == 0xdeadbeefu);                        // or.pred: a defined true
      CHECK(b.out[96 + l] == (l < 4 ? l + 100 : 0xdeadbeefu));    // back from shared memory
    }
  }
  // The strict check reports the read itself; with the check off nothing is reported.
  buffers strict(128);
  CHECK_THROWS_WITH(strict.run(undefined_kernel(kHarmless), 32, at_load()),
                    Catch::Contains("read of never-written shared byte 16 at PTX line") &&
                        Catch::Contains("`ld.shared.u32 %r1, [%r7]`") && Catch::Contains("thread (4,0,0)"));
  buffers off(128);
  CHECK_NOTHROW(off.run(undefined_kernel(kHarmless), 32, allowed()));
}

TEST_CASE("definedness: an undefined value stored to global memory is reported at the store",
          "[op:st.global.u32]") {
  const std::string text = undefined_kernel("  st.global.u32 [%rd_out], %r1;\n");
  buffers b(32);
  check_finding(finding_of(b, text), "st.global.u32 [%rd_out], %r1", "the value stored to global memory", 4);
  // Another seed, the same finding (the marks do not depend on the garbage or the schedule).
  buffers again(32);
  sim::schedule seed2;
  seed2.seed = 2;
  check_finding(finding_of(again, text, seed2), "st.global.u32 [%rd_out], %r1", "the value stored to global memory", 4);
  buffers strict(32);
  CHECK_THROWS_WITH(strict.run(text, 32, at_load()), Catch::Contains("read of never-written shared byte 16"));
  buffers off(32);
  CHECK_NOTHROW(off.run(text, 32, allowed()));
  for (unsigned l = 0; l < 4; ++l) CHECK(off.out[l] == l + 100);
  // Through arithmetic and back through shared memory, the origin stays the first read.
  buffers twice(32);
  check_finding(finding_of(twice, undefined_kernel(R"(
  add.s32 %r3, %r1, 1;
  st.shared.u32 [%r7+128], %r3;
  bar.sync 0;
  ld.shared.u32 %r4, [%r7+128];
  st.global.u32 [%rd_out], %r4;
)")), "st.global.u32 [%rd_out], %r4", "the value stored to global memory", 4);
  // To local memory (where definedness is not tracked): reported at the store.
  buffers local(32);
  check_finding(finding_of(local, undefined_kernel(R"(
  mov.u64 %rd3, depot;
  st.local.u32 [%rd3], %r1;
)", "  .local .align 4 .b8 depot[8];\n")), "st.local.u32 [%rd3], %r1", "the value stored to local memory (definedness is not tracked there)", 4);
}

TEST_CASE("definedness: a branch, a guard or an address from an undefined value is reported", "[op:bra]") {
  buffers branch(32);
  check_finding(finding_of(branch, undefined_kernel(R"(
  setp.ne.u32 %p2, %r1, 7;
  @%p2 bra $L_done;
  st.global.u32 [%rd_out], %lane;
$L_done:
)")), "@%p2 bra $L_done", "the branch's predicate", 4);
  buffers guard(32);
  check_finding(finding_of(guard, undefined_kernel(R"(
  setp.ne.u32 %p2, %r1, 7;
  @%p2 st.global.u32 [%rd_out], %lane;
)")), "@%p2 st.global.u32 [%rd_out], %lane", "the guard predicate", 4);
  buffers address(32);
  check_finding(finding_of(address, undefined_kernel(R"(
  and.b32 %r3, %r1, 60;
  add.s32 %r3, %r3, %r9;
  ld.shared.u32 %r4, [%r3];
  st.global.u32 [%rd_out], %r4;
)")), "ld.shared.u32 %r4, [%r3]", "the address", 4);
  // An undefined guard of an arithmetic instruction makes its result undefined, not a finding.
  buffers arith(32);
  CHECK_NOTHROW(arith.run(undefined_kernel(R"(
  setp.ne.u32 %p2, %r1, 7;
  @%p2 add.s32 %r2, %r2, 1;
)"), 32));
  buffers arith_used(32);
  check_finding(finding_of(arith_used, undefined_kernel(R"(
  setp.ne.u32 %p2, %r1, 7;
  @%p2 add.s32 %r2, %r2, 1;
  st.global.u32 [%rd_out], %r2;
)")), "st.global.u32 [%rd_out], %r2", "the value stored to global memory", 4);
}

TEST_CASE("definedness: shfl moves the source lane's mark", "[op:shfl.sync.up.b32]") {
  // Lane l gets lane l-1's %r1: lanes 0-4 get defined values (lane 0 its own), lane 5 the first
  // undefined one (lane 4's).
  const auto text = [](unsigned last_storing_lane) {
    return undefined_kernel(R"(
  shfl.sync.up.b32 %r5, %r1, 1, 0, -1;
  setp.le.u32 %p2, %lane, )" + std::to_string(last_storing_lane) + R"(;
  @%p2 st.global.u32 [%rd_out], %r5;
)");
  };
  buffers quiet(32);
  quiet.run(text(4), 32);
  CHECK(quiet.out[0] == 100);
  for (unsigned l = 1; l <= 4; ++l) CHECK(quiet.out[l] == l + 99);
  CHECK(quiet.out[5] == 0xdeadbeefu);
  buffers used(32);
  check_finding(finding_of(used, text(5)), "@%p2 st.global.u32 [%rd_out], %r5", "the value stored to global memory", 5);
}

TEST_CASE("definedness: vote and atomics with undefined inputs", "[op:vote.sync.ballot.b32][op:atom.shared.add.u32]") {
  buffers ballot(32);  // every lane's ballot depends on lanes 4-31's undefined predicates
  CHECK_THROWS_WITH(ballot.run(undefined_kernel(R"(
  setp.ne.u32 %p2, %r1, 7;
  vote.sync.ballot.b32 %r3, %p2, -1;
  st.global.u32 [%rd_out], %r3;
)"), 32), Catch::Contains("use of an undefined value at") && Catch::Contains("thread (0,0,0) of block (0,0,0): the value stored") &&
              Catch::Contains("never-written shared byte 16"));
  buffers atomic(32);  // a read-modify-write of never-written shared bytes: reported at the atomic
  CHECK_THROWS_WITH(atomic.run(undefined_kernel("  atom.shared.add.u32 %r3, [%r7+128], 1;\n"), 32),
                    Catch::Contains("use of an undefined value at") && Catch::Contains("`atom.shared.add.u32 %r3, [%r7+128], 1`") &&
                        Catch::Contains("the shared bytes the atomic reads and modifies comes from a read of never-written shared byte 128"));
  buffers operand(32);
  CHECK_THROWS_WITH(operand.run(undefined_kernel(R"(
  @%p1 st.shared.u32 [%r7+128], %r2;
  bar.sync 0;
  atom.shared.add.u32 %r3, [%r7+128], %r1;
)"), 32), Catch::Contains("`atom.shared.add.u32 %r3, [%r7+128], %r1`") && Catch::Contains("thread (4,0,0) of block (0,0,0): an operand of the atomic"));
}

// A mutant of a staging kernel: thread 7 skips its shared write, and its neighbour's output
// takes the garbage. Caught at the global store, naming the byte that was never written.
TEST_CASE("definedness: a missing shared write that reaches the output is caught", "[op:st.shared.u32]") {
  const auto text = [](const std::string& skip) {
    return kernel("  .shared .align 4 .b8 smem[256];\n", R"(
  ld.global.u32 %r1, [%rd_in];
  mov.u32 %r9, smem;
  shl.b32 %r8, %tid, 2;
  add.s32 %r7, %r9, %r8;
  setp.eq.u32 %p1, %tid, 7;
  )" + skip + R"(st.shared.u32 [%r7], %r1;
  bar.sync 0;
  xor.b32 %r2, %tid, 1;
  shl.b32 %r2, %r2, 2;
  add.s32 %r2, %r9, %r2;
  ld.shared.u32 %r3, [%r2];
  st.global.u32 [%rd_out], %r3;
)");
  };
  buffers ok(64);
  ok.run(text(""), 64);
  for (unsigned t = 0; t < 64; ++t) CHECK(ok.out[t] == (t ^ 1));
  buffers mutant(64);
  CHECK_THROWS_WITH(mutant.run(text("@!%p1 "), 64),
                    Catch::Contains("`st.global.u32 [%rd_out], %r3`, thread (6,0,0) of block (0,0,0): the value stored to global memory "
                                    "comes from a read of never-written shared byte 28") &&
                        Catch::Contains("`ld.shared.u32 %r3, [%r2]`, thread (6,0,0)"));
}

// Each element of a vector load, and each byte, is defined by its own bytes: a word written next
// to one never written, a byte written next to one never written.
TEST_CASE("definedness: per element and per byte", "[op:ld.shared.v2.u32][op:ld.shared.u8][op:st.shared.u8]") {
  const auto text = [](const std::string& use) {
    return kernel("  .shared .align 8 .b8 smem[64];\n", R"(
  setp.eq.u32 %p1, %lane, 0;
  mov.u32 %r1, 7;
  mov.u32 %r2, 9;
  @%p1 st.shared.u32 [smem], %r1;
  @%p1 st.shared.u8 [smem+8], %r2;
  bar.sync 0;
  @%p1 ld.shared.v2.u32 {%r3, %r4}, [smem];
  @%p1 ld.shared.u8 %r5, [smem+8];
  @%p1 ld.shared.u8 %r6, [smem+9];
  @%p1 st.global.u32 [%rd_out], %r3;
  @%p1 st.global.u32 [%rd_out+4], %r5;
)" + use);
  };
  buffers b(32);
  b.run(text(""), 32);
  CHECK(b.out[0] == 7);
  CHECK(b.out[1] == 9);
  buffers second(32);
  CHECK_THROWS_WITH(second.run(text("  @%p1 st.global.u32 [%rd_out+8], %r4;\n"), 32),
                    Catch::Contains("`@%p1 st.global.u32 [%rd_out+8], %r4`, thread (0,0,0) of block (0,0,0): the value stored to "
                                    "global memory comes from a read of never-written shared byte 4 (") &&
                        Catch::Contains("`@%p1 ld.shared.v2.u32 {%r3, %r4}, [smem]`"));
  buffers neighbour(32);
  CHECK_THROWS_WITH(neighbour.run(text("  @%p1 st.global.u32 [%rd_out+8], %r6;\n"), 32),
                    Catch::Contains("comes from a read of never-written shared byte 9 (") &&
                        Catch::Contains("`@%p1 ld.shared.u8 %r6, [smem+9]`"));
}

// shfl.sync reading an absent lane (a partial last warp) gets undefined bits (CUDA: "the value is
// undefined"): a use of them is a finding too.
TEST_CASE("definedness: shfl from an absent lane", "[op:shfl.sync.idx.b32]") {
  const auto text = [](const std::string& guard) {
    return kernel("", R"(
  shfl.sync.idx.b32 %r3, %lane, 20, 31, -1;
  setp.lt.u32 %p1, %tid, 32;
  )" + guard + R"(st.global.u32 [%rd_out], %r3;
)");
  };
  buffers b(40);
  b.run(text("@%p1 "), 40);
  for (unsigned t = 0; t < 32; ++t) CHECK(b.out[t] == 20);
  buffers all(40);
  CHECK_THROWS_WITH(all.run(text(""), 40),
                    Catch::Contains("`st.global.u32 [%rd_out], %r3`, thread (32,0,0) of block (0,0,0): the value stored to global "
                                    "memory comes from shfl.sync reading an exited or absent lane (") &&
                        Catch::Contains("`shfl.sync.idx.b32 %r3, %lane, 20, 31, -1`, thread (32,0,0)"));
  buffers off(40);  // the strict check and no check: as before (garbage, unreported)
  CHECK_NOTHROW(off.run(text(""), 40, allowed()));
  buffers strict(40);
  CHECK_NOTHROW(strict.run(text(""), 40, at_load()));
}
