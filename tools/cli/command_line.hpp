// The command-line conventions of rungs' programs (rungs-plan and the serving demo), on CLI11:
//
//  - one error type, usage_error: the program prints it as one line on stderr and exits with
//    status 2;
//  - strict parsers for integers, numbers and sizes. Every option is taken from CLI11 as text
//    and converted here, because CLI11's own conversions clamp an out-of-range integer to the
//    type's limit and accept "inf" and "nan";
//  - one size syntax (size() below), the same in every command;
//  - option() binds an option to a parser; parse() runs CLI11 and turns its errors into
//    usage_error.
//
// Tools only: the library headers (include/rungs) stay free of CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rungs::cli {

/// Bad command-line input: one line naming the option or value and the rule it breaks.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline std::string str(std::string_view s) { return std::string(s); }

// --- Numbers -------------------------------------------------------------------------------

/// A decimal integer: "X = 't' is not an integer" or "X = 't' is out of range".
inline std::int64_t integer(std::string_view what, std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size())
    throw usage_error(str(what) + " = '" + str(text) + "' is out of range");
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw usage_error(str(what) + " = '" + str(text) + "' is not an integer");
  return v;
}

/// An integer in [min, max]; the message says which bound it breaks.
inline std::int64_t integer_in(std::string_view what, std::string_view text, std::int64_t min, std::int64_t max) {
  const std::int64_t v = integer(what, text);
  if (v < min) {
    const std::string rule = min == 0 ? "must not be negative" : min == 1 ? "must be positive"
                                                                          : "must be at least " + std::to_string(min);
    throw usage_error(str(what) + " = " + std::to_string(v) + " " + rule);
  }
  if (v > max) throw usage_error(str(what) + " = " + std::to_string(v) + " must be at most " + std::to_string(max));
  return v;
}

inline std::int64_t positive(std::string_view what, std::string_view text) {
  return integer_in(what, text, 1, std::numeric_limits<std::int64_t>::max());
}
inline std::int64_t non_negative(std::string_view what, std::string_view text) {
  return integer_in(what, text, 0, std::numeric_limits<std::int64_t>::max());
}
/// A positive count that fits the library's 32-bit fields (tokens, sequences, turns).
inline std::int32_t count(std::string_view what, std::string_view text) {
  return static_cast<std::int32_t>(integer_in(what, text, 1, std::numeric_limits<std::int32_t>::max()));
}

/// A finite decimal number ("0.25", "1e-3"): never inf or nan, never out of double's range.
inline double number(std::string_view what, std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size())
    throw usage_error(str(what) + " = '" + str(text) + "' is out of range");
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    throw usage_error(str(what) + " = '" + str(text) + "' is not a number");
  return v;
}

/// A number in [min, max].
inline double number_in(std::string_view what, std::string_view text, double min, double max) {
  const double v = number(what, text);
  if (v < min || v > max) {
    std::ostringstream os;
    os << what << " = " << text << " must lie in [" << min << ", " << max << "]";
    throw usage_error(os.str());
  }
  return v;
}

// --- Sizes ---------------------------------------------------------------------------------

/// The size syntax, for messages and help.
inline constexpr std::string_view size_syntax =
    "bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T";

/// A size in bytes: a decimal number (digits, optionally a fraction: "79.16GiB") and a unit.
///   none or B: bytes;  KB MB GB TB: 10^3 10^6 10^9 10^12;
///   KiB MiB GiB TiB, and K M G T alike: 2^10 2^20 2^30 2^40.
/// The bare letters mean the binary units, as in `free -g`, CUDA's and PyTorch's memory reports.
/// Exact (integer arithmetic, rounded to the nearest byte); at most 2^63 - 1 bytes.
__extension__ typedef unsigned __int128 size_arithmetic;  // GCC and Clang: exact products of 30 digits and 2^40

inline std::int64_t size(std::string_view what, std::string_view text) {
  const auto bad = [&] { return usage_error(str(what) + " = '" + str(text) + "' is not a size (" + str(size_syntax) + ")"); };
  std::size_t i = 0;
  size_arithmetic mantissa = 0;
  int digits = 0, significant = 0, fraction = -1;  // fraction: digits after the point, -1 without one
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && fraction < 0 && digits > 0) {
      fraction = 0;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (mantissa > 0 || c != '0') ++significant;
    if (significant > 30) throw usage_error(str(what) + " = '" + str(text) + "' is out of range");
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
    if (fraction >= 0) ++fraction;
  }
  if (digits == 0 || fraction == 0) throw bad();
  const std::string_view unit = text.substr(i);
  struct scale_of {
    std::string_view unit;
    std::uint64_t scale;
  };
  static constexpr scale_of units[] = {
      {"", 1},           {"B", 1},          {"KB", 1000},          {"MB", 1000000},       {"GB", 1000000000},
      {"TB", 1000000000000}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
      {"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}, {"T", 1ull << 40}};
  std::uint64_t scale = 0;
  for (const scale_of& u : units)
    if (u.unit == unit) scale = u.scale;
  if (scale == 0) throw bad();
  size_arithmetic divisor = 1;
  for (int k = 0; k < std::max(fraction, 0); ++k) divisor *= 10;
  // mantissa < 10^30 and scale <= 2^40: the product fits in 128 bits.
  const size_arithmetic bytes = (mantissa * scale + divisor / 2) / divisor;
  if (bytes > static_cast<size_arithmetic>(std::numeric_limits<std::int64_t>::max()))
    throw usage_error(str(what) + " = '" + str(text) + "' is out of range (at most 2^63 - 1 bytes)");
  return static_cast<std::int64_t>(bytes);
}

inline std::int64_t positive_size(std::string_view what, std::string_view text) {
  const std::int64_t v = size(what, text);
  if (v <= 0) throw usage_error(str(what) + " = '" + str(text) + "' must be positive");
  return v;
}

// --- Lists ---------------------------------------------------------------------------------

/// "a,b,c" split at `sep` (an empty text is one empty item).
inline std::vector<std::string_view> split(std::string_view text, char sep = ',') {
  std::vector<std::string_view> items;
  for (;;) {
    const std::size_t at = text.find(sep);
    items.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return items;
    text.remove_prefix(at + 1);
  }
}

/// Refuses a list longer than `limit` items before anything is allocated for it.
inline void check_length(std::string_view what, std::string_view text, std::size_t limit, char sep = ',') {
  std::size_t n = 1;
  for (char c : text) n += c == sep;
  if (n > limit)
    throw usage_error(str(what) + " has " + std::to_string(n) + " items; at most " + std::to_string(limit) +
                      " are accepted");
}

// --- Options -------------------------------------------------------------------------------

/// Adds an option. `spec` is the flag and the name of its value, "--kv-memory SIZE", where the
/// flag may have aliases after commas ("--order,--capture-order KIND"); when the option is
/// given, `use(flag, value)` runs with the first name (and throws usage_error for a bad value).
/// A flag given twice is an error.
template <class Use>
CLI::Option* on(CLI::App& app, std::string_view spec, Use use, std::string help) {
  const std::size_t space = spec.find(' ');
  const std::string names(spec.substr(0, space));
  const std::string flag = names.substr(0, names.find(','));
  CLI::Option* o = app.add_option_function<std::string>(
      names, [use, flag](const std::string& v) { use(std::string_view(flag), std::string_view(v)); }, std::move(help));
  if (space != std::string_view::npos) o->type_name(str(spec.substr(space + 1)));
  return o;
}

/// An option whose value `parse(flag, text)` converts into `target`.
template <class T, class Parse>
CLI::Option* option(CLI::App& app, std::string_view spec, T& target, Parse parse, std::string help) {
  return on(app, spec, [&target, parse](std::string_view f, std::string_view v) { target = parse(f, v); },
            std::move(help));
}

/// One of `names`: "X = 'v' is not one of a, b, c" otherwise.
template <class E>
E choice(std::string_view what, std::string_view text, const std::vector<std::pair<std::string_view, E>>& names) {
  std::string known;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    known += (known.empty() ? "" : ", ") + str(name);
  }
  throw usage_error(str(what) + " = '" + str(text) + "' is not one of " + known);
}

/// The value `parse(text)` gives, for a library parser that throws std::invalid_argument on a
/// name it does not know (rungs::engine::parse_order, parse_timing, parse_bucket_kind), or
/// "X = 'text' is not one of `names`".
template <class Parse>
auto parsed(std::string_view what, std::string_view text, Parse parse, std::string_view names) {
  try {
    return parse(text);
  } catch (const std::invalid_argument&) {
    throw usage_error(str(what) + " = '" + str(text) + "' is not one of " + str(names));
  }
}

/// An option whose value is one of `names`.
template <class E, class T>
CLI::Option* choices(CLI::App& app, std::string_view spec, T& target, std::vector<std::pair<std::string_view, E>> names,
                     std::string help) {
  return option(app, spec, target, [names](std::string_view f, std::string_view v) { return choice(f, v, names); },
                std::move(help));
}

/// A text option ("--trace FILE").
template <class T>
CLI::Option* text(CLI::App& app, std::string_view spec, T& target, std::string help) {
  return option(app, spec, target, [](std::string_view, std::string_view v) { return std::string(v); }, std::move(help));
}

/// A switch ("--json").
inline CLI::Option* flag(CLI::App& app, const std::string& name, bool& target, std::string help) {
  return app.add_flag(name, target, std::move(help))->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

/// The words of a positional argument or of a multi-word option ("--ladder linear 1 32 512").
inline CLI::Option* words(CLI::App& app, std::string_view spec, std::vector<std::string>& target, std::string help) {
  const std::size_t space = spec.find(' ');
  CLI::Option* o = app.add_option(str(spec.substr(0, space)), target, std::move(help));
  if (space != std::string_view::npos) o->type_name(str(spec.substr(space + 1)));
  return o;
}

/// How a program words CLI11's own errors (the option's name replaces {}): an unknown option,
/// an option without its value, a required option missing, an option given twice.
struct messages {
  std::string_view unknown = "unknown option '{}'";
  std::string_view needs_value = "{} needs a value";
  std::string_view required = "{} is required";
  std::string_view twice = "{} given twice";
};

namespace detail {
inline std::string fill(std::string_view form, std::string_view name) {
  const std::size_t at = form.find("{}");
  if (at == std::string_view::npos) return str(form);
  return str(form.substr(0, at)) + str(name) + str(form.substr(at + 2));
}
}  // namespace detail

/// Parses `args` (without the program's name) into `app`'s options. Returns false when --help
/// was asked for (the caller prints app.help() and exits 0); a bad command line throws
/// usage_error with one line.
inline bool parse(CLI::App& app, std::span<const std::string_view> args, const messages& m = {}) {
  std::vector<std::string> reversed;  // CLI11 takes the arguments last first
  for (auto a = args.rbegin(); a != args.rend(); ++a) reversed.emplace_back(*a);
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return false;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extra = app.remaining();
    throw usage_error(detail::fill(m.unknown, extra.empty() ? std::string() : extra.front()));
  } catch (const CLI::RequiredError& e) {
    const std::string what = e.what();
    const std::size_t at = what.find(" is required");
    if (at == std::string::npos) throw usage_error(what);
    throw usage_error(detail::fill(m.required, what.substr(0, at)));
  } catch (const CLI::ArgumentMismatch& e) {  // "--x: 1 required TEXT missing", "--x: At Most 1 required ..."
    const std::string what = e.what();
    const std::string name = what.substr(0, what.find(':'));
    throw usage_error(detail::fill(what.find("At Most") != std::string::npos ? m.twice : m.needs_value, name));
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    throw usage_error(what);
  }
  return true;
}

}  // namespace rungs::cli
