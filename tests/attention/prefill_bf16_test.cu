// GPU prefill/extend, bf16: see prefill_checks.cuh.
#include "prefill_checks.cuh"

TEST_CASE("prefill bf16: every instance of the tested set matches the reference") {
  rungs_test::check_prefill_set<rungs::attention::dtype::bf16>();
}
