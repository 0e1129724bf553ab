// The tensor-core prefill mutants' driver: tests/attention/prefill_harness.hpp's check,
// unchanged, on the tensor-core prefill (kernels/.../tensor_core.cuh), launched by
// tensor_core_prefill_launch.cu (compiled against a mutated copy of kernels/): bf16, head dim
// 128, group 3, block sizes 16 and 32, without score transforms and (the windowed case) with
// every one (window 29); each check runs the cases of gpu_cases.hpp (no split, 40-token splits
// and the planner's, strided queries).
#include "mutant_sets.hpp"
#include "prefill_harness.hpp"

namespace ra = rungs::attention;
using rungs_mutation::tensor_core_prefill_set;

TEST_CASE("mutation driver: tensor-core prefill bf16, head dim 128, group 3") {
  std::mt19937_64 rng(13);
  for (int block_size : {16, 32}) {
    INFO("block_size " << block_size);
    rungs_test::check_prefill_with<rungs::bf16, tensor_core_prefill_set>(
        rungs_mutation::tensor_core_prefill, rng, ra::dtype::bf16, 128, block_size, 3, 0.3, false,
        ra::attention_kernel::tensor_cores);
  }
}

TEST_CASE("mutation driver: tensor-core prefill bf16, head dim 128, group 3, window, soft-cap and sinks") {
  std::mt19937_64 rng(14);
  for (int block_size : {16, 32}) {
    INFO("windowed case, block_size " << block_size);
    rungs_test::check_prefill_with<rungs::bf16, tensor_core_prefill_set, rungs_test::all_score_mods>(
        rungs_mutation::tensor_core_prefill_all_mods, rng, ra::dtype::bf16, 128, block_size, 3, 0.3, false,
        ra::attention_kernel::tensor_cores);
  }
}
