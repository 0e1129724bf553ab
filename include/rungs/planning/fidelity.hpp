// fidelity: the simulator checked against published serving measurements.
//
// A published figure is one number a serving engine's authors measured (output throughput,
// median TTFT, ITL or TPOT) with the run that produced it: GPU, model, tensor parallelism, the
// benchmark's workload (serving/benchmark_workload.hpp) and the engine's scheduler settings.
// read_published reads them from a CSV (benchmarks/fidelity/published.csv, one figure a row,
// its source URL beside it); replay runs each distinct run once through planning::simulate with
// the roofline of a cost_profile and reads the same figure off the simulation; fit_profile fits
// a profile's constants on the rows marked `fit`, and evaluate reports the error of every row,
// with the median over the held-out ones (docs/planning.md, "Fidelity").
#pragma once

#include <rungs/kv/capacity.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/planning/cost_model.hpp>
#include <rungs/planning/simulate.hpp>
#include <rungs/serving/benchmark_workload.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::planning {

enum class fidelity_metric { output_throughput, ttft_p50, itl_p50, tpot_p50 };

/// The metrics as the CSV names them: output tokens/s, and milliseconds.
inline constexpr std::array<std::string_view, 4> fidelity_metric_names = {"output_throughput", "ttft_p50_ms", "itl_p50_ms",
                                                                          "tpot_p50_ms"};
inline constexpr std::string_view to_string(fidelity_metric m) { return fidelity_metric_names[static_cast<std::size_t>(m)]; }

/// One measured benchmark run: where it ran and what it was sent.
struct published_run {
  std::string engine, gpu, model;  ///< gpu and model: cost_presets names
  std::int64_t tp = 1;
  serving::benchmark_workload workload{};
  bool chunked_prefill = false;     ///< mixed prefill and decode steps (false: separate prefill steps)
  std::int32_t max_batched_tokens = 16384;
  std::int32_t max_num_seqs = 256;
  std::int32_t graph_max_bs = 256;  ///< decode batches captured as graphs (vLLM's capture sizes up to it)
  std::int32_t max_model_len = 4096;
  double memory_fraction = 0.9;     ///< of the GPU's memory for weights and KV (gpu_memory_utilization, mem_frac)
};

struct published_figure {
  std::string id;
  bool fit = false;                 ///< on the fit half (false: held out)
  published_run run;
  std::string run_key;              ///< the run's columns: equal keys, one replay
  fidelity_metric metric = fidelity_metric::output_throughput;
  double value = 0;
  bool replayed = true;             ///< false: written down only (note says why)
  std::string source, note;
  std::size_t line = 0;
};

/// The CSV's columns, in order; `note` is the rest of the line (it may hold commas).
inline constexpr std::array<std::string_view, 22> published_columns = {
    "id",      "split",        "engine",      "gpu",             "model",              "tp",
    "dataset", "requests",     "rate",        "input_mean",      "output_mean",        "chunked_prefill",
    "max_batched_tokens", "max_num_seqs", "graph_max_bs", "max_model_len", "memory_fraction", "metric",
    "published", "replayed",   "source",      "note"};

namespace detail {
[[noreturn]] inline void published_fail(std::string_view file, std::size_t line, const std::string& why) {
  throw std::invalid_argument(std::string(file) + ":" + std::to_string(line) + ": " + why);
}
}  // namespace detail

/// Reads published figures: a header line with published_columns, then one figure a line
/// ('#' lines and blank lines skipped). Throws std::invalid_argument "file:line: reason".
inline std::vector<published_figure> read_published(std::string_view text, std::string_view file) {
  std::vector<published_figure> figures;
  std::size_t line = 0;
  bool header = false;
  while (!text.empty()) {
    ++line;
    const std::size_t eol = text.find('\n');
    std::string_view row = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.empty() || row.front() == '#') continue;
    std::vector<std::string_view> f;
    for (std::size_t k = 0; k + 1 < published_columns.size(); ++k) {
      const std::size_t comma = row.find(',');
      if (comma == std::string_view::npos)
        detail::published_fail(file, line, "expected " + std::to_string(published_columns.size()) + " columns, found " +
                                               std::to_string(f.size() + 1));
      f.push_back(row.substr(0, comma));
      row = row.substr(comma + 1);
    }
    f.push_back(row);
    if (!header) {
      for (std::size_t k = 0; k < published_columns.size(); ++k)
        if (f[k] != published_columns[k])
          detail::published_fail(file, line, "column " + std::to_string(k + 1) + " is '" + std::string(f[k]) + "', expected '" +
                                                 std::string(published_columns[k]) + "'");
      header = true;
      continue;
    }
    auto number = [&](std::size_t k, double lo, double hi) {
      double v = 0;
      const auto [end, ec] = std::from_chars(f[k].data(), f[k].data() + f[k].size(), v);
      if (f[k].empty() || ec != std::errc() || end != f[k].data() + f[k].size() || !(v >= lo && v <= hi))
        detail::published_fail(file, line, std::string(published_columns[k]) + " = '" + std::string(f[k]) +
                                               "' is not a number in [" + detail::number_text(lo) + ", " +
                                               detail::number_text(hi) + "]");
      return v;
    };
    auto integer = [&](std::size_t k, double lo, double hi) {
      const double v = number(k, lo, hi);
      if (v != std::floor(v)) detail::published_fail(file, line, std::string(published_columns[k]) + " = " + std::string(f[k]) + " is not an integer");
      return static_cast<std::int64_t>(v);
    };
    auto one_of = [&](std::size_t k, std::initializer_list<std::string_view> allowed) {
      std::size_t i = 0;
      std::string list;
      for (std::string_view a : allowed) {
        if (f[k] == a) return i;
        list += (list.empty() ? "" : ", ") + std::string(a);
        ++i;
      }
      detail::published_fail(file, line, std::string(published_columns[k]) + " = '" + std::string(f[k]) + "' is not one of " + list);
    };
    published_figure p;
    p.line = line;
    p.id = std::string(f[0]);
    if (p.id.empty()) detail::published_fail(file, line, "id is empty");
    p.fit = one_of(1, {"held-out", "fit"}) == 1;
    published_run& r = p.run;
    r.engine = std::string(f[2]);
    r.gpu = std::string(f[3]);
    r.model = std::string(f[4]);
    r.tp = integer(5, 1, 1024);
    r.workload.lengths = one_of(6, {"fixed", "sharegpt"}) == 0 ? serving::benchmark_lengths::fixed : serving::benchmark_lengths::sharegpt;
    r.workload.requests = integer(7, 1, 1e7);
    r.workload.rate = f[8] == "inf" ? 0.0 : number(8, 1e-6, 1e6);
    r.workload.input_mean = number(9, 1, 1e6);
    r.workload.output_mean = number(10, 1, 1e6);
    r.chunked_prefill = one_of(11, {"0", "1"}) == 1;
    r.max_batched_tokens = static_cast<std::int32_t>(integer(12, 1, 1 << 24));
    r.max_num_seqs = static_cast<std::int32_t>(integer(13, 1, 1 << 20));
    r.graph_max_bs = static_cast<std::int32_t>(integer(14, 1, 1 << 16));
    r.max_model_len = static_cast<std::int32_t>(integer(15, 1, 1 << 24));
    r.memory_fraction = number(16, 0.01, 1);
    p.metric = static_cast<fidelity_metric>(one_of(17, {fidelity_metric_names[0], fidelity_metric_names[1],
                                                        fidelity_metric_names[2], fidelity_metric_names[3]}));
    p.value = number(18, 1e-9, 1e12);
    p.replayed = one_of(19, {"no", "yes"}) == 1;
    p.source = std::string(f[20]);
    p.note = std::string(f[21]);
    if (!p.source.starts_with("https://")) detail::published_fail(file, line, "source = '" + p.source + "' must be an https:// URL");
    try {
      r.workload.validate();
    } catch (const std::invalid_argument& e) {
      detail::published_fail(file, line, e.what());
    }
    for (std::size_t k = 2; k <= 16; ++k) p.run_key += std::string(f[k]) + ",";
    for (const published_figure& q : figures)
      if (q.id == p.id) detail::published_fail(file, line, "id '" + p.id + "' is already used on line " + std::to_string(q.line));
    figures.push_back(std::move(p));
  }
  if (!header) detail::published_fail(file, line, "no header line (" + std::to_string(published_columns.size()) + " columns: id,split,...)");
  return figures;
}

/// The metrics of one replayed run (milliseconds for the latencies).
struct replayed_run {
  std::array<double, 4> values{};
  double operator[](fidelity_metric m) const { return values[static_cast<std::size_t>(m)]; }
};

/// The simulation of `run`: the roofline of its GPU and model under `profile`, its KV memory as
/// vLLM computes it (memory_fraction of the GPU less the weights), 16-token blocks, decode
/// graphs up to graph_max_bs captured at startup at no cost (a benchmark starts on a warm
/// server), no prefix caching (the benchmarks' prompts share none).
inline simulation_config replay_config(const published_run& run, const cost_presets& presets, const cost_profile& profile) {
  const gpu_spec& g = presets.gpu(run.gpu);
  const model_spec& m = presets.model(run.model);
  cost_model base;
  base.capture_seconds = 0;
  base.capture_seconds_per_token = 0;
  simulation_config c;
  c.cost = roofline_cost(g, m, run.tp, base, profile);
  c.model = kv_geometry(m, run.tp);
  c.kv_bytes = kv::kv_memory({.total_bytes = g.memory_bytes, .gpu_memory_utilization = run.memory_fraction,
                              .weights_bytes = weight_bytes(m, run.tp)});
  c.max_model_len = run.max_model_len;
  c.scheduler.chunked_prefill = run.chunked_prefill;
  c.scheduler.max_num_batched_tokens = run.max_batched_tokens;
  c.scheduler.max_num_seqs = run.max_num_seqs;
  c.ladder = rungs::ladder{CaptureSizes::vllm(run.graph_max_bs)};
  c.record_steps = false;
  return c;
}

/// Replays `run` and reads its metrics as the benchmarks compute them: output tokens over the
/// time from the first request sent to the last answered; TTFT and ITL medians over requests
/// and inter-token gaps; TPOT per request (its decode time over its outputs less one), median.
inline replayed_run replay(const published_run& run, const cost_presets& presets, const cost_profile& profile) {
  const simulation_result s = simulate(replay_config(run, presets, profile), serving::generate_benchmark(run.workload));
  double first = std::numeric_limits<double>::infinity(), last = 0;
  std::vector<double> tpot;
  for (const request_record& q : s.requests) {
    if (!q.rejected.empty()) continue;
    first = std::min(first, q.submitted);
    last = std::max(last, q.finished);
    if (q.output_tokens > 1) tpot.push_back((q.finished - q.first_token) / (q.output_tokens - 1));
  }
  replayed_run r;
  r.values = {last > first ? static_cast<double>(s.output_tokens) / (last - first) : 0.0, s.ttft.p50 * 1e3, s.itl.p50 * 1e3,
              summarize(std::move(tpot)).p50 * 1e3};
  return r;
}

/// A figure beside its replay: error = predicted / published - 1.
struct fidelity_row {
  const published_figure* figure = nullptr;
  double predicted = 0, error = 0;
};

struct fidelity_report {
  std::vector<fidelity_row> rows;  ///< the replayed figures, in file order
  /// Median |error| per metric (and over all metrics, last) of the held-out and of the fit
  /// rows; -1 where there are none.
  std::array<double, 5> held_out_median{}, fit_median{};
  std::array<std::size_t, 5> held_out_count{}, fit_count{};
};

inline double median_of(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Replays every figure marked replayed (each distinct run once); with `fit_only`, only the
/// fit rows.
inline fidelity_report evaluate(const std::vector<published_figure>& figures, const cost_presets& presets,
                                const cost_profile& profile, bool fit_only = false) {
  std::map<std::string, replayed_run> runs;
  fidelity_report rep;
  std::array<std::vector<double>, 5> held, fitted;
  for (const published_figure& p : figures) {
    if (!p.replayed || (fit_only && !p.fit)) continue;
    auto it = runs.find(p.run_key);
    if (it == runs.end()) it = runs.emplace(p.run_key, replay(p.run, presets, profile)).first;
    const double predicted = it->second[p.metric];
    rep.rows.push_back({&p, predicted, predicted / p.value - 1});
    auto& into = p.fit ? fitted : held;
    into[static_cast<std::size_t>(p.metric)].push_back(std::fabs(rep.rows.back().error));
    into[4].push_back(std::fabs(rep.rows.back().error));
  }
  for (std::size_t k = 0; k < 5; ++k) {
    rep.held_out_count[k] = held[k].size();
    rep.fit_count[k] = fitted[k].size();
    rep.held_out_median[k] = median_of(held[k]);
    rep.fit_median[k] = median_of(fitted[k]);
  }
  return rep;
}

/// What the fit minimises: the mean over the fit rows of |ln(predicted / published)| (a
/// factor of 2 too high and too low weigh the same).
inline double fit_loss(const fidelity_report& r) {
  double sum = 0;
  std::size_t n = 0;
  for (const fidelity_row& row : r.rows)
    if (row.figure->fit) {
      sum += std::fabs(std::log(std::max(row.predicted, 1e-12) / row.figure->value));
      ++n;
    }
  return n ? sum / static_cast<double>(n) : 0;
}

/// Fits `start`'s bandwidth and compute efficiencies, step_seconds, seconds_per_sequence and
/// allreduce_seconds (its link_efficiency is kept; a figure at 0 stays 0) to the fit rows: a coordinate search, each
/// figure in turn multiplied and divided by a factor that starts at 2 and shrinks to its
/// square root whenever no move helps, until it is below 1.01. Deterministic; `evaluations`
/// counts the replays of the fit rows it made.
inline cost_profile fit_profile(const std::vector<published_figure>& figures, const cost_presets& presets, cost_profile start,
                                std::int64_t* evaluations = nullptr) {
  start.bandwidth_efficiency = start.bandwidth_efficiency.value_or(0.9);
  start.compute_efficiency = start.compute_efficiency.value_or(1.0);
  auto loss = [&](const cost_profile& p) {
    if (evaluations) ++*evaluations;
    return fit_loss(evaluate(figures, presets, p, true));
  };
  using field = double& (*)(cost_profile&);
  const std::array<std::pair<field, double>, 5> params = {{
      {[](cost_profile& p) -> double& { return *p.bandwidth_efficiency; }, 1.0},
      {[](cost_profile& p) -> double& { return *p.compute_efficiency; }, 1.0},
      {[](cost_profile& p) -> double& { return p.step_seconds; }, 0.1},
      {[](cost_profile& p) -> double& { return p.seconds_per_sequence; }, 1e-3},
      {[](cost_profile& p) -> double& { return p.allreduce_seconds; }, 1e-3},
  }};
  double best = loss(start);
  for (double factor = 2; factor >= 1.01; factor = std::sqrt(factor)) {
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& [get, most] : params)
        for (const double f : {factor, 1 / factor}) {
          cost_profile trial = start;
          double& v = get(trial);
          v = std::min(most, v * f);
          if (v == get(start)) continue;
          const double l = loss(trial);
          if (l < best) {
            best = l;
            start = trial;
            moved = true;
          }
        }
    }
  }
  return start;
}

}  // namespace rungs::planning
