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

/// Which request is available when: first turns and standalone requests at their arrival;
/// each later turn once the previous one of its conversation finished.
class arrivals {
 public:
  explicit arrivals(const std::vector<demo_request>& requests) : requests_(&requests) {
    std::map<serving::session_id, std::size_t> last;  // conversation -> index of its latest turn so far
    next_turn_.assign(requests.size(), none);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const serving::session_id c = requests[i].row.conversation;
      if (c == 0) {
        ready_.push({requests[i].row.arrival, i});
        continue;
      }
      auto it = last.find(c);
      if (it == last.end()) ready_.push({requests[i].row.arrival, i});
      else next_turn_[it->second] = i;
      last[c] = i;
    }
    remaining_ = requests.size();
  }

  /// Requests available at `now`, in order of availability (ties by request index).
  std::vector<std::size_t> take(double now) {
    std::vector<std::size_t> out;
    while (!ready_.empty() && ready_.top().time <= now) {
      out.push_back(ready_.top().index);
      available_at_[ready_.top().index] = ready_.top().time;
      ready_.pop();
    }
    return out;
  }

  /// The next time a request becomes available, if one is scheduled.
  std::optional<double> next() const {
    if (ready_.empty()) return std::nullopt;
    return ready_.top().time;
  }

  /// When request `i` became available (its time-to-first-token starts there).
  double available_at(std::size_t i) const { return available_at_.at(i); }

  /// Request `i` finished at `now`: its conversation's next turn becomes available after
  /// the think time. Returns true when it was the conversation's last turn.
  bool finished(std::size_t i, double now) {
    --remaining_;
    const std::size_t n = next_turn_[i];
    if (n == none) return true;
    const serving::trace_request& r = (*requests_)[n].row;
    ready_.push({std::max(r.arrival, now + r.think), n});
    return false;
  }

  /// Requests not finished yet (waiting to arrive, queued or running).
  std::size_t remaining() const { return remaining_; }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  struct entry {
    double time;
    std::size_t index;
    bool operator>(const entry& o) const { return time != o.time ? time > o.time : index > o.index; }
  };
  const std::vector<demo_request>* requests_;
  std::priority_queue<entry, std::vector<entry>, std::greater<entry>> ready_;
  std::vector<std::size_t> next_turn_;
  std::map<std::size_t, double> available_at_;
  std::size_t remaining_ = 0;
};

}  // namespace demo
