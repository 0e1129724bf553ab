// rungs-plan capture-sizes MAX: vLLM's CUDA-graph capture sizes (1 2 4, then every 8).
//   $ rungs-plan capture-sizes 64
//   1 2 4 8 16 24 32 40 48 56 64
#include <vector>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
int capture_sizes(args_t args, std::ostream& out, std::ostream&) {
  if (args.size() != 1) throw usage_error("capture-sizes takes MAX (1 word), got " + std::to_string(args.size()));
  const std::vector<std::string_view> words{"capture-sizes", args[0]};
  print_rungs(out, parse_ladder(words));
  return 0;
}
const registration reg{{"capture-sizes", "capture-sizes MAX", capture_sizes}};
}  // namespace
}  // namespace rungs::plan
