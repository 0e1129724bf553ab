// expect: sequence parallel.*divides no rung
// A transform that leaves no rung does not compile; the diagnostic quotes the rule.
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/static_ladder.hpp>
#include <rungs/ladder/transforms.hpp>

using odd = rungs::static_ladder<rungs::SequenceParallel{rungs::Explicit{1, 3, 5}, 2}>;
static_assert(odd::size() > 0);
