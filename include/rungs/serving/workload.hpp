// Workloads: request traces read from files, and the generator of the paged-KV blog's chat
// workload (N concurrent chats of 10 turns, 150 tokens in and 350 out per turn).
//
// A trace is CSV with a header, or JSON lines, one request per line:
//
//   arrival,prompt_tokens,output_tokens,conversation,turn,think
//   0.0,150,350,1,1,0
//   0.0,150,350,1,2,0
//
//   {"arrival": 0.0, "prompt_tokens": 150, "output_tokens": 350, "conversation": 1, "turn": 2}
//
// arrival (seconds from the server's start), prompt_tokens and output_tokens are required;
// conversation (0 or absent: a standalone request), turn and think (seconds the user takes
// after the previous turn's answer) are optional. A turn's prompt_tokens are its new tokens:
// the conversation so far is prepended by the scheduler. A later turn is sent at
// max(arrival, previous answer + think): nobody answers before reading. Turns of one
// conversation must appear in increasing turn order. '#' starts a comment line in CSV.
// Every problem is a trace_error "file:line: reason".
#pragma once

#include <rungs/serving/scheduler.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <span>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rungs::serving {

struct trace_request {
  double arrival = 0;             ///< seconds from the server's start
  std::int32_t prompt_tokens = 0; ///< this turn's new tokens
  std::int32_t output_tokens = 0;
  session_id conversation = 0;    ///< 0: standalone
  std::int32_t turn = 0;          ///< 1-based within its conversation (0 when standalone)
  double think = 0;               ///< seconds after the previous turn's answer
  friend bool operator==(const trace_request&, const trace_request&) = default;
};

class trace_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

[[noreturn]] inline void trace_fail(std::string_view file, std::size_t line, const std::string& why) {
  throw trace_error(std::string(file) + ":" + std::to_string(line) + ": " + why);
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline double trace_number(std::string_view file, std::size_t line, std::string_view column, std::string_view text) {
  text = trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    trace_fail(file, line, std::string(column) + " = '" + std::string(text) + "' is not a number");
  return v;
}

inline std::int64_t trace_integer(std::string_view file, std::size_t line, std::string_view column, double v) {
  if (v != std::floor(v) || std::fabs(v) > 2147483647.0)
    trace_fail(file, line, std::string(column) + " = " + std::to_string(v) + " is not an integer");
  return static_cast<std::int64_t>(v);
}

enum class trace_column { arrival, prompt_tokens, output_tokens, conversation, turn, think };
inline constexpr std::string_view trace_columns[] = {"arrival", "prompt_tokens", "output_tokens",
                                                     "conversation", "turn", "think"};

/// Checks one row's values and fills `out`; `seen` marks the columns present.
inline trace_request trace_row(std::string_view file, std::size_t line, const double (&v)[6], const bool (&seen)[6]) {
  for (int c = 0; c < 3; ++c)
    if (!seen[c]) trace_fail(file, line, "missing " + std::string(trace_columns[c]));
  trace_request r;
  if (v[0] < 0) trace_fail(file, line, "arrival = " + std::to_string(v[0]) + " must not be negative");
  r.arrival = v[0];
  r.prompt_tokens = static_cast<std::int32_t>(trace_integer(file, line, "prompt_tokens", v[1]));
  r.output_tokens = static_cast<std::int32_t>(trace_integer(file, line, "output_tokens", v[2]));
  if (r.prompt_tokens < 1) trace_fail(file, line, "prompt_tokens = " + std::to_string(r.prompt_tokens) + " must be positive");
  if (r.output_tokens < 1) trace_fail(file, line, "output_tokens = " + std::to_string(r.output_tokens) + " must be positive");
  if (seen[3]) {
    const std::int64_t c = trace_integer(file, line, "conversation", v[3]);
    if (c < 0) trace_fail(file, line, "conversation = " + std::to_string(c) + " must not be negative");
    r.conversation = static_cast<session_id>(c);
  }
  if (seen[4]) {
    r.turn = static_cast<std::int32_t>(trace_integer(file, line, "turn", v[4]));
    if (r.turn < 1) trace_fail(file, line, "turn = " + std::to_string(r.turn) + " must be positive");
  }
  if (seen[5]) {
    if (v[5] < 0) trace_fail(file, line, "think = " + std::to_string(v[5]) + " must not be negative");
    r.think = v[5];
  }
  return r;
}

/// One flat JSON object of numbers: {"key": number, ...}.
inline trace_request json_row(std::string_view file, std::size_t line, std::string_view s) {
  double v[6] = {};
  bool seen[6] = {};
  std::size_t p = 0;
  auto space = [&] { while (p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\r')) ++p; };
  auto expect = [&](char c, const char* what) {
    space();
    if (p >= s.size() || s[p] != c) trace_fail(file, line, std::string("expected ") + what);
    ++p;
  };
  expect('{', "'{' to start a JSON object");
  space();
  if (p < s.size() && s[p] == '}') ++p;
  else
    for (;;) {
      expect('"', "a quoted key");
      const std::size_t close = s.find('"', p);
      if (close == std::string_view::npos) trace_fail(file, line, "unterminated key");
      const std::string_view key = s.substr(p, close - p);
      p = close + 1;
      expect(':', "':' after a key");
      space();
      std::size_t end = p;
      while (end < s.size() && s[end] != ',' && s[end] != '}') ++end;
      int column = -1;
      for (int c = 0; c < 6; ++c)
        if (key == trace_columns[c]) column = c;
      if (column < 0) trace_fail(file, line, "unknown key \"" + std::string(key) + "\"");
      if (seen[column]) trace_fail(file, line, "key \"" + std::string(key) + "\" given twice");
      v[column] = trace_number(file, line, key, s.substr(p, end - p));
      seen[column] = true;
      p = end;
      space();
      if (p < s.size() && s[p] == ',') {
        ++p;
        continue;
      }
      expect('}', "',' or '}' after a value");
      break;
    }
  space();
  if (p != s.size()) trace_fail(file, line, "unexpected text after the JSON object");
  return trace_row(file, line, v, seen);
}

/// Turns of a conversation come in increasing order, and a standalone request has no turn.
inline void check_turns(std::string_view file, const std::vector<trace_request>& rows, const std::vector<std::size_t>& lines) {
  std::unordered_map<session_id, std::int32_t> last;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const trace_request& r = rows[i];
    if (r.conversation == 0) {
      if (r.turn != 0) trace_fail(file, lines[i], "turn = " + std::to_string(r.turn) + " without a conversation");
      continue;
    }
    std::int32_t& l = last[r.conversation];
    if (r.turn != 0 && r.turn <= l)
      trace_fail(file, lines[i], "turn " + std::to_string(r.turn) + " of conversation " + std::to_string(r.conversation) +
                                     " comes after turn " + std::to_string(l));
    l = r.turn != 0 ? r.turn : l + 1;
  }
}

}  // namespace detail

/// Parses a trace (CSV with a header, or JSON lines when the first line starts with '{').
inline std::vector<trace_request> parse_trace(std::string_view text, std::string_view file = "<trace>") {
  std::vector<trace_request> rows;
  std::vector<std::size_t> lines;
  std::vector<int> columns;  // CSV: column index per field
  bool json = false, header = false;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t eol = text.find('\n');
    const std::string_view line = detail::trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (line.empty() || line.front() == '#') continue;
    if (!header && !json) {
      if (line.front() == '{') {
        json = true;
      } else {
        header = true;
        std::string_view rest = line;
        bool seen[6] = {};
        for (;;) {
          const std::size_t comma = rest.find(',');
          const std::string_view name = detail::trim(rest.substr(0, comma));
          int column = -1;
          for (int c = 0; c < 6; ++c)
            if (name == detail::trace_columns[c]) column = c;
          if (column < 0)
            detail::trace_fail(file, number, "unknown column '" + std::string(name) +
                                                 "' (a CSV trace starts with a header: arrival,prompt_tokens,output_tokens"
                                                 "[,conversation,turn,think])");
          if (seen[column]) detail::trace_fail(file, number, "column '" + std::string(name) + "' given twice");
          seen[column] = true;
          columns.push_back(column);
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
        for (int c = 0; c < 3; ++c)
          if (!seen[c]) detail::trace_fail(file, number, "the header lacks column '" + std::string(detail::trace_columns[c]) + "'");
        continue;
      }
    }
    if (json) {
      rows.push_back(detail::json_row(file, number, line));
    } else {
      double v[6] = {};
      bool seen[6] = {};
      std::string_view rest = line;
      std::size_t field = 0;
      for (;; ++field) {
        const std::size_t comma = rest.find(',');
        if (field >= columns.size())
          detail::trace_fail(file, number, "more than the header's " + std::to_string(columns.size()) + " fields");
        const int c = columns[field];
        const std::string_view text = detail::trim(rest.substr(0, comma));
        if (!(text.empty() && c >= 3)) {  // an optional column may be left empty
          v[c] = detail::trace_number(file, number, detail::trace_columns[c], text);
          seen[c] = true;
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      if (field + 1 != columns.size())
        detail::trace_fail(file, number, std::to_string(field + 1) + " fields, the header has " + std::to_string(columns.size()));
      rows.push_back(detail::trace_row(file, number, v, seen));
    }
    lines.push_back(number);
  }
  if (rows.empty()) throw trace_error(std::string(file) + ": no requests");
  detail::check_turns(file, rows, lines);
  return rows;
}

inline std::vector<trace_request> read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_trace(text.str(), path);
}

/// Writes a trace as CSV (every column), readable by parse_trace.
inline void write_trace(std::ostream& out, const std::vector<trace_request>& rows) {
  out << "arrival,prompt_tokens,output_tokens,conversation,turn,think\n";
  for (const trace_request& r : rows)
    out << r.arrival << "," << r.prompt_tokens << "," << r.output_tokens << "," << r.conversation << "," << r.turn << ","
        << r.think << "\n";
}

/// The paged-KV blog's chat workload: `conversations` chats, `turns` turns each, every turn
/// `prompt_tokens` in and `output_tokens` out on average, the next turn sent `think` seconds
/// after the answer. The blog sends every chat at once (arrival_interval = 0).
struct chat_workload {
  std::int32_t conversations = 10;
  std::int32_t turns = 10;
  std::int32_t prompt_tokens = 150;
  std::int32_t output_tokens = 350;
  /// Each length is drawn uniformly from mean x [1 - jitter, 1 + jitter] (0: exactly the mean).
  double jitter = 0;
  double think = 0;
  /// Seconds between the first turns of consecutive chats.
  double arrival_interval = 0;
  std::uint64_t seed = 1;

  void validate() const {
    auto positive = [](const char* what, std::int64_t v) {
      if (v <= 0) throw std::invalid_argument(std::string("chat workload: ") + what + " = " + std::to_string(v) + " must be positive");
    };
    positive("conversations", conversations);
    positive("turns", turns);
    positive("prompt_tokens", prompt_tokens);
    positive("output_tokens", output_tokens);
    if (!(jitter >= 0 && jitter < 1)) throw std::invalid_argument("chat workload: jitter = " + std::to_string(jitter) + " must be in [0, 1)");
    if (!(think >= 0)) throw std::invalid_argument("chat workload: think = " + std::to_string(think) + " must not be negative");
    if (!(arrival_interval >= 0))
      throw std::invalid_argument("chat workload: arrival_interval = " + std::to_string(arrival_interval) + " must not be negative");
  }
};

inline std::vector<trace_request> generate_chat(const chat_workload& w) {
  w.validate();
  std::mt19937_64 rng(w.seed);
  auto draw = [&](std::int32_t mean) {
    if (w.jitter == 0) return mean;
    std::uniform_real_distribution<double> d(mean * (1 - w.jitter), mean * (1 + w.jitter));
    return std::max<std::int32_t>(1, static_cast<std::int32_t>(std::lround(d(rng))));
  };
  std::vector<trace_request> rows;
  for (std::int32_t t = 1; t <= w.turns; ++t)
    for (std::int32_t c = 1; c <= w.conversations; ++c) {
      const double first = (c - 1) * w.arrival_interval;
      rows.push_back({.arrival = first, .prompt_tokens = draw(w.prompt_tokens), .output_tokens = draw(w.output_tokens),
                      .conversation = static_cast<session_id>(c), .turn = t, .think = t == 1 ? 0 : w.think});
    }
  return rows;
}

/// When each request of a trace becomes available to the scheduler: standalone requests and
/// first turns at their arrival time; each later turn of a conversation only once the previous
/// turn has finished, after its think time (never before its own arrival time). The serving
/// demo and the simulator both release turns through this, so a trace means the same in both.
/// Requests are identified by their index in the trace.
class turn_arrivals {
 public:
  explicit turn_arrivals(std::span<const trace_request> trace)
      : arrival_(trace.size()), think_(trace.size()), next_turn_(trace.size(), none),
        available_at_(trace.size(), std::numeric_limits<double>::quiet_NaN()), remaining_(trace.size()) {
    std::unordered_map<session_id, std::size_t> last;  // conversation -> its latest turn so far
    for (std::size_t i = 0; i < trace.size(); ++i) {
      arrival_[i] = trace[i].arrival;
      think_[i] = trace[i].think;
      const session_id c = trace[i].conversation;
      if (c != 0) {
        if (auto it = last.find(c); it != last.end()) {
          next_turn_[it->second] = i;
          it->second = i;
          continue;
        }
        last.emplace(c, i);
      }
      ready_.push({arrival_[i], i});
    }
  }

  /// Appends to `out` the requests available at `now`, in order of availability (ties by
  /// index), and returns how many.
  std::size_t take(double now, std::vector<std::size_t>& out) {
    std::size_t n = 0;
    for (; !ready_.empty() && ready_.top().time <= now; ++n) {
      out.push_back(ready_.top().index);
      available_at_[ready_.top().index] = ready_.top().time;
      ready_.pop();
    }
    return n;
  }
  std::vector<std::size_t> take(double now) {
    std::vector<std::size_t> out;
    take(now, out);
    return out;
  }

  /// The next time a request becomes available, if one is scheduled (later turns are scheduled
  /// only when the previous turn finishes).
  std::optional<double> next() const {
    if (ready_.empty()) return std::nullopt;
    return ready_.top().time;
  }

  /// When request `i` became available (its time to first token starts there); NaN before.
  double available_at(std::size_t i) const { return available_at_.at(i); }

  /// Request `i` finished at `now`: its conversation's next turn becomes available after the
  /// think time. Returns true when `i` had no later turn (the conversation, if any, is over).
  bool finished(std::size_t i, double now) {
    --remaining_;
    const std::size_t n = next_turn_.at(i);
    if (n == none) return true;
    ready_.push({std::max(arrival_[n], now + think_[n]), n});
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
  std::vector<double> arrival_, think_;
  std::vector<std::size_t> next_turn_;
  std::vector<double> available_at_;
  std::priority_queue<entry, std::vector<entry>, std::greater<entry>> ready_;
  std::size_t remaining_ = 0;
};

}  // namespace rungs::serving
