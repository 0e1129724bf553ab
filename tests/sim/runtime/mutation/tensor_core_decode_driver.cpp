// The tensor-core decode mutants' driver: tests/attention/decode_checks.cuh's check, unchanged,
// on the tensor-core decode (kernels/.../tensor_core.cuh) compiled against a mutated copy of
// kernels/: f16, head dim 128, group 4, block sizes 16 and 32; each check runs no split,
// 48-token splits (the merge kernel) and the planner's splits, over partial last blocks.
#include "decode_checks.cuh"

namespace ra = rungs::attention;

TEST_CASE("mutation driver: tensor-core decode f16, head dim 128, group 4") {
  using set = ra::instantiation_set<ra::dtypes<ra::dtype::fp16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                    ra::values<4>, ra::no_fp8_kv,
                                    ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::fp16>, ra::values<128>,
                                                                     ra::values<4>>>;
  std::mt19937_64 rng(11);
  for (int block_size : {16, 32}) {
    INFO("block_size " << block_size);
    rungs_test::check_decode<rungs::f16, set>(rng, ra::dtype::fp16, 128, block_size, 4, 0.3, false,
                                              ra::decode_kernel::tensor_cores);
  }
}
