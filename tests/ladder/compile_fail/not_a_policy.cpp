// expect: a ladder policy needs `constexpr void validate\(\) const`
// A type that is not a ladder policy fails with a message naming the missing operation.
#include <rungs/ladder/static_ladder.hpp>

struct just_a_number {
  int value = 0;
  friend constexpr bool operator==(const just_a_number&, const just_a_number&) = default;
};

using broken = rungs::static_ladder<just_a_number{8}>;
int main() { return static_cast<int>(broken::size()); }
