// VllmCaptureSizes: vLLM 0.33.0's default CUDA-graph capture sizes, computed from the same
// inputs as VllmConfig._set_cudagraph_sizes (vllm/config/vllm.py), e.g.
//   VllmCaptureSizes{.max_num_seqs = 3, .max_num_batched_tokens = 8192}      -> 1 2 3 4
//   VllmCaptureSizes{.max_num_seqs = 33, .max_num_batched_tokens = 8192}     -> 1 2 4 8 ... 32 33 40 ... 64
//   ... .spec_tokens = 1 (decode query length 2)                            -> ... 64 66 72 ... 128
//
// vLLM's rule (default performance mode, no user sizes, one speculative-decoding tier):
//   ceiling = 1024 on the SM100 family (is_device_capability_family(100)), else 512
//   q       = 1 + spec_tokens (the uniform-decode query length)
//   cap     = min(max_num_seqs * q * 2, ceiling)
//   decode  = q > 1: {n * q : n in counts(min(max_num_seqs, ceiling)), n * q <= cap},
//             counts(m) = 1 2 4, 8 16 ... < 256 (<= m), 256 272 ... <= m, and m itself;
//             q = 1: {max_num_seqs} when max_num_seqs <= cap
//   cap     = min(cap, max_num_batched_tokens)
//   sizes   = 1 2 4 (<= cap), 8 16 ... (<= cap, < 256), 256 272 ... (<= cap),
//             max_num_batched_tokens when it is <= cap,
//             the decode sizes <= max_num_batched_tokens; de-duplicated and sorted.
// vLLM then sets max_cudagraph_capture_size to the last size, so an off-stride cap (66 at
// max_num_seqs = 33) is cut back to the last size on the grid (64) unless a decode size or
// the token budget lands on it. tests/ladder/data/vllm_0_33_capture_sizes.txt holds the
// outputs of vLLM's own function over a grid of inputs; every case is a test.
#pragma once

#include <rungs/ladder/rung.hpp>

#include <cstddef>
#include <ostream>
#include <span>

namespace rungs {

/// The device family vLLM's capture ceiling depends on: sm100 is vLLM's
/// is_device_capability_family(100) (data-centre Blackwell, SM 10.x: ceiling 1024); sm90
/// stands for every other device (ceiling 512).
enum class gpu_family { sm90, sm100 };

inline std::ostream& operator<<(std::ostream& os, gpu_family f) {
  return os << (f == gpu_family::sm100 ? "sm100" : "sm90");
}

struct VllmCaptureSizes {
  rung_t max_num_seqs = 256;
  rung_t max_num_batched_tokens = 8192;
  /// Speculative tokens per request (num_speculative_tokens); 0 without speculative decoding.
  rung_t spec_tokens = 0;
  gpu_family device = gpu_family::sm90;

  friend constexpr bool operator==(const VllmCaptureSizes&, const VllmCaptureSizes&) = default;

  /// vLLM's default_max_graph_size.
  constexpr rung_t ceiling() const { return device == gpu_family::sm100 ? 1024 : 512; }
  /// The uniform-decode query length, 1 + spec_tokens (vLLM's uniform_decode_query_len).
  constexpr rung_t decode_query_len() const { return 1 + spec_tokens; }

  constexpr void validate() const {
    detail::require_positive("vllm capture sizes", "max_num_seqs", max_num_seqs);
    detail::require_positive("vllm capture sizes", "max_num_batched_tokens", max_num_batched_tokens);
    if (spec_tokens < 0) detail::reject("vllm capture sizes", "spec_tokens", spec_tokens, "must not be negative");
    if (spec_tokens >= max_rung)
      detail::reject("vllm capture sizes", "spec_tokens", spec_tokens, "exceeds the largest supported 2147483646");
    if (device != gpu_family::sm90 && device != gpu_family::sm100)
      detail::reject("vllm capture sizes", "device", static_cast<rung_t>(device), "is not sm90 or sm100");
  }

  /// Every size is distinct and at most the ceiling: the grid (51 or 83 sizes), the token
  /// budget, and at most as many decode sizes as request counts.
  constexpr std::size_t capacity() const { return 2 * grid_count(ceiling()) + 2; }

  constexpr std::size_t generate(std::span<rung_t> out) const {
    const rung_t top = ceiling(), q = decode_query_len();
    // max_num_seqs * q * 2 without overflow: anything at or above the ceiling is the ceiling.
    rung_t cap = max_num_seqs >= top || q >= top || max_num_seqs * q >= top ? top : max_num_seqs * q * 2;
    if (cap > top) cap = top;
    // Every size is at most the ceiling (1024), so a presence mark per value de-duplicates
    // and sorts as vLLM's sorted(set(...)) does.
    bool taken[1025] = {};
    if (q > 1) {
      const rung_t requests = max_num_seqs < top ? max_num_seqs : top;
      for (rung_t n = 1; n <= requests; ++n)
        if (is_request_count(n, requests) && n * q <= cap && n * q <= max_num_batched_tokens) taken[n * q] = true;
    } else if (max_num_seqs <= cap && max_num_seqs <= max_num_batched_tokens) {
      taken[max_num_seqs] = true;
    }
    if (cap > max_num_batched_tokens) cap = max_num_batched_tokens;
    for (rung_t v = 1; v <= cap; ++v)
      if (on_grid(v)) taken[v] = true;
    if (max_num_batched_tokens <= cap) taken[max_num_batched_tokens] = true;
    std::size_t n = 0;
    for (rung_t v = 1; v <= top; ++v)
      if (taken[v]) out[n++] = v;
    return n;
  }

  friend std::ostream& operator<<(std::ostream& os, const VllmCaptureSizes& p) {
    return os << "VllmCaptureSizes{.max_num_seqs = " << p.max_num_seqs
              << ", .max_num_batched_tokens = " << p.max_num_batched_tokens << ", .spec_tokens = " << p.spec_tokens
              << ", .device = " << p.device << "}";
  }

 private:
  /// vLLM's grid: 1 2 4, every 8 below 256, every 16 from 256.
  static constexpr bool on_grid(rung_t v) {
    return v == 1 || v == 2 || v == 4 || (v < 256 && v % 8 == 0) || (v >= 256 && v % 16 == 0);
  }
  static constexpr std::size_t grid_count(rung_t top) {
    std::size_t n = 0;
    for (rung_t v = 1; v <= top; ++v) n += on_grid(v) ? 1 : 0;
    return n;
  }
  /// vLLM's request_counts(m): the grid up to m, and m itself.
  static constexpr bool is_request_count(rung_t n, rung_t m) { return n == m || on_grid(n); }
};

}  // namespace rungs
