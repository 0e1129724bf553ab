// A replica small enough to follow by hand, for the planning tests that check step times:
// capture sizes 4 8 16, captured at startup in no time; a step takes max(10 ms, 2 ms per token
// row) (no context term, no graph overhead; 5 ms more when eager), so a bucket of 8 is
// compute-bound (16 ms) and one of 4 (8 ms) is not (10 ms).
#pragma once

#include <rungs/ladder/explicit.hpp>
#include <rungs/planning/simulate.hpp>

namespace rungs::planning::test {

inline simulation_config tiny() {
  simulation_config c;
  c.ladder = rungs::ladder{rungs::Explicit{4, 8, 16}};
  c.cost = {.weights_seconds = 0.010, .seconds_per_token = 0.002, .seconds_per_context_token = 0,
            .eager_overhead_seconds = 0.005, .graph_overhead_seconds = 0, .capture_seconds = 0,
            .capture_seconds_per_token = 0, .graph_bytes = 0, .graph_bytes_per_token = 0};
  return c;
}

}  // namespace rungs::planning::test
