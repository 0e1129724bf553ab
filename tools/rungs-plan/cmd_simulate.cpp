// rungs-plan simulate: replays a workload through the scheduler, the KV allocator and the
// engine's capture policies with the cost model (rungs/planning/simulate.hpp), and reports
// startup, time to first token, inter-token latency, eager steps, graphs and the queue.
//
//   rungs-plan simulate --chat 14                         the blog's experiment, 14 chats
//   rungs-plan simulate --trace day.csv --timing all      the four capture timings side by side
//   rungs-plan simulate --chat 14 --dp 2                  two data-parallel ranks in lockstep
//   rungs-plan simulate --trace az.csv --disaggregate 1:3 one prefill replica, three decode ones
//   rungs-plan simulate --trace mc.jsonl --prefix-caching --tiers hbm,dram:8000000:50e9
//                                                         the pool, and host DRAM below it
//
// Output: a table with one column per timing; --json prints the same as one JSON object;
// --plot FILE.png draws it with scripts/plot_simulation.py (writing FILE.json beside it);
// --write-steps FILE writes the tokens of every step, one per line (input to waste and fit).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <rungs/planning/data_parallel.hpp>
#include <rungs/planning/fleet.hpp>

#include "command.hpp"
#include "disaggregate_args.hpp"
#include "json_line.hpp"
#include "planning_args.hpp"
#include "tier_args.hpp"

#ifndef RUNGS_PLOT_SCRIPT
#define RUNGS_PLOT_SCRIPT ""
#endif
#ifndef RUNGS_INSTALLED_PLOT_SCRIPT
#define RUNGS_INSTALLED_PLOT_SCRIPT ""
#endif

namespace rungs::plan {
namespace {
using cli::json;

struct simulate_args {
  simulation_args sim;
  bool json = false;
  std::string plot, write_steps;
  std::size_t first = 10;
  std::optional<std::int32_t> replicas;
  router_args router;
  std::optional<std::int32_t> dp;
  std::optional<std::pair<std::int32_t, std::int32_t>> disaggregate;
  disaggregate_args disagg;
};

// At most this many rejected requests are listed one by one in --json.
constexpr std::size_t listed_rejections = 100;

void add_options(CLI::App& app, simulate_args& a) {
  add_simulation_options(app, a.sim);
  cli::flag(app, "--json", a.json, "print the report as one JSON object")->group("Output");
  cli::option(app, "--plot FILE.png", a.plot, [](std::string_view f, std::string_view v) {
        if (!v.ends_with(".png")) throw usage_error(std::string(f) + " = '" + std::string(v) + "' must name a .png file");
        return std::string(v);
      }, "draw the runs with scripts/plot_simulation.py (FILE.json beside it)")->group("Output");
  cli::text(app, "--write-steps FILE", a.write_steps, "the tokens of every step, one per line")->group("Output");
  cli::option(app, "--first N", a.first, [](std::string_view f, std::string_view v) {
        return static_cast<std::size_t>(cli::positive(f, v));
      }, "report the mean TTFT of the first N requests (default 10)")->group("Output");
  cli::option(app, "--replicas N", a.replicas, [](std::string_view f, std::string_view v) {
        return static_cast<std::int32_t>(cli::integer_in(f, v, 1, 4096));
      }, "serve the workload with N replicas, each with its own scheduler, KV pool and graphs")->group("Fleet");
  add_router_options(app, a.router);
  cli::option(app, "--dp N", a.dp, [](std::string_view f, std::string_view v) {
        return static_cast<std::int32_t>(cli::integer_in(f, v, 1, 256));
      }, "N data-parallel ranks in lockstep (vLLM's DP mode: every step every rank runs the agreed bucket, an idle "
         "rank a dummy batch), against the same ranks stepping independently")->group("Data parallel");
  cli::option(app, "--disaggregate P:D", a.disaggregate, parse_split,
              "P prefill replicas and D decode replicas: a request's prompt and first token on a prefill replica "
              "(--router), its KV over --kv-link to a decode replica (--decode-router), which generates the rest")
      ->group("Disaggregated");
  add_disaggregate_options(app, a.disagg);
  cli::option(app, "--tiers " + std::string(tiers_syntax), a.sim.config.tiers, parse_tiers,
              "a prefix cache in tiers, top first: the first is the replica's KV pool (HBM), given as NAME alone or "
              "with its exact capacity in tokens; each other NAME:TOKENS:BYTES_PER_S (e.g. hbm,dram:8000000:50e9,"
              "ssd:30000000:6e9). Blocks the pool evicts are demoted, hits below it promoted, and their load (tokens x "
              "KV bytes per token / bandwidth) added to the step that admits the request; reports hits per tier and "
              "TTFT percentiles. Needs --prefix-caching; one replica")
      ->group("KV cache");
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string mib(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / (1 << 20), 1); }

struct row {
  std::string name;
  std::string key;  // JSON key
  std::vector<std::string> values;
};

// The report, one row per metric, one column per run: the table and the JSON share it.
// A hybrid model's runs add the KV it held against all-full attention.
std::vector<row> report(const std::vector<planning::simulation_result>& runs, std::size_t first, bool hybrid = false,
                        bool tiers = false) {
  std::vector<row> rows;
  auto add = [&](std::string name, std::string key, auto f) {
    row r{std::move(name), std::move(key), {}};
    for (const planning::simulation_result& s : runs) {
      r.values.push_back(f(s));
      // Every value is printed as a JSON number too: refuse what is not one (inf, nan).
      if (!json::accept(r.values.back()))
        throw usage_error("simulate: " + r.name + " = " + r.values.back() +
                          " is not a finite number: the cost model's values are too large");
    }
    rows.push_back(std::move(r));
  };
  using R = const planning::simulation_result&;
  add("startup (s)", "startup_seconds", [](R s) { return fixed(s.startup_seconds, 3); });
  add("TTFT first request (s)", "ttft_first_seconds", [](R s) { return fixed(s.ttft_first, 3); });
  add("TTFT first " + std::to_string(first) + ", mean (s)", "ttft_first_mean_seconds",
      [](R s) { return fixed(s.ttft_first_mean, 3); });
  add("TTFT mean (s)", "ttft_mean_seconds", [](R s) { return fixed(s.ttft.mean, 3); });
  if (tiers) {  // the TTFT a lower tier buys: its percentiles
    add("TTFT p50 (s)", "ttft_p50_seconds", [](R s) { return fixed(s.ttft.p50, 3); });
    add("TTFT p90 (s)", "ttft_p90_seconds", [](R s) { return fixed(s.ttft.p90, 3); });
  }
  add("TTFT p99 (s)", "ttft_p99_seconds", [](R s) { return fixed(s.ttft.p99, 3); });
  add("rejected requests", "rejected", [](R s) { return std::to_string(s.rejected); });
  add("ITL mean (ms)", "itl_mean_ms", [](R s) { return fixed(s.itl.mean * 1e3, 2); });
  add("ITL p99 (ms)", "itl_p99_ms", [](R s) { return fixed(s.itl.p99 * 1e3, 2); });
  add("ITL max (ms)", "itl_max_ms", [](R s) { return fixed(s.itl.max * 1e3, 2); });
  add("steps", "steps", [](R s) { return std::to_string(s.engine.steps); });
  add("eager steps", "eager_steps", [](R s) { return std::to_string(s.engine.eager_steps()); });
  add("  of which not captured yet", "eager_not_captured",
      [](R s) { return std::to_string(s.engine.eager_steps(engine::eager_reason::not_captured)); });
  add("  of which above the top rung", "eager_above_top",
      [](R s) { return std::to_string(s.engine.eager_steps(engine::eager_reason::above_top)); });
  add("  of which refused by the budget", "eager_refused",
      [](R s) { return std::to_string(s.engine.eager_steps(engine::eager_reason::refused)); });
  add("  of which failed captures", "eager_failed",
      [](R s) { return std::to_string(s.engine.eager_steps(engine::eager_reason::failed)); });
  add("graphs captured", "graphs", [](R s) { return std::to_string(s.engine.captures); });
  add("graph memory (MiB)", "graph_mib", [](R s) { return mib(s.engine.capture_bytes); });
  add("capture time in service (s)", "capture_seconds_in_service",
      [](R s) { return fixed(s.capture_seconds_in_service, 3); });
  add("padded tokens in replays (%)", "padded_percent", [](R s) {
    const std::int64_t all = s.engine.real_tokens + s.engine.padded_tokens;
    return fixed(all ? 100.0 * static_cast<double>(s.engine.padded_tokens) / static_cast<double>(all) : 0.0, 2);
  });
  add("last request done (s)", "end_seconds", [](R s) { return fixed(s.end_seconds, 2); });
  add("output tokens / s", "output_tokens_per_second",
      [](R s) { return fixed(s.end_seconds > 0 ? static_cast<double>(s.output_tokens) / s.end_seconds : 0.0, 1); });
  add("preemptions", "preemptions", [](R s) { return std::to_string(s.scheduler.preemptions); });
  add("max running", "max_running", [](R s) { return std::to_string(s.max_running); });
  add("max waiting for KV blocks", "max_waiting_for_blocks", [](R s) { return std::to_string(s.max_waiting_for_blocks); });
  add("mean waiting for KV blocks", "mean_waiting_for_blocks", [](R s) { return fixed(s.mean_waiting_for_blocks, 2); });
  add("time with requests waiting for KV (s)", "seconds_waiting_for_blocks",
      [](R s) { return fixed(s.seconds_waiting_for_blocks, 2); });
  add("peak KV usage (%)", "peak_kv_percent", [](R s) { return fixed(100.0 * s.peak_kv_usage, 1); });
  add("prefix-cache hit tokens", "prefix_hit_tokens", [](R s) { return std::to_string(s.scheduler.prefix_hit_tokens); });
  if (hybrid) {
    add("peak KV held (MiB)", "peak_kv_mib", [](R s) { return mib(s.peak_kv_bytes); });
    add("peak KV if every layer were full (MiB)", "peak_all_full_kv_mib", [](R s) { return mib(s.peak_all_full_kv_bytes); });
    add("KV saved vs all-full (%)", "kv_saved_percent", [](R s) { return fixed(100.0 * s.kv_saved, 1); });
  }
  if (tiers)
    add("load from lower tiers (s)", "tier_load_seconds", [](R s) {
      double load = 0;
      for (const planning::simulated_tier& t : s.tiers) load += t.load_seconds;
      return fixed(load, 3);
    });
  return rows;
}

// --tiers: each tier's hits, per run.
json tiers_json(const planning::simulation_result& s) {
  json list = json::array();
  for (const planning::simulated_tier& t : s.tiers)
    list.push_back({{"tier", t.tier.name}, {"capacity_tokens", t.tier.capacity_tokens}, {"bandwidth", t.tier.bandwidth},
                    {"hit_blocks", t.hit_blocks}, {"hit_tokens", t.hit_tokens}, {"hit_rate", t.hit_rate},
                    {"load_seconds", t.load_seconds}});
  return list;
}

void print_tiers(std::ostream& out, const std::vector<std::string>& timings,
                 const std::vector<planning::simulation_result>& runs) {
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const planning::simulation_result& s = runs[k];
    out << "\ntier (" << timings[k] << ")    capacity tokens  hit rate   hit tokens    load s\n";
    double all = 0;
    for (const planning::simulated_tier& t : s.tiers) {
      char line[256];
      std::snprintf(line, sizeof line, "%-18s %16lld %8.2f%% %12lld %9.3f\n", t.tier.name.c_str(),
                    static_cast<long long>(t.tier.capacity_tokens), 100 * t.hit_rate, static_cast<long long>(t.hit_tokens),
                    t.load_seconds);
      out << line;
      all += t.hit_rate;
    }
    out << "all tiers: hit rate " << fixed(100 * all, 2) << "% of " << s.tier_looked_up_blocks
        << " looked-up blocks (every admission's)\n";
  }
}

void print_table(std::ostream& out, const std::vector<std::string>& timings, const std::vector<row>& rows) {
  std::size_t name_width = 0;
  for (const row& r : rows) name_width = std::max(name_width, r.name.size());
  out << std::left << std::setw(static_cast<int>(name_width) + 2) << "timing";
  for (const std::string& t : timings) out << std::right << std::setw(10) << t;
  out << "\n";
  for (const row& r : rows) {
    out << std::left << std::setw(static_cast<int>(name_width) + 2) << r.name;
    for (const std::string& v : r.values) out << std::right << std::setw(10) << v;
    out << "\n";
  }
}

// A value as the table prints it, as a JSON number.
json number(const std::string& text) { return json::parse(text); }

// The runs as JSON; with `steps`, each run's step series (at most ~2000 points: every k-th).
json runs_json(const std::string& description, const std::vector<std::string>& timings, const std::vector<row>& rows,
               const std::vector<planning::simulation_result>& runs, bool steps,
               const std::vector<planning::fleet_result>& fleets = {}, std::size_t first = 10,
               std::string_view router = {}) {
  json all = {{"workload", description}, {"kv_blocks", runs.front().num_blocks}, {"runs", json::array()}};
  if (!fleets.empty()) {
    all["replicas"] = fleets.front().replicas.size();
    all["router"] = router;
  }
  for (std::size_t k = 0; k < runs.size(); ++k) {
    json run = {{"timing", timings[k]}};
    for (const row& r : rows) run[r.key] = number(r.values[k]);
    json rejected = json::array();
    for (const planning::request_record& q : runs[k].requests)
      if (!q.rejected.empty() && rejected.size() < listed_rejections)
        rejected.push_back({{"request", q.trace_index + 1}, {"reason", q.rejected}});
    run["rejected_requests"] = std::move(rejected);
    if (!runs[k].tiers.empty()) {
      run["tiers"] = tiers_json(runs[k]);
      run["tier_looked_up_blocks"] = runs[k].tier_looked_up_blocks;
    }
    if (!fleets.empty()) {  // per replica: every key of the report, as an array over the replicas
      const std::vector<row> per = report(fleets[k].replicas, first);
      json replicas = json::object();
      replicas["requests"] = json::array();
      for (const planning::simulation_result& s : fleets[k].replicas) replicas["requests"].push_back(s.requests.size());
      for (const row& r : per) {
        json values = json::array();
        for (const std::string& v : r.values) values.push_back(number(v));
        replicas[r.key] = std::move(values);
      }
      run["per_replica"] = std::move(replicas);
    }
    if (steps) {
      const planning::simulation_result& s = runs[k];
      const std::size_t every = s.steps.size() / 2000 + 1;
      using S = const planning::step_record&;
      auto series = [&](auto f) {
        json a = json::array();
        for (std::size_t i = 0; i < s.steps.size(); i += every) a.push_back(f(s.steps[i]));
        return a;
      };
      run["steps"] = {
          {"start", series([](S x) { return number(fixed(x.start, 4)); })},
          {"seconds", series([](S x) { return number(fixed(x.seconds(), 5)); })},
          {"tokens", series([](S x) { return x.tokens; })},
          {"running", series([](S x) { return x.running; })},
          {"waiting", series([](S x) { return x.waiting; })},
          {"waiting_for_blocks", series([](S x) { return x.waiting_for_blocks; })},
          {"kv_usage", series([&](S x) { return number(fixed(static_cast<double>(x.kv.live_blocks) / s.num_blocks, 4)); })},
          {"replay", series([](S x) { return x.replayed() ? 1 : 0; })}};
    }
    all["runs"].push_back(std::move(run));
  }
  return all;
}

void print_json(std::ostream& out, const std::string& description, const std::vector<std::string>& timings,
                const std::vector<row>& rows, const std::vector<planning::simulation_result>& runs, bool steps,
                const std::vector<planning::fleet_result>& fleets = {}, std::size_t first = 10,
                std::string_view router = {}) {
  cli::write_json_line(out, runs_json(description, timings, rows, runs, steps, fleets, first, router));
}

// What data-parallel lockstep costs against the same ranks stepping independently: the
// lockstep and independent figures side by side (each over all ranks), and the difference.
struct dp_row {
  std::string name, key;
  std::string lockstep, independent;
  double change;  // lockstep - independent
  int digits;
};

std::vector<dp_row> dp_report(const planning::data_parallel_result& d) {
  const planning::simulation_result& l = d.lockstep.total;
  const planning::simulation_result& i = d.independent.total;
  std::vector<dp_row> rows;
  auto add = [&](std::string name, std::string key, double lv, double iv, int digits) {
    rows.push_back({std::move(name), std::move(key), fixed(lv, digits), fixed(iv, digits), lv - iv, digits});
  };
  auto count = [](std::int64_t v) { return static_cast<double>(v); };
  auto padded = [](const planning::simulation_result& s) {
    return s.tokens_run ? 100.0 * static_cast<double>(s.tokens_run - s.scheduler.computed_tokens) / static_cast<double>(s.tokens_run)
                        : 0.0;
  };
  auto throughput = [](const planning::simulation_result& s) {
    return s.end_seconds > 0 ? static_cast<double>(s.output_tokens) / s.end_seconds : 0.0;
  };
  add("rank-steps", "rank_steps", count(l.engine.steps), count(i.engine.steps), 0);
  add("  of which dummy (padding only)", "dummy_steps", count(l.dummy_steps), count(i.dummy_steps), 0);
  add("token rows computed", "tokens_run", count(l.tokens_run), count(i.tokens_run), 0);
  add("  of which padding (%)", "padded_percent", padded(l), padded(i), 2);
  add("padded sequence rows in replays", "padded_rows", count(l.engine.padded_rows), count(i.engine.padded_rows), 0);
  add("last request done (s)", "end_seconds", l.end_seconds, i.end_seconds, 2);
  add("output tokens / s", "output_tokens_per_second", throughput(l), throughput(i), 1);
  add("TTFT mean (s)", "ttft_mean_seconds", l.ttft.mean, i.ttft.mean, 3);
  add("TTFT p99 (s)", "ttft_p99_seconds", l.ttft.p99, i.ttft.p99, 3);
  add("ITL mean (ms)", "itl_mean_ms", l.itl.mean * 1e3, i.itl.mean * 1e3, 2);
  add("ITL p99 (ms)", "itl_p99_ms", l.itl.p99 * 1e3, i.itl.p99 * 1e3, 2);
  for (const dp_row& r : rows)
    if (!json::accept(r.lockstep) || !json::accept(r.independent))
      throw usage_error("simulate: " + r.name + " is not a finite number: the cost model's values are too large");
  return rows;
}

void print_dp_table(std::ostream& out, const std::string& timing, const planning::data_parallel_result& d,
                    std::size_t first) {
  const std::vector<dp_row> rows = dp_report(d);
  const std::size_t ranks = d.lockstep.replicas.size();
  out << "\ndata parallel: " << ranks << " ranks, " << d.steps << " steps in lockstep (capture timing " << timing
      << "), against the same ranks stepping independently\n";
  std::size_t name_width = 0;
  for (const dp_row& r : rows) name_width = std::max(name_width, r.name.size());
  out << std::left << std::setw(static_cast<int>(name_width) + 2) << "all ranks" << std::right << std::setw(12)
      << "lockstep" << std::setw(13) << "independent" << std::setw(12) << "change" << "\n";
  for (const dp_row& r : rows) {
    std::string change = fixed(r.change, r.digits);  // (not literal + temporary: g++ 12's false -Wrestrict)
    if (r.change > 0) change.insert(0, "+");
    out << std::left << std::setw(static_cast<int>(name_width) + 2) << r.name << std::right << std::setw(12)
        << r.lockstep << std::setw(13) << r.independent << std::setw(12) << change << "\n";
  }
  const std::vector<row> per = report(d.lockstep.replicas, first);
  auto value = [&](std::string_view key, std::size_t k) {
    for (const row& r : per)
      if (r.key == key) return r.values[k];
    return std::string("?");
  };
  out << "\nrank  requests  dummy steps  token rows  TTFT p99 (s)  ITL p99 (ms)  last done (s)\n";
  for (std::size_t k = 0; k < ranks; ++k) {
    const planning::simulation_result& s = d.lockstep.replicas[k];
    out << std::setw(4) << k << std::setw(10) << s.requests.size() << std::setw(13) << s.dummy_steps << std::setw(12)
        << s.tokens_run << std::setw(14) << value("ttft_p99_seconds", k) << std::setw(14) << value("itl_p99_ms", k)
        << std::setw(15) << value("end_seconds", k) << "\n";
  }
}

// --json with --dp: print_json's object (the lockstep totals as each run), and per run
// "data_parallel": the ranks, steps, the comparison (lockstep and independent figures) and
// every report key per rank.
void print_dp_json(std::ostream& out, const std::string& description, const std::vector<std::string>& timings,
                   const std::vector<row>& rows, const std::vector<planning::simulation_result>& runs,
                   const std::vector<planning::data_parallel_result>& dps, std::size_t first) {
  std::ostringstream base;
  print_json(base, description, timings, rows, runs, false);
  json all = json::parse(base.str());
  all["dp"] = dps.front().lockstep.replicas.size();
  for (std::size_t k = 0; k < dps.size(); ++k) {
    const planning::data_parallel_result& d = dps[k];
    json lockstep = json::object(), independent = json::object();
    for (const dp_row& r : dp_report(d)) {
      lockstep[r.key] = number(r.lockstep);
      independent[r.key] = number(r.independent);
    }
    json ranks = json::object();
    ranks["requests"] = json::array();
    ranks["dummy_steps"] = json::array();
    ranks["tokens_run"] = json::array();
    for (const planning::simulation_result& s : d.lockstep.replicas) {
      ranks["requests"].push_back(s.requests.size());
      ranks["dummy_steps"].push_back(s.dummy_steps);
      ranks["tokens_run"].push_back(s.tokens_run);
    }
    for (const row& r : report(d.lockstep.replicas, first)) {
      json values = json::array();
      for (const std::string& v : r.values) values.push_back(number(v));
      ranks[r.key] = std::move(values);
    }
    all["runs"][k]["data_parallel"] = {{"ranks", d.lockstep.replicas.size()}, {"steps", d.steps},
                                       {"lockstep", std::move(lockstep)}, {"independent", std::move(independent)},
                                       {"per_rank", std::move(ranks)}};
  }
  cli::write_json_line(out, all);
}

// --- Disaggregated prefill and decode (--disaggregate P:D) ---------------------------------

// Each pool as one result: the report's rows over {prefill, decode}.
std::vector<row> pool_report(const planning::disaggregated_result& d, std::size_t first) {
  return report({d.prefill.fleet.total, d.decode.total}, first);
}

std::string value_of(const std::vector<row>& rows, std::string_view key, std::size_t k) {
  for (const row& r : rows)
    if (r.key == key) return r.values[k];
  return "?";
}

// The pools' lines and the transfers, after the table.
void print_pools(std::ostream& out, const planning::disaggregated_result& d, std::size_t first) {
  const std::vector<row> per = pool_report(d, first);
  out << "\npool     replicas  requests  rejected  first token p99 (s)  ITL p99 (ms)  last done (s)    steps"
         "  output tokens / s\n";
  const std::int32_t replicas[] = {d.plan.prefill, d.plan.decode};
  const std::size_t requests[] = {d.prefill.fleet.requests.size(), d.decode.requests.size()};
  for (std::size_t k = 0; k < 2; ++k)
    out << std::left << std::setw(7) << (k == 0 ? "prefill" : "decode") << std::right << std::setw(10) << replicas[k]
        << std::setw(10) << requests[k] << std::setw(10) << value_of(per, "rejected", k) << std::setw(21)
        << value_of(per, "ttft_p99_seconds", k) << std::setw(14) << value_of(per, "itl_p99_ms", k) << std::setw(15)
        << value_of(per, "end_seconds", k) << std::setw(9) << value_of(per, "steps", k) << std::setw(19)
        << value_of(per, "output_tokens_per_second", k) << "\n";
  out << "(a decode replica's first token is a request's second, from its KV's arrival)\n";
  out << "KV transfers: " << d.transfer.count << ", " << mib(d.prefill.transfer_bytes) << " MiB (one rank's), mean "
      << fixed(d.transfer.mean * 1e3, 2) << " ms, p99 " << fixed(d.transfer.p99 * 1e3, 2)
      << " ms; first to second token: mean " << fixed(d.handoff.mean * 1e3, 2) << " ms, p99 "
      << fixed(d.handoff.p99 * 1e3, 2) << " ms\n";
}

// --json with --disaggregate: runs_json's object, `disaggregate` (the plan) and per run `pools`
// (every report key of each pool), `kv_transfer` and `handoff`.
void print_disaggregated_json(std::ostream& out, const std::string& description, const std::vector<std::string>& timings,
                              const std::vector<row>& rows, const std::vector<planning::simulation_result>& runs,
                              const std::vector<planning::disaggregated_result>& ds, std::size_t first) {
  json all = runs_json(description, timings, rows, runs, false);
  const planning::disaggregation& p = ds.front().plan;
  all["disaggregate"] = {{"prefill", p.prefill}, {"decode", p.decode},
                         {"prefill_router", planning::to_string(p.prefill_router.kind)},
                         {"decode_router", planning::to_string(p.decode_router.kind)},
                         {"link_bytes_per_second", p.link.bytes_per_second},
                         {"link_latency_seconds", p.link.latency_seconds}};
  for (std::size_t k = 0; k < ds.size(); ++k) {
    const std::vector<row> per = pool_report(ds[k], first);
    json pools = {{"prefill", {{"replicas", p.prefill}, {"requests", ds[k].prefill.fleet.requests.size()}}},
                  {"decode", {{"replicas", p.decode}, {"requests", ds[k].decode.requests.size()}}}};
    for (const row& r : per) {
      pools["prefill"][r.key] = number(r.values[0]);
      pools["decode"][r.key] = number(r.values[1]);
    }
    json& run = all["runs"][k];
    run["pools"] = std::move(pools);
    run["kv_transfer"] = {{"count", ds[k].transfer.count}, {"bytes", ds[k].prefill.transfer_bytes},
                          {"mean_ms", number(fixed(ds[k].transfer.mean * 1e3, 3))},
                          {"p99_ms", number(fixed(ds[k].transfer.p99 * 1e3, 3))},
                          {"max_ms", number(fixed(ds[k].transfer.max * 1e3, 3))}};
    run["handoff"] = {{"count", ds[k].handoff.count}, {"mean_ms", number(fixed(ds[k].handoff.mean * 1e3, 3))},
                      {"p99_ms", number(fixed(ds[k].handoff.p99 * 1e3, 3))},
                      {"max_ms", number(fixed(ds[k].handoff.max * 1e3, 3))}};
  }
  cli::write_json_line(out, all);
}

// --disaggregate's flags against the others.
void check_disaggregate(simulate_args& a) {
  if (!a.disaggregate) {
    if (a.disagg.given) throw usage_error("--kv-link, --kv-link-latency and --decode-router apply to --disaggregate P:D");
    return;
  }
  if (a.replicas || a.dp)
    throw usage_error("--disaggregate P:D sizes both pools itself: leave out --replicas and --dp");
  if (!a.plot.empty()) throw usage_error("--plot draws one replica's steps: leave out --disaggregate");
  a.disagg.plan.prefill = a.disaggregate->first;
  a.disagg.plan.decode = a.disaggregate->second;
  a.disagg.plan.prefill_router = a.router.options;
}

std::string plot_script() {
  if (const char* e = std::getenv("RUNGS_PLOT_SCRIPT")) return e;
  for (const char* p : {RUNGS_PLOT_SCRIPT, RUNGS_INSTALLED_PLOT_SCRIPT})
    if (*p && std::filesystem::exists(p)) return p;
  return {};
}

int simulate(simulate_args& a, std::ostream& out, std::ostream& err) {
  check_simulation_args(a.sim);
  check_router_args(a.router, a.sim);
  if (!a.replicas && !a.disaggregate && (a.router.router_given || a.router.imbalance_given))
    throw usage_error("--router and --max-imbalance route between replicas: add --replicas N");
  check_disaggregate(a);
  if (!a.sim.config.tiers.empty()) {
    if (!a.sim.config.prefix_caching)
      throw usage_error("--tiers keeps the blocks the prefix cache evicts: add --prefix-caching");
    if (a.disaggregate)
      throw usage_error("--tiers models each replica's own cache, not the KV a prefill pool sends a decode pool: "
                        "leave out --disaggregate");
  }
  a.sim.config.first_requests = a.first;
  const std::vector<serving::trace_request> trace = load_workload(a.sim);
  std::vector<std::string> timings;
  if (a.sim.timing == "all") timings = {"startup", "delayed", "lazy", "idle"};
  else timings = {a.sim.timing};
  if (a.replicas && !a.plot.empty()) throw usage_error("--plot draws one replica's steps: leave out --replicas");
  if (!a.sim.config.layer_groups.empty() && (a.replicas || a.dp))
    throw usage_error("--layers with a pattern measures one replica's KV: leave out --replicas and --dp");
  if (a.dp) {
    if (a.replicas) throw usage_error("--dp N ranks share the trace as replicas do: give --dp or --replicas, not both");
    if (!a.plot.empty()) throw usage_error("--plot draws one replica's steps: leave out --dp");
    if (!a.sim.config.scheduler.chunked_prefill)
      throw usage_error("--dp: data-parallel ranks run one bucket per step in lockstep, which needs chunked prefill: "
                        "leave out --no-chunked-prefill");
  }
  std::vector<planning::simulation_result> runs;
  std::vector<planning::fleet_result> fleets;
  std::vector<planning::data_parallel_result> dps;
  std::vector<planning::disaggregated_result> disaggregated;
  for (const std::string& t : timings) {
    planning::simulation_config c = a.sim.config;
    c.timing = timing_policy(a.sim, t);
    c.record_steps = !a.plot.empty();
    if (a.disaggregate) {
      disaggregated.push_back(planning::simulate_disaggregated(c, trace, a.disagg.plan));
      runs.push_back(disaggregated.back().total);
    } else if (a.dp) {
      dps.push_back(planning::simulate_data_parallel(c, trace, *a.dp));
      runs.push_back(dps.back().lockstep.total);
    } else if (a.replicas) {
      fleets.push_back(planning::simulate_fleet(c, trace, *a.replicas, a.router.options));
      runs.push_back(fleets.back().total);
    } else {
      runs.push_back(planning::simulate(c, trace));
    }
  }
  const std::vector<row> rows = report(runs, a.first, !a.sim.config.layer_groups.empty(), !a.sim.config.tiers.empty());
  std::string description = describe(a.sim, trace.size(), runs.front().num_blocks);
  if (a.replicas)
    description += "; " + std::to_string(*a.replicas) + " replicas, " + std::string(planning::to_string(a.router.options.kind));
  if (a.dp) description += "; " + std::to_string(*a.dp) + " data-parallel ranks in lockstep";
  if (!runs.front().tiers.empty()) {
    std::ostringstream os;  // (not literal + temporary: g++ 12's false -Wrestrict)
    os << "; tiers";
    for (const planning::simulated_tier& t : runs.front().tiers) {
      os << " " << t.tier.name << " " << t.tier.capacity_tokens << " tokens";
      if (t.tier.bandwidth > 0) os << " at " << t.tier.bandwidth / 1e9 << " GB/s";
      else os << " (the KV pool)";
    }
    description += os.str();
  }
  if (a.disaggregate) {
    const planning::disaggregation& p = a.disagg.plan;
    std::ostringstream os;  // (not literal + temporary: g++ 12's false -Wrestrict)
    os << "; disaggregated " << p.prefill << ":" << p.decode << " (prefill " << planning::to_string(p.prefill_router.kind)
       << ", decode " << planning::to_string(p.decode_router.kind) << "), KV link " << link_text(p.link);
    description += os.str();
  }
  if (a.json && a.disaggregate) {
    print_disaggregated_json(out, description, timings, rows, runs, disaggregated, a.first);
  } else if (a.json && a.dp) {
    print_dp_json(out, description, timings, rows, runs, dps, a.first);
  } else if (a.json) {
    print_json(out, description, timings, rows, runs, false, fleets, a.first, planning::to_string(a.router.options.kind));
  } else {
    out << "simulate: " << description << "\n";
    print_table(out, timings, rows);
    if (!a.sim.config.tiers.empty()) print_tiers(out, timings, runs);
    if (!fleets.empty()) {  // one line per replica of the first run
      const std::vector<row> per = report(fleets.front().replicas, a.first);
      out << "\nreplica  requests  rejected  TTFT p99 (s)  ITL p99 (ms)  last done (s)  steps\n";
      auto value = [&](std::string_view key, std::size_t k) {
        for (const row& r : per)
          if (r.key == key) return r.values[k];
        return std::string("?");
      };
      for (std::size_t k = 0; k < fleets.front().replicas.size(); ++k)
        out << std::setw(7) << k << std::setw(10) << fleets.front().replicas[k].requests.size() << std::setw(10)
            << value("rejected", k) << std::setw(14) << value("ttft_p99_seconds", k) << std::setw(14)
            << value("itl_p99_ms", k) << std::setw(15) << value("end_seconds", k) << std::setw(7) << value("steps", k)
            << "\n";
    }
    if (!dps.empty()) print_dp_table(out, timings.front(), dps.front(), a.first);
    if (!disaggregated.empty()) print_pools(out, disaggregated.front(), a.first);
  }
  if (!a.write_steps.empty()) {
    std::ofstream f(a.write_steps);
    if (!f) throw usage_error("--write-steps " + a.write_steps + ": cannot open for writing");
    for (std::int64_t n : runs.front().step_tokens) f << n << "\n";
  }
  if (!a.plot.empty()) {
    const std::string data = a.plot.substr(0, a.plot.size() - 4) + ".json";
    {
      std::ofstream f(data);
      if (!f) throw usage_error("--plot " + a.plot + ": cannot write " + data);
      print_json(f, description, timings, rows, runs, true);
    }
    const std::string script = plot_script();
    if (script.empty()) {
      err << "rungs-plan: plot not drawn: scripts/plot_simulation.py not found (set RUNGS_PLOT_SCRIPT); data in " << data
          << "\n";
      return 1;
    }
    const std::string cmd = "python3 '" + script + "' '" + data + "' '" + a.plot + "'";
    if (std::system(cmd.c_str()) != 0) {
      err << "rungs-plan: plot not drawn (python3 with matplotlib is needed; see the message above); data in " << data
          << "\n";
      return 1;
    }
  }
  return 0;
}

action define(CLI::App& app) {
  auto a = std::make_shared<simulate_args>();
  add_options(app, *a);
  return [a](std::ostream& out, std::ostream& err) { return simulate(*a, out, err); };
}

const registration reg{{"simulate", "simulate (--trace FILE | --chat N) [--timing startup|delayed|lazy|idle|all] "
                                    "[--ladder LADDER] [--json] [--plot FILE.png] [--write-steps FILE] [more: see --help]",
                        "Replays a workload through the scheduler, the KV allocator and the engine's capture policies "
                        "with the cost model.",
                        define}};
}  // namespace
}  // namespace rungs::plan
