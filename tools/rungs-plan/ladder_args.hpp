// The LADDER words shared by rungs-plan's commands (range, lookup, waste, and later ones
// such as timeline, fit and simulate), so every command accepts the same ladders with the
// same errors:
//
//   linear MIN STEP MAX              Gaudi linear range with ramp-up
//   exponential MIN STEP MAX LIMIT   Gaudi exponential range
//   capture-sizes MAX                vLLM: 1 2 4, then every 8
//   vllm-v1 MAX                      later vLLM: every 8 below 256, every 16 from 256
//   sglang MAX                       SGLang: 1 2 4 8 12, every 8/16/32
//   trtllm MAX                       TensorRT-LLM: 1 2 4, every 8 to 128, then every 64
//   pow2 MIN MAX                     powers of two (MIN and MAX always included)
//   explicit R1,R2,...               the rungs themselves, one comma-separated word
//   file PATH                        the rungs of a 1-D bucket file, `(r,)` per line (fit writes one)
//
// A word that is not a number is a usage_error; numbers that break a ladder's rule raise
// the library's ladder_error ("linear ladder: step = 0 must be positive"). Both end as one
// line on stderr with exit status 2.
#pragma once

#include <rungs/ladder/bucket_file.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/pow2.hpp>

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"

namespace rungs::plan {

/// For synopses: the LADDER alternatives.
inline constexpr std::string_view ladder_synopsis =
    "LADDER = linear MIN STEP MAX | exponential MIN STEP MAX LIMIT | capture-sizes MAX | vllm-v1 MAX | "
    "sglang MAX | trtllm MAX | pow2 MIN MAX | explicit R1,R2,... | file PATH";

namespace detail {

struct ladder_form {
  std::string_view name;
  std::string_view params;  // as shown to the user
  std::size_t arity;        // number words after the name
};

inline constexpr ladder_form ladder_forms[] = {
    {"linear", "MIN STEP MAX", 3},      {"exponential", "MIN STEP MAX LIMIT", 4},
    {"capture-sizes", "MAX", 1},        {"vllm-v1", "MAX", 1},
    {"sglang", "MAX", 1},               {"trtllm", "MAX", 1},
    {"pow2", "MIN MAX", 2},             {"explicit", "R1,R2,...", 1},
    {"file", "PATH", 1},
};

inline std::string_view param_name(std::string_view params, std::size_t i) {
  for (; i > 0; --i) params = params.substr(params.find(' ') + 1);
  return params.substr(0, params.find(' '));
}

inline ladder explicit_ladder(std::string_view list) {
  Explicit<> e;
  std::size_t i = 0;
  for (;;) {
    const std::size_t comma = list.find(',');
    e.values.push_back(parse_integer("explicit rung " + std::to_string(++i), list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return ladder{e};
}

}  // namespace detail

/// Parses one LADDER from the front of `words`; `consumed` is set to the number of words it
/// used (the caller may have more arguments after it).
inline ladder parse_ladder(args_t words, std::size_t& consumed) {
  if (words.empty()) throw usage_error("missing LADDER (" + std::string(ladder_synopsis.substr(9)) + ")");
  const std::string_view name = words[0];
  const detail::ladder_form* form = nullptr;
  for (const detail::ladder_form& f : detail::ladder_forms)
    if (f.name == name) form = &f;
  if (form == nullptr) {
    std::string known;
    for (const detail::ladder_form& f : detail::ladder_forms) known += (known.empty() ? "" : ", ") + std::string(f.name);
    throw usage_error("unknown ladder '" + std::string(name) + "' (known: " + known + ")");
  }
  if (words.size() < 1 + form->arity) {
    throw usage_error(std::string(name) + " needs " + std::string(form->params) + " (" + std::to_string(form->arity) +
                      (form->arity == 1 ? " word" : " words") + "), got " + std::to_string(words.size() - 1));
  }
  consumed = 1 + form->arity;
  if (name == "explicit") return detail::explicit_ladder(words[1]);
  if (name == "file") {
    Explicit<> e;
    for (const bucket<1>& b : read_bucket_file<1>(std::string(words[1]))) e.values.push_back(b[0]);
    return ladder{e};
  }
  rung_t v[4] = {};
  for (std::size_t i = 0; i < form->arity; ++i)
    v[i] = parse_integer(std::string(name) + " " + std::string(detail::param_name(form->params, i)), words[1 + i]);
  if (name == "linear") return ladder{Linear{v[0], v[1], v[2]}};
  if (name == "exponential") return ladder{Exponential{v[0], v[1], v[2], v[3]}};
  if (name == "capture-sizes") return ladder{CaptureSizes::vllm(v[0])};
  if (name == "vllm-v1") return ladder{CaptureSizes::vllm_v1(v[0])};
  if (name == "sglang") return ladder{CaptureSizes::sglang(v[0])};
  if (name == "trtllm") return ladder{CaptureSizes::trtllm(v[0])};
  return ladder{Pow2{v[0], v[1]}};
}

/// Parses a LADDER that must use every word.
inline ladder parse_ladder(args_t words) {
  std::size_t consumed = 0;
  ladder l = parse_ladder(words, consumed);
  if (consumed < words.size())
    throw usage_error("unexpected '" + std::string(words[consumed]) + "' after " + std::string(words[0]) + " ladder");
  return l;
}

/// Parses the LADDER words of a positional argument or of --ladder; all of them.
inline ladder parse_ladder(const std::vector<std::string>& words) {
  const std::vector<std::string_view> views(words.begin(), words.end());
  return parse_ladder(args_t(views));
}

/// Adds the positional LADDER words to a command.
inline CLI::Option* ladder_words(CLI::App& app, std::vector<std::string>& words) {
  return cli::words(app, "LADDER", words, std::string(ladder_synopsis.substr(9)));
}

/// Refuses a graph cost whose total over `l`'s rungs (sum of BASE + PER_TOKEN x rung) does
/// not fit in 64 bits, before anything computes or prints it.
inline void check_graph_memory(std::string_view flag, std::int64_t base, std::int64_t per_token, const ladder& l) {
  std::int64_t total = 0;
  for (const rung_t r : l.rungs()) {
    std::int64_t graph = 0;
    if (__builtin_mul_overflow(per_token, r, &graph) || __builtin_add_overflow(graph, base, &graph) ||
        __builtin_add_overflow(total, graph, &total))
      throw usage_error(std::string(flag) + ": the graphs of the ladder's " + std::to_string(l.size()) +
                        " rungs would take more than 2^63 - 1 bytes (BASE + PER_TOKEN x rung, summed)");
  }
}

/// The rungs on one line, separated by single spaces.
inline void print_rungs(std::ostream& out, const ladder& l) {
  for (std::size_t i = 0; i < l.size(); ++i) out << (i ? " " : "") << l[i];
  out << "\n";
}

}  // namespace rungs::plan
