// Observer hooks: an engine reports what it captures and runs through one callback,
// `void(const engine_event&)`, set with engine::observe(). log_observer turns the events
// into a progress bar on a terminal, or into log lines with time and memory per graph and a
// summary (as vLLM's and Gaudi's logs show them) when the output is a file or a pipe.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/stats.hpp>

namespace rungs::engine {

enum class capture_moment : std::uint8_t { startup, step, idle };

constexpr std::string_view to_string(capture_moment m) {
  switch (m) {
    case capture_moment::startup: return "startup";
    case capture_moment::step: return "step";
    case capture_moment::idle: return "idle";
  }
  return "?";
}

enum class capture_outcome : std::uint8_t {
  captured,  // kept: steps in the bucket replay it
  failed,    // the capture failed; the bucket runs eagerly for good
  refused,   // the estimate did not fit the budget; nothing was captured
  released,  // captured, but its measured cost broke the budget: released again
};

constexpr std::string_view to_string(capture_outcome o) {
  switch (o) {
    case capture_outcome::captured: return "captured";
    case capture_outcome::failed: return "failed";
    case capture_outcome::refused: return "refused";
    case capture_outcome::released: return "released";
  }
  return "?";
}

enum class run_kind : std::uint8_t { replay, eager };

constexpr std::string_view to_string(run_kind k) { return k == run_kind::replay ? "replay" : "eager"; }

/// One event. Views and pointers in it (error, stats) are valid during the callback only.
struct engine_event {
  enum class kind : std::uint8_t {
    startup_begin,  // `total` captures expected before the first step
    capture,        // one capture attempt: bucket, outcome, cost
    startup_end,    // the startup captures are done: totals in `stats`
    step,           // one step: bucket (or none), run kind, eager reason, rows
    forecast,       // after the first graph: `estimate` bytes for the `total` buckets still
                    // without one, against `budget_left` (vLLM reviewers' ask: warn early)
  };
  kind what = kind::step;
  std::int64_t step = 0;  // steps run before this event
  // capture
  capture_moment when = capture_moment::startup;
  capture_outcome outcome = capture_outcome::captured;
  std::int64_t ordinal = 0, total = 0;  // startup progress: ordinal-th of total (1-based)
  std::int64_t estimate = 0;            // bytes expected before capturing
  std::int64_t bytes = 0;               // bytes measured
  double seconds = 0;
  std::int64_t budget_left = -1;  // after the event, -1 when unlimited
  std::string_view error{};       // why a capture failed
  // capture and step
  std::optional<std::size_t> index{};  // bucket index
  bucket where{};                      // the bucket, when index is set
  // step
  run_kind run = run_kind::eager;
  std::optional<eager_reason> reason{};
  std::int64_t real_rows = 0, rows = 0;
  // startup_end
  const engine_stats* stats = nullptr;
};

template <class O>
concept engine_observer = std::invocable<O&, const engine_event&>;

namespace detail {
inline std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b < 0 ? -b : b);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  std::ostringstream os;
  os << (b < 0 ? "-" : "") << std::fixed << std::setprecision(u ? 2 : 0) << v << " " << units[u];
  return os.str();
}
}  // namespace detail

/// Logs captures: a progress bar while capturing at startup on a terminal, one line per
/// capture otherwise; a summary line at the end of startup. Steps are not logged.
class log_observer {
 public:
  /// `terminal`: draw a progress bar (use is_terminal(stderr) to decide).
  explicit log_observer(std::ostream& out, bool terminal = false) : out_(&out), terminal_(terminal) {}

  static bool is_terminal(std::FILE* f) {
#if __has_include(<unistd.h>)
    return ::isatty(::fileno(f)) == 1;
#else
    (void)f;
    return false;
#endif
  }

  void operator()(const engine_event& e) {
    switch (e.what) {
      case engine_event::kind::startup_begin:
        total_ = e.total;
        if (terminal_ && total_ > 0) bar(0);
        break;
      case engine_event::kind::capture:
        if (terminal_ && e.when == capture_moment::startup && total_ > 0) {
          if (e.outcome != capture_outcome::captured) {  // failures and skips still get a line
            *out_ << "\r\033[K";
            line(e);
          }
          bar(e.ordinal);
          break;
        }
        line(e);
        break;
      case engine_event::kind::startup_end:
        if (terminal_ && total_ > 0) *out_ << "\n";
        if (e.stats && total_ > 0) summary(*e.stats);  // nothing planned at startup: no summary
        break;
      case engine_event::kind::forecast:
        if (e.budget_left >= 0 && e.estimate > e.budget_left) {
          if (terminal_ && total_ > 0) *out_ << "\r\033[K";
          *out_ << "[Capture] warning: the " << e.total << " graphs still to capture need ~"
                << detail::human_bytes(e.estimate) << ", the graph budget has " << detail::human_bytes(e.budget_left)
                << " left: some will be skipped and run eagerly\n";
        }
        break;
      case engine_event::kind::step: break;
    }
  }

 private:
  void bar(std::int64_t done) {
    constexpr int width = 40;
    auto filled = static_cast<int>(total_ ? done * width / total_ : width);
    *out_ << "\rCapturing graphs: " << std::setw(3) << done << "/" << total_ << " [" << std::string(filled, '=')
          << std::string(width - filled, ' ') << "]" << std::flush;
  }

  void line(const engine_event& e) {
    std::ostream& o = *out_;
    o << "[Capture][";
    if (e.when == capture_moment::startup) {
      o << "startup";
      if (e.total > 0) o << "][" << e.ordinal << "/" << e.total;
    } else if (e.when == capture_moment::step) {
      o << "step " << e.step;
    } else {
      o << "idle before step " << e.step;
    }
    o << "] bucket " << e.where << " (" << to_string(e.where.ph) << "): ";
    switch (e.outcome) {
      case capture_outcome::captured:
        o << std::fixed << std::setprecision(3) << e.seconds << " s, " << detail::human_bytes(e.bytes);
        break;
      case capture_outcome::failed:
        o << "failed after " << std::fixed << std::setprecision(3) << e.seconds << " s (" << e.error
          << "); runs eagerly";
        break;
      case capture_outcome::refused:
        o << "skipped: needs ~" << detail::human_bytes(e.estimate) << ", budget has " << detail::human_bytes(e.budget_left)
          << " left";
        break;
      case capture_outcome::released:
        o << "released: took " << detail::human_bytes(e.bytes) << ", more than the budget allows";
        break;
    }
    if (e.budget_left >= 0 && e.outcome == capture_outcome::captured)
      o << ", budget left " << detail::human_bytes(e.budget_left);
    o << "\n";
  }

  void summary(const engine_stats& s) {
    *out_ << "Graph capturing finished in " << std::fixed << std::setprecision(2) << s.capture_seconds << " s: "
          << s.captures << " captured, " << s.capture_failures << " failed, " << s.budget_refusals
          << " refused by budget; took " << detail::human_bytes(s.capture_bytes);
    if (s.budget_left >= 0) *out_ << ", " << detail::human_bytes(s.budget_left) << " of graph budget left";
    *out_ << "\n";
  }

  std::ostream* out_;
  bool terminal_;
  std::int64_t total_ = 0;
};

static_assert(engine_observer<log_observer>);

}  // namespace rungs::engine
