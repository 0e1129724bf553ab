// rungs-plan version (and rungs-plan --version): the library version the tool was built from.
#include <rungs/version.hpp>

#include "command.hpp"

namespace rungs::plan {
namespace {
action define(CLI::App&) {
  return [](std::ostream& out, std::ostream&) {
    out << "rungs-plan " << rungs::version_string << "\n";
    return 0;
  };
}
const registration reg{{"version", "version", "Prints the version of rungs the tool was built from (as --version).",
                        define, {.unknown = "version takes no arguments"}}};
}  // namespace
}  // namespace rungs::plan
