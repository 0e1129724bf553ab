// cost_model: what a step, a graph capture and a graph cost, for planning without a GPU.
//
// A step is memory-bound until its tokens make it compute-bound (a roofline):
//   step = max(weights, tokens_run x per_token) + context_tokens x per_context_token
//          + (eager ? launch overhead : 0)
// where tokens_run is the bucket's padded size when a graph replays (padded rows are
// computed too) and the real tokens when the step runs eagerly. So padding costs time only
// once a step is compute-bound, as on a GPU, and an eager step pays the kernel launches a
// graph replay saves.
//
// Defaults, and where they come from:
//   weights            16.7 ms  the paged-KV blog: Mistral-7B in fp16 on an RTX 4090 reads
//                               14 GB of weights per step at 1008 GB/s (72 tok/s ideal) and
//                               runs at ~60 tok/s in practice: 1 / 60 s
//   per_token          0.15 ms  2 x 7.2 GFLOP per token at ~100 TFLOP/s (60% of the 4090's
//                               165 TFLOP/s fp16 dense): prefill and large batches
//   per_context_token  0.13 us  attention reads 128 KiB of K and V per cached token (the
//                               blog's 0.125 MiB) at 1008 GB/s
//   eager overhead     6 ms     launching ~400 kernels (32 layers x ~12) from eager PyTorch at
//                               ~15 us each; cuda-graphs.md reports eager batches up to 7.5x
//                               slower on other hardware (vllm-ascend #16049)
//   capture            0.05 s + 0.02 s x rung / 512   cuda-graphs.md and the lazy-capture PR:
//                               Llama-3.1-8B piecewise graphs take 0.05-0.07 s each (0.073 s for
//                               512 tokens, 3.8 s for vLLM's 67)
//   graph memory       24 MiB + 4 MiB x rung / 512    the same sources: 24-28 MiB per graph
//                               when captured one by one (the lazy PR's log)
// Every figure can be overridden (rungs-plan simulate --step-cost, --capture-cost, ...).
#pragma once

#include <rungs/ladder/rung.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace rungs::planning {

struct cost_model {
  double weights_seconds = 1.0 / 60;
  double seconds_per_token = 1.5e-4;
  double seconds_per_context_token = 1.3e-7;
  double eager_overhead_seconds = 0.006;
  double capture_seconds = 0.05;
  double capture_seconds_per_token = 0.02 / 512;
  std::int64_t graph_bytes = std::int64_t{24} << 20;
  std::int64_t graph_bytes_per_token = (std::int64_t{4} << 20) / 512;

  /// Seconds of one step running `tokens_run` token rows over `context_tokens` KV tokens.
  double step_seconds(std::int64_t tokens_run, std::int64_t context_tokens, bool graph) const {
    return std::max(weights_seconds, static_cast<double>(tokens_run) * seconds_per_token) +
           static_cast<double>(context_tokens) * seconds_per_context_token + (graph ? 0.0 : eager_overhead_seconds);
  }
  double capture_time(rung_t rung) const { return capture_seconds + capture_seconds_per_token * static_cast<double>(rung); }
  std::int64_t graph_memory(rung_t rung) const { return graph_bytes + graph_bytes_per_token * rung; }

  /// Capturing every rung: seconds and bytes.
  double capture_time(std::span<const rung_t> rungs) const {
    double s = 0;
    for (rung_t r : rungs) s += capture_time(r);
    return s;
  }
  std::int64_t graph_memory(std::span<const rung_t> rungs) const {
    std::int64_t b = 0;
    for (rung_t r : rungs) b += graph_memory(r);
    return b;
  }

  void validate() const {
    auto non_negative = [](const char* what, double v) {
      if (!(v >= 0)) throw std::invalid_argument(std::string("cost model: ") + what + " = " + std::to_string(v) + " must not be negative");
    };
    non_negative("weights_seconds", weights_seconds);
    non_negative("seconds_per_token", seconds_per_token);
    non_negative("seconds_per_context_token", seconds_per_context_token);
    non_negative("eager_overhead_seconds", eager_overhead_seconds);
    non_negative("capture_seconds", capture_seconds);
    non_negative("capture_seconds_per_token", capture_seconds_per_token);
    non_negative("graph_bytes", static_cast<double>(graph_bytes));
    non_negative("graph_bytes_per_token", static_cast<double>(graph_bytes_per_token));
    if (weights_seconds + seconds_per_token <= 0)
      throw std::invalid_argument("cost model: a step must take time (weights_seconds or seconds_per_token positive)");
  }
};

}  // namespace rungs::planning
