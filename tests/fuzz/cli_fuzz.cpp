// rungs-plan's command dispatch run in-process on a fuzzed argv (the input split at NUL
// bytes): every run returns an exit status (0, 1, 2) and never crashes. Arguments that write
// files or run programs (--plot, --write-*) are left out of the fuzzed space.
#include <ostream>
#include <streambuf>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "fuzz.hpp"

namespace {
struct null_buffer : std::streambuf {
  int overflow(int c) override { return c; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text = fuzz_text(data, size);
  std::vector<std::string_view> args;
  while (!text.empty() && args.size() < 64) {
    const std::size_t end = text.find('\0');
    args.push_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
  }
  for (std::string_view a : args)
    if (a.starts_with("--plot") || a.starts_with("--write")) return -1;  // not added to the corpus
  null_buffer sink;
  std::ostream out(&sink), err(&sink);
  const int status = rungs::plan::run(args, out, err);
  RUNGS_FUZZ_CHECK(status >= 0 && status <= 2, "exit status other than 0, 1, 2");
  return 0;
}
