// The subcommand registry of rungs-plan.
//
// A command declares its options on a CLI11 app (define) and returns the action that runs
// once they are parsed, writing to the given streams and returning the exit status. Bad
// arguments throw usage_error; the driver turns that into one line on stderr and exit status
// 2. `rungs-plan CMD --help` prints the app's help and exits 0. Each cmd_<name>.cpp registers
// its commands with a static `registration`, so adding a command touches no shared file, and
// adding an option is one line in its define.
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"

namespace rungs::plan {

using args_t = std::span<const std::string_view>;
using usage_error = cli::usage_error;

/// What a command does with its parsed options.
using action = std::function<int(std::ostream& out, std::ostream& err)>;

struct command {
  std::string_view name;
  std::string_view synopsis;  // one line for the command list: "range LADDER"
  std::string_view summary;   // what it does, the first line of `rungs-plan CMD --help`
  /// Adds the command's options and positionals to `app`, bound to state the action owns.
  action (*define)(CLI::App& app);
  cli::messages messages = {};  // how CLI11's errors read for this command
};

struct registration {
  explicit registration(command c);
};

/// The registered commands, sorted by name.
std::vector<command> commands();

/// Runs `rungs-plan ARGS...` (argv without the program name) and returns its exit status.
int run(args_t args, std::ostream& out, std::ostream& err);

// The number parsers, under the names the commands use. Each throws usage_error naming the
// argument and the rule it breaks.
inline std::int64_t parse_integer(std::string_view what, std::string_view text) { return cli::integer(what, text); }
inline std::int64_t parse_positive(std::string_view what, std::string_view text) { return cli::positive(what, text); }

}  // namespace rungs::plan
