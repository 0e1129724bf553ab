// Planning for rungs' paged-attention kernels: plain C++, no CUDA.
//
// Plan, then run (after FlashInfer). A plan is made once per bucket (max batch, max context):
// it fixes the grid, the KV split size and the workspace, from the shape and the GPU's SM
// count alone. The run (rungs::attention::decode / prefill in kernels/rungs/attention/
// paged_attention.cuh) is then a fixed launch that reads everything that changes per step
// (sequence lengths, block tables, query offsets) from device buffers the caller owns. Under
// CUDA graphs the run is captured once per bucket; each step the caller writes new metadata
// into the same buffers (write_decode_step / write_prefill_step fill a host staging copy) and
// replays. Sequences shorter than the bucket make the CTAs of their unused splits return
// early; rows of a padded batch have length 0 and produce zero outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <rungs/attention/dispatch.hpp>
#include <rungs/blocks.hpp>
#include <rungs/attention/geometry.hpp>
#include <rungs/attention/layout.hpp>
#include <rungs/attention/score_mod.hpp>

namespace rungs::attention {

/// What the planner needs to know about the GPU (rungs::attention::query_device fills it).
struct device_info {
  int num_sms = 0;
  /// Compute capability x 10 (80: A100, 90: H100 and H200): with the instance's query rows per
  /// thread it gives the CTAs per SM the kernels are built for (geometry::ctas_per_sm), and the
  /// planner picks the tensor-core decode on sm_80 and newer.
  int sm = 0;
};

/// The kernel a plan runs: the SIMT kernel (every shape, transform and cache type) or the
/// tensor-core one (kernels/rungs/attention/detail/tensor_core.cuh; 16-bit and fp8 caches,
/// every score transform; decode: geometry::tensor_core_decode_fits, prefill:
/// geometry::tensor_core_prefill_fits). Both kernels of a plan share its grid,
/// split-KV workspace layout and merge; the kernel's launch bound sets the CTA slots the split
/// model counts on.
enum class attention_kernel { simt, tensor_cores };
/// The decode plan's name for it (decode_plan::kernel, from before prefill had a choice).
using decode_kernel = attention_kernel;

inline const char* name(attention_kernel k) { return k == attention_kernel::simt ? "simt" : "tensor_cores"; }

/// How the KV cache is stored when not in the queries' type: an fp8 format (dtype::fp8_e4m3,
/// dtype::fp8_e5m2) whose element x of KV head h stands for x * scale, with the scales one per
/// tensor or one per KV head (float arrays in device memory: the args' k_scale and v_scale).
struct kv_cache_format {
  std::optional<dtype> type{};   ///< empty: the queries' type (a 16-bit cache, no scales)
  bool per_head_scales = false;  ///< the scale arrays hold num_kv_heads values; else one
};

/// One attention layer's configuration.
struct attention_config {
  dtype type = dtype::bf16;  ///< queries and outputs (and the KV cache unless kv.type says otherwise)
  attention_shape shape{};
  float sm_scale = 0.0f;  ///< softmax scale; 0 means 1/sqrt(head_dim)
  score_values scores{};  ///< sliding window and soft-cap (score_mod.hpp); zeros: causal only
  kv_cache_format kv{};   ///< an fp8 KV cache and its scales; default: the queries' type

  float scale() const { return sm_scale != 0.0f ? sm_scale : 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }
  /// The KV cache's element type.
  dtype cache_type() const { return kv.type.value_or(type); }
  /// Whether the cache is stored in another type than the queries' (fp8: the fp8 instances run).
  bool quantized_cache() const { return cache_type() != type; }
};

/// Planner knobs. The defaults choose the split by the wave model (docs/kernels.md, "Choosing
/// splits"); split_tokens forces a split size (tests use it to exercise many and empty splits),
/// ctas_per_sm the occupancy the model counts on.
struct plan_options {
  int split_tokens = 0;        ///< KV tokens per split; 0: chosen by the wave model
  int min_split_tokens = 256;  ///< smallest split the model considers (amortises the merge)
  int ctas_per_sm = 0;         ///< CTA slots per SM; 0: the instance's launch-bound occupancy on device_info.sm
  std::optional<attention_kernel> kernel{};  ///< force the plan's kernel (decode or prefill); empty: the planner's choice
  /// The tensor-core decode's in-CTA split (warp groups a CTA): 0 the planner's choice
  /// (geometry::tensor_core_decode_warp_groups, where the set compiles it), 1 none, 2 to 4
  /// forced (refused where the plan's kernel, the set or the architecture has no such instance).
  int warp_groups = 0;
};

/// A decode bucket: the largest batch and context one captured launch serves.
struct decode_bucket {
  int max_batch = 0;
  int max_context = 0;
};

/// A prefill/extend bucket. Query tokens of all sequences are packed (ragged, by q_indptr).
struct prefill_bucket {
  int max_batch = 0;
  int max_q_len = 0;     ///< most new tokens of one sequence
  int max_total_q = 0;   ///< most new tokens of the batch; 0 means max_batch * max_q_len
  int max_context = 0;   ///< most tokens (cached + new) of one sequence
};

/// Where the split-KV partial results live in the caller's workspace: per output row
/// (token * num_qo_heads + head), num_splits partial outputs of head_dim floats, then
/// num_splits log2-sum-exp values.
struct split_workspace {
  std::size_t partial_out_offset = 0;  ///< bytes; float[rows][num_splits][head_dim]
  std::size_t partial_lse_offset = 0;  ///< bytes; float[rows][num_splits]
  std::size_t bytes = 0;               ///< 0 when the plan does not split
};

struct decode_plan {
  attention_config config{};
  decode_bucket bucket{};
  int max_blocks_per_seq = 0;  ///< blocks of the longest sequence: the minimum table row length
  int split_tokens = 0;        ///< KV tokens per split
  int num_splits = 1;          ///< splits per (sequence, KV head); 1: no merge pass
  split_workspace workspace{};
  /// The kernel decode<Set, Mod> runs, chosen by plan_decode<Set> among the kernels Set
  /// compiles (check_decode_kernel<Set> refuses a plan for one it lacks).
  decode_kernel kernel = decode_kernel::simt;
  /// The tensor-core decode's warp groups a CTA (1: the 4-warp CTA; 2-4: the in-CTA split of
  /// each split's keys, docs/kernels.md "The in-CTA split"); 1 for the SIMT decode.
  int warp_groups = 1;
  bool split() const { return num_splits > 1; }
};

struct prefill_plan {
  attention_config config{};
  prefill_bucket bucket{};
  int max_blocks_per_seq = 0;
  int q_tiles = 0;             ///< CTAs along the flattened (token, head-in-group) rows
  int split_tokens = 0;
  int num_splits = 1;
  split_workspace workspace{};
  /// The planner's kernel: prefill<Set, Mod> runs the tensor-core prefill (compiled with Mod)
  /// when this says so, else the SIMT one.
  attention_kernel kernel = attention_kernel::simt;
  bool split() const { return num_splits > 1; }
};

/// Device buffers of one decode run. Pointers stay fixed for a captured bucket; their
/// contents change per step.
struct decode_args {
  const void* q = nullptr;               ///< [max_batch][num_qo_heads][head_dim]
  std::int64_t q_stride = 0;             ///< elements between sequences' queries; 0: num_qo_heads*head_dim
  const void* k_cache = nullptr;         ///< pool, see layout.hpp
  const void* v_cache = nullptr;
  const std::int32_t* block_tables = nullptr;  ///< [max_batch][block_table_stride] block ids
  std::int64_t block_table_stride = 0;   ///< ints per table row; 0: plan.max_blocks_per_seq
  const std::int32_t* seq_lens = nullptr;      ///< [max_batch]; 0 for padded rows
  void* out = nullptr;                   ///< [max_batch][num_qo_heads][head_dim]
  void* workspace = nullptr;             ///< plan.workspace.bytes (none when not split)
  std::size_t workspace_bytes = 0;
  const float* sinks = nullptr;          ///< [num_qo_heads] sink logits (score_mod::sinks); null: none
  const float* k_scale = nullptr;        ///< fp8 cache: [1 or num_kv_heads] (kv_cache_format); null: 1
  const float* v_scale = nullptr;
};

/// Device buffers of one prefill/extend run. The new tokens' K and V must already be in the
/// cache (cache_write), so a sequence's kv_len counts its cached and new tokens.
struct prefill_args {
  const void* q = nullptr;               ///< [total_q][num_qo_heads][head_dim], packed by q_indptr
  std::int64_t q_stride = 0;             ///< elements between tokens; 0: num_qo_heads*head_dim
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const std::int32_t* block_tables = nullptr;
  std::int64_t block_table_stride = 0;
  const std::int32_t* q_indptr = nullptr;  ///< [max_batch + 1]; sequence b's tokens are q_indptr[b] .. q_indptr[b+1]
  const std::int32_t* kv_lens = nullptr;   ///< [max_batch]
  void* out = nullptr;                   ///< [max_total_q][num_qo_heads][head_dim]
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  const float* sinks = nullptr;          ///< [num_qo_heads] sink logits (score_mod::sinks); null: none
  const float* k_scale = nullptr;        ///< fp8 cache: [1 or num_kv_heads] (kv_cache_format); null: 1
  const float* v_scale = nullptr;
};

/// Device buffers of one cache write: this step's keys and values go to the slots of
/// slot_mapping. Slots are int64 (vLLM's convention) so that slot * row size never overflows;
/// a negative slot (-1: a padded row) writes nothing.
struct cache_write_args {
  const void* k = nullptr;               ///< [num_tokens][num_kv_heads][head_dim], rows k_stride apart
  const void* v = nullptr;
  std::int64_t k_stride = 0;             ///< elements between tokens; 0: num_kv_heads*head_dim
  std::int64_t v_stride = 0;
  const std::int64_t* slot_mapping = nullptr;  ///< [num_tokens]
  std::int64_t num_tokens = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const float* k_scale = nullptr;        ///< fp8 cache: the write stores fp8(x / scale); null: 1
  const float* v_scale = nullptr;
};

namespace detail {

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw std::invalid_argument(os.str());
}

// Token positions and split offsets are int32 in the kernels; 2^30 leaves room for the last split.
inline constexpr int max_context_limit = 1 << 30;

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Architectures the kernels run on (sm_80 or later). geometry::ctas_per_sm knows the
// occupancy of sm_80 and sm_90, which the default build compiles and scripts/sass-check
// verifies; on the others it guarantees 1 CTA per SM, so plans there count 1 slot per SM
// unless plan_options::ctas_per_sm says more.
inline constexpr int known_sms[] = {80, 86, 87, 89, 90, 100, 103, 110, 120, 121};

// The split-KV wave model may make a launch at most this many waves of CTA slots (unless the
// unsplit launch already has more): it bounds the search and, independently of the context,
// the workspace (decode_workspace_bound).
inline constexpr int max_split_waves = 4;

// What the wave model needs to know about one launch.
struct split_problem {
  std::int64_t ctas = 0;  // CTAs without a split: (query tiles x) sequences x KV heads
  std::int64_t rows = 0;  // output rows the merge combines: query tokens x query heads
  int context = 0;        // the bucket's longest KV length
  int head_dim = 0;
  int kv_bytes = 0;       // bytes per KV element
  int ctas_per_sm = 0;    // the instance's launch-bound occupancy on the device
};

inline int slots_per_sm(const split_problem& p, const plan_options& opt) {
  return opt.ctas_per_sm > 0 ? opt.ctas_per_sm : p.ctas_per_sm;
}

// Most splits the model considers for a launch of `ctas` unsplit CTAs on `slots` CTA slots.
inline std::int64_t max_model_splits(std::int64_t ctas, std::int64_t slots, int context, int min_split_tokens) {
  return std::max<std::int64_t>(1, std::min(ceil_div(context, min_split_tokens), max_split_waves * slots / ctas));
}

// Predicted time of a launch split into num_splits pieces of split_tokens KV tokens, in units
// of the time one CTA slot takes to stream one token's K and V of one head while every slot
// streams (so the unit hides the GPU's bandwidth and only ratios matter). A CTA costs its
// split's tokens plus one pipeline tile, the tile it loads before anything overlaps it; the
// n CTAs run in ceil(n / slots) waves, a partial last wave costing a whole one. A split adds
// the merge: each split's partial output (head_dim floats and a log-sum-exp per row) written
// and read back, over the whole GPU's bandwidth, plus one tile for the dependent launch.
inline double split_time(const split_problem& p, std::int64_t slots, int split_tokens, int num_splits) {
  const double tile = geometry::tile_tokens(p.head_dim);
  const std::int64_t waves = ceil_div(p.ctas * num_splits, slots);
  double t = static_cast<double>(waves) * (split_tokens + tile);
  if (num_splits > 1) {
    const double partial_bytes = 2.0 * static_cast<double>(p.rows) * num_splits * (p.head_dim * 4.0 + 4.0);
    const double unit_bytes = static_cast<double>(slots) * 2.0 * p.head_dim * p.kv_bytes;
    t += partial_bytes / unit_bytes + tile;
  }
  return t;
}

inline void choose_splits(const split_problem& prob, const device_info& dev, const plan_options& opt,
                          int& split_tokens, int& num_splits) {
  if (opt.split_tokens < 0) fail("plan_options.split_tokens = ", opt.split_tokens, " must be 0 (choose) or positive");
  if (opt.ctas_per_sm < 0) {
    fail("plan_options.ctas_per_sm = ", opt.ctas_per_sm, " must be 0 (the instance's occupancy) or positive");
  }
  const int context = prob.context;
  if (opt.split_tokens > 0) {
    split_tokens = opt.split_tokens;
    num_splits = static_cast<int>(ceil_div(context, split_tokens));
    return;
  }
  if (opt.min_split_tokens < 1) fail("plan_options.min_split_tokens = ", opt.min_split_tokens, " must be at least 1");
  const std::int64_t slots = static_cast<std::int64_t>(dev.num_sms) * slots_per_sm(prob, opt);
  const std::int64_t most = max_model_splits(prob.ctas, slots, context, opt.min_split_tokens);
  double best = 0.0;
  // Splits cut the context evenly, rounded up to whole pipeline tiles: a CTA pays for a partial
  // tile as for a whole one, and the kernels need no other alignment (a split may start inside
  // a KV block; each token's row is whole 32-byte sectors).
  const std::int64_t tile = geometry::tile_tokens(prob.head_dim);
  for (std::int64_t wanted = 1; wanted <= most; ++wanted) {
    std::int64_t tokens = std::max<std::int64_t>(round_up(ceil_div(context, wanted), tile), opt.min_split_tokens);
    tokens = std::min<std::int64_t>(tokens, context);
    const int n = static_cast<int>(ceil_div(context, tokens));
    const double t = split_time(prob, slots, static_cast<int>(tokens), n);
    if (wanted == 1 || t < best) {  // ties keep fewer splits: less workspace, no merge
      best = t;
      split_tokens = static_cast<int>(tokens);
      num_splits = n;
    }
  }
}

inline split_workspace make_split_workspace(std::int64_t rows, int num_splits, int head_dim) {
  split_workspace w;
  if (num_splits <= 1) return w;
  const auto per_row = static_cast<std::size_t>(num_splits);
  w.partial_out_offset = 0;
  const std::size_t out_bytes = static_cast<std::size_t>(rows) * per_row * static_cast<std::size_t>(head_dim) * sizeof(float);
  w.partial_lse_offset = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(out_bytes), 256));
  w.bytes = w.partial_lse_offset + static_cast<std::size_t>(rows) * per_row * sizeof(float);
  return w;
}

// Sequences are the grid's z dimension.
inline void check_max_batch(int max_batch, const char* bucket) {
  if (max_batch < 1 || max_batch > 65535) fail(bucket, ".max_batch = ", max_batch, " must be in [1, 65535] (the grid's z limit)");
}

inline void check_device(const device_info& dev) {
  if (dev.num_sms < 1) fail("device_info.num_sms = ", dev.num_sms, " must be at least 1 (use query_device())");
  if (std::find(std::begin(known_sms), std::end(known_sms), dev.sm) == std::end(known_sms)) {
    std::ostringstream known;
    for (const int sm : known_sms) known << (sm == known_sms[0] ? "" : ", ") << sm;
    fail("device_info.sm = ", dev.sm, " is not an architecture the kernels run on (compute capability x 10: ",
         known.str(), "; use query_device())");
  }
}

inline void check_pointer(const void* p, const char* name, bool needed = true) {
  if (!needed) return;
  if (p == nullptr) fail(name, " is null");
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
    fail(name, " = ", p, " is not 16-byte aligned (the kernels move 16-byte vectors)");
  }
}

inline std::int64_t check_row_stride(std::int64_t stride, std::int64_t dense, const char* name) {
  if (stride == 0) return dense;
  if (stride < dense) fail(name, " = ", stride, " is smaller than a dense row (", dense, " elements)");
  if (stride % geometry::vector_elements != 0) {
    fail(name, " = ", stride, " must be a multiple of 8 elements (16-byte vectors)");
  }
  return stride;
}

inline std::int64_t check_table_stride(std::int64_t stride, int max_blocks_per_seq) {
  if (stride == 0) return max_blocks_per_seq;
  if (stride < max_blocks_per_seq) {
    fail("block_table_stride = ", stride, " is shorter than the plan's max_blocks_per_seq = ", max_blocks_per_seq,
         " (a row must hold the blocks of the bucket's longest sequence)");
  }
  return stride;
}

inline void check_workspace(const split_workspace& w, const void* p, std::size_t bytes) {
  if (w.bytes == 0) return;
  check_pointer(p, "workspace");
  if (bytes < w.bytes) fail("workspace_bytes = ", bytes, " is smaller than the plan's workspace.bytes = ", w.bytes);
}

inline void check_config(const attention_config& c) {
  if (!(c.sm_scale >= 0.0f) || std::isinf(c.sm_scale)) {
    fail("sm_scale = ", c.sm_scale, " must be finite and non-negative (0 means 1/sqrt(head_dim))");
  }
  if (c.scores.window < 0) fail("scores.window = ", c.scores.window, " must be 0 (none) or positive");
  if (!(c.scores.logit_soft_cap >= 0.0f) || std::isinf(c.scores.logit_soft_cap)) {
    fail("scores.logit_soft_cap = ", c.scores.logit_soft_cap, " must be finite and non-negative (0: none)");
  }
  if (c.quantized_cache() && !is_fp8(c.cache_type())) {
    fail("kv.type = ", name(c.cache_type()), " with dtype = ", name(c.type),
         ": a KV cache in another type than the queries' must be fp8_e4m3 or fp8_e5m2");
  }
  if (c.kv.per_head_scales && !c.quantized_cache()) {
    fail("kv.per_head_scales is set but the KV cache is ", name(c.cache_type()), " (scales apply to fp8 caches only)");
  }
}

// Scales are for fp8 caches only: a scale given for a 16-bit cache would be silently unused.
inline void check_scales(const attention_config& c, const float* k_scale, const float* v_scale, const std::string& args) {
  if (c.quantized_cache()) return;
  for (auto [p, field] : {std::pair{k_scale, ".k_scale"}, std::pair{v_scale, ".v_scale"}}) {
    if (p != nullptr) {
      fail(args, field, " is set but the KV cache is ", name(c.cache_type()), " (scales apply to fp8 caches only)");
    }
  }
}

// Shared by write_decode_step and write_prefill_step: copies the block ids of each sequence
// into its table row, checking that they cover the sequence and exist in the pool.
inline void write_tables(const attention_shape& s, int max_batch, int max_blocks_per_seq,
                         std::span<const std::int32_t> kv_lens,
                         std::span<const std::span<const std::int32_t>> block_ids,
                         std::span<std::int32_t> tables_out, std::int64_t table_stride) {
  const std::int64_t stride = check_table_stride(table_stride, max_blocks_per_seq);
  if (block_ids.size() != kv_lens.size()) {
    fail("block_ids has ", block_ids.size(), " rows for ", kv_lens.size(), " sequences");
  }
  if (static_cast<std::int64_t>(tables_out.size()) < max_batch * stride) {
    fail("block_tables_out has ", tables_out.size(), " entries; the plan needs max_batch * stride = ",
         max_batch * stride);
  }
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    const std::int64_t needed = blocks_for(kv_lens[b], s.block_size);
    if (static_cast<std::int64_t>(block_ids[b].size()) < needed) {
      fail("sequence ", b, ": ", kv_lens[b], " tokens need ", needed, " blocks of ", s.block_size, ", got ",
           block_ids[b].size());
    }
    for (std::int64_t i = 0; i < needed; ++i) {
      const std::int32_t id = block_ids[b][static_cast<std::size_t>(i)];
      if (id < 0 || id >= s.num_blocks) {
        fail("sequence ", b, ": block id ", id, " at position ", i, " is outside the pool [0, ", s.num_blocks, ")");
      }
      tables_out[static_cast<std::size_t>(static_cast<std::int64_t>(b) * stride + i)] = id;
    }
  }
}

// Why the tensor-core decode (prefill: `prefill`) cannot run a configuration's shape; empty
// when it can (either takes every cache type and score transform).
inline std::string tensor_core_refusal(const attention_config& c, bool prefill) {
  std::ostringstream os;
  if (prefill && !geometry::tensor_core_prefill_fits(c.shape.head_dim)) {
    os << "head_dim = " << c.shape.head_dim << " (the tensor-core prefill takes head dims 64 and 128)";
  } else if (!prefill && !geometry::tensor_core_decode_fits(c.shape.head_dim, c.shape.group_size())) {
    os << "head_dim = " << c.shape.head_dim << ", group_size = " << c.shape.group_size()
       << " (the tensor-core decode takes head dims 64, 80, 96, 128, 256 and groups 1-8, 16)";
  } else if (!prefill && c.quantized_cache() && !geometry::tensor_core_fp8_decode_fits(c.shape.head_dim)) {
    os << "kv cache dtype = " << name(c.cache_type()) << ", head_dim = " << c.shape.head_dim
       << " (the tensor-core decode takes fp8 caches at head dims 64 and 128)";
  }
  return os.str();
}

// Why decode<Set, Mod> (prefill<Set, Mod>: `prefill`) cannot run the tensor-core kernel for c;
// empty when it can: the kernel exists only where Set lists its instance (at a block size Set
// has).
template <class Set>
std::string tensor_core_refusal(const attention_config& c, bool prefill) {
  std::string why = tensor_core_refusal(c, prefill);
  if (!why.empty()) return why;
  std::ostringstream os;
  if (prefill ? !has_tensor_core_prefill<Set>(c.type, c.shape, c.cache_type())
              : !has_tensor_core_decode<Set>(c.type, c.shape, c.cache_type())) {
    os << "dtype = " << name(c.type);
    if (c.quantized_cache()) os << ", kv cache dtype = " << name(c.cache_type());
    os << ", head_dim = " << c.shape.head_dim << ", block_size = " << c.shape.block_size;
    if (!prefill) os << ", group_size = " << c.shape.group_size();
    os << " (the instantiation set has no tensor-core " << (prefill ? "prefill" : "decode") << " instance for it)";
  }
  return os.str();
}

// Whether plan_decode wants the tensor-core decode for head dim `head_dim` and GQA group `group`
// on architecture `sm` (where the set has its instance).
//  * sm_90: groups of 4 and more, and head dim 80 at group 2, by measurement: every default
//    bf16 decode instance on both kernels side by side, graph-replayed, at batch 64 x 4096, 8 x
//    4096 and 1 x 16384 with 32 query heads (benchmarks/RESULTS.md, "Every default decode
//    instance on an H100" and "... on an H200", 2026-11-27). On the H200's run with the kernels
//    timed A B B A (the fairest; each kernel's faster pass), tensor-core over SIMT time: groups
//    4, 8 and 16 0.57-0.89, 0.35-0.66 and 0.20-0.48 at head dims 64-128, 0.86-0.92, 0.50-0.66
//    and 0.27-0.39 at 256; head dim 80 at group 2 0.83-0.89 (its SIMT decode is issue-bound
//    there: 0.77 of copy); the other groups 1 and 2 0.94-1.14 (a tie, or slower at head dims 96
//    and 256 on the small grids): the SIMT decode, although scripts/sass-check gives the
//    tensor-core one the larger issue margin there (both are memory-bound at these groups).
//    The H100's run (tensor cores
//    always timed first; the first run of a shape measured up to 14% slow) agrees from group 4
//    (0.26-0.96). Group 3 (no default instance) was not measured and keeps the SIMT decode, as
//    the rule elsewhere.
//  * Other architectures (not measured): groups of 4 and more at head dims 64 and 128, where
//    the SIMT decode's per-score shuffles bound it (80, 96 and 256 keep the SIMT decode until
//    measured).
constexpr bool decode_wants_tensor_cores(int head_dim, int group, int sm) {
  if (sm == 90) return group >= 4 || (head_dim == 80 && group == 2);
  return group >= 4 && (head_dim == 64 || head_dim == 128);
}

// The planner's kernel, among those decode<Set, Mod> (prefill<Set, Mod>) compiles:
// plan_options::kernel when given (refused, naming why, where the tensor cores cannot run the
// configuration), else tensor cores on sm_80 and newer where `wanted` (decode:
// decode_wants_tensor_cores; docs/kernels.md, "Tensor-core decode" and "Tensor-core prefill").
template <class Set>
attention_kernel choose_kernel(const attention_config& c, const device_info& dev, const plan_options& opt, bool prefill,
                               bool wanted) {
  const std::string refusal = tensor_core_refusal<Set>(c, prefill);
  if (opt.kernel) {
    if (*opt.kernel == attention_kernel::tensor_cores && !refusal.empty()) {
      fail("plan_options.kernel = tensor_cores cannot run ", refusal);
    }
    return *opt.kernel;
  }
  return refusal.empty() && dev.sm >= 80 && wanted ? attention_kernel::tensor_cores : attention_kernel::simt;
}

// The split model's view of a decode: CTAs per SM from the chosen kernel's launch bound.
inline split_problem decode_split_problem(const attention_config& c, decode_kernel kernel, std::int64_t batch,
                                          int context, const device_info& dev) {
  return {.ctas = batch * c.shape.num_kv_heads,
          .rows = batch * c.shape.num_qo_heads,
          .context = context,
          .head_dim = c.shape.head_dim,
          .kv_bytes = bytes_per_element(c.cache_type()),
          .ctas_per_sm = kernel == decode_kernel::tensor_cores
                             ? geometry::tensor_core_decode_ctas_per_sm(dev.sm, c.shape.head_dim, c.shape.group_size())
                             : geometry::ctas_per_sm(dev.sm, geometry::decode_rows_per_thread(c.shape.group_size()))};
}

// The plan's warp groups a tensor-core decode CTA (plan_options::warp_groups): forced, checked
// against the kernel and the set; else geometry::tensor_core_decode_warp_groups for the plan's
// grid where Set compiles that split, and 1 otherwise.
template <class Set>
int choose_warp_groups(const decode_plan& p, const device_info& dev, const plan_options& opt) {
  const attention_config& c = p.config;
  const int d = c.shape.head_dim;
  const int g = c.shape.group_size();
  const bool tensor_cores = p.kernel == decode_kernel::tensor_cores && !c.quantized_cache();
  if (opt.warp_groups != 0) {
    if (opt.warp_groups < 1 || opt.warp_groups > 4) {
      fail("plan_options.warp_groups = ", opt.warp_groups, " must be 0 (the planner's choice) or 1 to 4");
    }
    if (opt.warp_groups > 1 && !(tensor_cores && Set::tensor_core_decode::contains_split(c.type, d, g, opt.warp_groups))) {
      fail("plan_options.warp_groups = ", opt.warp_groups, ": the set compiles no in-CTA split of ", opt.warp_groups,
           " warp groups for a ", tensor_cores ? "tensor-core" : "SIMT or fp8-cache", " decode of ", name(c.type),
           ", head_dim ", d, ", group ", g);
    }
    if (opt.warp_groups > 1 && (geometry::tensor_core_decode_split_ctas_per_sm(dev.sm, d, g, opt.warp_groups) == 0 ||
                                opt.warp_groups * geometry::tensor_core_decode_group_bytes(d) >
                                    geometry::max_dynamic_shared_bytes(dev.sm))) {
      fail("plan_options.warp_groups = ", opt.warp_groups, ": sm_", dev.sm, " runs no in-CTA split of ",
           opt.warp_groups, " warp groups at head_dim ", d, ", group ", g,
           " (the split is built for sm_90, within its shared memory)");
    }
    return opt.warp_groups;
  }
  if (!tensor_cores) return 1;
  const std::int64_t ctas = static_cast<std::int64_t>(p.bucket.max_batch) * c.shape.num_kv_heads * p.num_splits;
  const int w = geometry::tensor_core_decode_warp_groups(dev.sm, d, g, ctas, dev.num_sms);
  return w > 1 && Set::tensor_core_decode::contains_split(c.type, d, g, w) ? w : 1;
}

}  // namespace detail

/// Plans decode for a bucket, for the kernels of instantiation set Set: run the plan with
/// decode<Set, ...>, the same set (the defaults match decode's), so that the plan's kernel is
/// the one that runs (decode refuses a plan for a kernel its set lacks). Throws
/// std::invalid_argument / rungs::unsupported_value for shapes outside the contract, naming the
/// value and the rule.
template <class Set = default_instantiations>
decode_plan plan_decode(const attention_config& config, decode_bucket bucket, const device_info& dev,
                        const plan_options& options = {}) {
  check_decode_shape(config.shape);
  detail::check_config(config);
  detail::check_device(dev);
  detail::check_max_batch(bucket.max_batch, "decode_bucket");
  if (bucket.max_context < 1 || bucket.max_context > detail::max_context_limit) {
    detail::fail("decode_bucket.max_context = ", bucket.max_context, " must be in [1, 2^30]");
  }
  decode_plan p;
  p.config = config;
  p.bucket = bucket;
  p.max_blocks_per_seq = static_cast<int>(blocks_for(bucket.max_context, config.shape.block_size));
  p.kernel = detail::choose_kernel<Set>(config, dev, options, false,
                                       detail::decode_wants_tensor_cores(config.shape.head_dim, config.shape.group_size(), dev.sm));
  detail::choose_splits(detail::decode_split_problem(config, p.kernel, bucket.max_batch, bucket.max_context, dev), dev,
                        options, p.split_tokens, p.num_splits);
  p.warp_groups = detail::choose_warp_groups<Set>(p, dev, options);
  p.workspace = detail::make_split_workspace(static_cast<std::int64_t>(bucket.max_batch) * config.shape.num_qo_heads,
                                             p.num_splits, config.shape.head_dim);
  return p;
}

/// The most split-KV workspace any plan_decode<Set>(config, {b, c}, dev, options) can ask for, over
/// every batch b <= limits.max_batch and context c <= limits.max_context: what an engine
/// allocates once for steps whose plan is only known later (eager steps, buckets of any
/// context). Planning at the largest context is not enough: a shorter context's splits can
/// fill the waves better, so it may split into more pieces (8/2 heads of 64 on an H100, 27
/// sequences: 9 splits of 2049 tokens, 8 of 4096; plan_test). The bound uses, per batch,
/// the most splits the wave model considers (min(ceil(max_context / min_split_tokens),
/// max_split_waves x CTA slots / unsplit CTAs), at least 1), and ceil(max_context /
/// split_tokens) for a forced split size.
template <class Set = default_instantiations>
std::size_t decode_workspace_bound(const attention_config& config, decode_bucket limits, const device_info& dev,
                                   const plan_options& options = {}) {
  const decode_kernel kernel = plan_decode<Set>(config, limits, dev, options).kernel;  // validates every argument
  const attention_shape& s = config.shape;
  std::size_t bound = 0;
  for (std::int64_t b = 1; b <= limits.max_batch; ++b) {
    std::int64_t splits = 0;
    if (options.split_tokens > 0) {
      splits = detail::ceil_div(limits.max_context, options.split_tokens);
    } else {
      const detail::split_problem prob = detail::decode_split_problem(config, kernel, b, limits.max_context, dev);
      const std::int64_t slots = static_cast<std::int64_t>(dev.num_sms) * detail::slots_per_sm(prob, options);
      splits = detail::max_model_splits(prob.ctas, slots, limits.max_context, options.min_split_tokens);
    }
    const std::size_t bytes =
        detail::make_split_workspace(b * s.num_qo_heads, static_cast<int>(splits), s.head_dim).bytes;
    bound = std::max(bound, bytes);
  }
  return bound;
}

/// Plans prefill/extend for a bucket, for the kernels of instantiation set Set (run it with
/// prefill<Set, ...>, the same set, as plan_decode<Set> with decode<Set, ...>).
template <class Set = default_instantiations>
prefill_plan plan_prefill(const attention_config& config, prefill_bucket bucket, const device_info& dev,
                          const plan_options& options = {}) {
  check_shape(config.shape);
  detail::check_config(config);
  detail::check_device(dev);
  detail::check_max_batch(bucket.max_batch, "prefill_bucket");
  if (bucket.max_q_len < 1) detail::fail("prefill_bucket.max_q_len = ", bucket.max_q_len, " must be at least 1");
  if (bucket.max_context > detail::max_context_limit) {
    detail::fail("prefill_bucket.max_context = ", bucket.max_context, " must be at most 2^30");
  }
  if (bucket.max_context < bucket.max_q_len) {
    detail::fail("prefill_bucket.max_context = ", bucket.max_context, " is smaller than max_q_len = ", bucket.max_q_len,
                 " (the context includes the new tokens)");
  }
  const std::int64_t all_q = static_cast<std::int64_t>(bucket.max_batch) * bucket.max_q_len;
  if (bucket.max_total_q == 0) {
    if (all_q > INT32_MAX) detail::fail("max_batch * max_q_len = ", all_q, " exceeds int32; set max_total_q");
    bucket.max_total_q = static_cast<int>(all_q);
  }
  if (bucket.max_total_q < bucket.max_q_len || bucket.max_total_q > all_q) {
    detail::fail("prefill_bucket.max_total_q = ", bucket.max_total_q, " must be in [max_q_len, max_batch * max_q_len] = [",
                 bucket.max_q_len, ", ", all_q, "]");
  }
  prefill_plan p;
  p.config = config;
  p.bucket = bucket;
  p.max_blocks_per_seq = static_cast<int>(blocks_for(bucket.max_context, config.shape.block_size));
  const std::int64_t rows = static_cast<std::int64_t>(bucket.max_q_len) * config.shape.group_size();
  if (rows > INT32_MAX) detail::fail("max_q_len * group_size = ", rows, " query rows per sequence exceed int32");
  p.q_tiles = static_cast<int>(detail::ceil_div(rows, geometry::prefill_rows_per_cta(config.shape.head_dim)));
  p.kernel = detail::choose_kernel<Set>(config, dev, options, true, true);
  detail::choose_splits({.ctas = static_cast<std::int64_t>(p.q_tiles) * bucket.max_batch * config.shape.num_kv_heads,
                         .rows = static_cast<std::int64_t>(bucket.max_total_q) * config.shape.num_qo_heads,
                         .context = bucket.max_context,
                         .head_dim = config.shape.head_dim,
                         .kv_bytes = bytes_per_element(config.cache_type()),
                         .ctas_per_sm = p.kernel == attention_kernel::tensor_cores
                                            ? geometry::tensor_core_prefill_ctas_per_sm(dev.sm)
                                            : geometry::prefill_ctas_per_sm(dev.sm, config.scores.window > 0)},
                        dev, options, p.split_tokens, p.num_splits);
  if (static_cast<std::int64_t>(p.q_tiles) * p.num_splits > INT32_MAX) {
    detail::fail("q_tiles * num_splits = ", static_cast<std::int64_t>(p.q_tiles) * p.num_splits,
                 " exceeds the grid's x limit; use larger splits");
  }
  const int d = config.shape.head_dim;
  const std::int64_t merge_ctas =
      detail::ceil_div(static_cast<std::int64_t>(bucket.max_total_q) * config.shape.num_qo_heads,
                       geometry::merge_rows_per_cta(d, p.num_splits)) *
      geometry::merge_ctas_per_row(d);
  if (p.num_splits > 1 && merge_ctas > INT32_MAX) {
    detail::fail("max_total_q * num_qo_heads = ", static_cast<std::int64_t>(bucket.max_total_q) * config.shape.num_qo_heads,
                 " output rows need ", merge_ctas, " merge CTAs, past the grid's x limit; lower max_total_q");
  }
  p.workspace = detail::make_split_workspace(static_cast<std::int64_t>(bucket.max_total_q) * config.shape.num_qo_heads,
                                             p.num_splits, config.shape.head_dim);
  return p;
}

namespace detail {
// What decode and prefill runs share: Q, K, V, O, the block tables, the strides and the
// workspace. `args` names the struct in the messages ("decode_args.q is null").
template <class Args>
void check_paged_args(const Args& a, const std::string& args) {
  check_pointer(a.q, (args + ".q").c_str());
  check_pointer(a.k_cache, (args + ".k_cache").c_str());
  check_pointer(a.v_cache, (args + ".v_cache").c_str());
  check_pointer(a.out, (args + ".out").c_str());
  if (a.block_tables == nullptr) fail(args, ".block_tables is null");
}
}  // namespace detail

/// An instance runs exactly the score transforms it compiles in (`compiled`): throws
/// std::invalid_argument when the configuration and the sinks argument need others, or fewer
/// (a window instance given window 0 would mask every key).
inline void check_score_mod(score_mod compiled, const attention_config& c, const float* sinks, const char* op) {
  const score_mod needed = needed_mod(c.scores, sinks != nullptr);
  if (needed != compiled) {
    detail::fail(op, ": the instance compiles ", compiled, " but the configuration and arguments need ", needed,
                 " (scores.window = ", c.scores.window, ", scores.logit_soft_cap = ", c.scores.logit_soft_cap,
                 ", sinks ", sinks != nullptr ? "given" : "null", ")");
  }
}

/// Checks a decode run's buffers against its plan (host values only: pointers, alignment,
/// strides, workspace size). Throws std::invalid_argument naming the field and the rule.
inline void validate(const decode_plan& plan, const decode_args& a) {
  detail::check_paged_args(a, "decode_args");
  if (a.seq_lens == nullptr) detail::fail("decode_args.seq_lens is null");
  detail::check_row_stride(a.q_stride, plan.config.shape.q_row_elements(), "decode_args.q_stride");
  detail::check_table_stride(a.block_table_stride, plan.max_blocks_per_seq);
  detail::check_workspace(plan.workspace, a.workspace, a.workspace_bytes);
  detail::check_scales(plan.config, a.k_scale, a.v_scale, "decode_args");
}

namespace detail {
/// The rule of check_decode_kernel and check_prefill_kernel: `op` ("decode" or "prefill") can
/// run a tensor-core plan only where Set compiles its instance.
template <class Set>
void check_plan_kernel(attention_kernel kernel, const attention_config& config, bool prefill) {
  if (kernel != attention_kernel::tensor_cores) return;
  const std::string refusal = tensor_core_refusal<Set>(config, prefill);
  if (!refusal.empty()) {
    const char* op = prefill ? "prefill" : "decode";
    fail(op, ": the plan's kernel is tensor_cores, which this call cannot run: ", refusal, "; plan with plan_", op,
         "<Set>, ", op, "'s instantiation set, or plan_options.kernel = simt");
  }
}
}  // namespace detail

/// Checks that decode<Set, ...> can run the plan's kernel: a plan made for another set (or by
/// plan_decode without decode's set) may have chosen a tensor-core decode Set does not compile.
/// Throws std::invalid_argument naming the shape and what is missing.
template <class Set>
void check_decode_kernel(const decode_plan& plan) {
  detail::check_plan_kernel<Set>(plan.kernel, plan.config, false);
  const attention_config& c = plan.config;
  if (plan.warp_groups != 1 &&
      !(plan.kernel == decode_kernel::tensor_cores && !c.quantized_cache() &&
        Set::tensor_core_decode::contains_split(c.type, c.shape.head_dim, c.shape.group_size(), plan.warp_groups))) {
    detail::fail("decode: the plan's warp_groups = ", plan.warp_groups,
                 " is an in-CTA split this call's set does not compile for ", name(c.type), ", head_dim ",
                 c.shape.head_dim, ", group ", c.shape.group_size(), "; plan with plan_decode<Set>, decode's set");
  }
}

/// check_decode_kernel's rule for prefill<Set, ...> and a prefill plan.
template <class Set>
void check_prefill_kernel(const prefill_plan& plan) {
  detail::check_plan_kernel<Set>(plan.kernel, plan.config, true);
}

inline void validate(const prefill_plan& plan, const prefill_args& a) {
  detail::check_paged_args(a, "prefill_args");
  if (a.q_indptr == nullptr) detail::fail("prefill_args.q_indptr is null");
  if (a.kv_lens == nullptr) detail::fail("prefill_args.kv_lens is null");
  detail::check_row_stride(a.q_stride, plan.config.shape.q_row_elements(), "prefill_args.q_stride");
  detail::check_table_stride(a.block_table_stride, plan.max_blocks_per_seq);
  detail::check_workspace(plan.workspace, a.workspace, a.workspace_bytes);
  detail::check_scales(plan.config, a.k_scale, a.v_scale, "prefill_args");
}

inline void validate(const attention_config& config, const cache_write_args& a) {
  check_shape(config.shape);
  detail::check_config(config);
  detail::check_scales(config, a.k_scale, a.v_scale, "cache_write_args");
  const attention_shape& s = config.shape;
  if (a.num_tokens < 0) detail::fail("cache_write_args.num_tokens = ", a.num_tokens, " must not be negative");
  const bool any = a.num_tokens > 0;
  detail::check_pointer(a.k, "cache_write_args.k", any);
  detail::check_pointer(a.v, "cache_write_args.v", any);
  detail::check_pointer(a.k_cache, "cache_write_args.k_cache", any);
  detail::check_pointer(a.v_cache, "cache_write_args.v_cache", any);
  if (any && a.slot_mapping == nullptr) detail::fail("cache_write_args.slot_mapping is null");
  detail::check_row_stride(a.k_stride, s.kv_row_elements(), "cache_write_args.k_stride");
  detail::check_row_stride(a.v_stride, s.kv_row_elements(), "cache_write_args.v_stride");
}

/// Fills one decode step's metadata into caller-owned host buffers (copy them to the device
/// buffers the run reads, e.g. with one cudaMemcpyAsync each, then launch or replay).
/// seq_lens and block_ids describe the step's batch (at most the bucket's max_batch); rows
/// from the batch size up to max_batch are padding and get length 0. Only the entries a
/// sequence uses are written. Throws when the batch, a length or a block id does not fit the
/// plan, naming it.
inline void write_decode_step(const decode_plan& plan, std::span<const std::int32_t> seq_lens,
                              std::span<const std::span<const std::int32_t>> block_ids,
                              std::span<std::int32_t> seq_lens_out, std::span<std::int32_t> block_tables_out,
                              std::int64_t block_table_stride = 0) {
  const int max_batch = plan.bucket.max_batch;
  if (static_cast<std::int64_t>(seq_lens.size()) > max_batch) {
    detail::fail("batch = ", seq_lens.size(), " exceeds the plan's max_batch = ", max_batch,
                 " (plan a larger bucket)");
  }
  if (static_cast<std::int64_t>(seq_lens_out.size()) < max_batch) {
    detail::fail("seq_lens_out has ", seq_lens_out.size(), " entries; the plan needs max_batch = ", max_batch);
  }
  for (std::size_t b = 0; b < seq_lens.size(); ++b) {
    if (seq_lens[b] < 0 || seq_lens[b] > plan.bucket.max_context) {
      detail::fail("sequence ", b, ": seq_len = ", seq_lens[b], " is outside [0, max_context = ",
                   plan.bucket.max_context, "]");
    }
  }
  detail::write_tables(plan.config.shape, max_batch, plan.max_blocks_per_seq, seq_lens, block_ids, block_tables_out,
                       block_table_stride);
  for (int b = 0; b < max_batch; ++b) {
    seq_lens_out[static_cast<std::size_t>(b)] = b < static_cast<int>(seq_lens.size()) ? seq_lens[static_cast<std::size_t>(b)] : 0;
  }
}

/// Fills one prefill step's metadata: q_indptr (max_batch + 1 entries), kv_lens (max_batch)
/// and block-table rows. Padded sequences get no query tokens and length 0.
inline void write_prefill_step(const prefill_plan& plan, std::span<const std::int32_t> q_lens,
                               std::span<const std::int32_t> kv_lens,
                               std::span<const std::span<const std::int32_t>> block_ids,
                               std::span<std::int32_t> q_indptr_out, std::span<std::int32_t> kv_lens_out,
                               std::span<std::int32_t> block_tables_out, std::int64_t block_table_stride = 0) {
  const prefill_bucket& bk = plan.bucket;
  if (q_lens.size() != kv_lens.size()) {
    detail::fail("q_lens has ", q_lens.size(), " entries but kv_lens has ", kv_lens.size());
  }
  if (static_cast<std::int64_t>(q_lens.size()) > bk.max_batch) {
    detail::fail("batch = ", q_lens.size(), " exceeds the plan's max_batch = ", bk.max_batch, " (plan a larger bucket)");
  }
  if (static_cast<std::int64_t>(q_indptr_out.size()) < bk.max_batch + 1 ||
      static_cast<std::int64_t>(kv_lens_out.size()) < bk.max_batch) {
    detail::fail("q_indptr_out / kv_lens_out need max_batch + 1 = ", bk.max_batch + 1, " / max_batch = ", bk.max_batch,
                 " entries");
  }
  std::int64_t total = 0;
  for (std::size_t b = 0; b < q_lens.size(); ++b) {
    if (q_lens[b] < 0 || q_lens[b] > bk.max_q_len) {
      detail::fail("sequence ", b, ": q_len = ", q_lens[b], " is outside [0, max_q_len = ", bk.max_q_len, "]");
    }
    if (kv_lens[b] < q_lens[b] || kv_lens[b] > bk.max_context) {
      detail::fail("sequence ", b, ": kv_len = ", kv_lens[b], " must be in [q_len = ", q_lens[b],
                   ", max_context = ", bk.max_context, "] (the context includes the new tokens)");
    }
    total += q_lens[b];
  }
  if (total > bk.max_total_q) {
    detail::fail("the batch has ", total, " query tokens; the plan's max_total_q is ", bk.max_total_q);
  }
  detail::write_tables(plan.config.shape, bk.max_batch, plan.max_blocks_per_seq, kv_lens, block_ids, block_tables_out,
                       block_table_stride);
  std::int32_t offset = 0;
  for (int b = 0; b < bk.max_batch; ++b) {
    const bool real = b < static_cast<int>(q_lens.size());
    q_indptr_out[static_cast<std::size_t>(b)] = offset;
    offset += real ? q_lens[static_cast<std::size_t>(b)] : 0;
    kv_lens_out[static_cast<std::size_t>(b)] = real ? kv_lens[static_cast<std::size_t>(b)] : 0;
  }
  q_indptr_out[static_cast<std::size_t>(bk.max_batch)] = offset;
}

}  // namespace rungs::attention
