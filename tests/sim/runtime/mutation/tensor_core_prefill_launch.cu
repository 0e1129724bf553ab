// The tensor-core prefill mutants' launches (mutant_sets.hpp), compiled once per mutant against
// its mutated copy of kernels/ (the include path CMakeLists.txt puts first).
#include <rungs/attention/paged_attention.cuh>

#include "mutant_sets.hpp"

void rungs_mutation::tensor_core_prefill(const ra::prefill_plan& plan, const ra::prefill_args& args) {
  ra::prefill<tensor_core_prefill_set>(plan, args, nullptr);
}

void rungs_mutation::tensor_core_prefill_all_mods(const ra::prefill_plan& plan, const ra::prefill_args& args) {
  ra::prefill<tensor_core_prefill_set, rungs_test::all_score_mods>(plan, args, nullptr);
}
