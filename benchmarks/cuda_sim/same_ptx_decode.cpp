// The executor benchmark's decode step (decode_step.hpp), checks on and randomized, timed on
// whichever executor this file is linked with, on the PTX file it is built with: so that two
// executors run the very same PTX (the same warp instructions) side by side. Prints the median
// wall time of 40 launches, the warp instructions per launch and a hash of the output (the same
// on both executors when they agree). Usage: cuda_sim_same_ptx_decode [threads] (0: every core;
// an executor without schedule::threads runs its blocks one at a time).
//
// CMake builds it against this tree's executor. Against another one (an older commit's build,
// its headers first; benchmarks/RESULTS.md, "Blocks in parallel and decoded instructions"):
//   g++ -O2 -std=c++20 -DRUNGS_SIM_ATTENTION_PTX='"<this build>/tests/sim/executor/attention_instances.ptx"' \
//     -I<other>/sim/include -Iinclude -Ikernels -Ibenchmarks/cuda_sim -Itests/sim/executor/kernels \
//     -Itests/sim/executor benchmarks/cuda_sim/same_ptx_decode.cpp <other build>/sim/librungs_sim_executor.a \
//     -lpthread -o same_ptx_decode_other
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "decode_step.hpp"

// schedule::threads where the executor has it (since issue 28's blocks in parallel).
template <class Schedule>
void set_threads(Schedule& s, unsigned threads) {
  if constexpr (requires { s.threads = threads; }) s.threads = threads;
}

int main(int argc, char** argv) {
  const unsigned threads = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 1;
  rungs_sim_bench::decode_step step;
  rungs::sim::schedule sched{.seed = 3, .randomize = true, .race_check = true, .uninitialized_check = true};
  set_threads(sched, threads);
  std::vector<double> ms;
  std::uint64_t instructions = 0;
  for (int i = 0; i < 40; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    instructions = step.launch(sched).warp_instructions;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a of the output's bits
  for (const std::uint16_t x : step.out()) hash = (hash ^ x) * 1099511628211ull;
  std::printf("threads %u: median %.2f ms (fastest %.2f) per launch, %llu warp instructions, %.2f M/s, output %016llx\n",
              threads, ms[ms.size() / 2], ms.front(), static_cast<unsigned long long>(instructions),
              static_cast<double>(instructions) / ms[ms.size() / 2] / 1000.0, static_cast<unsigned long long>(hash));
}
