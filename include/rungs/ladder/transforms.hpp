// Ladder transforms from vLLM, each a policy wrapping any other policy (so it works with
// rungs::ladder and rungs::static_ladder alike, and composes):
//
//   SequenceParallel{inner, tp_size}       keeps the rungs that are multiples of tp_size
//   SpecDecodeRounded{inner, spec_tokens}  rounds every rung up to a multiple of 1 + spec_tokens
//   TokenBudget{inner, max_num_batched_tokens}  keeps the rungs within the token budget
//   CaptureList{...}                       a user's list: any order, duplicates dropped
//
// Where each comes from:
// - SequenceParallel: vLLM 0.11.0, VllmConfig.update_sizes_for_sequence_parallelism
//   (vllm/config/__init__.py), applied when tensor_parallel_size > 1 and sequence
//   parallelism is enabled: a sequence-parallel all-gather splits the tokens evenly over
//   the TP ranks. vLLM 0.33.0 no longer has this pass or the filter.
// - SpecDecodeRounded: vLLM 0.33.0, CompilationConfig.adjust_cudagraph_sizes_for_spec_decode
//   (vllm/config/compilation.py), applied by the V1 model runner when decode graphs are FULL
//   and the decode query length is above 1: a uniform-decode batch is a multiple of the
//   query length. Sizes rounded past the largest rung are dropped; when none is left but
//   the query length itself fits, it is the only rung.
// - TokenBudget and CaptureList: vLLM 0.33.0, VllmConfig._set_cudagraph_sizes
//   (vllm/config/vllm.py) for user-given cudagraph_capture_sizes: de-duplicated, filtered to
//   max_num_batched_tokens, sorted.
// Where vLLM would end with no size at all, rungs reports an error naming the value.
#pragma once

#include <rungs/ladder/concepts.hpp>
#include <rungs/ladder/rung.hpp>

#include <concepts>
#include <cstddef>
#include <ostream>
#include <span>
#include <vector>

namespace rungs {

template <class P>
struct SequenceParallel {
  P inner;
  rung_t tp_size = 1;

  friend constexpr bool operator==(const SequenceParallel&, const SequenceParallel&) = default;

  constexpr void validate() const {
    inner.validate();
    detail::require_positive("sequence parallel", "tp_size", tp_size);
  }
  constexpr std::size_t capacity() const { return inner.capacity(); }
  constexpr std::size_t generate(std::span<rung_t> out) const {
    const std::size_t n = inner.generate(out);
    std::size_t m = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (out[i] % tp_size == 0) out[m++] = out[i];
    if (m == 0)
      detail::reject("sequence parallel", "tp_size", tp_size, "divides no rung of the ladder, the largest of which is",
                     "rung", out[n - 1]);
    return m;
  }
  friend std::ostream& operator<<(std::ostream& os, const SequenceParallel& p) {
    return os << "SequenceParallel{" << p.inner << ", .tp_size = " << p.tp_size << "}";
  }
};
template <class P>
SequenceParallel(P, rung_t) -> SequenceParallel<P>;

template <class P>
struct SpecDecodeRounded {
  P inner;
  rung_t spec_tokens = 0;

  friend constexpr bool operator==(const SpecDecodeRounded&, const SpecDecodeRounded&) = default;

  constexpr void validate() const {
    inner.validate();
    if (spec_tokens < 0) detail::reject("spec-decode rounding", "spec_tokens", spec_tokens, "must not be negative");
    if (spec_tokens >= max_rung)
      detail::reject("spec-decode rounding", "spec_tokens", spec_tokens, "exceeds the largest supported 2147483646");
  }
  /// At most the inner rungs, or the one fallback rung.
  constexpr std::size_t capacity() const { return inner.capacity(); }
  constexpr std::size_t generate(std::span<rung_t> out) const {
    const std::size_t n = inner.generate(out);
    const rung_t q = 1 + spec_tokens, top = out[n - 1];
    if (q <= 1) return n;
    // Rounding up keeps the order, so equal results are neighbours and the ones past the
    // top are a tail: one pass in place.
    std::size_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const rung_t r = (out[i] + q - 1) / q * q;
      if (r > top) break;
      if (m == 0 || out[m - 1] != r) out[m++] = r;
    }
    if (m == 0 && q <= top) out[m++] = q;
    if (m == 0)
      detail::reject("spec-decode rounding", "decode query length (1 + spec_tokens)", q,
                     "exceeds the largest rung", "rung", top);
    return m;
  }
  friend std::ostream& operator<<(std::ostream& os, const SpecDecodeRounded& p) {
    return os << "SpecDecodeRounded{" << p.inner << ", .spec_tokens = " << p.spec_tokens << "}";
  }
};
template <class P>
SpecDecodeRounded(P, rung_t) -> SpecDecodeRounded<P>;

template <class P>
struct TokenBudget {
  P inner;
  rung_t max_num_batched_tokens = 0;

  friend constexpr bool operator==(const TokenBudget&, const TokenBudget&) = default;

  constexpr void validate() const {
    inner.validate();
    detail::require_positive("token budget", "max_num_batched_tokens", max_num_batched_tokens);
  }
  constexpr std::size_t capacity() const { return inner.capacity(); }
  constexpr std::size_t generate(std::span<rung_t> out) const {
    const std::size_t n = inner.generate(out);
    std::size_t m = 0;
    while (m < n && out[m] <= max_num_batched_tokens) ++m;
    if (m == 0)
      detail::reject("token budget", "max_num_batched_tokens", max_num_batched_tokens, "is below the smallest",
                     "rung", out[0]);
    return m;
  }
  friend std::ostream& operator<<(std::ostream& os, const TokenBudget& p) {
    return os << "TokenBudget{" << p.inner << ", .max_num_batched_tokens = " << p.max_num_batched_tokens << "}";
  }
};
template <class P>
TokenBudget(P, rung_t) -> TokenBudget<P>;

namespace detail {

constexpr void validate_capture_list(std::span<const rung_t> values) {
  if (values.empty()) reject("capture list", "size count", 0, "must be positive");
  require_rung_count("capture list", values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] <= 0) reject_element("capture list", "values", i, values[i], "must be positive");
    if (values[i] > max_rung)
      reject_element("capture list", "values", i, values[i], "exceeds the largest supported rung 2147483647");
  }
}

/// Sorted, duplicates dropped (vLLM's sorted(set(sizes))). An insertion sort, because it is
/// constexpr on every supported standard library and the lists are short.
constexpr std::size_t sort_unique(std::span<const rung_t> values, std::span<rung_t> out) {
  std::size_t n = 0;
  for (const rung_t v : values) {
    std::size_t i = n;
    while (i > 0 && out[i - 1] > v) --i;
    if (i > 0 && out[i - 1] == v) continue;
    for (std::size_t j = n; j > i; --j) out[j] = out[j - 1];
    out[i] = v;
    ++n;
  }
  return n;
}

inline std::ostream& print_capture_list(std::ostream& os, std::span<const rung_t> values) {
  os << "CaptureList{";
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  return os << "}";
}

}  // namespace detail

/// A capture-size list as a user gives it to vLLM (--cudagraph-capture-sizes): any order,
/// duplicates allowed. Where rungs::Explicit reports a duplicate as a typo, this reads the
/// list the way vLLM does. CaptureList<N> is structural; CaptureList<> holds a vector.
template <std::size_t N = std::dynamic_extent>
struct CaptureList {
  static_assert(N > 0, "rungs::CaptureList: a list needs at least one size");
  rung_t values[N];

  friend constexpr bool operator==(const CaptureList&, const CaptureList&) = default;

  constexpr void validate() const { detail::validate_capture_list(values); }
  constexpr std::size_t capacity() const { return N; }
  constexpr std::size_t generate(std::span<rung_t> out) const { return detail::sort_unique(values, out); }
  friend std::ostream& operator<<(std::ostream& os, const CaptureList& p) {
    return detail::print_capture_list(os, p.values);
  }
};

template <>
struct CaptureList<std::dynamic_extent> {
  std::vector<rung_t> values;

  friend bool operator==(const CaptureList&, const CaptureList&) = default;

  void validate() const { detail::validate_capture_list(values); }
  std::size_t capacity() const { return values.size(); }
  std::size_t generate(std::span<rung_t> out) const { return detail::sort_unique(values, out); }
  friend std::ostream& operator<<(std::ostream& os, const CaptureList& p) {
    return detail::print_capture_list(os, p.values);
  }
};

template <std::integral... T>
CaptureList(T...) -> CaptureList<sizeof...(T)>;
CaptureList(std::vector<rung_t>) -> CaptureList<std::dynamic_extent>;

}  // namespace rungs
