// Shared by the libFuzzer harnesses: a check that crashes the run (so libFuzzer records the
// input) and the input as text. A harness catches only the documented exceptions of what it
// calls (bad input is reported that way); anything else, and every sanitizer report, is a
// crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define RUNGS_FUZZ_CHECK(cond, what)                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, what); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

inline std::string_view fuzz_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}
