// The subcommand registry of rungs-plan.
//
// A subcommand is a function from its arguments (after the subcommand's name) to an exit
// status, writing to the given streams. It throws usage_error for bad arguments; the driver
// turns that into one line on stderr and exit status 2. Each cmd_<name>.cpp registers its
// commands with a static `registration`, so adding a command touches no shared file.
#pragma once

#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::plan {

using args_t = std::span<const std::string_view>;

struct command {
  std::string_view name;
  std::string_view synopsis;  // one line: "range linear MIN STEP MAX"
  int (*run)(args_t args, std::ostream& out, std::ostream& err);
};

/// Bad command-line input: reported as "rungs-plan: error: <what>" with exit status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct registration {
  explicit registration(command c);
};

/// The registered commands, sorted by name.
std::vector<command> commands();

/// Runs `rungs-plan ARGS...` (argv without the program name) and returns its exit status.
int run(args_t args, std::ostream& out, std::ostream& err);

// Helpers for subcommands. Each throws usage_error naming the argument and the rule it breaks.
long long parse_integer(std::string_view what, std::string_view text);
long long parse_positive(std::string_view what, std::string_view text);

}  // namespace rungs::plan
