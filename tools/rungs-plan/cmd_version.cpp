// rungs-plan version: prints the library version the tool was built from.
#include <rungs/version.hpp>

#include "command.hpp"

namespace rungs::plan {
namespace {
int version(args_t args, std::ostream& out, std::ostream&) {
  if (!args.empty()) throw usage_error("version takes no arguments");
  out << "rungs-plan " << rungs::version_string << "\n";
  return 0;
}
const registration reg{{"version", "version", version}};
}  // namespace
}  // namespace rungs::plan
