// GPU prefill/extend, f16: see prefill_checks.cuh.
#include "prefill_checks.cuh"

TEST_CASE("prefill f16: every instance of the tested set matches the reference") {
  rungs_test::check_prefill_set<rungs::attention::dtype::fp16>();
}
