// rungs-plan fit: the ladder minimising padded work over observed step sizes, exactly
// (rungs/planning/fit.hpp), compared at the same rung count with the serving engines' ladders.
//
//   rungs-plan fit --trace steps.txt --rungs 16          one step size per line
//   rungs-plan fit --trace chat.csv --graph-memory 1G    a workload: simulated, then fitted
//   rungs-plan fit --trace prompts.txt --rungs 24        two numbers per line: a [bs, seq] grid
//
// --trace takes a list of values (one per line, or "bs seq" pairs for a 2-D grid) or a
// workload trace (CSV with a header, JSON lines), which is simulated first with the options
// of rungs-plan simulate (--chat N works too): the values are then the tokens of every step.
// --write-bucket-file F writes the fitted ladder (or grid) as a bucket file, --explicit
// prints it as an `explicit R1,R2,...` LADDER for the other commands.
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/planning/fit.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "json_line.hpp"
#include "planning_args.hpp"

namespace rungs::plan {
namespace {
using cli::json;

struct fit_args {
  simulation_args sim;
  std::optional<std::int64_t> rungs, graph_memory, top;
  std::string bucket_file;
  bool explicit_list = false, json = false;
};

void add_options(CLI::App& app, fit_args& a) {
  cli::option(app, "--rungs K", a.rungs, cli::positive, "fit K rungs (or grid buckets)")->group("Fit");
  cli::option(app, "--graph-memory BYTES", a.graph_memory, cli::size, "fit as many rungs as this graph memory holds")
      ->group("Fit");
  cli::option(app, "--top N", a.top, cli::positive, "the top rung (default: the largest value)")->group("Fit");
  cli::text(app, "--write-bucket-file F", a.bucket_file, "write the fitted ladder or grid as a bucket file")->group("Fit");
  cli::flag(app, "--explicit", a.explicit_list, "print the fit as an `explicit R1,R2,...` LADDER")->group("Fit");
  cli::flag(app, "--json", a.json, "print the fit as JSON")->group("Fit");
  add_simulation_options(app, a.sim, false);
}

void check(const fit_args& a) {
  if (a.rungs.has_value() == a.graph_memory.has_value())
    throw usage_error("fit needs exactly one budget: --rungs K or --graph-memory BYTES");
  if (a.rungs && *a.rungs > static_cast<std::int64_t>(max_rungs))
    throw usage_error("--rungs = " + std::to_string(*a.rungs) + " must be at most 65536");
  if (!a.sim.trace && !a.sim.chat) throw usage_error("fit needs values: --trace FILE (values or a workload) or --chat N");
}

// The observed values: a file of values (1-D or [bs, seq] pairs), or a simulated workload's
// tokens per step.
struct observed {
  planning::size_histogram one;
  std::vector<planning::grid_value> two;
  bool grid = false;
  std::string source;
};

bool is_values_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("--trace " + path + ": cannot open: " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view s = serving::detail::trim(line);
    if (s.empty() || s.front() == '#') continue;
    return s.front() >= '0' && s.front() <= '9';
  }
  throw usage_error("--trace " + path + ": no values");
}

observed read_values(const std::string& path) {
  observed o;
  o.source = path;
  std::ifstream in(path);
  std::string line;
  int dims = 0;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    std::string_view s = line;
    if (const std::size_t hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    s = serving::detail::trim(s);
    if (s.empty()) continue;
    std::vector<long long> v;
    while (!s.empty()) {
      const std::size_t sep = s.find_first_of(" \t,");
      const std::string where = path + ":" + std::to_string(number);
      const long long x = parse_integer(where + ": value", s.substr(0, sep));
      if (x < 1 || x > max_rung) throw usage_error(where + ": value = " + std::to_string(x) + " must be in [1, 2147483647]");
      v.push_back(x);
      s = sep == std::string_view::npos ? std::string_view{} : serving::detail::trim(s.substr(sep + 1));
      while (!s.empty() && s.front() == ',') s = serving::detail::trim(s.substr(1));
    }
    const int d = static_cast<int>(v.size());
    if (d > 2 || (dims != 0 && d != dims))
      throw usage_error(path + ":" + std::to_string(number) + ": " + std::to_string(d) + " values; every line needs " +
                        (dims ? std::to_string(dims) : std::string("1 (a size) or 2 (bs seq)")));
    dims = d;
    if (d == 1) o.one.add(v[0]);
    else o.two.push_back({v[0], v[1], 1});
  }
  o.grid = dims == 2;
  return o;
}

observed simulate_values(fit_args& a) {
  check_simulation_args(a.sim);
  planning::simulation_config c = a.sim.config;
  c.timing = timing_policy(a.sim, a.sim.timing == "all" ? "startup" : a.sim.timing);
  c.record_steps = false;
  const std::vector<serving::trace_request> trace = load_workload(a.sim);
  const planning::simulation_result r = planning::simulate(c, trace);
  observed o;
  for (std::int64_t n : r.step_tokens) o.one.add(n);
  o.source = std::to_string(r.step_tokens.size()) + " steps of a simulated workload (" + std::to_string(trace.size()) +
             " requests)";
  return o;
}

std::string percent(double f) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100.0 * f << "%";
  return os.str();
}
std::string fixed(double v, int d) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(d) << v;
  return os.str();
}
std::string join(std::span<const rung_t> r, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? sep : "") + std::to_string(r[i]);
  return s;
}

struct compared {
  std::string name;
  std::vector<rung_t> rungs;
  planning::ladder_cost cost;
  planning::fitted_ladder fitted;  // at the same rung count
};

int fit_1d(const fit_args& a, const observed& o, std::ostream& out) {
  const std::vector<planning::value_count> v = o.one.values();
  const rung_t top = a.top.value_or(0);
  const rung_t max = a.top.value_or(v.back().value);
  const planning::cost_model& cost = a.sim.config.cost;
  const planning::fitted_ladder f =
      a.rungs ? planning::fit_ladder(v, static_cast<std::size_t>(*a.rungs), top)
              : planning::fit_ladder_to_memory(v, *a.graph_memory, {cost.graph_bytes, cost.graph_bytes_per_token}, top);

  std::vector<compared> rows;
  auto add = [&](std::string name, const rungs::ladder& l) {
    check_graph_memory("--graph-cost", cost.graph_bytes, cost.graph_bytes_per_token, l);
    std::vector<rung_t> r(l.rungs().begin(), l.rungs().end());
    planning::ladder_cost c = planning::evaluate_ladder(r, v);
    planning::fitted_ladder same = planning::fit_ladder(v, r.size(), top);
    rows.push_back({std::move(name), std::move(r), c, std::move(same)});
  };
  const auto log2_limit = static_cast<rung_t>(std::ceil(std::log2(static_cast<double>(max)))) + 1;
  add("vllm (capture-sizes " + std::to_string(max) + ")", rungs::ladder{CaptureSizes::vllm(max)});
  add("sglang " + std::to_string(max), rungs::ladder{CaptureSizes::sglang(max)});
  add("trtllm " + std::to_string(max), rungs::ladder{CaptureSizes::trtllm(max)});
  add("gaudi linear 1 32 " + std::to_string(max), rungs::ladder{Linear{1, 32, max}});
  add("gaudi exponential 1 1 " + std::to_string(max) + " " + std::to_string(log2_limit),
      rungs::ladder{Exponential{1, 1, max, log2_limit}});

  // The fewest fitted rungs reaching vLLM's padded fraction (padding never grows with rungs).
  const compared& vllm = rows.front();
  std::size_t lo = 1, hi = vllm.rungs.size();
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (planning::fit_ladder(v, mid, top).cost.padding <= vllm.cost.padding) hi = mid;
    else lo = mid + 1;
  }
  const planning::fitted_ladder fewest = planning::fit_ladder(v, lo, top);

  if (a.json) {
    auto ladder_json = [&](const std::vector<rung_t>& r, const planning::ladder_cost& c) {
      return json{{"rungs", r},
                  {"count", r.size()},
                  {"padded_fraction", json::parse(fixed(c.padded_fraction(), 6))},
                  {"eager", c.eager},
                  {"capture_seconds", json::parse(fixed(cost.capture_time(r), 3))},
                  {"graph_bytes", cost.graph_memory(r)}};
    };
    json others = json::array();
    for (const compared& r : rows)
      others.push_back({{"ladder", r.name},
                          {"preset", ladder_json(r.rungs, r.cost)},
                          {"fitted_same_rungs", ladder_json(r.fitted.rungs, r.fitted.cost)}});
    cli::write_json_line(out, json{{"values", o.one.total()},
                                   {"distinct", o.one.distinct()},
                                   {"max", v.back().value},
                                   {"fitted", ladder_json(f.rungs, f.cost)},
                                   {"compared", std::move(others)},
                                   {"fewest_rungs_matching_vllm", ladder_json(fewest.rungs, fewest.cost)}});
  } else {
    out << "fit: " << o.source << ": " << o.one.total() << " values, " << o.one.distinct() << " distinct, max "
        << v.back().value << "\n";
    out << "fitted ladder (" << f.rungs.size() << " rungs): " << join(f.rungs, " ") << "\n";
    out << "padded " << percent(f.padded_fraction()) << ", capture " << fixed(cost.capture_time(f.rungs), 2) << " s, graphs "
        << fixed(static_cast<double>(cost.graph_memory(f.rungs)) / (1 << 20), 1) << " MiB\n\n";
    out << std::left << std::setw(34) << "ladder" << std::right << std::setw(6) << "rungs" << std::setw(9) << "padded"
        << std::setw(7) << "eager" << std::setw(11) << "capture s" << std::setw(11) << "graph MiB" << std::setw(16)
        << "fitted, same" << "\n";
    for (const compared& r : rows)
      out << std::left << std::setw(34) << r.name << std::right << std::setw(6) << r.rungs.size() << std::setw(9)
          << percent(r.cost.padded_fraction()) << std::setw(7) << r.cost.eager << std::setw(11)
          << fixed(cost.capture_time(r.rungs), 2) << std::setw(11)
          << fixed(static_cast<double>(cost.graph_memory(r.rungs)) / (1 << 20), 1) << std::setw(16)
          << percent(r.fitted.padded_fraction()) << "\n";
    out << "\nfewest fitted rungs with at most vLLM's padding: " << fewest.rungs.size() << " (padded "
        << percent(fewest.padded_fraction()) << ", against " << vllm.rungs.size() << " rungs at "
        << percent(vllm.cost.padded_fraction()) << ")\n";
  }
  if (a.explicit_list) out << "explicit " << join(f.rungs, ",") << "\n";
  if (!a.bucket_file.empty()) {
    std::ofstream file(a.bucket_file);
    if (!file) throw usage_error("--write-bucket-file " + a.bucket_file + ": cannot open for writing");
    file << "# fitted by rungs-plan fit over " << o.source << ": " << f.rungs.size() << " rungs, padded "
         << percent(f.padded_fraction()) << "\n";
    for (rung_t r : f.rungs) file << "(" << r << ",)\n";
  }
  return 0;
}

int fit_2d(const fit_args& a, const observed& o, std::ostream& out) {
  if (a.graph_memory) throw usage_error("--graph-memory fits 1-D ladders; give a 2-D grid a bucket count with --rungs K");
  if (a.top) throw usage_error("--top applies to 1-D ladders");
  const planning::fitted_grid g = planning::fit_grid(o.two, static_cast<std::size_t>(*a.rungs));
  rung_t max_bs = 0, max_seq = 0;
  for (const planning::grid_value& v : o.two) max_bs = std::max(max_bs, v.bs), max_seq = std::max(max_seq, v.seq);
  const rung_t seq_min = std::min<rung_t>(128, max_seq);
  const rungs::ladder gb{Linear{1, 32, max_bs}}, gs{Linear{seq_min, seq_min, max_seq}};
  const std::vector<rung_t> lb(gb.rungs().begin(), gb.rungs().end()), ls(gs.rungs().begin(), gs.rungs().end());
  const planning::ladder_cost gaudi = planning::evaluate_grid(lb, ls, o.two);
  const planning::fitted_grid same = planning::fit_grid(o.two, lb.size() * ls.size());
  if (a.json) {
    const json padded = json::parse(fixed(g.padded_fraction(), 6));
    cli::write_json_line(
        out, json{{"values", o.two.size()},
                  {"fitted", {{"bs", g.bs}, {"seq", g.seq}, {"buckets", g.buckets()}, {"padded_fraction", padded},
                              {"exact", g.exact}}},
                  {"gaudi_linear", {{"buckets", lb.size() * ls.size()},
                                    {"padded_fraction", json::parse(fixed(gaudi.padded_fraction(), 6))},
                                    {"fitted_same_buckets", json::parse(fixed(same.padded_fraction(), 6))}}}});
  } else {
    out << "fit: " << o.source << ": " << o.two.size() << " [bs, seq] values\n";
    out << "fitted grid (" << g.bs.size() << " x " << g.seq.size() << " = " << g.buckets() << " buckets, "
        << (g.exact ? "exact" : "local optimum") << "): bs " << join(g.bs, " ") << "; seq " << join(g.seq, " ") << "\n";
    out << "padded " << percent(g.padded_fraction()) << " of tokens\n";
    out << "gaudi linear grid (bs 1 32 " << max_bs << " x seq " << seq_min << " " << seq_min << " " << max_seq
        << "): " << lb.size() * ls.size() << " buckets, padded " << percent(gaudi.padded_fraction())
        << "; fitted with as many: " << percent(same.padded_fraction()) << "\n";
  }
  if (a.explicit_list)
    out << "explicit bs " << join(g.bs, ",") << "; explicit seq " << join(g.seq, ",") << "\n";
  if (!a.bucket_file.empty()) {
    std::ofstream file(a.bucket_file);
    if (!file) throw usage_error("--write-bucket-file " + a.bucket_file + ": cannot open for writing");
    file << "# fitted by rungs-plan fit over " << o.source << ": " << g.buckets() << " [bs, seq] buckets, padded "
         << percent(g.padded_fraction()) << "\n";
    // Gaudi's 3-D format (batch, query, context blocks): prompt buckets without cached context,
    // which `buckets --file` and the demo's --ladder gaudi-file read.
    file << "([" << join(g.bs, ", ") << "], [" << join(g.seq, ", ") << "], 0)\n";
  }
  return 0;
}

int fit(fit_args& a, std::ostream& out) {
  check(a);
  const bool values = a.sim.trace && is_values_file(*a.sim.trace);
  if (values && (a.sim.chat || a.sim.timing != "startup"))
    throw usage_error("--trace " + *a.sim.trace + " holds values: the simulation options do not apply");
  const observed o = values ? read_values(*a.sim.trace) : simulate_values(a);
  return o.grid ? fit_2d(a, o, out) : fit_1d(a, o, out);
}

action define(CLI::App& app) {
  auto a = std::make_shared<fit_args>();
  add_options(app, *a);
  return [a](std::ostream& out, std::ostream&) { return fit(*a, out); };
}

const registration reg{{"fit", "fit (--trace FILE | --chat N ...) (--rungs K | --graph-memory BYTES) [--top N] "
                               "[--write-bucket-file F] [--explicit] [--json]",
                        "The ladder minimising padded work over observed step sizes, compared with the serving "
                        "engines' ladders.",
                        define}};
}  // namespace
}  // namespace rungs::plan
