// A bucket space chosen at run time: any_buckets holds one of the spaces a configuration can
// name (a 1-D ladder of capture sizes, vLLM V1's dispatch key over one, Gaudi's 2-D or 3-D
// prompt and decode grids) behind one type, as any_order and any_timing do for the capture
// policies, so an engine built over it is one instantiation whichever space is chosen.
// make_buckets builds it from a bucket_config (what a flag or a configuration file names)
// and the serving facts the grids derive from.
//
//   bucket_kind          space                                            routing
//   vllm sglang trtllm   ladder_buckets: capture sizes up to max_capture_size   single
//   explicit_rungs       ladder_buckets: the rungs, or a 1-D bucket file      single
//     + dispatch         dispatch_buckets over that ladder                   single
//   gaudi_linear         gaudi_buckets of a linear 2-D plan [bs, seq]         by_phase
//   gaudi_exponential    gaudi_buckets of an exponential 3-D plan              by_phase
//   gaudi_file           gaudi_buckets of a 3-D plan read from bucket_file     by_phase
//
// Gaudi's plans read their VLLM_*_BUCKET_* variables through an injectable getenv (the
// process environment by default), as rungs::gaudi::read_bucket_config does.
#pragma once

#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/engine/phased_buckets.hpp>
#include <rungs/ladder/bucket_file.hpp>
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/gaudi_buckets.hpp>
#include <rungs/ladder/gaudi_config.hpp>
#include <rungs/ladder/ladder.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rungs::engine {

/// The bucket spaces a configuration can name.
enum class bucket_kind : std::uint8_t {
  gaudi_linear,       ///< Gaudi's linear 2-D [bs, seq] prompt and decode grids
  gaudi_exponential,  ///< Gaudi's exponential 3-D [bs, query, blocks] grids
  gaudi_file,         ///< Gaudi's 3-D grids read from bucket_config::bucket_file
  vllm,               ///< vLLM's capture sizes (1 2 4, then every 8) up to max_capture_size
  sglang,             ///< SGLang's capture sizes up to max_capture_size
  trtllm,             ///< TensorRT-LLM's capture sizes up to max_capture_size
  explicit_rungs,     ///< the listed rungs, or a 1-D bucket file
};

/// Its name in flags and configuration files: gaudi-linear, gaudi-exponential, gaudi-file,
/// vllm, sglang, trtllm, explicit.
constexpr std::string_view to_string(bucket_kind k) {
  switch (k) {
    case bucket_kind::gaudi_linear: return "gaudi-linear";
    case bucket_kind::gaudi_exponential: return "gaudi-exponential";
    case bucket_kind::gaudi_file: return "gaudi-file";
    case bucket_kind::vllm: return "vllm";
    case bucket_kind::sglang: return "sglang";
    case bucket_kind::trtllm: return "trtllm";
    case bucket_kind::explicit_rungs: return "explicit";
  }
  return "?";
}

/// The kind named `name` (to_string's names). Throws std::invalid_argument naming it and the
/// choices.
inline bucket_kind parse_bucket_kind(std::string_view name) {
  for (auto k : {bucket_kind::gaudi_linear, bucket_kind::gaudi_exponential, bucket_kind::gaudi_file, bucket_kind::vllm,
                 bucket_kind::sglang, bucket_kind::trtllm, bucket_kind::explicit_rungs})
    if (to_string(k) == name) return k;
  throw std::invalid_argument("bucket kind '" + std::string(name) +
                              "' is not one of gaudi-linear, gaudi-exponential, gaudi-file, vllm, sglang, trtllm, explicit");
}

/// Gaudi's phased prompt and decode grids (routed by phase); the others are 1-D ladders.
constexpr bool is_gaudi(bucket_kind k) {
  return k == bucket_kind::gaudi_linear || k == bucket_kind::gaudi_exponential || k == bucket_kind::gaudi_file;
}

/// vLLM, SGLang and TensorRT-LLM: ladders generated up to max_capture_size.
constexpr bool is_capture_size_preset(bucket_kind k) {
  return k == bucket_kind::vllm || k == bucket_kind::sglang || k == bucket_kind::trtllm;
}

/// Reads a Gaudi VLLM_* variable: its value, or none when it is not set.
using env_reader = std::function<std::optional<std::string>(const char*)>;

/// Which bucket space to build (see the file comment). Every field applies to some kinds
/// only, and one set for another kind is refused by make_buckets (nothing is ignored).
struct bucket_config {
  bucket_kind kind = bucket_kind::vllm;  ///< the space
  rung_t max_capture_size = 0;           ///< vllm, sglang, trtllm: the largest capture size, in tokens
  std::vector<rung_t> rungs{};           ///< explicit_rungs: the rungs, in tokens per step
  /// gaudi_file: the buckets (VLLM_BUCKETING_FROM_FILE's format); explicit_rungs: a 1-D
  /// bucket file instead of `rungs`.
  std::string bucket_file{};
  /// 1-D kinds: vLLM V1's (tokens, uniform decode) key over the ladder (dispatch_buckets),
  /// uniform-decode graphs up to the scheduler's max_num_seqs sequences.
  bool dispatch = false;
  /// Gaudi kinds: where VLLM_*_BUCKET_* variables are read; empty: the process environment.
  env_reader getenv{};
};

/// One of the bucket spaces above, chosen at run time: one type for every space. It forwards
/// to the space it holds (one std::visit per lookup), so it pads and captures exactly as that
/// space does.
class any_buckets {
 public:
  using ladder_space = ladder_buckets<rungs::ladder>;  ///< a 1-D ladder (decode phase)
  /// Gaudi's linear plan: 2-D prompt and decode grids.
  using gaudi_2d_space = decltype(gaudi_buckets(std::declval<const gaudi::bucket_plan<2>&>()));
  /// Gaudi's exponential or file plan: 3-D prompt and decode grids.
  using gaudi_3d_space = decltype(gaudi_buckets(std::declval<const gaudi::bucket_plan<3>&>()));
  /// The spaces it can hold.
  using variant = std::variant<ladder_space, dispatch_buckets, gaudi_2d_space, gaudi_3d_space>;

  /// Holds `space`.
  template <class S>
    requires std::constructible_from<variant, S>
  any_buckets(S space) : s_(std::move(space)) {}  // NOLINT: implicit from any of the spaces

  /// Buckets in the space.
  std::size_t size() const {
    return std::visit([](const auto& s) { return static_cast<std::size_t>(s.size()); }, s_);
  }
  /// Bucket `i`.
  bucket at(std::size_t i) const {
    return std::visit([i](const auto& s) { return bucket(s.at(i)); }, s_);
  }
  /// The bucket a batch pads up to, or none.
  std::optional<std::size_t> find(const batch_key& k) const {
    return std::visit([&k](const auto& s) { return s.find(k); }, s_);
  }
  /// The phase that serves a batch: the dispatch key's, else the batch's own.
  phase phase_of(const batch_key& k) const {
    if (const auto* d = std::get_if<dispatch_buckets>(&s_)) return d->phase_of(k);
    return k.ph;
  }
  /// Whether the space keys graphs on the batch itself (it holds dispatch_buckets).
  bool keyed_on_batch() const { return std::holds_alternative<dispatch_buckets>(s_); }
  /// Whether it holds Gaudi's phased prompt and decode grids.
  bool gaudi() const { return std::holds_alternative<gaudi_2d_space>(s_) || std::holds_alternative<gaudi_3d_space>(s_); }
  /// The space it holds.
  const variant& space() const { return s_; }

 private:
  variant s_;
};
static_assert(bucket_space<any_buckets>);

/// Builds the space `c` names. `serving` holds the facts Gaudi's grids derive from (sequences,
/// block size, max_model_len, token budget, KV blocks, prefix caching; engine_config derives
/// it from its own fields) and, as max_num_seqs, the widest uniform-decode graph of
/// `c.dispatch`. When `log` is given, the configuration is written to it as Gaudi's logs print
/// it, or as the capture sizes of a 1-D ladder. Throws rungs::ladder_error (a
/// std::invalid_argument) naming the bad value and the rule it breaks.
inline any_buckets make_buckets(const bucket_config& c, const gaudi::serving_config& serving, std::ostream* log = nullptr) {
  const std::string kind(to_string(c.kind));
  const auto refuse = [&kind](const std::string& what) {
    throw ladder_error("buckets (kind " + kind + "): " + what);
  };
  if (c.dispatch && is_gaudi(c.kind)) refuse("dispatch applies to 1-D ladders only (vllm, sglang, trtllm, explicit)");
  if (!c.rungs.empty() && c.kind != bucket_kind::explicit_rungs) refuse("rungs apply to kind explicit only");
  if (!c.bucket_file.empty() && c.kind != bucket_kind::explicit_rungs && c.kind != bucket_kind::gaudi_file)
    refuse("bucket_file '" + c.bucket_file + "' applies to kinds gaudi-file and explicit only");
  if (c.max_capture_size != 0 && !is_capture_size_preset(c.kind))
    refuse("max_capture_size = " + std::to_string(c.max_capture_size) + " applies to kinds vllm, sglang and trtllm only");
  if (c.getenv && !is_gaudi(c.kind)) refuse("getenv applies to Gaudi's kinds only (their VLLM_* variables)");
  if (!is_gaudi(c.kind)) {
    if (is_capture_size_preset(c.kind) && c.max_capture_size <= 0)
      refuse("max_capture_size = " + std::to_string(c.max_capture_size) + " must be positive");
    if (c.kind == bucket_kind::explicit_rungs && c.rungs.empty() == c.bucket_file.empty())
      refuse(c.rungs.empty() ? "needs rungs or a bucket_file" : "takes rungs or a bucket_file, not both");
    const rungs::ladder l = [&]() -> rungs::ladder {
      if (c.kind == bucket_kind::vllm) return rungs::ladder{CaptureSizes::vllm(c.max_capture_size)};
      if (c.kind == bucket_kind::sglang) return rungs::ladder{CaptureSizes::sglang(c.max_capture_size)};
      if (c.kind == bucket_kind::trtllm) return rungs::ladder{CaptureSizes::trtllm(c.max_capture_size)};
      Explicit<> e{c.rungs};
      if (e.values.empty())
        for (const rungs::bucket<1>& b : read_bucket_file<1>(c.bucket_file)) e.values.push_back(b[0]);
      return rungs::ladder{e};
    }();
    if (log) {
      *log << "CUDA graph capture sizes (" << kind << ", tokens per step, " << l.size() << " rungs): [";
      for (std::size_t i = 0; i < l.size(); ++i) *log << (i ? ", " : "") << l[i];
      *log << "]; steps of more tokens run eagerly\n";
    }
    if (!c.dispatch) return any_buckets::ladder_space(l, phase::decode);
    dispatch_buckets d(l, {.max_num_seqs = serving.max_num_seqs});
    if (log)
      *log << "Dispatch key (tokens, uniform decode), vLLM V1's: " << d.decode_graphs()
           << " uniform-decode graphs (one new token per sequence, up to " << serving.max_num_seqs << " sequences) and "
           << d.mixed_graphs() << " token-count graphs\n";
    return d;
  }
  if (c.kind == bucket_kind::gaudi_file && c.bucket_file.empty()) refuse("needs a bucket_file");
  const auto getenv = [&c](const char* name) -> std::optional<std::string> {
    if (c.kind == bucket_kind::gaudi_file && std::string_view(name) == "VLLM_BUCKETING_FROM_FILE") return c.bucket_file;
    if (c.getenv) return c.getenv(name);
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
  };
  if (c.kind == bucket_kind::gaudi_linear) {
    const gaudi::bucket_plan<2> plan =
        gaudi::linear_buckets(gaudi::read_bucket_config(serving, gaudi::strategy::linear, getenv), serving);
    if (log) gaudi::write_log(*log, plan);
    return gaudi_buckets(plan);
  }
  const gaudi::strategy st = c.kind == bucket_kind::gaudi_file ? gaudi::strategy::file : gaudi::strategy::exponential;
  const gaudi::bucket_config config = gaudi::read_bucket_config(serving, st, getenv);
  const gaudi::bucket_plan<3> plan =
      st == gaudi::strategy::file ? gaudi::file_buckets(config, serving) : gaudi::exponential_buckets(config, serving);
  if (log) gaudi::write_log(*log, plan);
  return gaudi_buckets(plan);
}

}  // namespace rungs::engine
