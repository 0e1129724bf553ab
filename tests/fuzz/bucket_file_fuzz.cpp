// The bucket-file parser (VLLM_BUCKETING_FROM_FILE's format) on arbitrary text, as 1-, 2- and
// 3-D buckets: a bucket_file_error (a ladder_error) or buckets with every value in range and
// no more than max_buckets of them.
#include <rungs/ladder/bucket_file.hpp>

#include "fuzz.hpp"

namespace {
template <std::size_t D>
void parse(std::string_view text) {
  const rungs::bucket_file_options options{.max_buckets = 4096};
  try {
    const auto buckets = rungs::parse_bucket_file<D>(text, "<fuzz>", options);
    RUNGS_FUZZ_CHECK(buckets.size() <= options.max_buckets, "more buckets than max_buckets");
    for (const auto& b : buckets)
      for (std::size_t d = 0; d < D; ++d) RUNGS_FUZZ_CHECK(b[d] >= 0 && b[d] <= rungs::max_rung, "value out of range");
  } catch (const rungs::bucket_file_error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz_text(data, size);
  parse<1>(text);
  parse<2>(text);
  parse<3>(text);
  return 0;
}
