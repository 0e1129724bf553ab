// rungs-plan's driver: the registry, help, --version and the error convention (one line, exit 2).
#include "command.hpp"

#include <algorithm>
#include <exception>

namespace rungs::plan {
namespace {
std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

void print_help(std::ostream& out) {
  out << "usage: rungs-plan COMMAND [ARGS...]\n"
         "       rungs-plan COMMAND --help     the command's options\n"
         "       rungs-plan --version\n\ncommands:\n";
  for (const command& c : commands()) out << "  rungs-plan " << c.synopsis << "\n";
}
}  // namespace

registration::registration(command c) { registry().push_back(c); }

std::vector<command> commands() {
  std::vector<command> sorted = registry();
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const command& a, const command& b) { return a.name < b.name; });
  return sorted;
}

int run(args_t args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help(args.empty() ? err : out);
    return args.empty() ? 2 : 0;
  }
  const std::string_view name = args[0] == "--version" ? "version" : args[0];  // the two spellings
  for (const command& c : registry()) {
    if (c.name != name) continue;
    try {
      CLI::App app(std::string(c.summary), "rungs-plan " + std::string(c.name));
      const action act = c.define(app);
      if (!cli::parse(app, args.subspan(1), c.messages)) {
        out << app.help();
        return 0;
      }
      return act(out, err);
    } catch (const std::invalid_argument& e) {  // usage_error, and rungs' configuration errors
      err << "rungs-plan: error: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      err << "rungs-plan: error: " << e.what() << "\n";
      return 1;
    }
  }
  err << "rungs-plan: error: unknown command '" << args[0] << "' (try 'rungs-plan --help')\n";
  return 2;
}

}  // namespace rungs::plan
