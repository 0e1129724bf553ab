// CaptureSizes: the CUDA-graph capture-size ladders of serving engines, as segments.
//
// A segment {start, step} contributes start, start+step, ... below the next segment's
// start; the last segment runs up to max. The presets (from cuda-graphs.md):
//   vllm(max)     1 2 4, then every 8                        (67 rungs for 512; 11 for 64)
//   vllm_v1(max)  1 2 4, every 8 below 256, every 16 from 256
//   sglang(max)   1 2 4 8 12, every 8 to 256, every 16 to 512, every 32 beyond
//   trtllm(max)   1 2 4, every 8 to 128, then every 64
// An off-stride max (42 with steps of 8) is appended as an extra rung, as later vLLM does
// for its token budget: without it a batch of 41-42 would run eagerly (the "42 truncated
// to 40" slowdown in cuda-graphs.md). Setting append_off_stride_max = false turns that
// case into an error rather than a silent truncation.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <cstddef>
#include <initializer_list>
#include <ostream>
#include <span>

namespace rungs {

struct capture_segment {
  rung_t start = 0;
  rung_t step = 0;
  friend constexpr bool operator==(const capture_segment&, const capture_segment&) = default;
};

struct CaptureSizes {
  static constexpr std::size_t max_segments = 8;

  /// The used segments come first; the rest stay {0, 0}.
  capture_segment segments[max_segments] = {};
  rung_t max = 0;
  bool append_off_stride_max = true;

  friend constexpr bool operator==(const CaptureSizes&, const CaptureSizes&) = default;

  /// Builds a ladder from up to max_segments segments (throws ladder_error for more).
  static constexpr CaptureSizes from(std::initializer_list<capture_segment> list, rung_t max,
                                     bool append_off_stride_max = true) {
    if (list.size() > max_segments)
      detail::reject("capture sizes", "segment count", static_cast<rung_t>(list.size()),
                     "exceeds the limit of 8 segments");
    CaptureSizes c{};
    std::size_t i = 0;
    for (const capture_segment& s : list) c.segments[i++] = s;
    c.max = max;
    c.append_off_stride_max = append_off_stride_max;
    return c;
  }

  static constexpr CaptureSizes vllm(rung_t max) { return from({{1, 1}, {2, 2}, {4, 4}, {8, 8}}, max); }
  static constexpr CaptureSizes vllm_v1(rung_t max) {
    return from({{1, 1}, {2, 2}, {4, 4}, {8, 8}, {256, 16}}, max);
  }
  static constexpr CaptureSizes sglang(rung_t max) {
    return from({{1, 1}, {2, 2}, {4, 4}, {8, 4}, {16, 8}, {256, 16}, {512, 32}}, max);
  }
  static constexpr CaptureSizes trtllm(rung_t max) {
    return from({{1, 1}, {2, 2}, {4, 4}, {8, 8}, {128, 64}}, max);
  }

  /// Segments before the first empty {0, 0} one.
  constexpr std::size_t segment_count() const {
    std::size_t n = 0;
    while (n < max_segments && segments[n] != capture_segment{}) ++n;
    return n;
  }

  constexpr void validate() const {
    const std::size_t n = segment_count();
    if (n == 0) detail::reject("capture sizes", "segment count", 0, "must be positive (give at least one {start, step})");
    for (std::size_t i = n; i < max_segments; ++i)
      if (segments[i] != capture_segment{})
        detail::reject("capture sizes", "segment start", segments[i].start,
                       "follows an empty segment {0, 0}, which ends the list");
    for (std::size_t i = 0; i < n; ++i) {
      detail::require_positive("capture sizes", "segment start", segments[i].start);
      detail::require_positive("capture sizes", "segment step", segments[i].step);
      if (i > 0 && segments[i].start <= segments[i - 1].start)
        detail::reject("capture sizes", "segment start", segments[i].start,
                       "must be greater than the previous", "start", segments[i - 1].start);
    }
    detail::require_positive("capture sizes", "max", max);
    if (max < segments[0].start)
      detail::reject("capture sizes", "max", max, "must not be below the first segment's", "start", segments[0].start);
    if (!append_off_stride_max && walk_top() != max)
      detail::reject("capture sizes", "max", max,
                     "is off the stride (append_off_stride_max is false): use the last rung on it,", "max",
                     walk_top());
    detail::require_rung_count("capture sizes", capacity());
  }

  /// The exact rung count. Requires a valid segment list.
  constexpr std::size_t capacity() const {
    std::size_t count = 0;
    for (std::size_t i = 0; i < reached(); ++i) {
      const segment_run r = run(i);
      count += static_cast<std::size_t>((r.last - r.first) / r.step + 1);
    }
    return count + (walk_top() != max ? 1 : 0);
  }

  constexpr std::size_t generate(std::span<rung_t> out) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < reached(); ++i) {
      const segment_run r = run(i);
      for (rung_t v = r.first; v <= r.last; v += r.step) out[n++] = v;
    }
    if (n == 0 || out[n - 1] != max) out[n++] = max;
    return n;
  }

  friend std::ostream& operator<<(std::ostream& os, const CaptureSizes& p) {
    os << "CaptureSizes{.segments = {";
    for (std::size_t i = 0; i < p.segment_count(); ++i)
      os << (i ? ", " : "") << "{" << p.segments[i].start << ", " << p.segments[i].step << "}";
    return os << "}, .max = " << p.max
              << ", .append_off_stride_max = " << (p.append_off_stride_max ? "true" : "false") << "}";
  }

 private:
  // Plain loops over segment runs rather than a callback template: Clang 14 cannot
  // constant-evaluate a member template instantiated with a lambda here.
  struct segment_run {
    rung_t first, step, last;  // first, first+step, ..., last
  };

  /// Segments whose start is <= max (each contributes at least its start).
  constexpr std::size_t reached() const {
    std::size_t i = 0;
    while (i < segment_count() && segments[i].start <= max) ++i;
    return i;
  }

  /// The rungs of segment i (< reached()): up to the next segment's start, or max.
  constexpr segment_run run(std::size_t i) const {
    const std::size_t n = segment_count();
    const rung_t end = i + 1 < n && segments[i + 1].start - 1 < max ? segments[i + 1].start - 1 : max;
    const rung_t start = segments[i].start, step = segments[i].step;
    return {start, step, start + (end - start) / step * step};
  }

  /// The largest rung the segments reach on their own (0 when none does).
  constexpr rung_t walk_top() const { return reached() == 0 ? 0 : run(reached() - 1).last; }
};

}  // namespace rungs
