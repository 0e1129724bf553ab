// rungs-plan lookup N LADDER: the rung a batch of N runs at, and its padding.
//   $ rungs-plan lookup 33 capture-sizes 512
//   40 (padding 7, 17.5%)
// The percentage is padding / rung (the share of the graph's work thrown away), one
// decimal. Above the top rung it prints "eager": the batch runs without a graph. An empty
// batch (N = 0) runs no step at all: "none (an empty batch runs nothing)", not the first
// rung at 100% padding (docs/ladders.md).
#include <memory>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
struct lookup_args {
  std::string n;
  std::vector<std::string> ladder;
};

action define(CLI::App& app) {
  auto a = std::make_shared<lookup_args>();
  app.add_option("N", a->n, "the batch size");
  ladder_words(app, a->ladder);
  return [a](std::ostream& out, std::ostream&) {
    if (a->n.empty() && a->ladder.empty()) throw usage_error("lookup needs N and a LADDER");
    const std::int64_t n = cli::non_negative("N", a->n);
    const ladder l = parse_ladder(a->ladder);
    if (n == 0) out << "none (an empty batch runs nothing)\n";
    else out << l.lookup(n) << "\n";
    return 0;
  };
}
const registration reg{{"lookup", "lookup N LADDER", "The rung a batch of N runs at, and its padding.", define}};
}  // namespace
}  // namespace rungs::plan
