// Host-side rungs used from a .cu file, the way a CUDA serving engine uses them: compile-time
// ladders as template arguments and a KV allocator next to device code. Compiled, not run.
#include <rungs/kv.hpp>
#include <rungs/ladder.hpp>

namespace {
using decode_graphs = rungs::static_ladder<rungs::CaptureSizes::vllm(512)>;
static_assert(decode_graphs::size() == 67);
static_assert(decode_graphs::lookup(33).rung == 40);
static_assert(decode_graphs::lookup(513).eager());

using prompt_graphs = rungs::static_ladder<rungs::Linear{.min = 3, .step = 32, .max = 100}>;
static_assert(prompt_graphs::lookup(25).rung == 32);

__global__ void touch(const rungs::rung_t* rungs, int n, rungs::rung_t* out) {
  if (threadIdx.x < n) out[threadIdx.x] = rungs[threadIdx.x];
}
}  // namespace

int rungs_nvcc_host_usage() {
  rungs::kv::prefix_caching_allocator<> pool({.num_blocks = 8, .block_size = 16, .max_sequences = 2,
                                              .max_model_len = 64, .watermark_blocks = 0});
  touch<<<1, 1>>>(nullptr, 0, nullptr);
  return pool.num_blocks() + static_cast<int>(prompt_graphs::size());
}
