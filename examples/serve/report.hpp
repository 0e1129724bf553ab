// The demo's final report and its JSON output (--json FILE): what an operator reads after a
// run, computed from what the serving loop recorded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <rungs/planning/simulate.hpp>

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
inline std::uint64_t token_digest(const std::vector<turn_record>& turns) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const turn_record& t : turns) {
    mix(t.id);
    for (token_id x : t.output) mix(static_cast<std::uint32_t>(x));
  }
  return h;
}

inline report make_report(const serve_result& r) {
  report rep;
  std::vector<double> ttft, itl;
  std::vector<serving::session_id> chats;
  for (const turn_record& t : r.turns) {
    ++rep.requests;
    if (t.conversation != 0) chats.push_back(t.conversation);
    rep.prompt_tokens += t.prompt_tokens;
    rep.context_tokens += t.context_tokens;
    rep.output_tokens += static_cast<std::int64_t>(t.output.size());
    if (t.first_token >= 0) ttft.push_back(t.first_token - t.available);
    for (std::size_t i = 1; i < t.token_times.size(); ++i) itl.push_back(t.token_times[i] - t.token_times[i - 1]);
  }
  std::sort(chats.begin(), chats.end());
  rep.conversations = static_cast<std::size_t>(std::unique(chats.begin(), chats.end()) - chats.begin());
  rep.ttft = summarize(std::move(ttft));
  rep.itl = summarize(std::move(itl));
  const double busy = r.serving_seconds - r.idle_seconds;
  if (busy > 0) {
    rep.output_throughput = static_cast<double>(rep.output_tokens) / busy;
    rep.computed_throughput = static_cast<double>(r.scheduler.computed_tokens) / busy;
  }
  rep.digest = token_digest(r.turns);
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
                     << r.serving_seconds - r.idle_seconds << " s of serving";
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
                   << "), peak waiting " << r.peak_waiting << " requests\n";
  line("tokens out") << "digest " << std::hex << std::setw(16) << std::setfill('0') << std::right << rep.digest
                     << std::dec << std::setfill(' ') << std::left << " (same seed and workload, same digest)\n";
}

namespace json {
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}
}  // namespace json

/// {"config": {...}, "steps": [...], "turns": [...], "report": {...}}: the per-step series
/// (what --plot draws), every turn's latencies, and the report's figures.
inline void write_json(std::ostream& os, std::string_view config_json, const serve_result& r, const report& rep) {
  using json::number;
  using json::quote;
  const eng::engine_stats& e = r.engine;
  const serving::scheduler_stats& s = r.scheduler;
  os << "{\"config\": " << config_json << ",\n\"steps\": [\n";
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const step_record& st = r.steps[i];
    os << (i ? ",\n" : "") << "{\"step\": " << st.step << ", \"t\": " << number(st.t)
       << ", \"seconds\": " << number(st.seconds) << ", \"phase\": " << quote(serving::to_string(st.phase))
       << ", \"seqs\": " << st.seqs << ", \"tokens\": " << st.tokens << ", \"sampled\": " << st.sampled
       << ", \"admitted\": " << st.admitted << ", \"preempted\": " << st.preempted << ", \"running\": " << st.running
       << ", \"waiting\": " << st.waiting << ", \"kv_usage\": " << number(st.kv.usage())
       << ", \"kv_live_blocks\": " << st.kv.live_blocks << ", \"kv_cached_blocks\": " << st.kv.cached_blocks
       << ", \"kv_free_blocks\": " << st.kv.free_blocks << ", \"prefix_hit_rate\": " << number(st.kv.prefix_hit_rate())
       << ", \"padded_fraction\": " << number(st.padded_fraction) << ", \"eager_steps\": " << st.eager_steps
       << ", \"graphs\": " << st.graphs << ", \"runs\": [";
    for (std::size_t k = 0; k < st.runs.size(); ++k) {
      const engine_run& run = st.runs[k];
      os << (k ? ", " : "") << "{\"phase\": " << quote(eng::to_string(run.ph)) << ", \"seqs\": " << run.seqs
         << ", \"tokens\": " << run.tokens << ", \"bucket\": " << (run.bucket ? quote(*run.bucket) : "null")
         << ", \"run\": " << quote(eng::to_string(run.run))
         << ", \"eager_reason\": " << (run.reason ? quote(eng::to_string(*run.reason)) : "null")
         << ", \"padded_seqs\": " << run.padded_seqs << ", \"padded_tokens\": " << run.padded_tokens
         << ", \"captured\": " << (run.captured ? quote(*run.captured) : "null") << "}";
    }
    os << "]}";
  }
  os << "\n],\n\"turns\": [\n";
  for (std::size_t i = 0; i < r.turns.size(); ++i) {
    const turn_record& t = r.turns[i];
    os << (i ? ",\n" : "") << "{\"id\": " << t.id << ", \"conversation\": " << t.conversation << ", \"turn\": " << t.turn
       << ", \"available\": " << number(t.available) << ", \"first_token\": " << number(t.first_token)
       << ", \"finished\": " << number(t.finished) << ", \"prompt_tokens\": " << t.prompt_tokens
       << ", \"context_tokens\": " << t.context_tokens << ", \"output_tokens\": " << t.output.size()
       << ", \"preemptions\": " << t.preemptions << "}";
  }
  auto lat = [&](const latency& l) {
    return "{\"p50\": " + number(l.p50) + ", \"p90\": " + number(l.p90) + ", \"p99\": " + number(l.p99) +
           ", \"max\": " + number(l.max) + ", \"count\": " + std::to_string(l.count) + "}";
  };
  std::ostringstream digest;
  digest << std::hex << std::setw(16) << std::setfill('0') << rep.digest;
  os << "\n],\n\"report\": {\"requests\": " << rep.requests << ", \"conversations\": " << rep.conversations
     << ", \"prompt_tokens\": " << rep.prompt_tokens << ", \"context_tokens\": " << rep.context_tokens
     << ", \"output_tokens\": " << rep.output_tokens << ", \"computed_tokens\": " << s.computed_tokens
     << ", \"recomputed_tokens\": " << s.recomputed_tokens << ", \"prefix_hit_tokens\": " << s.prefix_hit_tokens
     << ", \"preemptions\": " << s.preemptions << ", \"scheduler_steps\": " << r.steps.size()
     << ", \"engine_steps\": " << e.steps << ", \"replays\": " << e.replays << ", \"eager_steps\": " << e.eager_steps()
     << ", \"eager\": {";
  for (std::size_t k = 0; k < eng::eager_reason_count; ++k)
    os << (k ? ", " : "") << quote(eng::to_string(static_cast<eng::eager_reason>(k))) << ": " << e.eager[k];
  os << "}, \"graphs_captured\": " << e.captures << ", \"graph_bytes\": " << e.capture_bytes
     << ", \"capture_seconds\": " << number(e.capture_seconds) << ", \"capture_failures\": " << e.capture_failures
     << ", \"budget_refusals\": " << e.budget_refusals << ", \"padded_tokens\": " << e.padded_tokens
     << ", \"real_tokens\": " << e.real_tokens << ", \"padded_rows\": " << e.padded_rows
     << ", \"real_rows\": " << e.real_rows << ", \"startup_seconds\": " << number(r.startup_seconds)
     << ", \"startup_captures\": " << r.startup_captures
     << ", \"serving_seconds\": " << number(r.serving_seconds) << ", \"idle_seconds\": " << number(r.idle_seconds)
     << ", \"output_tokens_per_second\": " << number(rep.output_throughput)
     << ", \"computed_tokens_per_second\": " << number(rep.computed_throughput) << ", \"ttft\": " << lat(rep.ttft)
     << ", \"itl\": " << lat(rep.itl) << ", \"peak_kv_blocks\": " << r.peak_live_blocks
     << ", \"kv_blocks\": " << r.kv.num_blocks << ", \"peak_waiting\": " << r.peak_waiting
     << ", \"token_digest\": " << quote(digest.str()) << "}}\n";
}

}  // namespace demo
