// rungs-plan capture-sizes MAX: vLLM's CUDA-graph capture sizes (1 2 4, then every 8).
//   $ rungs-plan capture-sizes 64
//   1 2 4 8 16 24 32 40 48 56 64
// rungs-plan capture-sizes --max-num-seqs N --max-num-batched-tokens T [--spec-tokens K]
// [--device sm90|sm100]: vLLM 0.33.0's default sizes (rungs::VllmCaptureSizes), ascending.
//   $ rungs-plan capture-sizes --max-num-seqs 3 --max-num-batched-tokens 8192
//   1 2 3 4
#include <memory>

#include "command.hpp"
#include "ladder_args.hpp"
#include "vllm_args.hpp"

namespace rungs::plan {
namespace {
struct capture_sizes_args {
  std::vector<std::string> words;
  vllm_size_args vllm;
};

action define(CLI::App& app) {
  auto a = std::make_shared<capture_sizes_args>();
  cli::words(app, "MAX", a->words, "the largest capture size (vLLM's 1 2 4, then every 8)");
  a->vllm.define(app);
  return [a](std::ostream& out, std::ostream&) {
    if (a->vllm.any()) {
      if (!a->words.empty()) throw usage_error("capture-sizes takes MAX or --max-num-seqs, not both");
      print_rungs(out, ladder{a->vllm.sizes()});
      return 0;
    }
    if (a->words.size() != 1) throw usage_error("capture-sizes takes MAX (1 word), got " + std::to_string(a->words.size()));
    print_rungs(out, parse_ladder(std::vector<std::string>{"capture-sizes", a->words.front()}));
    return 0;
  };
}
const registration reg{{"capture-sizes",
                        "capture-sizes MAX | --max-num-seqs N --max-num-batched-tokens T [--spec-tokens K] [--device sm90|sm100]",
                        "vLLM's CUDA-graph capture sizes: up to MAX (1 2 4, then every 8), or vLLM 0.33.0's default.",
                        define}};
}  // namespace
}  // namespace rungs::plan
