// expect: linear ladder.*step.*must be positive|must be positive.*linear ladder.*step
// A compile-time ladder with a zero step must not compile; the diagnostic quotes the rule.
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/static_ladder.hpp>

using broken = rungs::static_ladder<rungs::Linear{.min = 2, .step = 0, .max = 64}>;
int main() { return static_cast<int>(broken::lookup(3).rung); }
