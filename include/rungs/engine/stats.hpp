// Engine statistics: what the engine captured, replayed and ran eagerly, and why; how much
// padding the ladder cost; what captures took in time and memory.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace rungs::engine {

/// Why a step ran eagerly.
enum class eager_reason : std::uint8_t {
  above_top,    // no bucket covers the batch: a normal path, not an error
  not_captured, // its bucket has no graph yet (timing policy)
  failed,       // its bucket's capture failed
  refused,      // the graph-memory budget had no room for its bucket
};
inline constexpr std::size_t eager_reason_count = 4;

constexpr std::string_view to_string(eager_reason r) {
  switch (r) {
    case eager_reason::above_top: return "above-top";
    case eager_reason::not_captured: return "not-captured";
    case eager_reason::failed: return "failed";
    case eager_reason::refused: return "refused";
  }
  return "?";
}

struct engine_stats {
  std::int64_t steps = 0;
  std::int64_t replays = 0;
  std::array<std::int64_t, eager_reason_count> eager{};  // indexed by eager_reason
  std::int64_t captures = 0;          // graphs captured and kept
  std::int64_t capture_failures = 0;  // captures that failed (the bucket stays eager)
  std::int64_t budget_refusals = 0;   // captures the budget turned down (estimate or measured)
  std::int64_t real_rows = 0, padded_rows = 0;      // sequences, in replayed steps
  std::int64_t real_tokens = 0, padded_tokens = 0;  // tokens, in replayed steps
  double capture_seconds = 0;    // all capture attempts
  std::int64_t capture_bytes = 0;  // graphs kept, as measured
  std::int64_t budget_left = -1;   // graph memory left, -1 when unlimited

  std::int64_t eager_steps() const {
    std::int64_t n = 0;
    for (std::int64_t e : eager) n += e;
    return n;
  }
  std::int64_t eager_steps(eager_reason r) const { return eager[static_cast<std::size_t>(r)]; }
  /// Padded rows (sequences) as a share of all rows in replayed steps.
  double padding_ratio() const {
    return real_rows + padded_rows ? static_cast<double>(padded_rows) / static_cast<double>(real_rows + padded_rows) : 0.0;
  }
  /// Padded tokens as a share of all tokens in replayed steps: the compute a 1-D token ladder
  /// wastes (a step of few sequences but many tokens pads few tokens and many rows).
  double token_padding_ratio() const {
    return real_tokens + padded_tokens
               ? static_cast<double>(padded_tokens) / static_cast<double>(real_tokens + padded_tokens)
               : 0.0;
  }
};

inline std::ostream& operator<<(std::ostream& os, const engine_stats& s) {
  os << "steps " << s.steps << ": " << s.replays << " replayed, " << s.eager_steps() << " eager (";
  for (std::size_t r = 0; r < eager_reason_count; ++r)
    os << (r ? ", " : "") << to_string(static_cast<eager_reason>(r)) << " " << s.eager[r];
  os << "); graphs " << s.captures << " captured, " << s.capture_failures << " failed, " << s.budget_refusals
     << " refused by budget; padded rows " << s.padded_rows << " of " << s.real_rows + s.padded_rows
     << ", padded tokens " << s.padded_tokens << " of " << s.real_tokens + s.padded_tokens;
  return os;
}

}  // namespace rungs::engine
