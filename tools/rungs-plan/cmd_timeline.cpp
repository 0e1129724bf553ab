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
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "ladder_args.hpp"

namespace rungs::plan {
namespace {
using namespace rungs::engine;


// One line per rung list: "[1, 2, 4]".
std::string list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<std::int64_t> parse_list(std::string_view what, std::string_view text, bool positive) {
  std::vector<std::int64_t> out;
  if (text.empty()) throw usage_error(std::string(what) + " is empty; expected N,N,...");
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    long long v = parse_integer(what, item);
    if (positive && v <= 0) throw usage_error(std::string(what) + ": " + std::to_string(v) + " must be positive");
    if (!positive && v < 0) throw usage_error(std::string(what) + ": " + std::to_string(v) + " must not be negative");
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

struct timeline_args {
  std::string timing, order = "largest-first";
  std::optional<std::int64_t> budget;
  std::optional<graph_cost> cost;
  std::vector<std::int64_t> idle_after, batches;
  bool json = false;
  args_t ladder;
};

timeline_args parse(args_t args) {
  timeline_args a;
  bool have_batches = false;
  std::size_t i = 0;
  auto value = [&](std::string_view flag) {
    if (i + 1 >= args.size()) throw usage_error(std::string(flag) + " needs a value");
    return args[++i];
  };
  for (; i < args.size() && args[i].starts_with("--"); ++i) {
    std::string_view f = args[i];
    if (f == "--timing") {
      a.timing = value(f);
      if (a.timing != "startup" && a.timing != "delayed" && a.timing != "lazy" && a.timing != "idle")
        throw usage_error("--timing = '" + a.timing + "' is not one of startup, delayed, lazy, idle");
    } else if (f == "--order") {
      a.order = value(f);
      if (a.order != "largest-first" && a.order != "max-bs" && a.order != "min-tokens")
        throw usage_error("--order = '" + a.order + "' is not one of largest-first, max-bs, min-tokens");
    } else if (f == "--budget") {
      long long b = parse_integer("--budget", value(f));
      if (b < 0) throw usage_error("--budget = " + std::to_string(b) + " must not be negative");
      a.budget = b;
    } else if (f == "--graph-cost") {
      std::string_view v = value(f);
      std::size_t colon = v.find(':');
      if (colon == std::string_view::npos)
        throw usage_error("--graph-cost = '" + std::string(v) + "' must be BASE:PER_TOKEN (bytes)");
      long long base = parse_integer("--graph-cost BASE", v.substr(0, colon));
      long long per = parse_integer("--graph-cost PER_TOKEN", v.substr(colon + 1));
      if (base < 0 || per < 0) throw usage_error("--graph-cost = '" + std::string(v) + "' must not be negative");
      a.cost = graph_cost{.base = base, .per_unit = per};
    } else if (f == "--idle-after") {
      a.idle_after = parse_list("--idle-after", value(f), false);
    } else if (f == "--batches") {
      a.batches = parse_list("--batches", value(f), true);
      have_batches = true;
    } else if (f == "--json") {
      a.json = true;
    } else {
      throw usage_error("unknown option '" + std::string(f) + "'");
    }
  }
  if (a.timing.empty()) throw usage_error("--timing startup|delayed|lazy|idle is required");
  if (!have_batches) throw usage_error("--batches N,N,... is required");
  if (a.budget.has_value() != a.cost.has_value())
    throw usage_error("--budget and --graph-cost go together: the budget is checked against each graph's cost");
  for (std::int64_t s : a.idle_after)
    if (s >= static_cast<std::int64_t>(a.batches.size()))
      throw usage_error("--idle-after: step " + std::to_string(s) + " is past the last step (" +
                        std::to_string(a.batches.size() - 1) + ")");
  if (i == args.size()) throw usage_error("expected a LADDER after the options");
  a.ladder = args.subspan(i);
  return a;
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

void print_json(std::ostream& out, const timeline_args& a, const timeline& t) {
  out << "{\"startup\": " << list(t.startup) << ", \"steps\": [";
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const step_row& s = t.steps[i];
    out << (i ? ", " : "") << "{\"batch\": " << s.batch << ", \"rung\": ";
    if (s.rung) out << *s.rung;
    else out << "\"eager\"";
    out << ", \"captured\": " << list(s.captured) << ", \"run\": \"" << to_string(s.run) << "\"";
    if (s.idle_signal) out << ", \"idle\": " << list(s.idle);
    out << "}";
  }
  out << "]}\n";
  (void)a;
}

void print_table(std::ostream& out, const timeline_args& a, const timeline& t) {
  std::string words;
  for (std::string_view w : a.ladder) words += (words.empty() ? "" : " ") + std::string(w);
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

int timeline_cmd(args_t args, std::ostream& out, std::ostream&) {
  timeline_args a = parse(args);
  rungs::ladder l = parse_ladder(a.ladder);
  timeline t;
  if (a.timing == "startup") t = with_order(a, l, startup{});
  else if (a.timing == "delayed") t = with_order(a, l, delayed{});
  else if (a.timing == "lazy") t = with_order(a, l, lazy{});
  else t = with_order(a, l, idle{});
  if (a.json) print_json(out, a, t);
  else print_table(out, a, t);
  return 0;
}

const registration reg{{"timeline",
                        "timeline --timing startup|delayed|lazy|idle [--order largest-first|max-bs|min-tokens] "
                        "[--budget BYTES --graph-cost BASE:PER_TOKEN] [--idle-after LIST] --batches N,N,... [--json] "
                        "LADDER",
                        timeline_cmd}};
}  // namespace
}  // namespace rungs::plan
