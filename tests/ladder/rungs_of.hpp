// The rungs a policy generates, through the run-time ladder (so validation and the
// generated-rung checks run too), as a vector that Catch2 can compare and print.
#pragma once

#include <rungs/ladder/ladder.hpp>

#include <vector>

namespace rungs_test {

using rungs_list = std::vector<rungs::rung_t>;

template <class Policy>
rungs_list rungs_of(const Policy& p) {
  const rungs::ladder l{p};
  return {l.rungs().begin(), l.rungs().end()};
}

}  // namespace rungs_test
