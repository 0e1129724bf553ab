// The tensor-core prefill mutants' driver: tests/attention/prefill_checks.cuh's check, unchanged,
// on the tensor-core prefill (kernels/.../tensor_core.cuh) compiled against a mutated copy of
// kernels/: bf16, head dim 128, group 3, block sizes 16 and 32, without score transforms and
// (the windowed case) with every one (window 29); each check runs the cases of gpu_cases.hpp
// (no split, 40-token splits and the planner's, strided queries).
#include "prefill_checks.cuh"

namespace ra = rungs::attention;

namespace {
using set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                  ra::values<1>, ra::no_fp8_kv, ra::no_tensor_core_decode,
                                  ra::tensor_core_prefill_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>>>;
}  // namespace

TEST_CASE("mutation driver: tensor-core prefill bf16, head dim 128, group 3") {
  std::mt19937_64 rng(13);
  for (int block_size : {16, 32}) {
    INFO("block_size " << block_size);
    rungs_test::check_prefill<rungs::bf16, set>(rng, ra::dtype::bf16, 128, block_size, 3, 0.3, false,
                                                ra::attention_kernel::tensor_cores);
  }
}

TEST_CASE("mutation driver: tensor-core prefill bf16, head dim 128, group 3, window, soft-cap and sinks") {
  std::mt19937_64 rng(14);
  for (int block_size : {16, 32}) {
    INFO("windowed case, block_size " << block_size);
    rungs_test::check_prefill<rungs::bf16, set, rungs_test::all_score_mods>(rng, ra::dtype::bf16, 128, block_size, 3,
                                                                            0.3, false, ra::attention_kernel::tensor_cores);
  }
}
