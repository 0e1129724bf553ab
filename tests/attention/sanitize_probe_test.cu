// The kernels compute-sanitizer runs over in scripts/gpu-check (memcheck and racecheck): one
// decode and one prefill, each on both kernels (SIMT and tensor cores), bf16, head dim 128,
// GQA group 4, block size 16, with and without KV splits, against the host reference. Small
// on purpose: racecheck slows a kernel by two orders of magnitude. Also a plain 'cuda' test.
//
//   compute-sanitizer --tool memcheck --error-exitcode 1 attention_sanitize_gpu_test "sanitize: one decode"
#include "decode_checks.cuh"
#include "prefill_checks.cuh"

namespace {
namespace ra = rungs::attention;
constexpr ra::dtype kType = ra::dtype::bf16;
using decode_set = ra::instantiation_set<ra::dtypes<kType>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                         ra::values<4>, ra::no_fp8_kv,
                                         ra::tensor_core_decode_instances<ra::dtypes<kType>, ra::values<128>, ra::values<4>>>;
using prefill_set = ra::instantiation_set<ra::dtypes<kType>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                          ra::values<4>, ra::no_fp8_kv, ra::no_tensor_core_decode,
                                          ra::tensor_core_prefill_instances<ra::dtypes<kType>, ra::values<128>>>;
}  // namespace

TEST_CASE("sanitize: one decode") {
  std::mt19937_64 rng(4242);
  for (ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
    INFO(ra::name(k) << " decode, bf16, head_dim 128, block_size 16, group 4");
    rungs_test::check_decode<ra::host_type<kType>, decode_set>(rng, kType, 128, 16, 4, 0.3, false, k);
  }
}

TEST_CASE("sanitize: one prefill") {
  std::mt19937_64 rng(4243);
  for (ra::attention_kernel k : {ra::attention_kernel::simt, ra::attention_kernel::tensor_cores}) {
    INFO(ra::name(k) << " prefill, bf16, head_dim 128, block_size 16, group 4");
    rungs_test::check_prefill<ra::host_type<kType>, prefill_set>(rng, kType, 128, 16, 4, 0.3, false, k);
  }
}
