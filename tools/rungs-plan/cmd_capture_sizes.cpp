// rungs-plan capture-sizes MAX: vLLM's CUDA-graph capture sizes (1 2 4, then every 8).
//   $ rungs-plan capture-sizes 64
//   1 2 4 8 16 24 32 40 48 56 64
#include <memory>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
action define(CLI::App& app) {
  auto words = std::make_shared<std::vector<std::string>>();
  cli::words(app, "MAX", *words, "the largest capture size");
  return [words](std::ostream& out, std::ostream&) {
    if (words->size() != 1) throw usage_error("capture-sizes takes MAX (1 word), got " + std::to_string(words->size()));
    print_rungs(out, parse_ladder(std::vector<std::string>{"capture-sizes", words->front()}));
    return 0;
  };
}
const registration reg{{"capture-sizes", "capture-sizes MAX",
                        "vLLM's CUDA-graph capture sizes up to MAX: 1 2 4, then every 8.", define}};
}  // namespace
}  // namespace rungs::plan
