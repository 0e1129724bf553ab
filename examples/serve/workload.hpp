// The demo's requests: rungs::serving's workload (the paged-KV blog's chats, or a trace file)
// with token ids drawn from the seed, and the arrivals of each conversation's turns: a turn
// becomes available at max(its arrival, the previous turn's answer + think time), since nobody
// answers before reading.
#pragma once

#include <rungs/serving/scheduler.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"

namespace demo {

namespace serving = rungs::serving;

/// One request of the workload: its trace row and its prompt's token ids.
struct demo_request {
  serving::trace_request row;
  std::vector<token_id> prompt;
};

/// Prompt token ids for a trace, a function of (seed, conversation, turn, request index) only,
/// so the same seed gives the same prompts whatever order they are served in. Token 0 is left
/// out: it is the id padded rows carry.
inline std::vector<demo_request> make_requests(const std::vector<serving::trace_request>& rows, std::int32_t vocab,
                                               std::uint64_t seed) {
  std::vector<demo_request> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const serving::trace_request& r = rows[i];
    splitmix64 rng{seed * 0x100000001b3ull ^ (r.conversation << 20) ^ (static_cast<std::uint64_t>(r.turn) << 8) ^
                   (r.conversation == 0 ? i << 32 : 0)};
    demo_request d{r, std::vector<token_id>(static_cast<std::size_t>(r.prompt_tokens))};
    for (token_id& t : d.prompt) t = rng.between(1, vocab);
    out.push_back(std::move(d));
  }
  return out;
}

/// Longest conversation of a workload in tokens (every turn's prompt and output), per
/// conversation (standalone requests count alone): what one sequence may grow to.
inline std::int64_t longest_conversation(const std::vector<serving::trace_request>& rows) {
  std::map<serving::session_id, std::int64_t> total;
  std::int64_t longest = 0;
  for (const serving::trace_request& r : rows) {
    const std::int64_t n = std::int64_t{r.prompt_tokens} + r.output_tokens;
    if (r.conversation == 0) longest = std::max(longest, n);
    else longest = std::max(longest, total[r.conversation] += n);
  }
  return longest;
}

/// The trace rows of the demo's requests, for rungs::serving::turn_arrivals (which releases
/// each chat turn once the previous one finished, exactly as the simulator does).
inline std::vector<serving::trace_request> trace_rows(const std::vector<demo_request>& requests) {
  std::vector<serving::trace_request> rows;
  rows.reserve(requests.size());
  for (const demo_request& r : requests) rows.push_back(r.row);
  return rows;
}

}  // namespace demo
