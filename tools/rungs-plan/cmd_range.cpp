// rungs-plan range LADDER: prints a ladder's rungs on one line.
//   $ rungs-plan range linear 2 32 64
//   2 4 8 16 32 64
#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
int range(args_t args, std::ostream& out, std::ostream&) {
  print_rungs(out, parse_ladder(args));
  return 0;
}
const registration reg{{"range",
                        "range LADDER   (LADDER: linear MIN STEP MAX | exponential MIN STEP MAX LIMIT | "
                        "capture-sizes MAX | vllm-v1 MAX | sglang MAX | trtllm MAX | pow2 MIN MAX | explicit R1,R2,...)",
                        range}};
}  // namespace
}  // namespace rungs::plan
