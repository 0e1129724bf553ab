// Bucket files (Gaudi's VLLM_BUCKETING_FROM_FILE format): one bucket pattern per line.
//
//   # prompt: (batch_size, query_len, context_blocks); decode: (batch_size, 1, blocks)
//   (1, 2048, 0)
//   (1, [256, 512], [0, 4, 8])             six buckets: the Cartesian product
//   ([64, 128, 256], 1, range(512, 1024, 32))
//
// A value is an integer, a list [a, b, c] or range(stop) / range(start, stop[, step]) with
// Python's meaning (stop exclusive, negative steps count down, a zero step is an error).
// A list or range that yields no value is an error naming the pattern (upstream silently
// generates no bucket for the line). `#` starts a comment. Upstream evaluates each line as Python
// and crashes (or silently skips the line) when it is malformed; here every problem is a
// bucket_file_error "file:line:column: reason" pointing at the offending character, and
// the expansion is bounded (bucket_file_options::max_buckets) so a typo such as
// range(1, 10**9) cannot exhaust memory.
#pragma once

#include <rungs/ladder/grid.hpp>
#include <rungs/ladder/rung.hpp>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace rungs {

/// A malformed bucket file: what() is "file:line:column: reason" (1-based; a problem with
/// the file as a whole, such as a missing file, has line 0 and reads "file: reason").
class bucket_file_error : public ladder_error {
 public:
  bucket_file_error(std::string file, std::size_t line, std::size_t column, std::string reason)
      : ladder_error(format(file, line, column, reason)),
        file_(std::move(file)), line_(line), column_(column), reason_(std::move(reason)) {}

  const std::string& file() const noexcept { return file_; }
  std::size_t line() const noexcept { return line_; }
  std::size_t column() const noexcept { return column_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  static std::string format(const std::string& file, std::size_t line, std::size_t column,
                            const std::string& reason) {
    if (line == 0) return file + ": " + reason;
    return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + reason;
  }
  std::string file_;
  std::size_t line_, column_;
  std::string reason_;
};

struct bucket_file_options {
  /// Most buckets a file may expand to, over all its lines.
  std::size_t max_buckets = max_grid_buckets;
};

namespace detail {

/// One dimension of a bucket pattern: a list of values or a lazy Python range.
struct bucket_values {
  bool is_range = false;
  std::vector<rung_t> list;           // when !is_range
  rung_t start = 0, stop = 0, step = 1;  // when is_range
  std::size_t column = 0;  // 1-based, where the value starts
  std::size_t end = 0;     // 0-based, one past its last character

  std::uint64_t size() const noexcept {
    if (!is_range) return list.size();
    if (step > 0 && stop > start) {
      const std::uint64_t span = static_cast<std::uint64_t>(stop) - static_cast<std::uint64_t>(start);
      const auto s = static_cast<std::uint64_t>(step);
      return span / s + (span % s != 0);
    }
    if (step < 0 && start > stop) {
      const std::uint64_t span = static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(stop);
      const std::uint64_t s = 0 - static_cast<std::uint64_t>(step);
      return span / s + (span % s != 0);
    }
    return 0;
  }
  rung_t at(std::uint64_t i) const noexcept {
    return is_range ? static_cast<rung_t>(static_cast<std::uint64_t>(start) + i * static_cast<std::uint64_t>(step))
                    : list[i];
  }
};

class bucket_line_parser {
 public:
  bucket_line_parser(std::string_view file, std::size_t line_number, std::string_view line)
      : file_(file), line_number_(line_number), line_(line) {}

  /// The values of the line's tuple (empty when the line is blank or a comment).
  std::vector<bucket_values> parse(std::size_t dims, std::size_t& tuple_column) {
    std::vector<bucket_values> values;
    skip_space();
    if (at_end()) return values;
    tuple_column = column();
    expect('(', "'(' to start a bucket");
    for (;;) {
      skip_space();
      values.push_back(value());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == ')') break;  // trailing comma, as Python allows
        continue;
      }
      if (peek() == ')') break;
      fail("expected ',' or ')' after a value, found " + found());
    }
    const std::size_t close = column();
    ++pos_;
    skip_space();
    if (!at_end()) fail("expected the end of the line after the bucket, found " + found());
    if (values.size() != dims) {
      pos_ = close - 1;
      fail("expected " + std::to_string(dims) + " values in a bucket, found " + std::to_string(values.size()));
    }
    const std::string_view pattern = line_.substr(tuple_column - 1, close - tuple_column + 1);
    for (const bucket_values& v : values) {
      if (v.size() == 0)
        fail_at(v.column, "bucket pattern " + std::string(pattern) + ": " +
                              std::string(line_.substr(v.column - 1, v.end - (v.column - 1))) +
                              " yields no value (every value of a pattern must yield at least one)");
      check_values(v);
    }
    return values;
  }

  [[noreturn]] void fail_at(std::size_t col, const std::string& reason) const {
    throw bucket_file_error(std::string(file_), line_number_, col, reason);
  }

 private:
  bucket_values value() {
    bucket_values v;
    v.column = column();
    if (peek() == '[') {
      ++pos_;
      v.list = integers(']', "in a list", 0);
    } else if (line_.substr(pos_, 5) == "range") {
      pos_ += 5;
      skip_space();
      expect('(', "'(' after 'range'");
      const std::vector<rung_t> args = integers(')', "in range()", 3);
      if (args.empty()) fail_at(v.column, "range() takes 1 to 3 integer arguments, found none");
      v.is_range = true;
      if (args.size() == 1) v.stop = args[0];
      else v.start = args[0], v.stop = args[1];
      if (args.size() == 3) v.step = args[2];
      if (v.step == 0) fail_at(v.column, "range() step must not be zero");
    } else if (starts_integer()) {
      v.list.push_back(integer());
    } else {
      fail("expected an integer, a list [...] or range(...), found " + found());
    }
    v.end = pos_;
    return v;
  }

  /// "a, b, c<close>" (a trailing comma allowed, as in Python), after the opening bracket;
  /// at most `limit` integers when limit > 0.
  std::vector<rung_t> integers(char close, std::string_view where, std::size_t limit) {
    std::vector<rung_t> values;
    const std::string closer = std::string("'") + close + "' " + std::string(where);
    skip_space();
    while (peek() != close) {
      if (!starts_integer()) fail("expected an integer or " + closer + ", found " + found());
      if (limit > 0 && values.size() == limit)
        fail("expected at most " + std::to_string(limit) + " integers " + std::string(where) + ", found another");
      values.push_back(integer());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != close) {
        fail("expected ',' or " + closer + ", found " + found());
      }
    }
    ++pos_;
    return values;
  }

  void check_values(const bucket_values& v) const {
    auto check = [&](rung_t x) {
      if (x < 0) fail_at(v.column, "bucket value " + std::to_string(x) + " is negative");
      if (x > max_rung)
        fail_at(v.column, "bucket value " + std::to_string(x) + " exceeds the largest supported 2147483647");
    };
    if (!v.is_range) {
      for (rung_t x : v.list) check(x);
    } else if (const std::uint64_t n = v.size(); n > 0) {
      check(v.at(0));  // a range is monotonic: its ends bound it, however long it is
      check(v.at(n - 1));
    }
  }

  rung_t integer() {
    const std::size_t begin = pos_;
    if (peek() == '+' || peek() == '-') ++pos_;
    while (pos_ < line_.size() && line_[pos_] >= '0' && line_[pos_] <= '9') ++pos_;
    std::string_view text = line_.substr(begin, pos_ - begin);
    if (text.front() == '+') text.remove_prefix(1);
    rung_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
      fail_at(begin + 1, "integer " + std::string(line_.substr(begin, pos_ - begin)) + " is out of range");
    if (ec != std::errc() || end != text.data() + text.size()) {
      pos_ = begin;
      fail("expected an integer, found " + found());
    }
    return v;
  }

  bool starts_integer() const {
    std::size_t p = pos_;
    if (p < line_.size() && (line_[p] == '+' || line_[p] == '-')) ++p;
    return p < line_.size() && line_[p] >= '0' && line_[p] <= '9';
  }
  void expect(char c, const char* what) {
    if (peek() != c) fail(std::string("expected ") + what + ", found " + found());
    ++pos_;
  }
  void skip_space() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r')) ++pos_;
  }
  bool at_end() const { return pos_ >= line_.size(); }
  char peek() const { return at_end() ? '\0' : line_[pos_]; }
  std::size_t column() const { return pos_ + 1; }
  std::string found() const {
    if (at_end()) return "the end of the line";
    std::string quoted(3, '\'');
    quoted[1] = line_[pos_];
    return quoted;
  }
  [[noreturn]] void fail(const std::string& reason) const { fail_at(column(), reason); }

  std::string_view file_;
  std::size_t line_number_;
  std::string_view line_;  // without its comment
  std::size_t pos_ = 0;
};

/// Parses `text`, appending each expanded bucket's `dims` values to `out`.
inline void parse_bucket_text(std::string_view text, std::string_view file, std::size_t dims,
                              const bucket_file_options& options, std::vector<rung_t>& out) {
  std::size_t total = 0;
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);

    bucket_line_parser parser(file, line_number, line);
    std::size_t tuple_column = 1;
    const std::vector<bucket_values> values = parser.parse(dims, tuple_column);
    if (values.empty()) continue;

    std::uint64_t count = 1;  // Cartesian product size, checked before anything expands
    for (const bucket_values& v : values) {
      const std::uint64_t n = v.size();
      if (n != 0 && count > (options.max_buckets - total) / n) {
        parser.fail_at(tuple_column, "the buckets expand to more than " + std::to_string(options.max_buckets) +
                                         " (bucket_file_options::max_buckets)");
      }
      count *= n;
    }
    total += count;
    std::vector<std::uint64_t> index(dims, 0);
    for (std::uint64_t k = 0; k < count; ++k) {
      for (std::size_t d = 0; d < dims; ++d) out.push_back(values[d].at(index[d]));
      for (std::size_t d = dims; d-- > 0;) {  // odometer: the last dimension varies fastest
        if (++index[d] < values[d].size()) break;
        index[d] = 0;
      }
    }
  }
}

}  // namespace detail

/// Parses bucket patterns of D values each, in file order, expanded (duplicates kept).
/// `file` names the text in error messages.
template <std::size_t D>
std::vector<bucket<D>> parse_bucket_file(std::string_view text, std::string_view file = "<buckets>",
                                         const bucket_file_options& options = {}) {
  std::vector<rung_t> flat;
  detail::parse_bucket_text(text, file, D, options, flat);
  std::vector<bucket<D>> buckets(flat.size() / D);
  for (std::size_t i = 0; i < buckets.size(); ++i)
    for (std::size_t d = 0; d < D; ++d) buckets[i][d] = flat[i * D + d];
  return buckets;
}

/// Reads and parses a bucket file; a file that cannot be read is a bucket_file_error too.
template <std::size_t D>
std::vector<bucket<D>> read_bucket_file(const std::string& path, const bucket_file_options& options = {}) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bucket_file_error(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_bucket_file<D>(text.str(), path, options);
}

}  // namespace rungs
