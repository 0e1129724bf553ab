// The demo's final report and its JSON output (--json FILE, written by nlohmann/json): what an
// operator reads after a run, computed from what the serving loop recorded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <rungs/planning/simulate.hpp>

#include "json_line.hpp"
#include "serve.hpp"

namespace demo {

/// Latency percentiles (nearest rank), as rungs-plan simulate reports them.
using latency = rungs::planning::latency_summary;
using rungs::planning::summarize;

struct report {
  std::size_t requests = 0, conversations = 0;
  std::int64_t prompt_tokens = 0;     ///< new prompt tokens of every turn
  std::int64_t context_tokens = 0;    ///< prompts with their conversation history (what prefill must cover)
  std::int64_t output_tokens = 0;
  latency ttft, itl;
  double output_throughput = 0, computed_throughput = 0;
  std::uint64_t digest = 0;           ///< FNV-1a of every request's output tokens, in request order
};

/// FNV-1a over the output tokens of every turn, in request order: equal digests, equal streams.
inline std::uint64_t token_digest(const std::vector<request_record>& turns) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const request_record& t : turns) {
    mix(t.trace_index + 1);
    for (token_id x : t.output) mix(static_cast<std::uint32_t>(x));
  }
  return h;
}

inline report make_report(const serve_result& r) {
  report rep;
  std::vector<double> ttft;
  std::vector<serving::session_id> chats;
  for (const request_record& t : r.requests) {
    ++rep.requests;
    if (t.conversation != 0) chats.push_back(t.conversation);
    rep.prompt_tokens += t.new_prompt_tokens;
    rep.context_tokens += t.prompt_tokens;
    rep.output_tokens += t.output_tokens;
    if (t.first_token >= 0) ttft.push_back(t.first_token - t.submitted);
  }
  std::sort(chats.begin(), chats.end());
  rep.conversations = static_cast<std::size_t>(std::unique(chats.begin(), chats.end()) - chats.begin());
  rep.ttft = summarize(std::move(ttft));
  rep.itl = summarize(r.itl_samples);
  const double busy = r.end_seconds - r.idle_seconds;
  if (busy > 0) {
    rep.output_throughput = static_cast<double>(rep.output_tokens) / busy;
    rep.computed_throughput = static_cast<double>(r.scheduler.computed_tokens) / busy;
  }
  rep.digest = token_digest(r.requests);
  return rep;
}

inline std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  std::ostringstream os;
  os << std::fixed << std::setprecision(u ? 2 : 0) << v << " " << units[u];
  return os.str();
}

inline std::string ms(double seconds) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(seconds < 0.1 ? 2 : 1) << seconds * 1e3 << " ms";
  return os.str();
}

inline std::string percent(double f) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100.0 * f << "%";
  return os.str();
}

/// The final report, one topic per line.
inline void print_report(std::ostream& os, const serve_result& r, const report& rep, std::string_view graph_memory_note) {
  const eng::engine_stats& e = r.engine;
  const serving::scheduler_stats& s = r.scheduler;
  auto line = [&](std::string_view label) -> std::ostream& { return os << "  " << std::left << std::setw(13) << label; };
  os << "\nReport\n";
  line("requests") << rep.requests << " finished";
  if (rep.conversations > 0) os << " (" << rep.conversations << " chats)";
  os << ", " << s.preemptions << " preemptions\n";
  line("tokens") << rep.prompt_tokens << " prompt (" << rep.context_tokens << " with chat history), "
                 << rep.output_tokens << " output; " << s.computed_tokens << " computed, of which "
                 << s.recomputed_tokens << " recomputed after preemption\n";
  line("prefix cache") << s.prefix_hit_tokens << " of " << r.kv.prefix_query_tokens << " prompt tokens hit ("
                       << percent(r.kv.prefix_hit_rate()) << "), " << r.kv.evictions << " cached blocks evicted\n";
  line("throughput") << std::fixed << std::setprecision(1) << rep.output_throughput << " output tokens/s, "
                     << rep.computed_throughput << " computed tokens/s over " << std::setprecision(2)
                     << r.end_seconds - r.idle_seconds << " s of serving";
  if (r.idle_periods > 0) os << " (+" << r.idle_seconds << " s idle in " << r.idle_periods << " periods)";
  os << "\n";
  line("TTFT") << "p50 " << ms(rep.ttft.p50) << "  p90 " << ms(rep.ttft.p90) << "  p99 " << ms(rep.ttft.p99)
               << "  max " << ms(rep.ttft.max) << "\n";
  line("ITL") << "p50 " << ms(rep.itl.p50) << "  p90 " << ms(rep.itl.p90) << "  p99 " << ms(rep.itl.p99) << "  max "
              << ms(rep.itl.max) << "\n";
  line("startup") << std::fixed << std::setprecision(2) << r.startup_seconds << " s to the first step ("
                  << r.startup_captures << " graphs captured before it)\n";
  line("graphs") << e.captures << " captured in " << std::setprecision(2) << e.capture_seconds << " s, "
                 << human_bytes(e.capture_bytes) << graph_memory_note << "; " << e.capture_failures << " failed, "
                 << e.budget_refusals << " refused by budget";
  if (r.idle_captures > 0) os << "; " << r.idle_captures << " captured while idle";
  os << "\n";
  line("steps") << r.steps.size() << " scheduler steps, " << e.steps << " engine steps: " << e.replays
                << " replayed, " << e.eager_steps() << " eager (";
  for (std::size_t k = 0; k < eng::eager_reason_count; ++k)
    os << (k ? ", " : "") << eng::to_string(static_cast<eng::eager_reason>(k)) << " " << e.eager[k];
  os << ")\n";
  const std::int64_t rows = e.real_rows + e.padded_rows, toks = e.real_tokens + e.padded_tokens;
  line("padding") << e.padded_tokens << " of " << toks << " tokens (" << percent(toks ? double(e.padded_tokens) / toks : 0)
                  << ") and " << e.padded_rows << " of " << rows << " sequence rows ("
                  << percent(rows ? double(e.padded_rows) / rows : 0) << ") in replayed steps were padding\n";
  line("KV cache") << "peak " << r.peak_live_blocks << " of " << r.kv.num_blocks << " blocks ("
                   << percent(r.kv.num_blocks ? double(r.peak_live_blocks) / r.kv.num_blocks : 0)
                   << "), peak waiting " << r.max_waiting << " requests\n";
  line("tokens out") << "digest " << std::hex << std::setw(16) << std::setfill('0') << std::right << rep.digest
                     << std::dec << std::setfill(' ') << std::left << " (same seed and workload, same digest)\n";
}

/// A number as JSON: nine significant digits (the precision the output always had), or null
/// when it is not finite.
inline rungs::cli::json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return std::stod(os.str());
}

/// A latency summary as JSON.
inline rungs::cli::json latency_json(const latency& l) {
  return {{"p50", number(l.p50)}, {"p90", number(l.p90)}, {"p99", number(l.p99)}, {"max", number(l.max)}, {"count", l.count}};
}

/// One step of --json's series (what --plot draws).
inline rungs::cli::json step_json(const step_record& st) {
  using rungs::cli::json;
  json runs = json::array();
  const auto bucket_text = [](const std::optional<eng::bucket>& b) -> json {
    if (!b) return nullptr;
    std::ostringstream os;
    os << *b;
    return os.str();
  };
  for (const run_record& run : st.runs)
    runs.push_back({{"phase", eng::to_string(run.ph)}, {"seqs", run.seqs}, {"tokens", run.tokens},
                    {"bucket", bucket_text(run.bucket)}, {"run", eng::to_string(run.run)},
                    {"eager_reason", run.reason ? json(eng::to_string(*run.reason)) : json(nullptr)},
                    {"padded_seqs", run.padded_seqs()}, {"padded_tokens", run.padded_tokens()},
                    {"captured", bucket_text(run.captured)}});
  // "seconds" as the step's serving time spanned (its end minus its start), as it always was.
  return {{"step", st.step}, {"t", number(st.end)}, {"seconds", number(st.seconds())},
          {"phase", serving::to_string(st.phase)}, {"seqs", st.seqs}, {"tokens", st.tokens}, {"sampled", st.sampled},
          {"admitted", st.admitted}, {"preempted", st.preempted}, {"running", st.running}, {"waiting", st.waiting},
          {"kv_usage", number(st.kv.usage())}, {"kv_live_blocks", st.kv.live_blocks},
          {"kv_cached_blocks", st.kv.cached_blocks}, {"kv_free_blocks", st.kv.free_blocks},
          {"prefix_hit_rate", number(st.kv.prefix_hit_rate())}, {"padded_fraction", number(st.padded_fraction)},
          {"eager_steps", st.eager_steps}, {"graphs", st.graphs}, {"runs", std::move(runs)}};
}

/// One turn of --json's list.
inline rungs::cli::json turn_json(const request_record& t) {
  return {{"id", t.trace_index + 1}, {"conversation", t.conversation}, {"turn", t.turn},
          {"available", number(t.submitted)}, {"first_token", number(t.first_token)}, {"finished", number(t.finished)},
          {"prompt_tokens", t.new_prompt_tokens}, {"context_tokens", t.prompt_tokens},
          {"output_tokens", t.output_tokens}, {"preemptions", t.preemptions}};
}

/// The report's figures in --json.
inline rungs::cli::json report_json(const serve_result& r, const report& rep) {
  using rungs::cli::json;
  const eng::engine_stats& e = r.engine;
  const serving::scheduler_stats& s = r.scheduler;
  json eager = json::object();
  for (std::size_t k = 0; k < eng::eager_reason_count; ++k) eager[std::string(eng::to_string(static_cast<eng::eager_reason>(k)))] = e.eager[k];
  std::ostringstream digest;
  digest << std::hex << std::setw(16) << std::setfill('0') << rep.digest;
  return {{"requests", rep.requests}, {"conversations", rep.conversations}, {"prompt_tokens", rep.prompt_tokens},
          {"context_tokens", rep.context_tokens}, {"output_tokens", rep.output_tokens},
          {"computed_tokens", s.computed_tokens}, {"recomputed_tokens", s.recomputed_tokens},
          {"prefix_hit_tokens", s.prefix_hit_tokens}, {"preemptions", s.preemptions},
          {"scheduler_steps", r.steps.size()}, {"engine_steps", e.steps}, {"replays", e.replays},
          {"eager_steps", e.eager_steps()}, {"eager", std::move(eager)}, {"graphs_captured", e.captures},
          {"graph_bytes", e.capture_bytes}, {"capture_seconds", number(e.capture_seconds)},
          {"capture_failures", e.capture_failures}, {"budget_refusals", e.budget_refusals},
          {"padded_tokens", e.padded_tokens}, {"real_tokens", e.real_tokens}, {"padded_rows", e.padded_rows},
          {"real_rows", e.real_rows}, {"startup_seconds", number(r.startup_seconds)},
          {"startup_captures", r.startup_captures}, {"serving_seconds", number(r.end_seconds)},
          {"idle_seconds", number(r.idle_seconds)}, {"output_tokens_per_second", number(rep.output_throughput)},
          {"computed_tokens_per_second", number(rep.computed_throughput)}, {"ttft", latency_json(rep.ttft)},
          {"itl", latency_json(rep.itl)}, {"peak_kv_blocks", r.peak_live_blocks}, {"kv_blocks", r.kv.num_blocks},
          {"peak_waiting", r.max_waiting}, {"token_digest", digest.str()}};
}

/// {"config": {...}, "steps": [...], "turns": [...], "report": {...}}: the per-step series
/// (what --plot draws), every turn's latencies, and the report's figures; one step or turn per
/// line. nlohmann/json writes every value (rungs::cli::write_json).
inline void write_json(std::ostream& os, const rungs::cli::json& config, const serve_result& r, const report& rep) {
  os << "{\"config\": ";
  rungs::cli::write_json(os, config);
  os << ",\n\"steps\": [\n";
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    os << (i ? ",\n" : "");
    rungs::cli::write_json(os, step_json(r.steps[i]));
  }
  os << "\n],\n\"turns\": [\n";
  for (std::size_t i = 0; i < r.requests.size(); ++i) {
    os << (i ? ",\n" : "");
    rungs::cli::write_json(os, turn_json(r.requests[i]));
  }
  os << "\n],\n\"report\": ";
  rungs::cli::write_json(os, report_json(r, rep));
  os << "}\n";
}

}  // namespace demo
