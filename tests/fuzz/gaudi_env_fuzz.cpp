// Gaudi's bucket configuration from the environment (VLLM_EXPONENTIAL_BUCKETING and the
// VLLM_{PROMPT,DECODE}_{BS,SEQ,BLOCK}_BUCKET_{MIN,STEP,MAX,LIMIT} variables) over a fuzzed
// serving configuration, then the buckets it generates: a ladder_error, or a plan whose
// buckets are all positive and whose prompt buckets respect the token budget.
#include <rungs/ladder/gaudi_buckets.hpp>
#include <rungs/ladder/gaudi_config.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <map>
#include <optional>
#include <string>

#include "fuzz.hpp"

namespace {
rungs::rung_t any_rung(FuzzedDataProvider& in) {
  // Mostly small values, sometimes anything (limits, negatives, the int32 extremes).
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<rungs::rung_t>(0, 4096) : in.ConsumeIntegral<rungs::rung_t>();
}

template <std::size_t D>
void check(const rungs::gaudi::bucket_plan<D>& plan) {
  for (const auto* grid : {&plan.prompt, &plan.decode})
    for (const auto& b : grid->buckets())
      for (std::size_t d = 0; d < D; ++d) RUNGS_FUZZ_CHECK(b[d] >= 0, "negative bucket value");
  if (plan.serving.max_num_batched_tokens > 0)
    for (const auto& b : plan.prompt.buckets())
      RUNGS_FUZZ_CHECK(plan.prompt.tokens(b) <= plan.serving.max_num_batched_tokens, "prompt bucket above the budget");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  rungs::gaudi::serving_config serving;
  serving.max_num_seqs = any_rung(in);
  serving.max_num_prefill_seqs = any_rung(in);
  serving.block_size = any_rung(in);
  serving.max_model_len = any_rung(in);
  serving.max_num_batched_tokens = any_rung(in);
  serving.num_blocks = any_rung(in);
  serving.prefix_caching = in.ConsumeBool();

  std::map<std::string, std::string> env;
  if (in.ConsumeBool()) env["VLLM_EXPONENTIAL_BUCKETING"] = in.ConsumeRandomLengthString(8);
  for (const char* phase : {"prompt", "decode"})
    for (const char* dim : {"bs", "seq", "block"})
      for (const char* param : {"min", "step", "max", "limit"})
        if (in.ConsumeBool())  // a number (the fuzzer rarely spells one), or any text
          env[rungs::gaudi::env_name(phase, dim, param)] =
              in.ConsumeBool() ? std::to_string(any_rung(in)) : in.ConsumeRandomLengthString(24);
  const auto getenv = [&](const char* name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  try {
    const rungs::gaudi::bucket_config c = rungs::gaudi::read_bucket_config(serving, std::nullopt, getenv);
    RUNGS_FUZZ_CHECK(c.strategy != rungs::gaudi::strategy::file, "the file strategy without VLLM_BUCKETING_FROM_FILE");
    if (c.strategy == rungs::gaudi::strategy::linear) check(rungs::gaudi::linear_buckets(c, serving));
    else check(rungs::gaudi::exponential_buckets(c, serving));
  } catch (const rungs::ladder_error&) {
  }
  return 0;
}
