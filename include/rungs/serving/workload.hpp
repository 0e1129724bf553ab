// Workloads: request traces read from files, and the generator of the paged-KV blog's chat
// workload (N concurrent chats of 10 turns, 150 tokens in and 350 out per turn).
//
// Trace formats (trace_format), detected from the CSV header or the first JSON object's keys:
//
// rungs' own: CSV with a header, or JSON lines, one request per line:
//
//   arrival,prompt_tokens,output_tokens,conversation,turn,think
//   0.0,150,350,1,1,0
//   0.0,150,350,1,2,0
//
//   {"arrival": 0.0, "prompt_tokens": 150, "output_tokens": 350, "conversation": 1, "turn": 2}
//
//   arrival (seconds from the server's start), prompt_tokens and output_tokens are required;
//   conversation (0 or absent: a standalone request), turn, think (seconds the user takes
//   after the previous turn's answer) and hash_ids (below; in CSV, ids separated by spaces)
//   are optional, and an optional CSV field may be left empty. A turn's prompt_tokens are its
//   new tokens: the conversation so far is prepended by the scheduler. A later turn is sent at
//   max(arrival, previous answer + think): nobody answers before reading. Turns of one
//   conversation must appear in increasing turn order; a turn left out is the previous one
//   plus 1. '#' starts a comment line in CSV.
//
// Azure LLM inference traces (Azure/AzurePublicDataset, Splitwise, ISCA 2024): CSV with the
//   header TIMESTAMP,ContextTokens,GeneratedTokens, CRLF line ends, wall-clock timestamps
//   `2023-11-16 18:15:46.6805900`. The arrival is the time since the file's earliest
//   timestamp (exact to the 100 ns tick the format writes); every row is standalone.
//
// Mooncake traces (kvcache-ai/Mooncake FAST25-release): JSON lines with `timestamp` (ms from
//   the trace's start), `input_length`, `output_length` and `hash_ids`: remapped hashes of
//   the prompt's blocks of 512 tokens (hash_block_tokens), chained, so requests sharing their
//   first k ids share their first k x 512 prompt tokens. Every row is standalone.
//
// A UTF-8 byte-order mark is skipped; CR before LF is ignored. Every problem is a trace_error
// "file:line: reason" naming the value and the rule it breaks.
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
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rungs::serving {

/// Tokens named by one of a request's hash_ids (Mooncake's block size).
inline constexpr std::int32_t hash_block_tokens = 512;
/// Largest arrival or think time a trace may give (about 31.7 years): every later sum of
/// times stays finite and exact to well under a microsecond.
inline constexpr double max_trace_seconds = 1e9;
/// Largest conversation id: ids at or above 2^63 name standalone requests inside the
/// simulator (see trace_prompt).
inline constexpr std::uint64_t max_conversation_id = (std::uint64_t{1} << 63) - 1;

struct trace_request {
  double arrival = 0;             ///< seconds from the server's start
  std::int32_t prompt_tokens = 0; ///< this turn's new tokens
  std::int32_t output_tokens = 0;
  session_id conversation = 0;    ///< 0: standalone
  std::int32_t turn = 0;          ///< 1-based within its conversation (0 when standalone)
  double think = 0;               ///< seconds after the previous turn's answer
  /// Prompt block k (tokens [k, k + 1) x hash_block_tokens) has content hash_ids[k]: equal
  /// leading ids, equal leading tokens. At most ceil(prompt_tokens / hash_block_tokens)
  /// ids; tokens past them are the request's own. Empty: nothing shared by id.
  std::vector<std::uint64_t> hash_ids{};
  /// Leading prompt tokens whose KV arrives with the request (request::transferred_tokens):
  /// the decode side of a disaggregated plan (planning/disaggregated.hpp) sets it; trace files
  /// neither hold nor write it.
  std::int32_t transferred_tokens = 0;
  friend bool operator==(const trace_request&, const trace_request&) = default;
};

enum class trace_format { detect, rungs, azure, mooncake };

inline constexpr std::string_view to_string(trace_format f) {
  switch (f) {
    case trace_format::detect: return "detect";
    case trace_format::rungs: return "rungs";
    case trace_format::azure: return "azure";
    case trace_format::mooncake: return "mooncake";
  }
  return "?";
}

/// "detect", "rungs", "azure" or "mooncake"; nullopt for anything else.
inline std::optional<trace_format> trace_format_from(std::string_view name) {
  for (trace_format f : {trace_format::detect, trace_format::rungs, trace_format::azure, trace_format::mooncake})
    if (name == to_string(f)) return f;
  return std::nullopt;
}

class trace_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Token ids of simulated content: deterministic per (owner, salt, position), spread over a
/// 32000-token vocabulary, so equal arguments give equal tokens and prefix caching can hit.
inline kv::token_id synthetic_token(std::uint64_t owner, std::uint64_t salt, std::uint64_t position) {
  std::uint64_t z = owner * 0x9E3779B97F4A7C15ull ^ (salt + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ position;
  z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
  return static_cast<kv::token_id>((z ^ (z >> 29)) % 32000);
}

/// The prompt tokens of request `index` of a trace, positions [0, out.size()): a position
/// under one of its hash_ids is a function of that id and the offset in its block (so two
/// requests with equal leading ids have equal leading tokens at every KV block size);
/// any other position is the request's own (its conversation and turn, or its index).
/// out.size() may exceed prompt_tokens (the prefix-cache study pads to whole id blocks).
inline void trace_prompt(const trace_request& r, std::size_t index, std::span<kv::token_id> out) {
  constexpr std::uint64_t hashed = ~std::uint64_t{0};  // salt of id content: no turn has it
  const std::uint64_t owner = r.conversation != 0 ? r.conversation : (std::uint64_t{1} << 63) + index;
  const std::size_t by_id = std::min(out.size(), r.hash_ids.size() * static_cast<std::size_t>(hash_block_tokens));
  for (std::size_t p = 0; p < by_id; ++p)
    out[p] = synthetic_token(r.hash_ids[p / hash_block_tokens], hashed, p % hash_block_tokens);
  for (std::size_t p = by_id; p < out.size(); ++p) out[p] = synthetic_token(owner, static_cast<std::uint64_t>(r.turn), p);
}

namespace detail {

[[noreturn]] inline void trace_fail(std::string_view file, std::size_t line, const std::string& why) {
  throw trace_error(std::string(file) + ":" + std::to_string(line) + ": " + why);
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

/// Where one value came from, for messages.
struct trace_where {
  std::string_view file;
  std::size_t line;
  [[noreturn]] void fail(const std::string& why) const { trace_fail(file, line, why); }
};

/// A finite number of seconds in [0, max_trace_seconds].
inline double trace_seconds(const trace_where& at, std::string_view column, std::string_view text, double scale = 1) {
  text = trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) || end != text.data() + text.size())
    at.fail(std::string(column) + " = '" + std::string(text) + "' is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(v) || std::fabs(v * scale) > max_trace_seconds)
    at.fail(std::string(column) + " = " + std::string(text) + " is out of range (at most " +
            std::to_string(static_cast<std::int64_t>(max_trace_seconds / scale)) + ")");
  if (v < 0) at.fail(std::string(column) + " = " + std::string(text) + " must not be negative");
  return v * scale;
}

/// An integer in [lo, hi]; integral decimals ("5.0", "1e3") are accepted as JSON writers
/// produce them.
inline std::uint64_t trace_integer(const trace_where& at, std::string_view column, std::string_view text,
                                   std::uint64_t hi, std::uint64_t lo = 0) {
  text = trim(text);
  auto out_of_range = [&] {
    at.fail(std::string(column) + " = " + std::string(text) + " is out of range (at most " + std::to_string(hi) + ")");
  };
  auto below = [&] {
    at.fail(std::string(column) + " = " + std::string(text) + (lo == 1 ? " must be positive" : " must not be negative"));
  };
  const char* const first = text.data();
  const char* const last = first + text.size();
  if (!text.empty() && text.front() == '-') {
    std::int64_t neg = 0;
    const auto [end, ec] = std::from_chars(first, last, neg);
    if (ec == std::errc() && end == last) below();
  } else {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(first, last, v);
    if (end == last && ec == std::errc::result_out_of_range) out_of_range();
    if (end == last && ec == std::errc()) {
      if (v > hi) out_of_range();
      if (v < lo) below();
      return v;
    }
  }
  double d = 0;
  const auto [end, ec] = std::from_chars(first, last, d);
  if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) || end != last)
    at.fail(std::string(column) + " = '" + std::string(text) + "' is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(d)) out_of_range();
  if (d != std::floor(d)) at.fail(std::string(column) + " = " + std::string(text) + " is not an integer");
  if (d < 0 || d < static_cast<double>(lo)) below();
  if (d >= 18446744073709551616.0 || static_cast<std::uint64_t>(d) > hi) out_of_range();
  return static_cast<std::uint64_t>(d);
}

inline std::int32_t trace_tokens(const trace_where& at, std::string_view column, std::string_view text) {
  return static_cast<std::int32_t>(trace_integer(at, column, text, std::numeric_limits<std::int32_t>::max(), 1));
}

/// One value of a JSON line: a number (its text) or an array of numbers.
struct json_value {
  std::string_view text;
  bool array = false;
  std::vector<std::string_view> items;
};
struct json_field {
  std::string_view key;
  json_value value;
};

/// One flat JSON object whose values are numbers or arrays of numbers, as both JSON-lines
/// formats write them. Bounded by the line: one pass, no recursion.
inline std::vector<json_field> json_object(const trace_where& at, std::string_view s) {
  std::vector<json_field> fields;
  std::size_t p = 0;
  auto space = [&] { while (p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\r')) ++p; };
  auto expect = [&](char c, const char* what) {
    space();
    if (p >= s.size() || s[p] != c) at.fail(std::string("expected ") + what);
    ++p;
  };
  auto number = [&](std::string_view key) {
    space();
    const std::size_t begin = p;
    if (p < s.size() && (s[p] == '"' || s[p] == '{' || s[p] == '['))
      at.fail("the value of \"" + std::string(key) + "\" must be a number" + (s[p] == '"' ? ", not a string" : ""));
    while (p < s.size() && s[p] != ',' && s[p] != '}' && s[p] != ']' && s[p] != ' ' && s[p] != '\t' && s[p] != '\r') ++p;
    if (p == begin) at.fail("the value of \"" + std::string(key) + "\" is missing");
    return s.substr(begin, p - begin);
  };
  expect('{', "'{' to start a JSON object");
  space();
  if (p < s.size() && s[p] == '}') {
    ++p;
  } else {
    for (;;) {
      expect('"', "a quoted key");
      const std::size_t close = s.find('"', p);
      if (close == std::string_view::npos) at.fail("unterminated key");
      const std::string_view key = s.substr(p, close - p);
      if (key.find('\\') != std::string_view::npos) at.fail("key \"" + std::string(key) + "\" has an escape; no trace key needs one");
      for (const json_field& f : fields)
        if (f.key == key) at.fail("key \"" + std::string(key) + "\" given twice");
      p = close + 1;
      expect(':', "':' after a key");
      space();
      json_field f{key, {}};
      if (p < s.size() && s[p] == '[') {
        ++p;
        f.value.array = true;
        space();
        if (p < s.size() && s[p] == ']') {
          ++p;
        } else {
          for (;;) {
            f.value.items.push_back(number(key));
            space();
            if (p < s.size() && s[p] == ',') {
              ++p;
              continue;
            }
            expect(']', "',' or ']' in an array");
            break;
          }
        }
      } else {
        f.value.text = number(key);
      }
      fields.push_back(std::move(f));
      space();
      if (p < s.size() && s[p] == ',') {
        ++p;
        continue;
      }
      expect('}', "',' or '}' after a value");
      break;
    }
  }
  space();
  if (p != s.size()) at.fail("unexpected text after the JSON object");
  return fields;
}

/// The columns (CSV) or keys (JSON) of the formats. hash_ids is a list.
enum class trace_column { arrival, prompt_tokens, output_tokens, conversation, turn, think, hash_ids };
inline constexpr int trace_column_count = 7;
inline constexpr std::string_view rungs_names[trace_column_count] = {"arrival", "prompt_tokens", "output_tokens",
                                                                     "conversation", "turn", "think", "hash_ids"};
inline constexpr std::string_view azure_names[trace_column_count] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens",
                                                                     "", "", "", ""};
inline constexpr std::string_view mooncake_names[trace_column_count] = {"timestamp", "input_length", "output_length",
                                                                        "", "", "", "hash_ids"};

inline const std::string_view (&column_names(trace_format f))[trace_column_count] {
  return f == trace_format::azure ? azure_names : f == trace_format::mooncake ? mooncake_names : rungs_names;
}

inline int column_of(trace_format f, std::string_view name) {
  for (int c = 0; c < trace_column_count; ++c)
    if (!column_names(f)[c].empty() && name == column_names(f)[c]) return c;
  return -1;
}

inline std::string known_columns(trace_format f) {
  std::string s;
  for (int c = 0; c < trace_column_count; ++c)
    if (!column_names(f)[c].empty()) {
      if (!s.empty()) s += ',';
      s += column_names(f)[c];
    }
  return s;
}

/// One row's fields by column, as text (a list's items for hash_ids); absent when unset.
struct raw_row {
  std::optional<std::string_view> text[trace_column_count];
  std::vector<std::string_view> ids;  // hash_ids
  bool has_ids = false;
};

/// Azure's `YYYY-MM-DD HH:MM:SS[.fffffff]` as 100 ns ticks since 0001-01-01 (days from the
/// civil date: H. Hinnant's algorithm).
inline std::int64_t azure_ticks(const trace_where& at, std::string_view text) {
  text = trim(text);
  auto bad = [&](const char* why) {
    at.fail("TIMESTAMP = '" + std::string(text) + "' " + why + " (expected YYYY-MM-DD HH:MM:SS.fffffff)");
  };
  auto digits = [&](std::size_t pos, std::size_t n) {
    if (pos + n > text.size()) bad("is too short");
    std::int64_t v = 0;
    for (std::size_t k = pos; k < pos + n; ++k) {
      if (text[k] < '0' || text[k] > '9') bad("is not a timestamp");
      v = v * 10 + (text[k] - '0');
    }
    return v;
  };
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || (text[10] != ' ' && text[10] != 'T') || text[13] != ':' ||
      text[16] != ':')
    bad("is not a timestamp");
  const std::int64_t y = digits(0, 4), m = digits(5, 2), d = digits(8, 2);
  const std::int64_t hh = digits(11, 2), mm = digits(14, 2), ss = digits(17, 2);
  if (y < 1 || m < 1 || m > 12 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60) bad("is not a valid time");
  std::int64_t ticks = 0;
  if (text.size() > 19) {
    if (text[19] != '.' || text.size() == 20 || text.size() > 27) bad("has a bad fraction (1 to 7 digits)");
    const std::size_t n = text.size() - 20;
    ticks = digits(20, n);
    for (std::size_t k = n; k < 7; ++k) ticks *= 10;
  }
  const std::int64_t yy = y - (m <= 2);
  const std::int64_t era = yy / 400;
  const std::int64_t yoe = yy - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t days = era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy;  // since 0000-03-01
  return ((days * 24 + hh) * 60 + mm) * 60 * 10'000'000 + ss * 10'000'000 + ticks;  // < 2^63 for years < 10000
}

/// Checks one row's values (column meanings by format) and builds the request. Azure
/// arrivals are filled in later, from the ticks written to `ticks`.
inline trace_request trace_row(const trace_where& at, trace_format f, const raw_row& raw, std::int64_t& ticks) {
  const auto& names = column_names(f);
  for (int c = 0; c < 3; ++c)
    if (!raw.text[c]) at.fail("missing " + std::string(names[c]));
  trace_request r;
  if (f == trace_format::azure)
    ticks = azure_ticks(at, *raw.text[0]);
  else
    r.arrival = trace_seconds(at, names[0], *raw.text[0], f == trace_format::mooncake ? 1e-3 : 1.0);
  r.prompt_tokens = trace_tokens(at, names[1], *raw.text[1]);
  r.output_tokens = trace_tokens(at, names[2], *raw.text[2]);
  if (raw.text[3]) r.conversation = trace_integer(at, names[3], *raw.text[3], max_conversation_id);
  if (raw.text[4]) r.turn = static_cast<std::int32_t>(trace_integer(at, names[4], *raw.text[4], INT32_MAX, 1));
  if (raw.text[5]) r.think = trace_seconds(at, names[5], *raw.text[5]);
  if (raw.has_ids) {
    const std::size_t most = (static_cast<std::size_t>(r.prompt_tokens) + hash_block_tokens - 1) / hash_block_tokens;
    if (raw.ids.size() > most)
      at.fail(std::string(names[6]) + " has " + std::to_string(raw.ids.size()) + " ids; a prompt of " +
              std::to_string(r.prompt_tokens) + " tokens has at most " + std::to_string(most) + " blocks of " +
              std::to_string(hash_block_tokens));
    r.hash_ids.reserve(raw.ids.size());
    for (std::string_view id : raw.ids)
      r.hash_ids.push_back(trace_integer(at, names[6], id, std::numeric_limits<std::uint64_t>::max()));
  }
  return r;
}

/// Turns of a conversation come in increasing order (a missing turn is the previous plus
/// one), and a standalone request has no turn.
inline void check_turns(std::string_view file, std::vector<trace_request>& rows, const std::vector<std::size_t>& lines) {
  std::unordered_map<session_id, std::int32_t> last;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    trace_request& r = rows[i];
    if (r.conversation == 0) {
      if (r.turn != 0) trace_fail(file, lines[i], "turn = " + std::to_string(r.turn) + " without a conversation");
      continue;
    }
    std::int32_t& l = last[r.conversation];
    if (r.turn == 0) {
      if (l == std::numeric_limits<std::int32_t>::max())
        trace_fail(file, lines[i], "conversation " + std::to_string(r.conversation) + " has a turn after turn " +
                                       std::to_string(l) + ", the largest turn number");
      r.turn = l + 1;
    } else if (r.turn <= l) {
      trace_fail(file, lines[i], "turn " + std::to_string(r.turn) + " of conversation " + std::to_string(r.conversation) +
                                     " comes after turn " + std::to_string(l));
    }
    l = r.turn;
  }
}

/// Splits a CSV line at commas (no quoting: no trace format quotes).
inline std::vector<std::string_view> csv_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    line.remove_prefix(comma + 1);
  }
}

inline std::vector<std::string_view> split_ids(std::string_view s) {
  std::vector<std::string_view> out;
  while (!(s = trim(s)).empty()) {
    std::size_t end = 0;
    while (end < s.size() && s[end] != ' ' && s[end] != '\t') ++end;
    out.push_back(s.substr(0, end));
    s.remove_prefix(end);
  }
  return out;
}

}  // namespace detail

/// Parses a trace: CSV with a header, or JSON lines when the first line starts with '{'.
/// `format` detect: Azure when the CSV header has one of Azure's columns, Mooncake when the
/// first JSON object has `timestamp` or `input_length`, rungs' own otherwise.
inline std::vector<trace_request> parse_trace(std::string_view text, std::string_view file = "<trace>",
                                              trace_format format = trace_format::detect) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  std::vector<trace_request> rows;
  std::vector<std::size_t> lines;
  std::vector<std::int64_t> ticks;  // Azure: per row
  std::vector<int> columns;         // CSV: column index per field
  trace_format f = format;
  bool json = false, csv = false;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t eol = text.find('\n');
    const std::string_view line = detail::trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    const detail::trace_where at{file, number};
    if (line.empty() || line.front() == '#') continue;
    if (!csv && !json) {
      json = line.front() == '{';
      csv = !json;
      if (csv) {
        const std::vector<std::string_view> names = detail::csv_fields(line);
        if (f == trace_format::detect) {
          f = trace_format::rungs;
          for (std::string_view n : names)
            if (detail::column_of(trace_format::azure, n) >= 0) f = trace_format::azure;
        }
        if (f == trace_format::mooncake) at.fail("a Mooncake trace is JSON lines, not CSV");
        bool seen[detail::trace_column_count] = {};
        for (std::string_view name : names) {
          const int column = detail::column_of(f, name);
          if (column < 0)
            at.fail("unknown column '" + std::string(name) + "' (a CSV trace starts with a header: " +
                    (f == trace_format::azure ? "Azure's TIMESTAMP,ContextTokens,GeneratedTokens"
                                              : "arrival,prompt_tokens,output_tokens[,conversation,turn,think,hash_ids], "
                                                "or Azure's TIMESTAMP,ContextTokens,GeneratedTokens") +
                    ")");
          if (seen[column]) at.fail("column '" + std::string(name) + "' given twice");
          seen[column] = true;
          columns.push_back(column);
        }
        for (int c = 0; c < 3; ++c)
          if (!seen[c]) at.fail("the header lacks column '" + std::string(detail::column_names(f)[c]) + "'");
        continue;
      }
    }
    detail::raw_row raw;
    std::vector<detail::json_field> fields;
    if (json) {
      if (line.front() != '{') at.fail("expected '{' to start a JSON object");
      fields = detail::json_object(at, line);
      if (f == trace_format::detect) {
        f = trace_format::rungs;
        for (const detail::json_field& field : fields)
          if (field.key == "timestamp" || field.key == "input_length") f = trace_format::mooncake;
      }
      if (f == trace_format::azure) at.fail("an Azure trace is CSV, not JSON lines");
      for (const detail::json_field& field : fields) {
        const int c = detail::column_of(f, field.key);
        if (c < 0)
          at.fail("unknown key \"" + std::string(field.key) + "\" (" + (f == trace_format::mooncake ? "Mooncake" : "rungs") +
                  " trace keys: " + detail::known_columns(f) + ")");
        if ((c == static_cast<int>(detail::trace_column::hash_ids)) != field.value.array)
          at.fail("the value of \"" + std::string(field.key) + "\" must be " +
                  (field.value.array ? "a number, not an array" : "an array of numbers"));
        if (field.value.array) {
          raw.has_ids = true;
          raw.ids = field.value.items;
        } else {
          raw.text[c] = field.value.text;
        }
      }
    } else {
      const std::vector<std::string_view> values = detail::csv_fields(line);
      if (values.size() > columns.size())
        at.fail("more than the header's " + std::to_string(columns.size()) + " fields");
      if (values.size() < columns.size())
        at.fail(std::to_string(values.size()) + " fields, the header has " + std::to_string(columns.size()));
      for (std::size_t k = 0; k < values.size(); ++k) {
        const int c = columns[k];
        if (values[k].empty() && c >= 3) continue;  // an optional column may be left empty
        if (c == static_cast<int>(detail::trace_column::hash_ids)) {
          raw.has_ids = true;
          raw.ids = detail::split_ids(values[k]);
        } else {
          raw.text[c] = values[k];
        }
      }
    }
    ticks.push_back(0);
    rows.push_back(detail::trace_row(at, f, raw, ticks.back()));
    lines.push_back(number);
  }
  if (rows.empty()) throw trace_error(std::string(file) + ": no requests");
  if (f == trace_format::azure) {
    const std::int64_t first = *std::min_element(ticks.begin(), ticks.end());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i].arrival = static_cast<double>(ticks[i] - first) * 1e-7;
      if (rows[i].arrival > max_trace_seconds)
        detail::trace_fail(file, lines[i], "TIMESTAMP is " + std::to_string(rows[i].arrival) +
                                               " s after the earliest; at most " +
                                               std::to_string(static_cast<std::int64_t>(max_trace_seconds)) + " s");
    }
  }
  detail::check_turns(file, rows, lines);
  return rows;
}

inline std::vector<trace_request> read_trace(const std::string& path, trace_format format = trace_format::detect) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_trace(text.str(), path, format);
}

/// Writes a trace as rungs' CSV (every column; hash_ids only when a row has them), readable
/// by parse_trace: times in their shortest exact form, a standalone request's turn empty.
inline void write_trace(std::ostream& out, const std::vector<trace_request>& rows) {
  const bool ids = std::any_of(rows.begin(), rows.end(), [](const trace_request& r) { return !r.hash_ids.empty(); });
  auto real = [&](double v) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.write(buf, end - buf);
  };
  out << "arrival,prompt_tokens,output_tokens,conversation,turn,think" << (ids ? ",hash_ids" : "") << "\n";
  for (const trace_request& r : rows) {
    real(r.arrival);
    out << "," << r.prompt_tokens << "," << r.output_tokens << "," << r.conversation << ",";
    if (r.turn != 0) out << r.turn;
    out << ",";
    real(r.think);
    if (ids) {
      out << ",";
      for (std::size_t k = 0; k < r.hash_ids.size(); ++k) out << (k ? " " : "") << r.hash_ids[k];
    }
    out << "\n";
  }
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
///
/// With `held`, no request is scheduled at construction: release(i) schedules a first turn or
/// standalone request and makes its conversation this instance's (one replica of a fleet,
/// whose router decides at each arrival where it goes).
class turn_arrivals {
 public:
  explicit turn_arrivals(std::span<const trace_request> trace, bool held = false)
      : arrival_(trace.size()), think_(trace.size()), next_turn_(trace.size(), none),
        available_at_(trace.size(), std::numeric_limits<double>::quiet_NaN()), remaining_(held ? 0 : trace.size()) {
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
      if (!held) ready_.push({arrival_[i], i});
    }
  }

  /// Schedules request `i`, a first turn or standalone request held at construction, at its
  /// arrival time; its conversation's later turns follow it here.
  void release(std::size_t i) {
    ready_.push({arrival_.at(i), i});
    for (std::size_t k = i; k != none; k = next_turn_[k]) ++remaining_;
  }

  /// The conversation's turn after request `i`, if any.
  std::optional<std::size_t> next_turn(std::size_t i) const {
    const std::size_t n = next_turn_.at(i);
    if (n == none) return std::nullopt;
    return n;
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
