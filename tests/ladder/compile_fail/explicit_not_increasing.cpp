// expect: reject_not_increasing.*explicit ladder
// A repeated rung in an explicit compile-time ladder is a typo, reported as such.
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/static_ladder.hpp>

using broken = rungs::static_ladder<rungs::Explicit{1, 4, 4, 8}>;
int main() { return static_cast<int>(broken::size()); }
