// A CUDA forward for the engine built on rungs' PagedAttention kernels
// (rungs/attention/paged_attention.cuh): the GPU counterpart of reference_forward.hpp.
//
// The Model fixes the kernel instances: the forward's instantiation set (`instances`) holds
// exactly the Model's dtype, head size, block size and GQA group, so an engine compiles one
// cache write and the decode and prefill kernels of one shape (the SIMT kernels, and the
// tensor-core ones where they take the shape), not the dispatcher's 90. Each step: a
// weightless projection writes every token's query, key and value (the same functions of
// token id and position as reference_forward), the cache write stores the new K/V at their
// slots (slot -1, a padded token, writes nothing), attention runs over the paged KV, and each
// sequence's last output row is widened to float for the engine. A step whose shape has one
// token per sequence (tokens == seqs: decode batches, and uniform-decode graphs) runs the
// decode kernel (plan_decode<instances>); any other step (prefill, chunked prefill, mixed)
// the prefill/extend kernel (plan_prefill<instances>). Plans are made once per step shape and
// cached: each fixes the kernel, the grid and the split count, so the launch is capturable.
// Queries, keys, values, outputs and the split-KV partials live in the engine's workspace,
// sized once for the largest bucket.
//
// A shape with tokens == seqs cannot serve a live batch with several tokens for a sequence
// (the decode kernel reads one query per sequence): backend_options()' per-step check refuses
// such a batch. Model.dtype is the KV cache's type: fp16 or bf16 (queries, keys and values in the
// same type), or fp8_e4m3 / fp8_e5m2 (bf16 queries; the cache write quantises with the
// caller's k/v scales, per tensor or per KV head, 1 when none are given, as reference_forward's
// cache does, and decode and prefill dequantise). The head size, block size and GQA
// group must be ones the kernels support (instantiation_set's static_asserts name what does
// not fit).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/reference.hpp>
#include <rungs/cuda/error.hpp>
#include <rungs/engine/cuda_backend.hpp>
#include <rungs/engine/model.hpp>

namespace rungs::engine {

namespace detail {
__device__ inline void store_element(__nv_bfloat16* p, float x) { *p = __float2bfloat16(x); }
__device__ inline void store_element(__half* p, float x) { *p = __float2half(x); }
__device__ inline float load_element(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline float load_element(const __half* p) { return __half2float(*p); }

// x reduced to about [-pi, pi] (Cody-Waite: 2 pi split into 6.28125, exact in 7 bits, and the
// rest), so the SFU's __sinf/__cosf are accurate to ~1e-6 absolute. sinf/cosf would be no more
// accurate here (the float argument itself is only good to ~1e-3 at |x| ~ 1e4), and their
// huge-argument path keeps a table in local memory, which rungs' ptxas check rejects.
__device__ inline float wrap_two_pi(float x) {
  const float turns = rintf(x * 0.15915494309189535f);
  x = fmaf(-turns, 6.28125f, x);
  return fmaf(-turns, 1.9353071795864769e-3f, x);
}

// One block per token: the weightless projections of reference_forward.hpp, in float.
template <class T, int QRow, int KvRow>
__global__ void project_tokens(const std::int32_t* tokens, const std::int32_t* positions, T* q, T* k, T* v) {
  const std::int64_t t = blockIdx.x;
  const float tk = 0.37f * static_cast<float>(tokens[t]), ps = 0.011f * static_cast<float>(positions[t]);
  for (int c = threadIdx.x; c < QRow; c += blockDim.x) {
    store_element(q + t * QRow + c, __sinf(wrap_two_pi(tk + 0.13f * c + ps)));
  }
  for (int c = threadIdx.x; c < KvRow; c += blockDim.x) {
    store_element(k + t * KvRow + c, __cosf(wrap_two_pi(tk - 0.07f * c + ps)));
    store_element(v + t * KvRow + c, __sinf(wrap_two_pi(0.5f * tk + 0.29f * c)) + ps);
  }
}

template <class T>
__global__ void widen_rows(const T* in, float* out, std::int64_t n) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = load_element(in + i);
}

// After a prefill: out[s] = the row of sequence s's last new token, widened; zeros for a
// sequence with no new token or no context (padding), as reference_forward. One block per
// sequence.
template <class T, int QRow>
__global__ void widen_last_rows(const T* in, const std::int32_t* query_start, const std::int32_t* seq_lens, float* out) {
  const std::int64_t s = blockIdx.x;
  const std::int32_t first = query_start[s], last = query_start[s + 1] - 1;
  const bool real = seq_lens[s] > 0 && last >= first;
  for (int c = threadIdx.x; c < QRow; c += blockDim.x)
    out[s * QRow + c] = real ? load_element(in + std::int64_t{last} * QRow + c) : 0.0f;
}
}  // namespace detail

template <model_shape Model>
class attention_forward {
  static_assert(rule_holds<broken_rule(Model)>,
                "rungs::engine: the Model shape is invalid; the note below names the rule it breaks");
  static_assert(Model.dtype == dtype::fp16 || Model.dtype == dtype::bf16 || is_fp8(Model.dtype),
                "rungs::engine::attention_forward: the paged-attention kernels' caches are fp16, bf16, fp8_e4m3 or "
                "fp8_e5m2");
  static constexpr bool quantized = is_fp8(Model.dtype);
  // Queries, keys and values before the cache write, and outputs: the cache's type, or bf16
  // over an fp8 cache (the type the default set's fp8 instances take).
  static constexpr dtype query_dtype = quantized ? dtype::bf16 : Model.dtype;

 public:
  using element = host_type<query_dtype>;
  using device_element = rungs::attention::detail::device_type_t<element>;
  using cache_element = host_type<Model.dtype>;
  static constexpr int q_row = Model.num_qo_heads * Model.head_dim;
  static constexpr int kv_row = Model.num_kv_heads * Model.head_dim;
  static constexpr int group = Model.num_qo_heads / Model.num_kv_heads;

  /// The kernels this forward compiles: one shape, the fp8 instances over an fp8 cache, the
  /// tensor-core decode where it takes the shape (geometry::tensor_core_decode_fits; over an fp8
  /// cache too, at head dims 64 and 128: the set has it where its tensor-core and fp8 lists share
  /// the shape), and the
  /// tensor-core prefill where it takes the shape (geometry::tensor_core_prefill_fits; over an
  /// fp8 cache too, as the decode).
  using instances = rungs::attention::instantiation_set<
      rungs::attention::dtypes<query_dtype>, rungs::attention::values<Model.head_dim>,
      rungs::attention::values<Model.block_size>, rungs::attention::values<group>,
      std::conditional_t<quantized,
                         rungs::attention::fp8_kv_instances<rungs::attention::dtypes<query_dtype>,
                                                            rungs::attention::dtypes<Model.dtype>,
                                                            rungs::attention::values<Model.head_dim>,
                                                            rungs::attention::values<group>>,
                         rungs::attention::no_fp8_kv>,
      std::conditional_t<rungs::attention::geometry::tensor_core_decode_fits(Model.head_dim, group) &&
                             (!quantized || rungs::attention::geometry::tensor_core_fp8_decode_fits(Model.head_dim)),
                         rungs::attention::tensor_core_decode_instances<rungs::attention::dtypes<query_dtype>,
                                                                        rungs::attention::values<Model.head_dim>,
                                                                        rungs::attention::values<group>>,
                         rungs::attention::no_tensor_core_decode>,
      std::conditional_t<rungs::attention::geometry::tensor_core_prefill_fits(Model.head_dim),
                         rungs::attention::tensor_core_prefill_instances<rungs::attention::dtypes<query_dtype>,
                                                                         rungs::attention::values<Model.head_dim>>,
                         rungs::attention::no_tensor_core_prefill>>;

  /// KV pools of `num_blocks` blocks (one layer) on the current device, for sequences up to
  /// `max_model_len` tokens. decode_options go to every decode plan, prefill_options to every
  /// prefill plan: the default lets the planner choose the kernel; {.kernel =
  /// rungs::attention::attention_kernel::simt} forces the SIMT kernel. Prefill plans do not
  /// split the KV unless prefill_options.split_tokens asks (their query tiles are the work
  /// that fills the GPU; an unsplit plan needs no workspace). `scales`: an fp8 cache's
  /// dequantisation scales for K and V (vLLM's k_scale / v_scale), one per tensor or one per KV
  /// head, each finite and positive (rungs::attention::reference::kv_scales; empty: 1); a cached
  /// element x of KV head h stands for x * scale[h]. A bad scale, or scales for a 16-bit cache,
  /// are refused here, naming the value.
  attention_forward(std::int64_t num_blocks, std::int64_t max_model_len,
                    const rungs::attention::plan_options& decode_options = {},
                    const rungs::attention::plan_options& prefill_options = {},
                    const rungs::attention::reference::kv_scales& scales = {})
      : config_{query_dtype, rungs::attention::attention_shape::of(Model, num_blocks), 0.0f, {},
                {.type = quantized ? std::optional<dtype>(Model.dtype) : std::nullopt,
                 .per_head_scales = scales.k.size() > 1 || scales.v.size() > 1}},
        max_model_len_(max_model_len),
        device_(rungs::attention::query_device()),
        decode_options_(decode_options),
        prefill_options_(prefill_options) {
    // Validates the options once, naming what is wrong, instead of on the first step.
    (void)plan(1, 1);
    (void)prefill_plan_of(1, 1, 1);
    rungs::attention::reference::detail::check_scales<cache_element>(config_.shape, scales);
    const std::size_t bytes = static_cast<std::size_t>(config_.shape.pool_elements()) * sizeof(cache_element);
    // A failed call throws cuda_error naming it, and what was allocated before it is freed
    // (the destructor does not run for a constructor that threw).
    try {
      allocate_pools(bytes, scales);
    } catch (...) {
      free_pools();
      throw;
    }
  }
  attention_forward(const attention_forward&) = delete;
  attention_forward& operator=(const attention_forward&) = delete;
  ~attention_forward() { free_pools(); }

  /// Workspace of a step of up to `seqs` sequences and `tokens` tokens: q, k, v and output
  /// rows, and the largest split-KV workspace a plan may ask for: a decode plan for up to
  /// `seqs` sequences of any context up to max_model_len (rungs::attention::decode_workspace_bound:
  /// smaller batches, and some shorter contexts, split more), or a prefill plan of up to
  /// `tokens` tokens when prefill_options.split_tokens splits it.
  std::int64_t workspace_bytes(std::int64_t seqs, std::int64_t tokens) const {
    const std::int64_t context = blocks_for(max_model_len_, Model.block_size) * Model.block_size;
    std::size_t split = rungs::attention::decode_workspace_bound<instances>(
        config_, {.max_batch = static_cast<int>(std::max<std::int64_t>(seqs, 1)), .max_context = static_cast<int>(context)},
        device_, decode_options_);
    if (prefill_options_.split_tokens > 0) {
      const auto splits = static_cast<int>((context + prefill_options_.split_tokens - 1) / prefill_options_.split_tokens);
      split = std::max(split, rungs::attention::detail::make_split_workspace(
                                  std::max<std::int64_t>(tokens, 1) * Model.num_qo_heads, splits, Model.head_dim)
                                  .bytes);
    }
    return static_cast<std::int64_t>(layout_of(seqs, tokens).split + split);
  }

  /// cuda_backend options for this forward: its workspace, and a per-step host check (the
  /// backend's plan hook, run on every replay and eager step) that a step whose shape runs the
  /// decode kernel (tokens == seqs) holds a decode batch. A replay cannot be checked inside the
  /// forward: it sees the bucket's padded shape, where tokens equal sequences even when the
  /// live batch had several tokens per sequence.
  cuda_backend_options backend_options() const {
    cuda_backend_options o;
    o.workspace_bytes = [this](std::int64_t seqs, std::int64_t tokens) { return workspace_bytes(seqs, tokens); };
    o.plan = [](const padded_batch& staged, std::span<std::byte>) {
      if (staged.tokens() == staged.seqs()) require_decode(staged.real_tokens(), staged.real_seqs());
    };
    return o;
  }

  void operator()(const cuda_step& s) {
    const batch_view& b = s.batch;
    const bool decode = b.tokens == b.seqs;
    const layout l = layout_of(b.seqs, b.tokens);
    auto* q = reinterpret_cast<device_element*>(s.workspace + l.q);
    auto* k = reinterpret_cast<device_element*>(s.workspace + l.k);
    auto* v = reinterpret_cast<device_element*>(s.workspace + l.v);
    auto* out = reinterpret_cast<device_element*>(s.workspace + l.out);
    const rungs::attention::decode_plan* p = decode ? &plan_for(b.seqs, b.width * Model.block_size) : nullptr;
    const rungs::attention::prefill_plan* pp = decode ? nullptr : &prefill_plan_for(b.seqs, b.tokens, b.width);
    const std::size_t split_bytes = decode ? p->workspace.bytes : pp->workspace.bytes;
    if (l.split + split_bytes > s.workspace_bytes)
      throw std::invalid_argument("attention_forward: the workspace holds " + std::to_string(s.workspace_bytes) +
                                  " bytes; this step needs " + std::to_string(l.split + split_bytes) + " bytes");
    if (b.tokens > 0)
      detail::project_tokens<device_element, q_row, kv_row>
          <<<static_cast<unsigned>(b.tokens), 128, 0, s.stream>>>(b.token_ids, b.positions, q, k, v);
    RUNGS_CUDA_CHECK(cudaGetLastError());
    rungs::attention::cache_write<instances>(
        config_,
        {.k = k, .v = v, .slot_mapping = b.slot_mapping, .num_tokens = b.tokens, .k_cache = k_cache_, .v_cache = v_cache_,
         .k_scale = k_scale_, .v_scale = v_scale_},
        s.stream);
    if (decode) {
      // Decode: sequence i's query is its one new token, row query_start[i] = i; the plan's kernel.
      rungs::attention::decode<instances>(
          *p,
          {.q = q, .k_cache = k_cache_, .v_cache = v_cache_, .block_tables = b.block_tables, .block_table_stride = b.width,
           .seq_lens = b.seq_lens, .out = out, .workspace = s.workspace + l.split, .workspace_bytes = s.workspace_bytes - l.split,
           .k_scale = k_scale_, .v_scale = v_scale_},
          s.stream);
      const std::int64_t n = b.seqs * q_row;
      detail::widen_rows<device_element><<<static_cast<unsigned>((n + 255) / 256), 256, 0, s.stream>>>(out, s.out, n);
    } else {
      // Prefill/extend: each sequence's new tokens against its whole context; the plan's kernel.
      rungs::attention::prefill<instances>(
          *pp,
          {.q = q, .k_cache = k_cache_, .v_cache = v_cache_, .block_tables = b.block_tables, .block_table_stride = b.width,
           .q_indptr = b.query_start, .kv_lens = b.seq_lens, .out = out, .workspace = s.workspace + l.split,
           .workspace_bytes = s.workspace_bytes - l.split, .k_scale = k_scale_, .v_scale = v_scale_},
          s.stream);
      if (b.seqs > 0)
        detail::widen_last_rows<device_element, q_row>
            <<<static_cast<unsigned>(b.seqs), 128, 0, s.stream>>>(out, b.query_start, b.seq_lens, s.out);
    }
    RUNGS_CUDA_CHECK(cudaGetLastError());
  }

  /// The decode kernel this forward's plans run (the same for every step: it depends on the
  /// Model, the instances, the device and the options, not on the batch).
  rungs::attention::decode_kernel decode_kernel() const { return plan(1, 1).kernel; }
  /// The prefill kernel this forward's prefill plans run (likewise the same for every step).
  rungs::attention::attention_kernel prefill_kernel() const { return prefill_plan_of(1, 1, 1).kernel; }
  const void* k_cache() const { return k_cache_; }
  const void* v_cache() const { return v_cache_; }
  const rungs::attention::attention_config& config() const { return config_; }

 private:
  static void require_decode(std::int64_t tokens, std::int64_t seqs) {
    if (tokens != seqs) {
      throw std::invalid_argument("attention_forward: a step shaped with one token per sequence runs the decode kernel, "
                                  "which takes one new token per sequence; this step has " +
                                  std::to_string(tokens) + " tokens for " + std::to_string(seqs) +
                                  " sequences (prefill batches need a shape with more tokens than sequences)");
    }
  }

  struct layout {
    std::size_t q, k, v, out, split;
  };
  static std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }
  static layout layout_of(std::int64_t seqs, std::int64_t tokens) {
    const auto t = static_cast<std::size_t>(tokens), e = sizeof(element);
    layout l{};
    l.q = 0;
    l.k = l.q + align256(t * q_row * e);
    l.v = l.k + align256(t * kv_row * e);
    l.out = l.v + align256(t * kv_row * e);
    l.split = l.out + align256(static_cast<std::size_t>(std::max(seqs, tokens)) * q_row * e);  // decode: seqs rows
    return l;
  }

  rungs::attention::decode_plan plan(std::int64_t seqs, std::int64_t context) const {
    return rungs::attention::plan_decode<instances>(
        config_, {.max_batch = static_cast<int>(seqs), .max_context = static_cast<int>(std::max<std::int64_t>(context, 1))},
        device_, decode_options_);
  }
  // A plan per graph shape, made on first use (host arithmetic only, so also during capture).
  const rungs::attention::decode_plan& plan_for(std::int64_t seqs, std::int64_t context) {
    auto key = std::pair(seqs, context);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, plan(seqs, context)).first;
    return it->second;
  }

  // The prefill plan of a step shape: a sequence's new tokens fit its context, the shape's
  // block-table width in tokens.
  rungs::attention::prefill_plan prefill_plan_of(std::int64_t seqs, std::int64_t tokens, std::int64_t width) const {
    const auto context = static_cast<int>(std::max<std::int64_t>(width * Model.block_size, 1));
    rungs::attention::plan_options o = prefill_options_;
    if (o.split_tokens == 0) o.split_tokens = context;
    return rungs::attention::plan_prefill<instances>(
        config_,
        {.max_batch = static_cast<int>(std::max<std::int64_t>(seqs, 1)),
         .max_q_len = static_cast<int>(std::clamp<std::int64_t>(tokens, 1, context)),
         .max_total_q = static_cast<int>(std::max<std::int64_t>(tokens, 1)),
         .max_context = context},
        device_, o);
  }
  const rungs::attention::prefill_plan& prefill_plan_for(std::int64_t seqs, std::int64_t tokens, std::int64_t width) {
    auto key = std::tuple(seqs, tokens, width);
    auto it = prefill_plans_.find(key);
    if (it == prefill_plans_.end()) it = prefill_plans_.emplace(key, prefill_plan_of(seqs, tokens, width)).first;
    return it->second;
  }

  // The KV pools (zeroed) and the fp8 scales, on the current device.
  void allocate_pools(std::size_t bytes, const rungs::attention::reference::kv_scales& scales) {
    RUNGS_CUDA_CHECK(cudaMalloc(&k_cache_, bytes));
    RUNGS_CUDA_CHECK(cudaMalloc(&v_cache_, bytes));
    RUNGS_CUDA_CHECK(cudaMemset(k_cache_, 0, bytes));
    RUNGS_CUDA_CHECK(cudaMemset(v_cache_, 0, bytes));
    if (!scales.k.empty() || !scales.v.empty()) {
      // The kernels take one layout for both (kv_cache_format::per_head_scales): a per-tensor
      // scale beside per-head ones is repeated per head, a missing one is 1.
      const int n = config_.kv.per_head_scales ? Model.num_kv_heads : 1;
      std::vector<float> host(2 * static_cast<std::size_t>(n));
      for (int h = 0; h < n; ++h) {
        host[static_cast<std::size_t>(h)] = static_cast<float>(rungs::attention::reference::detail::scale_of(scales.k, h));
        host[static_cast<std::size_t>(n + h)] = static_cast<float>(rungs::attention::reference::detail::scale_of(scales.v, h));
      }
      RUNGS_CUDA_CHECK(cudaMalloc(&k_scale_, host.size() * sizeof(float)));
      v_scale_ = k_scale_ + n;
      RUNGS_CUDA_CHECK(cudaMemcpy(k_scale_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    // cudaMemset runs on the legacy stream, which a non-blocking backend stream does not wait for.
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // Each pointer freed once; a failed cudaFree is reported, not repeated (RUNGS_CUDA_RELEASE).
  void free_pools() noexcept {
    for (void* p : {static_cast<void*>(k_cache_), static_cast<void*>(v_cache_), static_cast<void*>(k_scale_)})
      if (p) RUNGS_CUDA_RELEASE(cudaFree(p));
    k_cache_ = v_cache_ = nullptr;
    k_scale_ = v_scale_ = nullptr;
  }

  rungs::attention::attention_config config_;
  std::int64_t max_model_len_;
  rungs::attention::device_info device_;
  rungs::attention::plan_options decode_options_, prefill_options_;
  void* k_cache_ = nullptr;
  void* v_cache_ = nullptr;
  float* k_scale_ = nullptr;  // device: k then v scales (null: 1); one allocation, freed through k_scale_
  float* v_scale_ = nullptr;
  std::map<std::pair<std::int64_t, std::int64_t>, rungs::attention::decode_plan> plans_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, rungs::attention::prefill_plan> prefill_plans_;
};

}  // namespace rungs::engine
