// The PTX executor's speed on rungs' attention kernels as nvcc compiles them
// (tests/sim/executor/kernels/attention_instances.cu): warp instructions executed per second,
// for a decode step (decode_step.hpp), with every check on and a randomized schedule, and the
// same launch with the checks and the randomization off (their cost, side by side). Results are
// not checked here (the cuda-sim tests do that). And a grid-stride copy that writes 16 MiB
// (global stores at scale). Each on one thread and with the blocks on every core
// (schedule::threads), in wall time.
#include <rungs_sim/executor.hpp>

#include <benchmark/benchmark.h>

#include <numeric>
#include <string>
#include <vector>

#include "decode_step.hpp"
#include "harness.hpp"

namespace sim = rungs::sim;

namespace {

// Each benchmark with the checks on and off, on one thread and on every core (schedule::threads 1
// and 0), in wall time ("CPU" is the whole process's: the blocks run on several threads).
void checks_and_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"checks", "threads"})->ArgsProduct({{1, 0}, {1, 0}})->UseRealTime()->MeasureProcessCPUTime();
  b->Unit(benchmark::kMillisecond);
}

void decode_step(benchmark::State& state) {
  const bool checks = state.range(0) != 0;
  rungs_sim_bench::decode_step step;
  sim::schedule sched{.seed = 3, .randomize = checks, .race_check = checks, .uninitialized_check = checks};
  sched.threads = static_cast<unsigned>(state.range(1));
  std::uint64_t instructions = 0;
  for (auto _ : state) instructions += step.launch(sched).warp_instructions;
  state.counters["warp_instr_per_s"] = benchmark::Counter(static_cast<double>(instructions), benchmark::Counter::kIsRate);
  state.counters["warp_instr_per_launch"] = static_cast<double>(instructions) / static_cast<double>(state.iterations());
  state.SetLabel(std::string(checks ? "checks on, randomized" : "checks off, fixed order") +
                 (state.range(1) == 1 ? ", one thread" : ", blocks on all cores"));
}
BENCHMARK(decode_step)->Apply(checks_and_threads);

// A kernel that writes a large output: 64 blocks of 256 threads copy 2^22 words (16 MiB) with a
// grid-stride loop, every word stored once (weakly), so the missing-fence check records 2^22
// words per launch. Checks on and randomized, against checks off in fixed order.
void global_copy(benchmark::State& state) {
  const bool checks = state.range(0) != 0;
  constexpr std::uint32_t kWords = 1u << 22;
  const auto m = sim::load_ptx(rungs_sim_test::ptx_module(R"(
.visible .entry copy(.param .u64 p_out, .param .u64 p_in, .param .u32 p_n)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<6>;
  .reg .pred %p1;
  ld.param.u64 %rd1, [p_out];
  ld.param.u64 %rd2, [p_in];
  ld.param.u32 %r1, [p_n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mov.u32 %r6, %nctaid.x;
  mul.lo.s32 %r6, %r6, %r3;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra $done;
$loop:
  mul.wide.s32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r7, [%rd4];
  add.u32 %r7, %r7, 1;
  add.s64 %rd5, %rd1, %rd3;
  st.global.u32 [%rd5], %r7;
  add.s32 %r5, %r5, %r6;
  setp.lt.s32 %p1, %r5, %r1;
  @%p1 bra $loop;
$done:
  ret;
}
)"), "copy.ptx");
  std::vector<std::uint32_t> in(kWords), out(kWords);
  std::iota(in.begin(), in.end(), 0u);
  rungs_sim_test::host_memory mem;
  mem.add(in), mem.add(out);
  std::uint64_t pout = reinterpret_cast<std::uint64_t>(out.data()), pin = reinterpret_cast<std::uint64_t>(in.data());
  std::uint32_t n = kWords;
  void* args[] = {&pout, &pin, &n};
  sim::schedule sched{.seed = 3, .randomize = checks, .race_check = checks, .uninitialized_check = checks};
  sched.threads = static_cast<unsigned>(state.range(1));
  std::uint64_t instructions = 0;
  for (auto _ : state) instructions += sim::launch(*m, "copy", {64, 1, 1}, {256, 1, 1}, 0, args, mem, sched).warp_instructions;
  if (out[kWords - 1] != kWords) state.SkipWithError("the copy is wrong");
  state.counters["warp_instr_per_s"] = benchmark::Counter(static_cast<double>(instructions), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(checks ? "checks on, randomized" : "checks off, fixed order") +
                 (state.range(1) == 1 ? ", one thread" : ", blocks on all cores"));
}
BENCHMARK(global_copy)->Apply(checks_and_threads);

}  // namespace

BENCHMARK_MAIN();
