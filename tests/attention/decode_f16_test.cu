// GPU decode, f16: every head dim, block size and group of the tested set against the host
// reference (see decode_checks.cuh).
#include "decode_checks.cuh"

TEST_CASE("decode f16: every instance of the tested set matches the reference") {
  rungs_test::check_decode_set<rungs::attention::dtype::fp16>();
}

TEST_CASE("decode f16 with a sliding window, soft-cap and sinks matches the reference (head dim 128)") {
  rungs_test::check_decode_score_mods<rungs::attention::dtype::fp16>();
}
