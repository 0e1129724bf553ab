// cost_model: what a step, a graph capture and a graph cost, for planning without a GPU.
//
// A step is a roofline: the larger of its memory time and its compute time, plus the launch
// overhead of a graph replay or of an eager step:
//   step = max(weights + context_tokens x per_context_token,                      (bytes / bandwidth)
//              tokens_run x per_token + context_tokens x compute_per_context_token) (FLOPs / peak)
//          + (graph ? graph_overhead : eager_overhead)
//          + step_overhead + tokens_run x overhead_per_token                      (0 unless calibrated)
//          + sequences x overhead_per_sequence
// where tokens_run is the bucket's padded size when a graph replays (padded rows are
// computed too) and the real tokens when the step runs eagerly. So padding costs time only
// once a step is compute-bound, as on a GPU, and an eager step pays the kernel launches a
// graph replay saves.
//
// Two ways to get the figures:
//   - roofline_cost(gpu, model, tp, base, profile): derived from a GPU's bandwidth and peak and
//     a model's shape (presets below, or from a file: read_cost_presets); see roofline_cost.
//     The profile `calibrated` replaces the datasheet efficiencies and adds the serving stack's
//     CPU time and tensor parallelism's all-reduces, fitted to published measurements
//     (planning/fidelity.hpp; docs/planning.md, "Fidelity").
//   - cost_model{} (the preset "blog-4090"): the constants rungs has always used, for the
//     paged-KV blog's Mistral-7B in fp16 on an RTX 4090. With compute_per_context_token unset
//     the context term is on both sides, so the step is max(weights, tokens x per_token) +
//     context x per_context_token:
//   weights            16.7 ms  the blog: 14 GB of weights per step at 1008 GB/s (72 tok/s
//                               ideal), ~60 tok/s in practice: 1 / 60 s
//   per_token          0.15 ms  2 x 7.2 GFLOP per token at ~100 TFLOP/s (60% of the 4090's
//                               165 TFLOP/s fp16 dense): prefill and large batches
//   per_context_token  0.13 us  attention reads 128 KiB of K and V per cached token (the
//                               blog's 0.125 MiB) at 1008 GB/s
//   eager overhead     6 ms     launching ~400 kernels (32 layers x ~12) from eager PyTorch at
//                               ~15 us each (an estimate; cuda-graphs.md reports eager batches
//                               up to 7.5x slower than replays, vllm-ascend #16049, and 25
//                               against 133 tok/s for speculative decoding sent eager)
//   graph overhead     0        (the replay's own launch is folded into the other figures)
//   capture            0.05 s + 0.02 s x rung / 512   cuda-graphs.md and the lazy-capture PR:
//                               Llama-3.1-8B piecewise graphs take 0.05-0.07 s each (0.073 s for
//                               512 tokens, 3.8 s for vLLM's 67)
//   graph memory       24 MiB + 4 MiB x rung / 512    the same sources: 24-28 MiB per graph
//                               when captured one by one (the lazy PR's log)
// Every figure can be overridden (rungs-plan simulate --step-cost, --capture-cost, ...).
// validate() keeps every result finite: each time figure is at most max_cost_seconds, and
// graph_memory refuses a result past int64.
#pragma once

#include <rungs/checked.hpp>
#include <rungs/kv/capacity.hpp>
#include <rungs/ladder/rung.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::planning {

/// Largest time figure of a cost model (an hour): any sum of steps then stays finite.
inline constexpr double max_cost_seconds = 3600;

namespace detail {
/// The shortest text that reads back as v (1e+308, not 309 digits).
inline std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}
}  // namespace detail

struct cost_model {
  double weights_seconds = 1.0 / 60;
  double seconds_per_token = 1.5e-4;
  double seconds_per_context_token = 1.3e-7;  ///< memory side: K and V read per context token
  /// Compute side: attention FLOPs per context token; unset: seconds_per_context_token (the
  /// blog-4090 preset's additive context term).
  std::optional<double> compute_seconds_per_context_token{};
  double eager_overhead_seconds = 0.006;
  double graph_overhead_seconds = 0;
  /// Paid by every step, replayed or eager, outside the roofline: the serving stack's CPU
  /// time per step (scheduling, input preparation) and tensor parallelism's all-reduce
  /// latencies. 0 in every preset but a calibrated profile (cost_profile).
  double step_overhead_seconds = 0;
  /// Likewise per token row run: tensor parallelism's all-reduced activations.
  double overhead_seconds_per_token = 0;
  /// Likewise per sequence in the step: the stack's CPU time per request (sampling, output
  /// processing, scheduling it).
  double overhead_seconds_per_sequence = 0;
  double capture_seconds = 0.05;
  double capture_seconds_per_token = 0.02 / 512;
  std::int64_t graph_bytes = std::int64_t{24} << 20;
  std::int64_t graph_bytes_per_token = (std::int64_t{4} << 20) / 512;

  /// Seconds of one step running `tokens_run` token rows of `sequences` sequences over
  /// `context_tokens` KV tokens.
  double step_seconds(std::int64_t tokens_run, std::int64_t context_tokens, bool graph, std::int64_t sequences = 0) const {
    const double context = static_cast<double>(context_tokens);
    const double memory = weights_seconds + context * seconds_per_context_token;
    const double compute = static_cast<double>(tokens_run) * seconds_per_token +
                           context * compute_seconds_per_context_token.value_or(seconds_per_context_token);
    return std::max(memory, compute) + (graph ? graph_overhead_seconds : eager_overhead_seconds) +
           step_overhead_seconds + static_cast<double>(tokens_run) * overhead_seconds_per_token +
           static_cast<double>(sequences) * overhead_seconds_per_sequence;
  }
  double capture_time(rung_t rung) const { return capture_seconds + capture_seconds_per_token * static_cast<double>(rung); }
  /// Bytes of the graph for `rung`; throws std::overflow_error when past int64.
  std::int64_t graph_memory(rung_t rung) const {
    const std::optional<std::int64_t> per = checked_mul(graph_bytes_per_token, static_cast<std::int64_t>(rung));
    const std::optional<std::int64_t> total = per ? checked_add(graph_bytes, *per) : std::nullopt;
    if (!total)
      throw std::overflow_error("cost model: graph memory " + std::to_string(graph_bytes) + " + " +
                                std::to_string(graph_bytes_per_token) + " x " + std::to_string(rung) +
                                " bytes is past 2^63 - 1");
    return *total;
  }

  /// Capturing every rung: seconds and bytes.
  double capture_time(std::span<const rung_t> rungs) const {
    double s = 0;
    for (rung_t r : rungs) s += capture_time(r);
    return s;
  }
  std::int64_t graph_memory(std::span<const rung_t> rungs) const {
    std::int64_t b = 0;
    for (rung_t r : rungs) {
      const std::optional<std::int64_t> sum = checked_add(b, graph_memory(r));
      if (!sum)
        throw std::overflow_error("cost model: the graphs of " + std::to_string(rungs.size()) +
                                  " rungs take more than 2^63 - 1 bytes");
      b = *sum;
    }
    return b;
  }

  /// Throws std::invalid_argument naming the first figure that is negative, not finite, or
  /// (times) above max_cost_seconds.
  void validate() const {
    auto seconds = [](const char* what, double v) {
      if (!(v >= 0)) throw std::invalid_argument(std::string("cost model: ") + what + " = " + detail::number_text(v) + " must not be negative");
      if (!(v <= max_cost_seconds))
        throw std::invalid_argument(std::string("cost model: ") + what + " = " + detail::number_text(v) +
                                    " must be at most 3600 seconds (results must stay finite)");
    };
    seconds("weights_seconds", weights_seconds);
    seconds("seconds_per_token", seconds_per_token);
    seconds("seconds_per_context_token", seconds_per_context_token);
    if (compute_seconds_per_context_token) seconds("compute_seconds_per_context_token", *compute_seconds_per_context_token);
    seconds("eager_overhead_seconds", eager_overhead_seconds);
    seconds("graph_overhead_seconds", graph_overhead_seconds);
    seconds("step_overhead_seconds", step_overhead_seconds);
    seconds("overhead_seconds_per_token", overhead_seconds_per_token);
    seconds("overhead_seconds_per_sequence", overhead_seconds_per_sequence);
    seconds("capture_seconds", capture_seconds);
    seconds("capture_seconds_per_token", capture_seconds_per_token);
    if (graph_bytes < 0) throw std::invalid_argument("cost model: graph_bytes = " + std::to_string(graph_bytes) + " must not be negative");
    if (graph_bytes_per_token < 0)
      throw std::invalid_argument("cost model: graph_bytes_per_token = " + std::to_string(graph_bytes_per_token) + " must not be negative");
    if (weights_seconds + seconds_per_token <= 0)
      throw std::invalid_argument("cost model: a step must take time (weights_seconds or seconds_per_token positive)");
  }
};

// ---- the roofline from a GPU and a model ---------------------------------------------------

/// A GPU: datasheet figures (dense bf16, no sparsity) and the share of them a kernel reaches.
struct gpu_spec {
  std::string name;
  double memory_bandwidth = 0;         ///< bytes/s (HBM)
  double bf16_flops = 0;               ///< FLOP/s, dense
  std::int64_t memory_bytes = 0;
  double bandwidth_efficiency = 0.9;   ///< kernels.md: a device copy reaches ~3.0 of 3.35 TB/s (H100), ~4.3 of 4.8 (H200)
  double compute_efficiency = 1.0;     ///< unmeasured: the datasheet peak (compute-bound steps are a lower bound)
  double launch_seconds = 15e-6;       ///< one kernel launched from eager PyTorch (the blog-4090 preset's estimate)
  /// Bytes/s one GPU sends to its tensor-parallel peers, one direction (NVLink; PCIe without
  /// it): what an all-reduce's ring moves its data at. Used by a cost_profile that models
  /// communication.
  double link_bandwidth = 0;
};

/// A decoder-only transformer with grouped-query attention and a gated MLP (Llama, Mistral,
/// Qwen2.5), as in its config.json.
struct model_spec {
  std::string name;
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0, vocab = 0;
  bool tied_embeddings = false;
  std::int64_t bytes_per_parameter = 2;  ///< bf16 weights and KV

  /// Weights of one layer: q and o (hidden x heads x head_dim each), k and v (hidden x
  /// kv_heads x head_dim each), gate, up and down (hidden x intermediate each). Norms and
  /// biases are left out (under 0.1%).
  std::int64_t layer_parameters() const {
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate;
  }
  /// Weights every step reads: the layers and the output head (the embedding table is
  /// indexed, not read whole).
  std::int64_t step_parameters() const { return layers * layer_parameters() + vocab * hidden; }
  std::int64_t parameters() const { return step_parameters() + (tied_embeddings ? 0 : vocab * hidden); }
};

/// Kernels an eager step launches per layer (norms, projections, rotary, attention, MLP,
/// residual adds): the blog-4090 preset's ~400 for 32 layers.
inline constexpr std::int64_t eager_kernels_per_layer = 12;

inline const std::vector<gpu_spec>& gpu_presets() {
  // NVIDIA datasheets. Memory as marketed (decimal GB); links one direction: NVLink 4 900 GB/s
  // and NVLink 3 600 GB/s both directions together, the L40S a PCIe 4.0 x16 slot (32 GB/s).
  static const std::vector<gpu_spec> presets = {
      {.name = "h100-sxm", .memory_bandwidth = 3.35e12, .bf16_flops = 989e12, .memory_bytes = 80'000'000'000,
       .link_bandwidth = 450e9},
      {.name = "h200", .memory_bandwidth = 4.8e12, .bf16_flops = 989e12, .memory_bytes = 141'000'000'000,
       .link_bandwidth = 450e9},
      {.name = "a100-80gb", .memory_bandwidth = 2.039e12, .bf16_flops = 312e12, .memory_bytes = 80'000'000'000,
       .link_bandwidth = 300e9},
      {.name = "l40s", .memory_bandwidth = 864e9, .bf16_flops = 362e12, .memory_bytes = 48'000'000'000,
       .link_bandwidth = 32e9},
  };
  return presets;
}

inline const std::vector<model_spec>& model_presets() {
  // The models' config.json on Hugging Face.
  static const std::vector<model_spec> presets = {
      {.name = "llama-3-8b", .layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
       .intermediate = 14336, .vocab = 128256},
      {.name = "llama-3-70b", .layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8, .head_dim = 128,
       .intermediate = 28672, .vocab = 128256},
      {.name = "mistral-7b", .layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
       .intermediate = 14336, .vocab = 32000},
      {.name = "qwen2.5-7b", .layers = 28, .hidden = 3584, .heads = 28, .kv_heads = 4, .head_dim = 128,
       .intermediate = 18944, .vocab = 152064},
      {.name = "qwen2.5-72b", .layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8, .head_dim = 128,
       .intermediate = 29568, .vocab = 152064},
  };
  return presets;
}

/// GPUs and models known by name: the presets, plus or overridden by a file's.
struct cost_presets {
  std::vector<gpu_spec> gpus = gpu_presets();
  std::vector<model_spec> models = model_presets();

  const gpu_spec& gpu(std::string_view name) const { return find(gpus, name, "GPU"); }
  const model_spec& model(std::string_view name) const { return find(models, name, "model"); }

 private:
  template <class T>
  static const T& find(const std::vector<T>& v, std::string_view name, const char* what) {
    std::string known;
    for (const T& x : v) {
      if (x.name == name) return x;
      known += (known.empty() ? "" : ", ") + x.name;
    }
    throw std::invalid_argument(std::string("unknown ") + what + " '" + std::string(name) + "' (known: " + known + ")");
  }
};

/// One rank's KV geometry under tensor parallelism: the KV heads split across ranks (a KV
/// head is replicated when there are more ranks than KV heads).
inline kv::kv_shape kv_geometry(const model_spec& m, std::int64_t tp) {
  return {.layers = m.layers, .kv_heads = std::max<std::int64_t>(1, m.kv_heads / tp), .head_dim = m.head_dim,
          .bytes_per_element = m.bytes_per_parameter};
}

/// Checks a GPU, a model and a tensor-parallel degree; throws std::invalid_argument naming
/// the first bad figure.
inline void validate(const gpu_spec& g, const model_spec& m, std::int64_t tp) {
  auto positive = [](const std::string& what, double v, double most) {
    if (!(v > 0) || !(v <= most))
      throw std::invalid_argument(what + " = " + detail::number_text(v) + " must be positive and at most " + detail::number_text(most));
  };
  positive("gpu " + g.name + ": memory_bandwidth", g.memory_bandwidth, 1e16);
  positive("gpu " + g.name + ": bf16_flops", g.bf16_flops, 1e19);
  positive("gpu " + g.name + ": memory_bytes", static_cast<double>(g.memory_bytes), 1e15);
  positive("gpu " + g.name + ": bandwidth_efficiency", g.bandwidth_efficiency, 1);
  positive("gpu " + g.name + ": compute_efficiency", g.compute_efficiency, 1);
  if (!(g.launch_seconds >= 0 && g.launch_seconds <= 1))
    throw std::invalid_argument("gpu " + g.name + ": launch_seconds = " + detail::number_text(g.launch_seconds) + " must be in [0, 1]");
  if (!(g.link_bandwidth >= 0 && g.link_bandwidth <= 1e16))
    throw std::invalid_argument("gpu " + g.name + ": link_bandwidth = " + detail::number_text(g.link_bandwidth) +
                                " must be in [0, 1e16]");
  // Each dimension at most 2^20 (hidden x intermediate x 3 x layers then stays far below 2^63).
  const std::pair<const char*, std::int64_t> dims[] = {{"layers", m.layers},   {"hidden", m.hidden},
                                                       {"heads", m.heads},     {"kv_heads", m.kv_heads},
                                                       {"head_dim", m.head_dim}, {"intermediate", m.intermediate},
                                                       {"vocab", m.vocab},     {"bytes_per_parameter", m.bytes_per_parameter}};
  for (const auto& [what, v] : dims)
    if (v < 1 || v > (std::int64_t{1} << 20))
      throw std::invalid_argument("model " + m.name + ": " + what + " = " + std::to_string(v) + " must be in [1, 2^20]");
  if (m.bytes_per_parameter > 8)
    throw std::invalid_argument("model " + m.name + ": bytes_per_parameter = " + std::to_string(m.bytes_per_parameter) + " must be at most 8");
  if (tp < 1 || tp > 1024) throw std::invalid_argument("tensor-parallel degree = " + std::to_string(tp) + " must be in [1, 1024]");
  if (m.heads % tp != 0)
    throw std::invalid_argument("tensor-parallel degree = " + std::to_string(tp) + " must divide model " + m.name +
                                "'s heads = " + std::to_string(m.heads));
  if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0)
    throw std::invalid_argument("tensor-parallel degree = " + std::to_string(tp) + " and model " + m.name +
                                "'s kv_heads = " + std::to_string(m.kv_heads) + ": one must divide the other");
}

/// What the datasheet roofline leaves out, as constants fitted to published serving
/// measurements (docs/planning.md, "Fidelity"): a profile replaces the GPU's kernel
/// efficiencies and adds the serving stack's overheads and tensor parallelism's all-reduces.
/// The default profile (`datasheet`) adds nothing: roofline_cost as it always was.
struct cost_profile {
  std::string name = "datasheet";
  std::optional<double> bandwidth_efficiency{};  ///< replaces the GPU's when set
  std::optional<double> compute_efficiency{};    ///< replaces the GPU's when set
  double step_seconds = 0;          ///< CPU per step: scheduling, input preparation, launch
  double seconds_per_sequence = 0;  ///< CPU per sequence in a step: sampling, output processing
  /// Tensor parallelism (tp > 1): two all-reduces per layer (after attention and after the
  /// MLP) of every token row's hidden state, a ring moving 2 (tp - 1) / tp of the bytes at
  /// link_efficiency x the GPU's link_bandwidth, each all-reduce also waiting
  /// allreduce_seconds. link_efficiency 0: communication is not modelled.
  double link_efficiency = 0;
  double allreduce_seconds = 0;

  /// Throws std::invalid_argument naming the first bad figure.
  void validate() const {
    auto in = [&](const char* what, double v, double lo, double hi, bool open_low) {
      if (!(open_low ? v > lo : v >= lo) || !(v <= hi))
        throw std::invalid_argument("cost profile " + name + ": " + what + " = " + detail::number_text(v) + " must be in " +
                                    (open_low ? "(" : "[") + detail::number_text(lo) + ", " + detail::number_text(hi) + "]");
    };
    if (bandwidth_efficiency) in("bandwidth_efficiency", *bandwidth_efficiency, 0, 1, true);
    if (compute_efficiency) in("compute_efficiency", *compute_efficiency, 0, 1, true);
    in("step_seconds", step_seconds, 0, 1, false);
    in("seconds_per_sequence", seconds_per_sequence, 0, 1, false);
    in("link_efficiency", link_efficiency, 0, 1, false);
    in("allreduce_seconds", allreduce_seconds, 0, 1, false);
  }
};

/// The profiles known by name: `datasheet` (nothing added: the default) and `calibrated`
/// (fitted by `rungs-plan fidelity --fit` on the fit half of benchmarks/fidelity/published.csv;
/// docs/planning.md, "Fidelity", gives the figures and the error on the held-out half).
inline const std::vector<cost_profile>& cost_profiles() {
  static const std::vector<cost_profile> profiles = {
      {},
      // `rungs-plan fidelity --published benchmarks/fidelity/published.csv --fit`, run three
      // times, each from the previous result: from bandwidth 0.8, compute 0.65, 1.5 ms a step,
      // 20 us a sequence and 20 us an all-reduce, the fit loss went 0.0506, 0.0399, 0.0347 (a
      // coordinate search stops at local minima; docs/planning.md, "Fidelity").
      // link_efficiency is assumed (not fitted: two of the fit runs use more than one GPU).
      {.name = "calibrated", .bandwidth_efficiency = 0.783, .compute_efficiency = 0.48, .step_seconds = 1.5e-3,
       .seconds_per_sequence = 1.84e-5, .link_efficiency = 0.75, .allreduce_seconds = 2.63e-5},
  };
  return profiles;
}

/// The profile named `name`; throws std::invalid_argument listing the known ones.
inline const cost_profile& cost_profile_named(std::string_view name) {
  std::string known;
  for (const cost_profile& p : cost_profiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw std::invalid_argument("unknown cost profile '" + std::string(name) + "' (known: " + known + ")");
}

/// The roofline of one tensor-parallel rank (every rank does the same work in lockstep):
///   weights                    step_parameters x bytes / tp / (bandwidth x efficiency)
///   per_token                  2 x step_parameters / tp FLOPs / (peak x efficiency)
///   per_context_token (memory) K and V of one token on this rank / (bandwidth x efficiency)
///   per_context_token (FLOPs)  4 x heads / tp x head_dim x layers (QK and PV) / (peak x efficiency)
///   eager overhead             layers x eager_kernels_per_layer x launch_seconds
///   graph overhead             layers x launch_seconds: vLLM v1's piecewise graphs launch
///                              attention eagerly between the graph pieces, once per layer
/// and, from `profile` (the efficiencies above are its own when it sets them):
///   step overhead              step_seconds + 2 x layers x allreduce_seconds (tp > 1)
///   overhead per sequence      seconds_per_sequence
///   overhead per token         2 x layers x 2 (tp - 1) / tp x hidden x bytes
///                              / (link_bandwidth x link_efficiency)           (tp > 1)
/// Capture time and graph memory are `base`'s (by default the blog-4090 preset's, measured on
/// Llama-3.1-8B per graph; no source scales them to other models).
inline cost_model roofline_cost(const gpu_spec& g, const model_spec& m, std::int64_t tp = 1, const cost_model& base = {},
                                const cost_profile& profile = {}) {
  validate(g, m, tp);
  profile.validate();
  const double bandwidth = g.memory_bandwidth * profile.bandwidth_efficiency.value_or(g.bandwidth_efficiency);
  const double peak = g.bf16_flops * profile.compute_efficiency.value_or(g.compute_efficiency);
  const double ranks = static_cast<double>(tp);
  const double step_parameters = static_cast<double>(m.step_parameters());
  cost_model c = base;
  c.weights_seconds = step_parameters * static_cast<double>(m.bytes_per_parameter) / ranks / bandwidth;
  c.seconds_per_token = 2 * step_parameters / ranks / peak;
  c.seconds_per_context_token = static_cast<double>(kv::bytes_per_token(kv_geometry(m, tp))) / bandwidth;
  c.compute_seconds_per_context_token =
      4.0 * static_cast<double>(m.heads / tp * m.head_dim * m.layers) / peak;
  c.eager_overhead_seconds = static_cast<double>(m.layers * eager_kernels_per_layer) * g.launch_seconds;
  c.graph_overhead_seconds = static_cast<double>(m.layers) * g.launch_seconds;
  c.step_overhead_seconds = profile.step_seconds;
  c.overhead_seconds_per_token = 0;
  c.overhead_seconds_per_sequence = profile.seconds_per_sequence;
  if (tp > 1 && profile.link_efficiency > 0) {
    if (!(g.link_bandwidth > 0))
      throw std::invalid_argument("gpu " + g.name + ": link_bandwidth = 0, but cost profile " + profile.name +
                                  " prices tensor parallelism's all-reduces: give the GPU a link_bandwidth");
    const double all_reduces = 2.0 * static_cast<double>(m.layers);
    c.step_overhead_seconds += all_reduces * profile.allreduce_seconds;
    c.overhead_seconds_per_token += all_reduces * 2 * (ranks - 1) / ranks * static_cast<double>(m.hidden * m.bytes_per_parameter) /
                                    (g.link_bandwidth * profile.link_efficiency);
  }
  c.validate();
  return c;
}

/// Bytes of one rank's weights (the whole model, embedding included, split tp ways).
inline std::int64_t weight_bytes(const model_spec& m, std::int64_t tp) { return m.parameters() * m.bytes_per_parameter / tp; }

namespace detail {
[[noreturn]] inline void preset_fail(std::string_view file, std::size_t line, const std::string& why) {
  throw std::invalid_argument(std::string(file) + ":" + std::to_string(line) + ": " + why);
}
}  // namespace detail

/// Reads presets, one per line, into `into` (a name already known is overridden field by
/// field; a new one needs every field without a default):
///   gpu NAME memory_bandwidth=3.35e12 bf16_flops=989e12 memory_bytes=80e9 [bandwidth_efficiency=0.9]
///       [compute_efficiency=1] [launch_seconds=15e-6] [link_bandwidth=450e9]
///   model NAME layers=32 hidden=4096 heads=32 kv_heads=8 head_dim=128 intermediate=14336
///       vocab=128256 [tied_embeddings=0] [bytes_per_parameter=2]
/// '#' starts a comment. Throws std::invalid_argument "file:line: reason".
inline void read_cost_presets(std::string_view text, std::string_view file, cost_presets& into) {
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words;
    for (std::size_t p = 0; p < line.size();) {
      while (p < line.size() && (line[p] == ' ' || line[p] == '\t' || line[p] == '\r')) ++p;
      const std::size_t start = p;
      while (p < line.size() && line[p] != ' ' && line[p] != '\t' && line[p] != '\r') ++p;
      if (p > start) words.push_back(line.substr(start, p - start));
    }
    if (words.empty()) continue;
    if ((words[0] != "gpu" && words[0] != "model") || words.size() < 2)
      detail::preset_fail(file, number, "expected 'gpu NAME key=value...' or 'model NAME key=value...'");
    const bool gpu = words[0] == "gpu";
    const std::string name(words[1]);
    auto number_of = [&](std::string_view key, std::string_view value) {
      double v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v))
        detail::preset_fail(file, number, std::string(key) + " = '" + std::string(value) + "' is not a finite number");
      return v;
    };
    auto integer_of = [&](std::string_view key, std::string_view value) {
      const double v = number_of(key, value);
      if (v != std::floor(v) || !(std::fabs(v) < 9.2e18))
        detail::preset_fail(file, number, std::string(key) + " = " + std::string(value) + " is not an integer in range");
      return static_cast<std::int64_t>(v);
    };
    auto known = [&](auto& list) -> auto& {
      for (auto& x : list)
        if (x.name == name) return x;
      list.emplace_back();
      list.back().name = name;
      return list.back();
    };
    if (gpu) {
      gpu_spec& g = known(into.gpus);
      for (std::size_t k = 2; k < words.size(); ++k) {
        const std::size_t eq = words[k].find('=');
        if (eq == std::string_view::npos) detail::preset_fail(file, number, "expected key=value, got '" + std::string(words[k]) + "'");
        const std::string_view key = words[k].substr(0, eq), value = words[k].substr(eq + 1);
        if (key == "memory_bandwidth") g.memory_bandwidth = number_of(key, value);
        else if (key == "bf16_flops") g.bf16_flops = number_of(key, value);
        else if (key == "memory_bytes") g.memory_bytes = integer_of(key, value);
        else if (key == "bandwidth_efficiency") g.bandwidth_efficiency = number_of(key, value);
        else if (key == "compute_efficiency") g.compute_efficiency = number_of(key, value);
        else if (key == "launch_seconds") g.launch_seconds = number_of(key, value);
        else if (key == "link_bandwidth") g.link_bandwidth = number_of(key, value);
        else detail::preset_fail(file, number, "unknown gpu key '" + std::string(key) +
                                                   "' (memory_bandwidth, bf16_flops, memory_bytes, bandwidth_efficiency, "
                                                   "compute_efficiency, launch_seconds, link_bandwidth)");
      }
    } else {
      model_spec& m = known(into.models);
      for (std::size_t k = 2; k < words.size(); ++k) {
        const std::size_t eq = words[k].find('=');
        if (eq == std::string_view::npos) detail::preset_fail(file, number, "expected key=value, got '" + std::string(words[k]) + "'");
        const std::string_view key = words[k].substr(0, eq), value = words[k].substr(eq + 1);
        std::int64_t* field = key == "layers"         ? &m.layers
                              : key == "hidden"       ? &m.hidden
                              : key == "heads"        ? &m.heads
                              : key == "kv_heads"     ? &m.kv_heads
                              : key == "head_dim"     ? &m.head_dim
                              : key == "intermediate" ? &m.intermediate
                              : key == "vocab"        ? &m.vocab
                              : key == "bytes_per_parameter" ? &m.bytes_per_parameter
                                                             : nullptr;
        if (field) *field = integer_of(key, value);
        else if (key == "tied_embeddings") m.tied_embeddings = integer_of(key, value) != 0;
        else detail::preset_fail(file, number, "unknown model key '" + std::string(key) +
                                                   "' (layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, "
                                                   "tied_embeddings, bytes_per_parameter)");
      }
    }
    // A preset must be usable as read (tensor-parallel degree 1 checks the shape alone).
    try {
      if (gpu) validate(into.gpu(name), model_presets().front(), 1);
      else validate(gpu_presets().front(), into.model(name), 1);
    } catch (const std::invalid_argument& e) {
      detail::preset_fail(file, number, e.what());
    }
  }
}

}  // namespace rungs::planning
