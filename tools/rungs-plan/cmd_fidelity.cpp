// rungs-plan fidelity --published FILE [--profile NAME] [--fit] [--json]: the simulator
// against published serving measurements (planning/fidelity.hpp; docs/planning.md,
// "Fidelity"). Replays every figure of FILE (benchmarks/fidelity/published.csv) under a cost
// profile and prints, as a Markdown table, each figure beside its prediction and the error,
// then the median error per metric over the held-out and the fit rows. --fit first fits the
// profile's constants to the fit rows and prints them (the `calibrated` profile in
// cost_model.hpp is that output). The figures not replayed are listed with their reason.
//
//   $ rungs-plan fidelity --published benchmarks/fidelity/published.csv
//   | id | engine | GPU x TP | model | workload | metric | published | predicted | error | split |
//   ...
#include <rungs/planning/fidelity.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "command.hpp"
#include "json_line.hpp"

namespace rungs::plan {
namespace {
using cli::json;

struct fidelity_args {
  std::string published;
  std::string profile = "calibrated";
  bool fit = false, json = false;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string signed_percent(double f) { return (f >= 0 ? "+" : "") + fixed(100 * f, 1) + "%"; }

// A metric's value as the table prints it: tokens/s to one decimal, milliseconds to two.
std::string value_text(planning::fidelity_metric m, double v) {
  return fixed(v, m == planning::fidelity_metric::output_throughput ? 1 : 2);
}

std::string workload_text(const planning::published_run& r) {
  const serving::benchmark_workload& w = r.workload;
  std::string s = std::to_string(w.requests) + (w.lengths == serving::benchmark_lengths::sharegpt ? " ShareGPT-like " : " fixed ") +
                  fixed(w.input_mean, 0) + "/" + fixed(w.output_mean, 0) + ", ";
  return s + (w.rate > 0 ? fixed(w.rate, 0) + " req/s" : "all at once");
}

std::string profile_text(const planning::cost_profile& p) {
  std::ostringstream os;
  // An efficiency the profile leaves to the GPU preset prints as "gpu".
  auto efficiency = [](const std::optional<double>& v) { return v ? planning::detail::number_text(*v) : std::string("gpu"); };
  os << "bandwidth_efficiency=" << efficiency(p.bandwidth_efficiency) << " compute_efficiency=" << efficiency(p.compute_efficiency)
     << " step_seconds=" << planning::detail::number_text(p.step_seconds)
     << " seconds_per_sequence=" << planning::detail::number_text(p.seconds_per_sequence)
     << " link_efficiency=" << planning::detail::number_text(p.link_efficiency)
     << " allreduce_seconds=" << planning::detail::number_text(p.allreduce_seconds);
  return os.str();
}

// Each figure's numbers, rounded as printed: a constant only moves the table when it moves a
// printed digit.
planning::cost_profile rounded(planning::cost_profile p) {
  auto round3 = [](double v) {  // three significant digits
    if (v == 0) return v;
    const double scale = std::pow(10.0, 2 - std::floor(std::log10(std::fabs(v))));
    return std::round(v * scale) / scale;
  };
  p.bandwidth_efficiency = round3(*p.bandwidth_efficiency);
  p.compute_efficiency = round3(*p.compute_efficiency);
  p.step_seconds = round3(p.step_seconds);
  p.seconds_per_sequence = round3(p.seconds_per_sequence);
  p.allreduce_seconds = round3(p.allreduce_seconds);
  return p;
}

void print_table(std::ostream& out, const planning::fidelity_report& rep, const std::vector<planning::published_figure>& all) {
  out << "| id | engine | GPU x TP | model | workload | metric | published | predicted | error | split |\n"
      << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const planning::fidelity_row& r : rep.rows) {
    const planning::published_figure& p = *r.figure;
    out << "| " << p.id << " | " << p.run.engine << " | " << p.run.gpu << " x " << p.run.tp << " | " << p.run.model << " | "
        << workload_text(p.run) << " | " << to_string(p.metric) << " | " << value_text(p.metric, p.value) << " | "
        << value_text(p.metric, r.predicted) << " | " << signed_percent(r.error) << " | " << (p.fit ? "fit" : "held-out")
        << " |\n";
  }
  out << "\nmedian |error|      held-out         fit\n";
  for (std::size_t k = 0; k < 5; ++k) {
    const std::string name = k < 4 ? std::string(planning::fidelity_metric_names[k]) : "all";
    auto cell = [](double m, std::size_t n) {
      return (m < 0 ? std::string("-") : fixed(100 * m, 1) + "%") + " (" + std::to_string(n) + ")";
    };
    char line[128];
    std::snprintf(line, sizeof line, "%-18s %11s %11s\n", name.c_str(), cell(rep.held_out_median[k], rep.held_out_count[k]).c_str(),
                  cell(rep.fit_median[k], rep.fit_count[k]).c_str());
    out << line;
  }
  bool header = false;
  for (const planning::published_figure& p : all)
    if (!p.replayed) {
      if (!header) out << "\nnot replayed:\n";
      header = true;
      out << "  " << p.id << " (" << to_string(p.metric) << " " << value_text(p.metric, p.value) << "): " << p.note << "\n";
    }
}

action define(CLI::App& app) {
  auto a = std::make_shared<fidelity_args>();
  cli::text(app, "--published FILE", a->published,
            "published figures and their runs (CSV; benchmarks/fidelity/published.csv)")->required();
  cli::text(app, "--profile NAME", a->profile, "the cost profile: calibrated (default) or datasheet");
  cli::flag(app, "--fit", a->fit, "fit the profile's constants to the rows marked fit first, and print them");
  cli::flag(app, "--json", a->json, "print one JSON object: the profile, every row, the medians");
  return [a](std::ostream& out, std::ostream&) {
    std::ifstream in(a->published, std::ios::binary);
    if (!in) throw usage_error("--published " + a->published + ": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    std::vector<planning::published_figure> figures;
    planning::cost_profile profile;
    const planning::cost_presets presets;
    planning::fidelity_report rep;
    try {
      figures = planning::read_published(text.str(), a->published);
      profile = planning::cost_profile_named(a->profile);
      if (a->fit) {
        std::int64_t evaluations = 0;
        profile = rounded(planning::fit_profile(figures, presets, profile, &evaluations));
        profile.name = "fitted";
        if (!a->json) out << "fitted on the fit rows (" << evaluations << " replays): " << profile_text(profile) << "\n\n";
      }
      rep = planning::evaluate(figures, presets, profile);  // a row's GPU, model or memory may not work
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
    if (!a->json) {
      print_table(out, rep, figures);
      return 0;
    }
    json rows = json::array();
    for (const planning::fidelity_row& r : rep.rows)
      rows.push_back({{"id", r.figure->id}, {"metric", to_string(r.figure->metric)}, {"published", r.figure->value},
                      {"predicted", r.predicted}, {"error", r.error}, {"split", r.figure->fit ? "fit" : "held-out"},
                      {"source", r.figure->source}});
    json medians = json::object();
    for (std::size_t k = 0; k < 5; ++k) {
      const std::string name = k < 4 ? std::string(planning::fidelity_metric_names[k]) : "all";
      medians[name] = {{"held_out", rep.held_out_median[k]}, {"held_out_count", rep.held_out_count[k]},
                       {"fit", rep.fit_median[k]}, {"fit_count", rep.fit_count[k]}};
    }
    cli::write_json_line(out, {{"profile", profile.name}, {"constants", profile_text(profile)}, {"rows", rows},
                               {"median_abs_error", medians}});
    return 0;
  };
}

const registration reg{{"fidelity", "fidelity --published FILE [--profile NAME] [--fit] [--json]",
                        "Replays published serving measurements in the simulator: predicted against published, the error "
                        "on held-out figures.",
                        define}};

}  // namespace
}  // namespace rungs::plan
