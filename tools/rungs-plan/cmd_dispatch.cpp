// rungs-plan dispatch: the graphs vLLM V1's dispatch key (num_tokens, uniform_decode
// [, has_lora]) captures for vLLM 0.33.0's default sizes (rungs::engine::dispatch_buckets),
// and their memory under the cost model's graph figures.
//   $ rungs-plan dispatch --max-num-seqs 4 --max-num-batched-tokens 8192 --spec-tokens 1 --specialize-lora
//   capture sizes: 1 2 4 8 16
//   uniform-decode graphs: 3 (tokens 2 4 8)
//   mixed graphs: 5 (tokens 1 2 4 8 16)
//   LoRA cases: 2
//   graphs: 16
//   graph memory: 384.7 MiB (24 MiB + 8 KiB per token row, each graph)
#include <cstdio>
#include <memory>
#include <sstream>

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/planning/cost_model.hpp>

#include "command.hpp"
#include "ladder_args.hpp"
#include "vllm_args.hpp"

namespace rungs::plan {
namespace {
struct dispatch_args {
  vllm_size_args vllm;
  bool lora = false;
};

action define(CLI::App& app) {
  auto a = std::make_shared<dispatch_args>();
  a->vllm.define(app);
  cli::flag(app, "--specialize-lora", a->lora, "graphs with and without LoRA adapters (vLLM's cudagraph_specialize_lora)");
  return [a](std::ostream& out, std::ostream&) {
    const VllmCaptureSizes p = a->vllm.sizes();
    const ladder sizes{p};
    const engine::dispatch_buckets space(sizes, {.spec_tokens = p.spec_tokens, .max_num_seqs = p.max_num_seqs,
                                                 .specialize_lora = a->lora});
    const planning::cost_model cost{};
    std::int64_t bytes = 0;
    std::ostringstream decode, mixed;
    for (std::size_t i = 0; i < space.size(); ++i) {
      const engine::bucket b = space.at(i);
      bytes += cost.graph_memory(b.shape.tokens);
      if (i >= space.decode_graphs() + space.mixed_graphs()) continue;
      std::ostringstream& list = b.ph == engine::phase::decode ? decode : mixed;
      list << (list.tellp() > 0 ? " " : "") << b.shape.tokens;
    }
    out << "capture sizes: ";
    print_rungs(out, sizes);
    const auto tokens = [](const std::ostringstream& list) {
      return list.str().empty() ? std::string() : " (tokens " + list.str() + ")";
    };
    out << "uniform-decode graphs: " << space.decode_graphs() << tokens(decode) << "\n";
    out << "mixed graphs: " << space.mixed_graphs() << tokens(mixed) << "\n";
    out << "LoRA cases: " << space.lora_cases() << "\n";
    out << "graphs: " << space.size() << "\n";
    char line[160];
    std::snprintf(line, sizeof line, "graph memory: %.1f MiB (%.0f MiB + %.0f KiB per token row, each graph)\n",
                  static_cast<double>(bytes) / (1 << 20), static_cast<double>(cost.graph_bytes) / (1 << 20),
                  static_cast<double>(cost.graph_bytes_per_token) / (1 << 10));
    out << line;
    return 0;
  };
}
const registration reg{{"dispatch",
                        "dispatch --max-num-seqs N --max-num-batched-tokens T [--spec-tokens K] [--device sm90|sm100] "
                        "[--specialize-lora]",
                        "The graphs of vLLM V1's dispatch key (uniform decode, mixed, LoRA) and their memory.", define}};
}  // namespace
}  // namespace rungs::plan
