// rungs-plan waste LADDER --trace FILE: padding of a ladder over a trace of batch sizes.
//
// FILE holds one batch size per line (blank lines and '#' comments are skipped). Output:
//   ladder: 67 rungs, 1 to 512
//   batches: 6
//   eager: 1
//   real rows: 145
//   padded rows: 12
//   wasted: 7.6%
//   eager rows: 600
// "wasted" is padded / (real + padded) over the batches that ran on a rung; eager batches
// (above the top rung) run unpadded and are counted apart.
#include <rungs/ladder/padding.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {

padding_tally tally_trace(const ladder& l, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("--trace " + path + ": cannot open: " + std::strerror(errno));
  padding_tally t;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    std::string_view s = line;
    if (const std::size_t hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    if (s.empty()) continue;
    const std::string where = path + ":" + std::to_string(number) + ": batch size";
    const long long n = parse_integer(where, s);
    if (n < 0) throw usage_error(where + " = " + std::to_string(n) + " must not be negative");
    t.add(l.lookup(n));
  }
  return t;
}

struct waste_args {
  std::vector<std::string> ladder;
  std::string trace;
};

action define(CLI::App& app) {
  auto a = std::make_shared<waste_args>();
  ladder_words(app, a->ladder);
  cli::text(app, "--trace FILE", a->trace, "batch sizes, one per line ('#' starts a comment)");
  return [a](std::ostream& out, std::ostream&) {
    if (a->trace.empty()) throw usage_error("waste needs --trace FILE");
    const ladder l = parse_ladder(a->ladder);
    const padding_tally t = tally_trace(l, a->trace);
    char wasted[32];
    std::snprintf(wasted, sizeof wasted, "%.1f%%", 100.0 * t.wasted_fraction());
    out << "ladder: " << l.size() << (l.size() == 1 ? " rung, " : " rungs, ") << l.front() << " to " << l.top() << "\n"
        << "batches: " << t.batches << "\n"
        << "eager: " << t.eager << "\n"
        << "real rows: " << t.real << "\n"
        << "padded rows: " << t.padding << "\n"
        << "wasted: " << wasted << "\n"
        << "eager rows: " << t.eager_real << "\n";
    return 0;
  };
}
const registration reg{{"waste", "waste LADDER --trace FILE", "Padding of a ladder over a trace of batch sizes.", define,
                        {.needs_value = "{} needs a FILE"}}};
}  // namespace
}  // namespace rungs::plan
