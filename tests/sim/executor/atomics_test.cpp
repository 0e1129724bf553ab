// Atomics and memory ordering (sim/executor/memory.cpp): atom and red of every operation
// against the PTX ISA, racing atomics under the adversarial schedule, the race check's view of
// strong (atomic, volatile, relaxed, acquire, release) and weak accesses, and fences.
// [op:...] tags: see ops_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <numeric>

#include "eval.hpp"

using namespace rungs_sim_test;
namespace sim = rungs::sim;

namespace {

struct atomic_result {
  std::uint32_t returned = 0, stored = 0;
};

// One thread: memory word m = old; `instruction` (reading [%rd_m], %b, %c, writing %d); then
// the value it returned and the word's new value.
atomic_result atomic32(const std::string& instruction, std::uint32_t old, std::uint32_t b, std::uint32_t c = 0) {
  const std::string text = lane_kernel("  .reg .b32 %a, %b, %c, %d, %e;\n  .reg .b16 %hb, %hd;\n  .reg .b64 %rd_m;\n",
                                       "  ld.global.u32 %a, [%rd_in];\n  ld.global.u32 %b, [%rd_in+4];\n"
                                       "  ld.global.u32 %c, [%rd_in+8];\n  add.s64 %rd_m, %rd_in, 12;\n"
                                       "  st.global.u32 [%rd_m], %a;\n  mov.u32 %d, 0xdeadbeef;\n  " +
                                           instruction + ";\n  ld.global.u32 %e, [%rd_m];\n"
                                                         "  st.global.u32 [%rd_out], %d;\n  st.global.u32 [%rd_out+4], %e;",
                                       16, 8);
  std::vector<std::uint32_t> in{old, b, c, 0}, out(2, 0);
  host_memory mem;
  mem.add(in);
  mem.add(out);
  run(text, "k", {1, 1, 1}, {1, 1, 1}, mem, {}, out.data(), in.data());
  return {out[0], out[1]};
}

// A kernel over one shared u32 `word`, zeroed by thread 0 before a barrier, then `body`
// (kernel(): %p1 is "not thread 0").
std::string on_shared_word(const std::string& body) {
  return kernel("  .shared .align 4 .u32 word;\n",
                "  setp.ne.u32 %p1, %tid, 0;\n  @%p1 bra $L_wait;\n  st.shared.u32 [word], 0;\n$L_wait:\n  bar.sync 0;\n" + body);
}

bool operator==(atomic_result x, atomic_result y) { return x.returned == y.returned && x.stored == y.stored; }

}  // namespace

namespace Catch {
template <>
struct StringMaker<atomic_result> {
  static std::string convert(const atomic_result& r) {
    return "{returned " + std::to_string(r.returned) + ", stored " + std::to_string(r.stored) + "}";
  }
};
}  // namespace Catch

TEST_CASE("atom on 32-bit integers: every operation returns the old value and stores the PTX ISA's result",
          "[op:atom.global.add.u32][op:atom.global.min.s32][op:atom.global.min.u32][op:atom.global.max.s32]"
          "[op:atom.global.max.u32][op:atom.global.inc.u32][op:atom.global.dec.u32][op:atom.global.exch.b32]"
          "[op:atom.global.cas.b32][op:atom.global.and.b32][op:atom.global.or.b32][op:atom.global.xor.b32]"
          "[op:red.global.add.u32]") {
  CHECK(atomic32("atom.global.add.u32 %d, [%rd_m], %b", 5, 7) == atomic_result{5, 12});
  CHECK(atomic32("atom.global.add.u32 %d, [%rd_m], %b", 0xffffffffu, 2) == atomic_result{0xffffffffu, 1});
  CHECK(atomic32("atom.global.min.s32 %d, [%rd_m], %b", 0xfffffffdu, 2) == atomic_result{0xfffffffdu, 0xfffffffdu});
  CHECK(atomic32("atom.global.min.u32 %d, [%rd_m], %b", 0xfffffffdu, 2) == atomic_result{0xfffffffdu, 2});
  CHECK(atomic32("atom.global.max.s32 %d, [%rd_m], %b", 0xfffffffdu, 2) == atomic_result{0xfffffffdu, 2});
  CHECK(atomic32("atom.global.max.u32 %d, [%rd_m], %b", 0xfffffffdu, 2) == atomic_result{0xfffffffdu, 0xfffffffdu});
  // inc: old >= b ? 0 : old + 1; dec: old == 0 || old > b ? b : old - 1.
  CHECK(atomic32("atom.global.inc.u32 %d, [%rd_m], %b", 5, 5) == atomic_result{5, 0});
  CHECK(atomic32("atom.global.inc.u32 %d, [%rd_m], %b", 4, 5) == atomic_result{4, 5});
  CHECK(atomic32("atom.global.dec.u32 %d, [%rd_m], %b", 0, 5) == atomic_result{0, 5});
  CHECK(atomic32("atom.global.dec.u32 %d, [%rd_m], %b", 6, 5) == atomic_result{6, 5});
  CHECK(atomic32("atom.global.dec.u32 %d, [%rd_m], %b", 3, 5) == atomic_result{3, 2});
  CHECK(atomic32("atom.global.exch.b32 %d, [%rd_m], %b", 1, 9) == atomic_result{1, 9});
  CHECK(atomic32("atom.global.cas.b32 %d, [%rd_m], %b, %c", 7, 7, 9) == atomic_result{7, 9});
  CHECK(atomic32("atom.global.cas.b32 %d, [%rd_m], %b, %c", 7, 8, 9) == atomic_result{7, 7});
  CHECK(atomic32("atom.global.and.b32 %d, [%rd_m], %b", 0xf0f0u, 0xff00u) == atomic_result{0xf0f0u, 0xf000u});
  CHECK(atomic32("atom.global.or.b32 %d, [%rd_m], %b", 0xf0f0u, 0xff00u) == atomic_result{0xf0f0u, 0xfff0u});
  CHECK(atomic32("atom.global.xor.b32 %d, [%rd_m], %b", 0xf0f0u, 0xff00u) == atomic_result{0xf0f0u, 0x0ff0u});
  CHECK(atomic32("red.global.add.u32 [%rd_m], %b", 5, 7) == atomic_result{0xdeadbeefu, 12});
  // Orders and scopes are accepted (every access is in one sequentially consistent order).
  CHECK(atomic32("atom.acq_rel.gpu.global.add.u32 %d, [%rd_m], %b", 5, 7) == atomic_result{5, 12});
  CHECK(atomic32("red.relaxed.sys.global.or.b32 [%rd_m], %b", 1, 6) == atomic_result{0xdeadbeefu, 7});
  // Generic addressing is global addressing here.
  CHECK(atomic32("atom.add.u32 %d, [%rd_m], %b", 5, 7) == atomic_result{5, 12});
}

TEST_CASE("atom.add on floating point: f32 flushes subnormals, f64 and the 16-bit pairs keep them",
          "[op:atom.global.add.f32][op:atom.global.add.noftz.f16x2][op:atom.global.add.noftz.bf16x2]"
          "[op:atom.global.add.noftz.f16][op:red.global.add.f32]") {
  CHECK(atomic32("atom.global.add.f32 %d, [%rd_m], %b", bits(1.5f), bits(2.25f)) ==
        atomic_result{bits(1.5f), bits(3.75f)});
  CHECK(atomic32("atom.global.add.f32 %d, [%rd_m], %b", 1u, 0u).stored == 0u);  // a subnormal flushed to +0
  CHECK(atomic32("red.global.add.f32 [%rd_m], %b", bits(-1.0f), bits(0.5f)).stored == bits(-0.5f));
  // f16x2: hi 1.0 (0x3c00), lo 2.0 (0x4000), plus (1.0, 1.0): hi 2.0 (0x4000), lo 3.0 (0x4200).
  CHECK(atomic32("atom.global.add.noftz.f16x2 %d, [%rd_m], %b", 0x3c004000u, 0x3c003c00u) ==
        atomic_result{0x3c004000u, 0x40004200u});
  // bf16x2: hi 1.0 (0x3f80), lo 2.0 (0x4000), plus (1.0, 1.0): hi 2.0 (0x4000), lo 3.0 (0x4040).
  CHECK(atomic32("atom.global.add.noftz.bf16x2 %d, [%rd_m], %b", 0x3f804000u, 0x3f803f80u) ==
        atomic_result{0x3f804000u, 0x40004040u});
  // f16 at the low half: 1.0 + 1.0 = 2.0; the high half is untouched. f16 subnormals are kept.
  CHECK(atomic32("cvt.u16.u32 %hb, %b; atom.global.add.noftz.f16 %hd, [%rd_m], %hb; cvt.u32.u16 %d, %hd", 0xabcd3c00u,
                 0x3c00u) == atomic_result{0x3c00u, 0xabcd4000u});
  CHECK(atomic32("cvt.u16.u32 %hb, %b; atom.global.add.noftz.f16 %hd, [%rd_m], %hb; cvt.u32.u16 %d, %hd", 0x0001u,
                 0x0001u)
            .stored == 0x0002u);
}

TEST_CASE("atom on 64-bit values", "[op:atom.global.add.u64][op:atom.global.cas.b64][op:atom.global.add.f64]") {
  const std::string text = lane_kernel("  .reg .b64 %x, %y, %z, %old;\n",
                                       "  ld.global.u64 %x, [%rd_in];\n  ld.global.u64 %y, [%rd_in+8];\n"
                                       "  atom.global.add.u64 %old, [%rd_out], %x;\n"
                                       "  atom.global.cas.b64 %z, [%rd_out+8], %old, %y;\n"
                                       "  atom.global.add.f64 %z, [%rd_out+16], %y;\n",
                                       16, 8);
  std::vector<std::uint64_t> in{0x100000000ull, 0x0123456789abcdefull};
  std::vector<std::uint64_t> out{0xffffffffull, 0xffffffffull, std::bit_cast<std::uint64_t>(1.5)};
  in[1] = std::bit_cast<std::uint64_t>(2.25);
  host_memory mem;
  mem.add(in);
  mem.add(out);
  run(text, "k", {1, 1, 1}, {1, 1, 1}, mem, {}, out.data(), in.data());
  CHECK(out[0] == 0x1ffffffffull);                          // a carry into the high word
  CHECK(out[1] == std::bit_cast<std::uint64_t>(2.25));      // cas: old 0xffffffff matched
  CHECK(out[2] == std::bit_cast<std::uint64_t>(3.75));
}

TEST_CASE("racing atomics are exact under the adversarial schedule", "[op:atom.global.add.u32][op:atom.shared.add.u32]") {
  // 256 threads (8 warps, interleaved at random): each takes a ticket from a global counter and
  // adds 1 to a shared one; thread 0 adds the shared count to a second global word.
  const std::string text = on_shared_word(R"(
  ld.param.u64 %rd1, [k_in];
  atom.global.add.u32 %r1, [%rd1], 1;
  st.global.u32 [%rd_out], %r1;
  atom.shared.add.u32 %r2, [word], 1;
  bar.sync 0;
  @%p1 bra $L_end;
  ld.shared.u32 %r3, [word];
  red.global.add.u32 [%rd1+4], %r3;
$L_end:
)");
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    std::vector<std::uint32_t> in(2, 0), out(256, 0);
    host_memory mem;
    mem.add(in);
    mem.add(out);
    run(text, "k", {1, 1, 1}, {256, 1, 1}, mem, {.seed = seed}, out.data(), in.data());
    std::vector<std::uint32_t> tickets = out;
    std::sort(tickets.begin(), tickets.end());
    std::vector<std::uint32_t> expected(256);
    std::iota(expected.begin(), expected.end(), 0u);
    CHECK(tickets == expected);  // every ticket exactly once
    CHECK(out != expected);      // ... in an order the schedule shuffled
    CHECK(in[0] == 256);
    CHECK(in[1] == 256);
  }
}

TEST_CASE("the race check: a non-atomic read-modify-write is reported, the atomic one is clean",
          "[op:atom.shared.add.u32][op:ld.shared.u32][op:st.shared.u32]") {
  const auto counter = [](const std::string& increment) {
    return on_shared_word(increment + R"(
  bar.sync 0;
  ld.shared.u32 %r3, [word];
  st.global.u32 [%rd_out], %r3;
)");
  };
  const std::string plain = counter("  ld.shared.u32 %r1, [word];\n  add.s32 %r1, %r1, 1;\n  st.shared.u32 [word], %r1;");
  const std::string atomic = counter("  atom.shared.add.u32 %r1, [word], 1;");
  const std::string mixed = counter("  atom.shared.add.u32 %r1, [word], 1;\n  ld.shared.u32 %r2, [word];");
  for (std::uint64_t seed : {1, 2, 3}) {
    buffers a(64);
    CHECK_THROWS_WITH(a.run(plain, 64, {.seed = seed}), Catch::Contains("shared-memory race"));
    buffers b(64);
    b.run(atomic, 64, {.seed = seed});
    CHECK(b.out == std::vector<std::uint32_t>(64, 64));
    buffers c(64);  // a plain read racing with other threads' atomics is a race too
    CHECK_THROWS_WITH(c.run(mixed, 64, {.seed = seed}), Catch::Contains("shared-memory race"));
  }
}

TEST_CASE("volatile, relaxed, acquire and release accesses are strong: they do not race with each other",
          "[op:st.volatile.shared.u32][op:ld.volatile.shared.u32][op:ld.acquire.gpu.global.u32]"
          "[op:st.release.gpu.global.u32][op:ld.relaxed.cta.shared.u32][op:st.relaxed.cta.shared.u32]") {
  // Warp 0 writes a flag word that warp 1 reads, with no barrier between them.
  const auto flag = [](const std::string& store, const std::string& load) {
    return on_shared_word(R"(
  setp.ge.u32 %p2, %tid, 32;
  @%p2 bra $L_reader;
  )" + store + R"( [word], 1;
  bra.uni $L_end;
$L_reader:
  )" + load + R"( %r1, [word];
$L_end:
)");
  };
  for (std::uint64_t seed : {1, 2, 3}) {
    buffers a(64);
    CHECK_NOTHROW(a.run(flag("st.volatile.shared.u32", "ld.volatile.shared.u32"), 64, {.seed = seed}));
    buffers b(64);
    CHECK_NOTHROW(b.run(flag("st.relaxed.cta.shared.u32", "ld.relaxed.cta.shared.u32"), 64, {.seed = seed}));
    buffers c(64);
    CHECK_THROWS_WITH(c.run(flag("st.shared.u32", "ld.shared.u32"), 64, {.seed = seed}), Catch::Contains("race"));
    buffers d(64);  // one weak side is enough for a race
    CHECK_THROWS_WITH(d.run(flag("st.volatile.shared.u32", "ld.shared.u32"), 64, {.seed = seed}), Catch::Contains("race"));
  }
  // Acquire and release in global memory read and write as plain accesses do.
  CHECK(eval32("st.release.gpu.global.u32 [%rd_out], %a; ld.acquire.gpu.global.u32 %d, [%rd_out]", 41u) == 41u);
  CHECK(eval32("ld.relaxed.sys.global.u32 %d, [%rd_in]; ld.volatile.global.u32 %c, [%rd_in+4]; add.u32 %d, %d, %c", 1u,
               2u) == 3u);
  CHECK(eval32("ld.global.cg.u32 %d, [%rd_in+4]", 1u, 7u) == 7u);
}

TEST_CASE("fence and membar execute (nothing to order further); proxy fences are refused by name",
          "[op:fence.acq_rel.gpu][op:fence.sc.cta][op:membar.gl][op:membar.cta][op:membar.sys]") {
  CHECK(eval32("fence.acq_rel.gpu; fence.sc.cta; membar.gl; membar.cta; membar.sys; add.u32 %d, %a, 1", 1u) == 2u);
  CHECK_THROWS_WITH(eval32("fence.proxy.alias; add.u32 %d, %a, 1", 1u),
                    Catch::Contains("not implemented") && Catch::Contains("fence.proxy.alias"));
  CHECK_THROWS_WITH(eval32("atom.global.inc.u64 %d, [%rd_out], %a", 1u),
                    Catch::Contains("not implemented") && Catch::Contains("atom.global.inc.u64"));
}

TEST_CASE("a block reading another block's weak store that was never published is a missing fence",
          "[op:membar.gl][op:fence.acq_rel.gpu][op:fence.sc.sys][op:membar.cta][op:atom.release.gpu.global.add.u32]") {
  // NVIDIA's threadFenceReduction pattern, one thread a block: each block stores its partial
  // (weak), then (the fence under test) takes a ticket; the block with the last ticket sums every
  // block's partial. Without a fence of gpu scope between store and ticket, the last block may
  // read a stale partial on a GPU; here it is reported, whatever order the blocks run in.
  const auto kernel = [](const std::string& fence, const std::string& ticket) {
    return ptx_module(R"(
.visible .entry last_block_sums(.param .u64 p_part, .param .u64 p_count, .param .u64 p_sum)
{
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;
  .reg .pred %p<3>;
  ld.param.u64 %rd1, [p_part];
  ld.param.u64 %rd2, [p_count];
  ld.param.u64 %rd3, [p_sum];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %nctaid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.u32 %r3, %r1, 10;
  st.global.u32 [%rd5], %r3;
  )" + fence + R"(
  )" + ticket + R"( %r4, [%rd2], 1;
  add.u32 %r5, %r2, -1;
  setp.ne.u32 %p1, %r4, %r5;
  @%p1 bra $L_end;
  mov.u32 %r6, 0;
  mov.u32 %r7, 0;
  mov.u64 %rd6, %rd1;
$L_loop:
  ld.volatile.global.u32 %r8, [%rd6];
  add.u32 %r6, %r6, %r8;
  add.s64 %rd6, %rd6, 4;
  add.u32 %r7, %r7, 1;
  setp.lt.u32 %p2, %r7, %r2;
  @%p2 bra $L_loop;
  st.global.u32 [%rd3], %r6;
$L_end:
  ret;
}
)");
  };
  const auto run_it = [](const std::string& text, sim::schedule sched) {
    std::vector<std::uint32_t> part(4, 0), count(1, 0), sum(1, 0);
    host_memory mem;
    mem.add(part);
    mem.add(count);
    mem.add(sum);
    std::uint64_t a = reinterpret_cast<std::uint64_t>(part.data()), b = reinterpret_cast<std::uint64_t>(count.data()),
                  c = reinterpret_cast<std::uint64_t>(sum.data());
    void* args[] = {&a, &b, &c};
    const auto m = sim::load_ptx(text, "fence.ptx");
    sim::launch(*m, "last_block_sums", {4, 1, 1}, {1, 1, 1}, 0, args, mem, sched);
    return sum[0];
  };
  const std::string atom = "atom.global.add.u32";
  for (std::uint64_t seed : {1, 2, 3}) {
    INFO("seed " << seed);
    for (const char* fence : {"membar.gl;", "fence.acq_rel.gpu;", "fence.sc.sys;", "membar.sys;"}) {
      INFO(fence);
      CHECK(run_it(kernel(fence, atom), {.seed = seed}) == 10 + 11 + 12 + 13);
    }
    // A release on the ticket publishes the store before it as a fence does.
    CHECK(run_it(kernel("", "atom.release.gpu.global.add.u32"), {.seed = seed}) == 46);
    // A fence publishes the stores before it only: a store after it is not published.
    for (const char* fence : {"", "membar.cta;", "fence.acq_rel.cta;", "fence.sc.cluster;",
                              "membar.gl;\n  st.global.u32 [%rd5], %r3;"}) {
      INFO("fence '" << fence << "'");
      CHECK_THROWS_WITH(run_it(kernel(fence, atom), {.seed = seed}),
                        Catch::Contains("written in this launch by thread (0,0,0) of block") &&
                            Catch::Contains("never published") && Catch::Contains("ld.volatile.global.u32"));
    }
    // With the race check off nothing is reported (the sum is right here: one order of a CPU).
    CHECK(run_it(kernel("", atom), {.seed = seed, .race_check = false}) == 46);
  }
}
