// rungs-plan range LADDER: prints a ladder's rungs on one line.
//   $ rungs-plan range linear 2 32 64
//   2 4 8 16 32 64
#include <memory>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
action define(CLI::App& app) {
  auto words = std::make_shared<std::vector<std::string>>();
  ladder_words(app, *words);
  return [words](std::ostream& out, std::ostream&) {
    print_rungs(out, parse_ladder(*words));
    return 0;
  };
}
const registration reg{{"range",
                        "range LADDER   (LADDER: linear MIN STEP MAX | exponential MIN STEP MAX LIMIT | "
                        "capture-sizes MAX | vllm-v1 MAX | sglang MAX | trtllm MAX | pow2 MIN MAX | explicit R1,R2,... | file PATH)",
                        "Prints a ladder's rungs on one line.", define}};
}  // namespace
}  // namespace rungs::plan
