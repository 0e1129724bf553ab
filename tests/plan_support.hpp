// Runs rungs-plan in-process for the command tests: exact stdout, stderr and exit status.
#pragma once

#include <catch2/catch.hpp>

#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"

namespace rungs::plan::test {

struct result {
  int status;
  std::string out, err;
};

inline result plan(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  std::ostringstream out, err;
  const int status = rungs::plan::run(v, out, err);
  return {status, out.str(), err.str()};
}

inline void check_ok(const result& r, const std::string& out) {
  CHECK(r.err == "");
  CHECK(r.out == out);
  CHECK(r.status == 0);
}

inline void check_usage(const result& r, const std::string& message) {
  CHECK(r.out == "");
  CHECK(r.err == "rungs-plan: error: " + message + "\n");
  CHECK(r.status == 2);
}

}  // namespace rungs::plan::test
