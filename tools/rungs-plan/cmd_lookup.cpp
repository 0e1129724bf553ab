// rungs-plan lookup N LADDER: the rung a batch of N runs at, and its padding.
//   $ rungs-plan lookup 33 capture-sizes 512
//   40 (padding 7, 17.5%)
// The percentage is padding / rung (the share of the graph's work thrown away), one
// decimal. Above the top rung it prints "eager": the batch runs without a graph.
#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
int lookup(args_t args, std::ostream& out, std::ostream&) {
  if (args.empty()) throw usage_error("lookup needs N and a LADDER");
  const long long n = parse_integer("N", args[0]);
  if (n < 0) throw usage_error("N = " + std::to_string(n) + " must not be negative");
  const ladder l = parse_ladder(args.subspan(1));
  out << l.lookup(n) << "\n";
  return 0;
}
const registration reg{{"lookup", "lookup N LADDER", lookup}};
}  // namespace
}  // namespace rungs::plan
