// The flags that give vLLM 0.33.0's default capture sizes (rungs::VllmCaptureSizes), shared by
// `capture-sizes` and `dispatch`:
//   --max-num-seqs N --max-num-batched-tokens T [--spec-tokens K] [--device sm90|sm100]
#pragma once

#include <cstdint>
#include <optional>

#include <rungs/ladder/vllm_capture_sizes.hpp>

#include "command.hpp"

namespace rungs::plan {

struct vllm_size_args {
  std::optional<std::int64_t> seqs, tokens, spec;
  std::optional<gpu_family> device;

  bool any() const { return seqs || tokens || spec || device; }

  void define(CLI::App& app) {
    cli::option(app, "--max-num-seqs N", seqs, cli::positive, "vLLM 0.33.0's default sizes for N requests per step");
    cli::option(app, "--max-num-batched-tokens T", tokens, cli::positive, "the token budget per step");
    cli::option(app, "--spec-tokens K", spec, cli::non_negative, "speculative tokens per request (default 0)");
    cli::choices<gpu_family>(app, "--device FAMILY", device, {{"sm90", gpu_family::sm90}, {"sm100", gpu_family::sm100}},
                             "sm100: the SM100 family's ceiling of 1024; sm90 (default): any other device, 512");
  }

  /// The policy; throws usage_error naming a missing flag.
  VllmCaptureSizes sizes() const {
    if (!seqs) throw usage_error("--max-num-seqs is required with --max-num-batched-tokens, --spec-tokens or --device");
    if (!tokens) throw usage_error("--max-num-batched-tokens is required with --max-num-seqs");
    return {.max_num_seqs = *seqs, .max_num_batched_tokens = *tokens, .spec_tokens = spec.value_or(0),
            .device = device.value_or(gpu_family::sm90)};
  }
};

}  // namespace rungs::plan
