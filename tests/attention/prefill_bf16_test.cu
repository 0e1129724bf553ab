// GPU prefill/extend, bf16: see prefill_checks.cuh.
#include "prefill_checks.cuh"

TEST_CASE("prefill bf16: every instance of the tested set matches the reference") {
  rungs_test::check_prefill_set<rungs::attention::dtype::bf16>();
}

TEST_CASE("prefill bf16 with a sliding window, soft-cap and sinks matches the reference (head dim 128)") {
  rungs_test::check_prefill_score_mods<rungs::attention::dtype::bf16>();
}
