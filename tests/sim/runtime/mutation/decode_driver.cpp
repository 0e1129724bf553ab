// The SIMT decode mutants' driver: tests/attention/decode_harness.hpp's check, unchanged, on
// mutant_sets.hpp's decode set, launched by simt_decode (decode_launch.cu, compiled against a
// mutated copy of kernels/): block sizes 16 and 32; each check runs no split, 48-token splits
// (the merge kernel) and the planner's splits for the SIMT decode, over partial last blocks.
#include "decode_harness.hpp"
#include "mutant_sets.hpp"

namespace ra = rungs::attention;

TEST_CASE("mutation driver: decode f16, head dim 128, group 4") {
  std::mt19937_64 rng(7);
  for (int block_size : {16, 32}) {
    INFO("block_size " << block_size);
    rungs_test::check_decode_with<rungs::f16, rungs_mutation::decode_set>(
        rungs_mutation::simt_decode, rng, ra::dtype::fp16, 128, block_size, 4, 0.3, false, ra::decode_kernel::simt);
  }
}
