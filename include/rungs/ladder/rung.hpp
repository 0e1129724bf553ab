// The vocabulary every ladder shares: the rung type, the limits a ladder must respect, and
// the error a bad configuration raises.
//
// A rung is a size a graph (or compiled binary) is captured for: a batch size, a token
// count, a number of KV blocks. Ladders reject malformed parameters instead of clamping
// them, because a silently clamped ladder is how a production batch ends up with no rung
// (see docs/ladders.md). Every message names the ladder, the parameter, its value and the
// rule, e.g. "linear ladder: step = 0 must be positive".
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rungs {

/// A size on a ladder or a dimension of a bucket. Signed so that a negative value read
/// from a configuration can be reported as such instead of wrapping around.
using rung_t = std::int64_t;

/// Largest value a ladder parameter or rung may take. Device code indexes with int32, and
/// keeping parameters below 2^31 means no arithmetic on one ladder (doubling, rounding up
/// to a step) and no product of two rungs can overflow rung_t. A product of three (a 3-D
/// bucket's batch * (query + context_blocks * block_size)) can, and is checked (grid.hpp).
inline constexpr rung_t max_rung = (rung_t{1} << 31) - 1;

/// Most rungs one ladder may have: each rung is a captured graph, and 65536 keeps the
/// lookup table's entries 16-bit.
inline constexpr std::size_t max_rungs = std::size_t{1} << 16;

/// Most buckets one grid may hold (and a bucket file or a Gaudi strategy may generate for
/// one phase): each bucket is a graph to capture, and counting against this bound before
/// expanding keeps a configuration from asking for unbounded memory.
inline constexpr std::size_t max_grid_buckets = std::size_t{1} << 20;

/// Thrown for an invalid ladder, grid or bucketing configuration (a std::invalid_argument,
/// so callers that already map invalid_argument to "bad configuration" keep working).
class ladder_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/// Throws ladder_error "<ladder>: <parameter> = <value> <rule>".
///
/// Deliberately not constexpr: when a compile-time ladder is invalid, constant evaluation
/// reaches this call and the compiler's diagnostic quotes the calling line, which spells
/// out the parameter and the rule (e.g. `reject("linear ladder", "step", step, "must be
/// positive")`). At run time it formats the same words with the value.
[[noreturn]] inline void reject(std::string_view ladder, std::string_view parameter, rung_t value,
                                std::string_view rule) {
  std::string m;
  m.append(ladder).append(": ").append(parameter).append(" = ").append(std::to_string(value));
  m.append(" ").append(rule);
  throw ladder_error(m);
}

/// As above, for a rule that relates two parameters: "<ladder>: a = 5 <rule> b = 3".
[[noreturn]] inline void reject(std::string_view ladder, std::string_view parameter, rung_t value,
                                std::string_view rule, std::string_view other, rung_t other_value) {
  std::string r(rule);
  r.append(" ").append(other).append(" = ").append(std::to_string(other_value));
  reject(ladder, parameter, value, r);
}

/// For an element of a list: "<ladder>: <array>[i] = <value> <rule>".
[[noreturn]] inline void reject_element(std::string_view ladder, std::string_view array, std::size_t i,
                                        rung_t value, std::string_view rule) {
  std::string name(array);
  name.append("[").append(std::to_string(i)).append("]");
  reject(ladder, name, value, rule);
}

/// A list that is not strictly increasing: "<ladder>: a[i] = 4 must be greater than a[i-1] = 4".
[[noreturn]] inline void reject_not_increasing(std::string_view ladder, std::string_view array, std::size_t i,
                                      rung_t value, rung_t previous) {
  std::string rule("must be greater than ");
  rule.append(array).append("[").append(std::to_string(i - 1)).append("] = ").append(std::to_string(previous));
  rule.append(" (rungs are strictly increasing)");
  reject_element(ladder, array, i, value, rule);
}

/// The common checks: 1 <= value <= max_rung.
constexpr void require_positive(std::string_view ladder, std::string_view parameter, rung_t value) {
  if (value <= 0) reject(ladder, parameter, value, "must be positive");
  if (value > max_rung) reject(ladder, parameter, value, "exceeds the largest supported rung 2147483647");
}

/// Rejects a grid of more than max_grid_buckets buckets, counted before it is expanded:
/// "<what>: <parameter> = <count> exceeds the limit of 1048576 buckets per grid ...".
inline void require_grid_size(std::string_view what, std::string_view parameter, std::uint64_t count) {
  if (count <= max_grid_buckets) return;
  std::string m(what);
  m.append(": ").append(parameter).append(" = ").append(std::to_string(count));
  m.append(" exceeds the limit of ").append(std::to_string(max_grid_buckets));
  throw ladder_error(m + " buckets per grid (rungs::max_grid_buckets)");
}

/// Rejects a ladder that would have more than max_rungs rungs.
constexpr void require_rung_count(std::string_view ladder, std::size_t count) {
  if (count > max_rungs)
    reject(ladder, "rung count", static_cast<rung_t>(count), "exceeds the limit of 65536 rungs");
}

}  // namespace detail
}  // namespace rungs
