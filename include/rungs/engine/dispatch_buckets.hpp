// vLLM V1's dispatch key as a bucket space: graphs keyed on (num_tokens, uniform_decode
// [, has_lora]), both spaces derived from one list of capture sizes (vLLM 0.33.0's
// CudaGraphManager._init_candidates in vllm/v1/worker/gpu/cudagraph_utils.py; the mode, vLLM's
// CompilationConfig.cudagraph_mode, decides which spaces are captured):
//
//   uniform-decode space  no sequence is a prefill and every one has exactly q = 1 +
//                         spec_tokens new tokens. One FULL graph per capture size s rounded up
//                         to a multiple of q, kept when it stays within max_num_seqs * q tokens
//                         and the largest size; bucket (n, q): n request rows, n * q token
//                         rows, phase decode. Modes full_decode_only and full_and_piecewise.
//   mixed space           any other batch (prefill, chunked prefill with decodes; a uniform
//                         decode too where the mode has no decode graphs). One graph per
//                         capture size, padded by token count; bucket (tokens): up to
//                         min(tokens, max_num_seqs) request rows, phase prompt. PIECEWISE in
//                         modes piecewise and full_and_piecewise, FULL in mode full; none in
//                         none and full_decode_only.
//
// A prompt of exactly q new tokens has the shape of a uniform decode; vLLM replays its decode
// graph only for batches without a prefill (batch_key::has_prefill, from sequence::prefill).
//   has_lora              with specialize_lora (vLLM's cudagraph_specialize_lora) every
//                         graph exists twice, without and with adapters: the set doubles.
//                         Without it one set serves both (vLLM then captures with adapters).
//
// A uniform-decode batch takes the smallest decode graph with enough tokens; above the
// largest it takes a mixed graph, as vLLM's candidate list puts FULL before PIECEWISE for
// the same token count. The spaces map onto the engine's two phases (decode and prompt), so
// capture order (by_phase), timing and the graph budget's split apply across them as they
// do across Gaudi's prompt and decode buckets. phase_of(key) tells the engine which space a
// batch belongs to, so the caller's phase is not needed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rungs/engine/bucket_space.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/ladder.hpp>

namespace rungs::engine {

/// vLLM's CompilationConfig.cudagraph_mode: which graphs are captured. full_and_piecewise is
/// vLLM's default (with piecewise compilation).
enum class cudagraph_mode : std::uint8_t { none, piecewise, full, full_decode_only, full_and_piecewise };

/// What one batch runs as (vLLM's runtime modes): eagerly, on a piecewise graph (attention
/// eager between graph pieces), or on a full graph.
enum class runtime_mode : std::uint8_t { none, piecewise, full };

constexpr std::string_view to_string(cudagraph_mode m) {
  constexpr std::string_view names[] = {"none", "piecewise", "full", "full_decode_only", "full_and_piecewise"};
  return names[static_cast<int>(m)];
}
constexpr std::string_view to_string(runtime_mode m) {
  return m == runtime_mode::none ? "NONE" : m == runtime_mode::piecewise ? "PIECEWISE" : "FULL";
}

/// The mode named `text` (to_string's spelling), or nullopt.
constexpr std::optional<cudagraph_mode> parse_cudagraph_mode(std::string_view text) {
  for (int i = 0; i <= static_cast<int>(cudagraph_mode::full_and_piecewise); ++i)
    if (to_string(static_cast<cudagraph_mode>(i)) == text) return static_cast<cudagraph_mode>(i);
  return std::nullopt;
}

struct dispatch_options {
  std::int64_t spec_tokens = 0;   ///< speculative tokens per request: uniform decode is 1 + spec_tokens per sequence
  std::int64_t max_num_seqs = 0;  ///< request rows of the widest decode graph (the scheduler's max_num_seqs)
  bool specialize_lora = false;   ///< graphs with and without LoRA adapters (vLLM's cudagraph_specialize_lora)
  cudagraph_mode mode = cudagraph_mode::full_and_piecewise;  ///< which spaces are captured (vLLM's default)
};

/// How one batch runs: the runtime mode, the graph (nullopt: eager) and the shape it is
/// padded to (the batch's own shape when eager).
struct dispatch_decision {
  runtime_mode mode = runtime_mode::none;
  std::optional<std::size_t> bucket;
  std::int64_t seqs = 0;
  std::int64_t tokens = 0;
  friend constexpr bool operator==(const dispatch_decision&, const dispatch_decision&) = default;
};

/// What a step is, by its sequences: every one prefilling, some of each, or every one decoding
/// exactly the uniform query length (else mixed).
enum class step_kind : std::uint8_t { prefill, mixed, uniform_decode };

constexpr std::string_view to_string(step_kind k) {
  return k == step_kind::prefill ? "prefill" : k == step_kind::mixed ? "mixed" : "uniform decode";
}

/// `prefills` sequences prefilling (a prompt or a chunk of one) and `decodes` decoding, with
/// `tokens` new tokens in all, when every decode carries `decode_query_len` tokens.
constexpr step_kind kind_of(std::int64_t prefills, std::int64_t decodes, std::int64_t tokens,
                            std::int64_t decode_query_len = 1) {
  if (prefills == 0 && decodes > 0 && tokens == decodes * decode_query_len) return step_kind::uniform_decode;
  return decodes == 0 ? step_kind::prefill : step_kind::mixed;
}

class dispatch_buckets {
 public:
  /// `sizes`: the capture sizes in tokens (e.g. rungs::VllmCaptureSizes). Throws
  /// std::invalid_argument for spec_tokens < 0 or max_num_seqs < 1.
  dispatch_buckets(const rungs::ladder& sizes, dispatch_options o)
      : opts_(check(o)), mixed_(sizes) {
    const cudagraph_mode m = opts_.mode;
    if (m == cudagraph_mode::full_decode_only || m == cudagraph_mode::full_and_piecewise)
      decode_ = decode_sizes(sizes, q(), o.max_num_seqs);
    if (m == cudagraph_mode::piecewise || m == cudagraph_mode::full || m == cudagraph_mode::full_and_piecewise)
      mixed_count_ = mixed_.size();
    per_lora_ = decode_.size() + mixed_count_;
  }

  std::size_t size() const { return per_lora_ * (opts_.specialize_lora ? 2 : 1); }

  /// Layout: [decode graphs, mixed graphs] without adapters, then the same with adapters.
  bucket at(std::size_t i) const {
    const bool lora = i >= per_lora_;
    const std::size_t j = i % per_lora_;
    const std::uint8_t rank_extra = opts_.specialize_lora ? 1 : 0;
    if (j < decode_.size()) {
      const std::int64_t n = decode_[j] / q();
      return bucket{.dims = {n, q(), lora ? 1 : 0}, .rank = static_cast<std::uint8_t>(2 + rank_extra), .ph = phase::decode,
                    .shape = {.seqs = n, .tokens = decode_[j], .context = 0, .query = q()}};
    }
    const std::int64_t t = mixed_[j - decode_.size()];
    return bucket{.dims = {t, rank_extra ? 1 : 0, lora ? 1 : 0}, .rank = static_cast<std::uint8_t>(1 + 2 * rank_extra),
                  .ph = phase::prompt, .shape = {std::min(t, opts_.max_num_seqs), t, 0}};
  }

  /// Whether no sequence of the batch is a prefill and every one carries exactly 1 +
  /// spec_tokens new tokens.
  bool uniform_decode(const batch_key& k) const {
    return !k.has_prefill && k.max_query == q() && k.tokens == k.seqs * q();
  }

  /// The space that serves the batch: decode for a uniform-decode batch a decode graph covers.
  phase phase_of(const batch_key& k) const { return find_decode(k) ? phase::decode : phase::prompt; }

  std::optional<std::size_t> find(const batch_key& k) const {
    const std::size_t base = opts_.specialize_lora && k.has_lora ? per_lora_ : 0;
    if (k.ph == phase::decode) {
      auto d = find_decode(k);
      if (d) *d += base;
      return d;
    }
    if (mixed_count_ == 0 || k.seqs > opts_.max_num_seqs) return std::nullopt;
    const rung_lookup l = mixed_.lookup(k.tokens);
    if (l.eager()) return std::nullopt;
    return base + decode_.size() + static_cast<std::size_t>(l.index);
  }

  /// The runtime mode of graph `i`: FULL for uniform-decode graphs and in mode full,
  /// PIECEWISE for the mixed graphs of modes piecewise and full_and_piecewise.
  runtime_mode mode_of(std::size_t i) const {
    if (per_lora_ == 0) return runtime_mode::none;  // no graphs (modes none, or nothing to capture)
    if (i % per_lora_ < decode_.size() || opts_.mode == cudagraph_mode::full) return runtime_mode::full;
    return runtime_mode::piecewise;
  }

  /// The runtime mode, graph and padded shape of a batch (vLLM's CudagraphDispatcher.dispatch):
  /// a uniform decode a decode graph covers, else a mixed graph, else eager.
  dispatch_decision dispatch(batch_key k) const {
    k.ph = phase_of(k);
    const std::optional<std::size_t> b = find(k);
    if (!b) return {runtime_mode::none, std::nullopt, k.seqs, k.tokens};
    const bucket g = at(*b);
    return {mode_of(*b), b, g.shape.seqs, g.shape.tokens};
  }

  /// Graph counts: uniform-decode and mixed graphs of one LoRA case, and the number of cases.
  std::size_t decode_graphs() const { return decode_.size(); }
  std::size_t mixed_graphs() const { return mixed_count_; }
  std::size_t lora_cases() const { return opts_.specialize_lora ? 2 : 1; }
  const dispatch_options& options() const { return opts_; }

 private:
  std::int64_t q() const { return 1 + opts_.spec_tokens; }

  static dispatch_options check(dispatch_options o) {
    if (o.spec_tokens < 0)
      throw std::invalid_argument("dispatch buckets: spec_tokens = " + std::to_string(o.spec_tokens) +
                                  " must not be negative");
    if (static_cast<int>(o.mode) > static_cast<int>(cudagraph_mode::full_and_piecewise))
      throw std::invalid_argument("dispatch buckets: mode = " + std::to_string(static_cast<int>(o.mode)) +
                                  " is not a cudagraph_mode (none, piecewise, full, full_decode_only, full_and_piecewise)");
    if (o.max_num_seqs < 1 || o.max_num_seqs > rungs::max_rung)
      throw std::invalid_argument("dispatch buckets: max_num_seqs = " + std::to_string(o.max_num_seqs) +
                                  " must be in 1 .. 2147483647");
    return o;
  }

  // vLLM rounds each capture size up to a multiple of q and keeps it within the widest
  // uniform-decode batch and the largest capture size.
  static std::vector<std::int64_t> decode_sizes(const rungs::ladder& sizes, std::int64_t q, std::int64_t max_num_seqs) {
    if (q > rungs::max_rung) return {};
    std::vector<std::int64_t> out;
    for (const rung_t s : sizes.rungs()) {
      const std::int64_t r = (s + q - 1) / q * q;
      if (r > sizes.top() || r / q > max_num_seqs) break;
      if (out.empty() || out.back() != r) out.push_back(r);
    }
    return out;
  }

  std::optional<std::size_t> find_decode(const batch_key& k) const {
    if (!uniform_decode(k)) return std::nullopt;
    auto it = std::lower_bound(decode_.begin(), decode_.end(), k.tokens);
    if (it == decode_.end()) return std::nullopt;
    return static_cast<std::size_t>(it - decode_.begin());
  }

  dispatch_options opts_;
  rungs::ladder mixed_;
  std::vector<std::int64_t> decode_;
  std::size_t mixed_count_ = 0;  // mixed_'s graphs when the mode captures them, else 0
  std::size_t per_lora_ = 0;
};

}  // namespace rungs::engine
