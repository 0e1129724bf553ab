// rungs-plan's driver: the registry, help and the error convention (one line, exit 2).
#include "command.hpp"

#include <algorithm>
#include <charconv>
#include <exception>

namespace rungs::plan {
namespace {
std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

void print_help(std::ostream& out) {
  out << "usage: rungs-plan COMMAND [ARGS...]\n\ncommands:\n";
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
  for (const command& c : registry()) {
    if (c.name != args[0]) continue;
    try {
      return c.run(args.subspan(1), out, err);
    } catch (const usage_error& e) {
      err << "rungs-plan: error: " << e.what() << "\n";
      return 2;
    } catch (const std::invalid_argument& e) {  // rungs' configuration errors
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

long long parse_integer(std::string_view what, std::string_view text) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw usage_error(std::string(what) + " = '" + std::string(text) + "' is out of range");
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    throw usage_error(std::string(what) + " = '" + std::string(text) + "' is not an integer");
  return v;
}

long long parse_positive(std::string_view what, std::string_view text) {
  long long v = parse_integer(what, text);
  if (v <= 0) throw usage_error(std::string(what) + " = " + std::to_string(v) + " must be positive");
  return v;
}

}  // namespace rungs::plan
