// rungs-plan plan-fleet --trace FILE --slo ttft_p99=2s,itl_p99=100ms [--router R] [--max-replicas N]:
// the fewest replicas whose simulated latencies meet the objective (planning::search_fleet:
// doubling, then bisection over replica counts; docs/planning.md states its monotonicity
// assumption and the neighbour checks), with the ladder, capture timing and graph memory of
// the fleet chosen.
//
//   $ rungs-plan plan-fleet --trace azure.csv --gpu h100-sxm --model llama-3-8b --slo ttft_p99=2s
//
// Every simulate option applies to each replica. The ladder is --ladder's (default vLLM's
// capture sizes to 512); the capture timing is --timing's, and --timing all searches each of
// the four and chooses the one needing the fewest replicas (ties: the lower value of the
// objective's first metric, then the order startup, delayed, lazy, idle). Exit 0 with a
// fleet, 1 when no fleet of at most --max-replicas meets the objective (the table of what
// was tried is printed either way), 2 for bad arguments.
//
// --disaggregated also searches disaggregated fleets (planning::search_disaggregated: P
// prefill replicas for the TTFT bounds, then D decode replicas), under the colocated search's
// capture timing, and chooses the fleet with fewer GPUs (ties: colocated, which moves no KV).
#include <rungs/planning/disaggregated.hpp>
#include <rungs/planning/fleet_search.hpp>

#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "disaggregate_args.hpp"
#include "json_line.hpp"
#include "planning_args.hpp"

namespace rungs::plan {
namespace {
using cli::json;

struct plan_fleet_args {
  simulation_args sim;
  router_args router;
  planning::service_objective objective;
  std::int32_t max_replicas = 64;
  bool json = false;
  bool disaggregated = false;
  disaggregate_args disagg;
};

// "ttft_p99=2s,itl_p99=100ms": each bound NAME=NUMBER followed by s or ms.
planning::service_objective parse_objective(std::string_view flag, std::string_view text) {
  cli::check_length(flag, text, planning::slo_metric_names.size());
  const std::string f(flag);
  std::string names;
  for (const auto& [name, metric] : planning::slo_metric_names) names += (names.empty() ? "" : ", ") + std::string(name);
  planning::service_objective o;
  for (std::string_view item : cli::split(text)) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw usage_error(f + ": '" + std::string(item) + "' is not NAME=DURATION (e.g. ttft_p99=2s)");
    const std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    std::optional<planning::slo_metric> metric;
    for (const auto& [n, m] : planning::slo_metric_names)
      if (n == name) metric = m;
    if (!metric) throw usage_error(f + ": '" + std::string(name) + "' is not one of " + names);
    for (const planning::slo_bound& b : o)
      if (b.metric == *metric) throw usage_error(f + ": " + std::string(name) + " is given twice");
    const bool ms = value.ends_with("ms");
    if (!ms && !value.ends_with("s"))
      throw usage_error(f + ": " + std::string(name) + " = '" + std::string(value) + "' needs a unit: s or ms (e.g. 2s, 100ms)");
    const double v = cli::number(f + ": " + std::string(name), value.substr(0, value.size() - (ms ? 2 : 1)));
    if (!(v > 0))
      throw usage_error(f + ": " + std::string(name) + " = '" + std::string(value) + "' must be a positive duration");
    o.push_back({.metric = *metric, .seconds = ms ? v / 1000 : v});
  }
  return o;
}

// A metric as simulate reports it: TTFT in seconds (3 decimals), inter-token latency in ms (2).
bool is_ttft(planning::slo_metric m) { return m <= planning::slo_metric::ttft_max; }
std::string key(planning::slo_metric m) { return std::string(to_string(m)) + (is_ttft(m) ? "_seconds" : "_ms"); }
std::string label(planning::slo_metric m) { return std::string(to_string(m)) + (is_ttft(m) ? " (s)" : " (ms)"); }
std::string shown(planning::slo_metric m, double seconds) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(is_ttft(m) ? 3 : 2) << (is_ttft(m) ? seconds : seconds * 1e3);
  return os.str();
}
std::string bound_text(const planning::slo_bound& b) {
  std::ostringstream os;
  os << to_string(b.metric) << " <= " << (is_ttft(b.metric) ? b.seconds : b.seconds * 1e3) << (is_ttft(b.metric) ? " s" : " ms");
  return os.str();
}

struct search {
  std::string timing;
  planning::fleet_search_result result;
};

// Largest graph memory and graph count of one replica of a fleet.
std::pair<std::int64_t, std::int64_t> graphs_per_replica(const planning::fleet_result& f) {
  std::int64_t bytes = 0, graphs = 0;
  for (const planning::simulation_result& s : f.replicas) {
    bytes = std::max(bytes, s.engine.capture_bytes);
    graphs = std::max(graphs, s.engine.captures);
  }
  return {bytes, graphs};
}

std::string mib(std::int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20);
  return os.str();
}

// The disaggregated search and how it compares (--disaggregated).
struct disaggregated_plan {
  std::string timing;
  planning::disaggregated_search_result result;
  bool chosen = false;  // fewer GPUs than the colocated fleet (or the only one meeting)
};

std::string metric_or_dash(const planning::disaggregated_trial& t, planning::slo_metric m) {
  if (t.decode == 0 && !is_ttft(m)) return "-";
  return shown(m, planning::slo_value(t.ttft, t.itl, m));
}

void print_disaggregated(std::ostream& out, const plan_fleet_args& a, const disaggregated_plan& d,
                         const std::optional<std::int32_t>& colocated) {
  const planning::disaggregation& p = a.disagg.plan;
  out << "disaggregated: prefill router " << planning::to_string(a.router.options.kind) << ", decode router "
      << planning::to_string(p.decode_router.kind) << ", KV link " << link_text(p.link) << "; capture timing "
      << d.timing << "\n";
  out << std::setw(8) << "prefill" << std::setw(8) << "decode";
  for (const planning::slo_bound& b : a.objective) out << std::setw(16) << label(b.metric);
  out << std::setw(10) << "rejected" << "  meets\n";
  for (const planning::disaggregated_trial& t : d.result.tried) {
    out << std::setw(8) << t.prefill << std::setw(8) << (t.decode == 0 ? std::string("-") : std::to_string(t.decode));
    for (const planning::slo_bound& b : a.objective) out << std::setw(16) << metric_or_dash(t, b.metric);
    out << std::setw(10) << t.rejected << "  " << (t.met ? "yes" : "no") << (t.decode == 0 ? " (TTFT bounds)" : "") << "\n";
  }
  const std::int64_t tp = a.sim.tp;
  if (!d.result.split) out << "no disaggregated fleet of at most " << a.max_replicas << " replicas a pool meets the objective\n";
  else
    out << "disaggregated fleet: " << d.result.split->first << ":" << d.result.split->second << " ("
        << d.result.split->first + d.result.split->second << " replicas, "
        << (d.result.split->first + d.result.split->second) * tp << " GPUs)\n";
  out << "choice: ";
  if (!colocated && !d.result.split) out << "none meets the objective\n";
  else if (d.chosen)
    out << "disaggregated " << d.result.split->first << ":" << d.result.split->second << " ("
        << (d.result.split->first + d.result.split->second) * tp << " GPUs)"
        << (colocated ? " against colocated " + std::to_string(*colocated * tp) + " GPUs" : std::string(", colocated misses"))
        << "\n";
  else
    out << "colocated " << *colocated << (*colocated == 1 ? " replica (" : " replicas (") << *colocated * tp << " GPUs)"
        << (!d.result.split ? std::string(", disaggregated misses")
            : " against disaggregated " + std::to_string((d.result.split->first + d.result.split->second) * tp) + " GPUs" +
                  (d.result.split->first + d.result.split->second == *colocated ? " (a tie: colocated moves no KV)" : ""))
        << "\n";
}

cli::json disaggregated_json(const plan_fleet_args& a, const disaggregated_plan& d) {
  const planning::disaggregation& p = a.disagg.plan;
  cli::json j = {{"timing", d.timing},
                 {"prefill_router", planning::to_string(a.router.options.kind)},
                 {"decode_router", planning::to_string(p.decode_router.kind)},
                 {"link_bytes_per_second", p.link.bytes_per_second},
                 {"link_latency_seconds", p.link.latency_seconds}};
  j["prefill"] = d.result.split ? cli::json(d.result.split->first) : cli::json(nullptr);
  j["decode"] = d.result.split ? cli::json(d.result.split->second) : cli::json(nullptr);
  j["gpus"] = d.result.split ? cli::json((d.result.split->first + d.result.split->second) * a.sim.tp) : cli::json(nullptr);
  j["tried"] = cli::json::array();
  for (const planning::disaggregated_trial& t : d.result.tried) {
    cli::json m = {{"prefill", t.prefill}, {"decode", t.decode}, {"met", t.met}};
    for (const planning::slo_bound& b : a.objective)
      m[key(b.metric)] = t.decode == 0 && !is_ttft(b.metric) ? cli::json(nullptr) : cli::json::parse(metric_or_dash(t, b.metric));
    m["rejected"] = t.rejected;
    j["tried"].push_back(std::move(m));
  }
  return j;
}

int plan_fleet(plan_fleet_args& a, std::ostream& out, std::ostream&) {
  check_simulation_args(a.sim);
  check_router_args(a.router, a.sim);
  if (a.disagg.given && !a.disaggregated)
    throw usage_error("--kv-link, --kv-link-latency and --decode-router apply to --disaggregated");
  const std::vector<serving::trace_request> trace = load_workload(a.sim);
  std::vector<std::string> timings;
  if (a.sim.timing == "all") timings = {"startup", "delayed", "lazy", "idle"};
  else timings = {a.sim.timing};
  std::vector<search> searches;
  for (const std::string& t : timings) {
    planning::simulation_config c = a.sim.config;
    c.timing = timing_policy(a.sim, t);
    searches.push_back({t, planning::search_fleet(c, trace, a.objective, a.router.options, a.max_replicas)});
  }
  // The fewest replicas; ties: the objective's first metric, then the listed order.
  const planning::slo_metric first = a.objective.front().metric;
  std::size_t best = 0;
  for (std::size_t k = 1; k < searches.size(); ++k) {
    const planning::fleet_search_result &x = searches[k].result, &y = searches[best].result;
    if (!x.replicas) continue;
    if (!y.replicas || *x.replicas < *y.replicas ||
        (*x.replicas == *y.replicas &&
         planning::slo_value(x.chosen().fleet, first) < planning::slo_value(y.chosen().fleet, first)))
      best = k;
  }
  const search& chosen = searches[best];
  const planning::fleet_trial& fleet = chosen.result.chosen();
  const auto [graph_bytes, graphs] = graphs_per_replica(fleet.fleet);
  std::string objective;
  for (const planning::slo_bound& b : a.objective) objective += (objective.empty() ? "" : ", ") + bound_text(b);
  const std::string router(planning::to_string(a.router.options.kind));
  const std::int32_t num_blocks = fleet.fleet.total.num_blocks;
  const std::string workload = describe(a.sim, trace.size(), num_blocks);
  std::optional<disaggregated_plan> disaggregated;
  if (a.disaggregated) {
    planning::simulation_config c = a.sim.config;
    c.timing = timing_policy(a.sim, chosen.timing);
    a.disagg.plan.prefill_router = a.router.options;
    disaggregated = disaggregated_plan{
        chosen.timing, planning::search_disaggregated(c, trace, a.objective, a.disagg.plan, a.max_replicas), false};
    const auto& split = disaggregated->result.split;
    disaggregated->chosen =
        split && (!chosen.result.replicas || split->first + split->second < *chosen.result.replicas);
  }
  const bool any = chosen.result.replicas || (disaggregated && disaggregated->result.split);

  if (a.json) {
    auto metrics = [&](const planning::fleet_trial& t) {
      json m = {{"replicas", t.replicas}, {"met", t.met}};
      for (const planning::slo_bound& b : a.objective) m[key(b.metric)] = json::parse(shown(b.metric, planning::slo_value(t.fleet, b.metric)));
      m["rejected"] = t.fleet.rejected;
      return m;
    };
    json all = {{"workload", workload}, {"router", router}, {"max_replicas", a.max_replicas}, {"objective", json::object()}};
    for (const planning::slo_bound& b : a.objective)
      all["objective"][key(b.metric)] = is_ttft(b.metric) ? b.seconds : b.seconds * 1e3;
    all["replicas"] = chosen.result.replicas ? json(*chosen.result.replicas) : json(nullptr);
    all["timing"] = chosen.timing;
    all["ladder"] = a.sim.ladder_text;
    all["rungs"] = a.sim.config.ladder.size();
    all["graphs_per_replica"] = graphs;
    all["graph_mib_per_replica"] = json::parse(mib(graph_bytes));
    all["graph_mib"] = json::parse(mib(fleet.fleet.total.engine.capture_bytes));
    all["monotone_above"] = chosen.result.monotone_above ? json(*chosen.result.monotone_above) : json(nullptr);
    all["fleet"] = metrics(fleet);
    all["tried"] = json::array();
    for (const search& s : searches)
      for (const planning::fleet_trial& t : s.result.tried) {
        json m = metrics(t);
        m["timing"] = s.timing;
        all["tried"].push_back(std::move(m));
      }
    if (disaggregated) {
      all["disaggregated"] = disaggregated_json(a, *disaggregated);
      all["choice"] = !any ? json(nullptr) : json(disaggregated->chosen ? "disaggregated" : "colocated");
    }
    cli::write_json_line(out, all);
  } else {
    out << "plan-fleet: " << workload << "; router " << router << "; objective " << objective << "\n";
    out << std::setw(8) << "replicas" << "  " << std::left << std::setw(8) << "timing" << std::right;
    for (const planning::slo_bound& b : a.objective) out << std::setw(16) << label(b.metric);
    out << std::setw(10) << "rejected" << "  meets\n";
    for (const search& s : searches)
      for (const planning::fleet_trial& t : s.result.tried) {
        out << std::setw(8) << t.replicas << "  " << std::left << std::setw(8) << s.timing << std::right;
        for (const planning::slo_bound& b : a.objective) out << std::setw(16) << shown(b.metric, planning::slo_value(t.fleet, b.metric));
        out << std::setw(10) << t.fleet.rejected << "  " << (t.met ? "yes" : "no") << "\n";
      }
    if (!chosen.result.replicas) {
      out << "no fleet of at most " << a.max_replicas << " replicas meets the objective\n";
      if (disaggregated) print_disaggregated(out, a, *disaggregated, chosen.result.replicas);
      return any ? 0 : 1;
    }
    const std::int32_t n = *chosen.result.replicas;
    out << "fleet: " << n << (n == 1 ? " replica" : " replicas") << ", router " << router << "; ladder "
        << a.sim.ladder_text << " (" << a.sim.config.ladder.size() << " rungs); capture timing " << chosen.timing
        << "; graph memory " << mib(graph_bytes) << " MiB per replica (" << graphs << " graphs), "
        << mib(fleet.fleet.total.engine.capture_bytes) << " MiB in all\n";
    out << "neighbours: "
        << (n == 1 ? std::string("1 is the fewest")
                   : n == 2 ? std::string("1 replica misses the objective") : std::to_string(n - 1) + " replicas miss the objective");
    if (chosen.result.monotone_above)
      out << "; " << n + 1 << " replicas " << (*chosen.result.monotone_above ? "meet it too" : "MISS it: latency is not monotone in replicas here");
    out << "\n";
    if (disaggregated) print_disaggregated(out, a, *disaggregated, chosen.result.replicas);
  }
  return any ? 0 : 1;
}

action define(CLI::App& app) {
  auto a = std::make_shared<plan_fleet_args>();
  add_simulation_options(app, a->sim);
  add_router_options(app, a->router);
  cli::option(app, "--slo NAME=DURATION[,...]", a->objective, parse_objective,
              "the objective, every bound must hold: NAME is ttft_ or itl_ with mean, p50, p90, p99 or max; "
              "DURATION a number with s or ms (e.g. ttft_p99=2s,itl_p99=100ms)")
      ->required()
      ->group("Fleet");
  cli::option(app, "--max-replicas N", a->max_replicas, [](std::string_view f, std::string_view v) {
        return static_cast<std::int32_t>(cli::integer_in(f, v, 1, 4096));
      }, "the largest fleet searched (default 64)")->group("Fleet");
  cli::flag(app, "--json", a->json, "print the result as one JSON object")->group("Output");
  cli::flag(app, "--disaggregated", a->disaggregated,
            "also search disaggregated fleets (P prefill : D decode replicas) and choose the one with fewer GPUs")
      ->group("Disaggregated");
  add_disaggregate_options(app, a->disagg);
  return [a](std::ostream& out, std::ostream& err) { return plan_fleet(*a, out, err); };
}

const registration reg{{"plan-fleet", "plan-fleet (--trace FILE | --chat N) --slo ttft_p99=2s[,itl_p99=100ms...] "
                                      "[--router R] [--max-replicas N] [--disaggregated] [--json] [more: see --help]",
                        "Finds the fewest replicas whose simulated latencies meet a service-level objective, with the "
                        "ladder, capture timing and graph memory chosen.",
                        define}};
}  // namespace
}  // namespace rungs::plan
