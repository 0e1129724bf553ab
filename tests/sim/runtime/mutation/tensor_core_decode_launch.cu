// The tensor-core decode mutants' launch (mutant_sets.hpp), compiled once per mutant against its
// mutated copy of kernels/ (the include path CMakeLists.txt puts first).
#include <rungs/attention/paged_attention.cuh>

#include "mutant_sets.hpp"

void rungs_mutation::tensor_core_decode(const ra::decode_plan& plan, const ra::decode_args& args) {
  ra::decode<tensor_core_decode_set>(plan, args, nullptr);
}
