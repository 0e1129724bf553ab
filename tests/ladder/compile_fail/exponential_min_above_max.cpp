// expect: exponential ladder.*must not exceed
// min above max is rejected at compile time, naming both parameters.
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/static_ladder.hpp>

using broken = rungs::static_ladder<rungs::Exponential{.min = 256, .step = 128, .max = 128, .limit = 4}>;
int main() { return static_cast<int>(broken::size()); }
