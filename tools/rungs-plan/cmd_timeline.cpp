// rungs-plan timeline: which graphs an engine captures when, for a scripted batch sequence.
//
// It runs the engine's graph runner (host backend with simulated capture cost and no forward:
// a cost-model backend) with the chosen timing and order policies over a 1-D ladder, so what
// it prints is what the engine does. Each step's sequences are single decode tokens, one KV
// block of one token each (block i for sequence i): the planner computes nothing, so the
// runner's KV geometry is the smallest that holds the largest batch.
#include <rungs/engine/graph_runner.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/ladder_buckets.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "json_line.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
using cli::json;
using namespace rungs::engine;


// One line per rung list: "[1, 2, 4]".
std::string list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The timeline runs the engine with one KV block per sequence and one step per entry of
// --batches: both are bounded before anything is allocated.
constexpr std::size_t max_steps = 1'000'000;
constexpr std::int64_t max_batch = 1 << 20;

std::vector<std::int64_t> parse_list(std::string_view what, std::string_view text, bool positive) {
  if (text.empty()) throw usage_error(std::string(what) + " is empty; expected N,N,...");
  cli::check_length(what, text, max_steps);
  std::vector<std::int64_t> out;
  for (std::string_view item : cli::split(text)) {
    const std::int64_t v = parse_integer(what, item);
    if (positive && v <= 0) throw usage_error(std::string(what) + ": " + std::to_string(v) + " must be positive");
    if (v > max_batch)
      throw usage_error(std::string(what) + ": " + std::to_string(v) + " must be at most " + std::to_string(max_batch) +
                        " (the timeline simulates one KV block per sequence)");
    if (!positive && v < 0) throw usage_error(std::string(what) + ": " + std::to_string(v) + " must not be negative");
    out.push_back(v);
  }
  return out;
}

std::string one_of(std::string_view flag, std::string_view v, std::initializer_list<std::string_view> names) {
  std::vector<std::pair<std::string_view, std::string>> pairs;
  for (std::string_view n : names) pairs.emplace_back(n, n);
  return cli::choice(flag, v, pairs);
}

graph_cost parse_graph_cost(std::string_view flag, std::string_view v) {
  const std::size_t colon = v.find(':');
  if (colon == std::string_view::npos)
    throw usage_error(std::string(flag) + " = '" + std::string(v) + "' must be BASE:PER_TOKEN (bytes)");
  return graph_cost{.base = cli::size("--graph-cost BASE", v.substr(0, colon)),
                    .per_unit = cli::size("--graph-cost PER_TOKEN", v.substr(colon + 1))};
}

struct timeline_args {
  std::string timing, order = "largest-first";
  std::optional<std::int64_t> budget;
  std::optional<graph_cost> cost;
  std::vector<std::int64_t> idle_after, batches;
  bool have_batches = false, json = false;
  std::vector<std::string> ladder;
};

void check(const timeline_args& a) {
  if (a.timing.empty()) throw usage_error("--timing startup|delayed|lazy|idle is required");
  if (!a.have_batches) throw usage_error("--batches N,N,... is required");
  if (a.budget.has_value() != a.cost.has_value())
    throw usage_error("--budget and --graph-cost go together: the budget is checked against each graph's cost");
  for (std::int64_t s : a.idle_after)
    if (s >= static_cast<std::int64_t>(a.batches.size()))
      throw usage_error("--idle-after: step " + std::to_string(s) + " is past the last step (" +
                        std::to_string(a.batches.size() - 1) + ")");
  if (a.ladder.empty()) throw usage_error("expected a LADDER after the options");
}

// What the timeline shows, step by step.
struct step_row {
  std::int64_t batch = 0;
  std::optional<std::int64_t> rung;
  std::vector<std::int64_t> captured, idle, skipped;
  run_kind run = run_kind::eager;
  std::optional<eager_reason> reason;
  bool idle_signal = false;
};

struct timeline {
  std::vector<std::int64_t> startup, startup_skipped;
  std::vector<step_row> steps;
  engine_stats stats;
  std::size_t rungs = 0;
};

// The planner's model: only the ladder's shape matters, so one head of size 1 and a KV block
// per token keep the host forward trivial.
template <class Order, class Timing>
timeline simulate(const timeline_args& a, const rungs::ladder& ladder, Order order, Timing timing) {
  using space = ladder_buckets<rungs::ladder>;
  std::int64_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  host_backend::options opts;
  opts.simulate = simulated_capture{.bytes = a.cost.value_or(graph_cost{})};
  graph_runner<space, Order, Timing, host_backend> e(
      space(ladder), host_backend([](const host_step&) {}, opts),
      {.order = order,
       .timing = timing,
       .budget = {.bytes = a.budget.value_or(graph_budget::unlimited), .model = a.cost},
       .max_model_len = 1,
       .shape = {.block_size = 1, .num_blocks = max_batch}});
  timeline t;
  t.rungs = ladder.size();
  step_row* current = nullptr;
  e.observe([&](const engine_event& ev) {
    if (ev.what != engine_event::kind::capture) return;
    std::int64_t r = ev.where.batch();
    bool kept = ev.outcome == capture_outcome::captured;
    bool skipped = ev.outcome == capture_outcome::refused || ev.outcome == capture_outcome::released;
    if (ev.when == capture_moment::startup) {
      if (kept) t.startup.push_back(r);
      if (skipped) t.startup_skipped.push_back(r);
    } else if (current) {
      if (kept) (ev.when == capture_moment::idle ? current->idle : current->captured).push_back(r);
      if (skipped) current->skipped.push_back(r);
    }
  });
  e.start();
  std::vector<std::int32_t> token{1};
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(max_batch));
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int32_t>(i);
  std::vector<sequence> seqs;
  for (std::size_t s = 0; s < a.batches.size(); ++s) {
    seqs.clear();
    for (std::int64_t k = 0; k < a.batches[s]; ++k)
      seqs.push_back(sequence{token, 0, std::span<const std::int32_t>(blocks).subspan(static_cast<std::size_t>(k), 1)});
    t.steps.push_back(step_row{});
    t.steps.back().batch = a.batches[s];
    current = &t.steps.back();
    auto r = e.step(seqs);
    if (r.bucket) current->rung = e.at(*r.bucket).batch();
    current->run = r.run;
    current->reason = r.reason;
    for (std::int64_t after : a.idle_after)
      if (after == static_cast<std::int64_t>(s)) {
        current->idle_signal = true;
        e.idle({.max_captures = 1});
      }
  }
  t.stats = e.stats();
  return t;
}

template <class Timing>
timeline with_order(const timeline_args& a, const rungs::ladder& l, Timing timing) {
  if (a.order == "max-bs") return simulate(a, l, max_bs{}, timing);
  if (a.order == "min-tokens") return simulate(a, l, min_tokens{}, timing);
  return simulate(a, l, largest_first{}, timing);
}

void print_json(std::ostream& out, const timeline& t) {
  json steps = json::array();
  for (const step_row& s : t.steps) {
    json row = {{"batch", s.batch}};
    row["rung"] = s.rung ? json(*s.rung) : json("eager");
    row["captured"] = s.captured;
    row["run"] = to_string(s.run);
    if (s.idle_signal) row["idle"] = s.idle;
    steps.push_back(std::move(row));
  }
  cli::write_json_line(out, json{{"startup", t.startup}, {"steps", std::move(steps)}});
}

void print_table(std::ostream& out, const timeline_args& a, const timeline& t) {
  std::string words;
  for (const std::string& w : a.ladder) words += (words.empty() ? "" : " ") + w;
  out << "timeline: timing " << a.timing << ", order " << a.order << ", " << t.rungs << " rungs (" << words << ")";
  if (a.budget) out << ", budget " << *a.budget << " bytes at " << a.cost->base << " + " << a.cost->per_unit << "/token";
  out << "\n";
  out << "startup: " << (t.startup.empty() ? "nothing" : "captured " + list(t.startup));
  if (!t.startup_skipped.empty()) out << ", skipped (budget) " << list(t.startup_skipped);
  out << "\n";
  out << std::left << std::setw(6) << "step" << std::setw(7) << "batch" << std::setw(7) << "rung" << std::setw(21)
      << "run" << "captured\n";
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const step_row& s = t.steps[i];
    std::string run(to_string(s.run));
    if (s.reason) run += " (" + std::string(to_string(*s.reason)) + ")";
    std::string what = s.captured.empty() ? "-" : list(s.captured);
    if (!s.skipped.empty()) what += " skipped " + list(s.skipped);
    if (s.idle_signal) what += "; idle: " + (s.idle.empty() ? std::string("nothing") : list(s.idle));
    out << std::setw(6) << i << std::setw(7) << s.batch << std::setw(7)
        << (s.rung ? std::to_string(*s.rung) : std::string("-")) << std::setw(21) << run << what << "\n";
  }
  const engine_stats& st = t.stats;
  out << "summary: " << st.steps << " steps, " << st.replays << " replayed, " << st.eager_steps() << " eager; "
      << st.captures << " of " << t.rungs << " rungs captured";
  if (st.budget_refusals) out << ", " << st.budget_refusals << " skipped by the budget";
  if (a.budget) out << "; graph memory " << st.capture_bytes << " of " << *a.budget << " bytes";
  out << "\n";
}

int run_timeline(const timeline_args& a, std::ostream& out) {
  check(a);
  rungs::ladder l = parse_ladder(a.ladder);
  if (a.cost) check_graph_memory("--graph-cost", a.cost->base, a.cost->per_unit, l);
  timeline t;
  if (a.timing == "startup") t = with_order(a, l, startup{});
  else if (a.timing == "delayed") t = with_order(a, l, delayed{});
  else if (a.timing == "lazy") t = with_order(a, l, lazy{});
  else t = with_order(a, l, idle{});
  if (a.json) print_json(out, t);
  else print_table(out, a, t);
  return 0;
}

action define(CLI::App& app) {
  auto a = std::make_shared<timeline_args>();
  cli::option(app, "--timing startup|delayed|lazy|idle", a->timing,
              [](std::string_view f, std::string_view v) { return one_of(f, v, {"startup", "delayed", "lazy", "idle"}); },
              "when graphs are captured (required)");
  cli::option(app, "--order largest-first|max-bs|min-tokens", a->order,
              [](std::string_view f, std::string_view v) { return one_of(f, v, {"largest-first", "max-bs", "min-tokens"}); },
              "the capture order (default largest-first)");
  cli::option(app, "--budget BYTES", a->budget, cli::size,
              "graph memory budget (" + std::string(cli::size_syntax) + "); needs --graph-cost");
  cli::option(app, "--graph-cost BASE:PER_TOKEN", a->cost, parse_graph_cost, "each graph's memory: BASE + PER_TOKEN x rung");
  cli::option(app, "--idle-after LIST", a->idle_after,
              [](std::string_view f, std::string_view v) { return parse_list(f, v, false); },
              "steps after which the engine is told it is idle (one capture per mention)");
  cli::option(app, "--batches N,N,...", a->batches,
              [a](std::string_view f, std::string_view v) {
                a->have_batches = true;
                return parse_list(f, v, true);
              },
              "the batch size of every step (required)");
  cli::flag(app, "--json", a->json, "print the timeline as JSON");
  ladder_words(app, a->ladder);
  return [a](std::ostream& out, std::ostream&) { return run_timeline(*a, out); };
}

const registration reg{{"timeline",
                        "timeline --timing startup|delayed|lazy|idle [--order largest-first|max-bs|min-tokens] "
                        "[--budget BYTES --graph-cost BASE:PER_TOKEN] [--idle-after LIST] --batches N,N,... [--json] "
                        "LADDER",
                        "Which graphs the engine captures when, for a scripted batch sequence.", define}};
}  // namespace
}  // namespace rungs::plan
