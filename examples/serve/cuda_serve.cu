// The demo's CUDA backend: the same decoder architecture as the host model (model.hpp), sized
// like a small production model, on the GPU; rungs' CUDA engine backend captures one graph
// per bucket and replays it; attention is rungs' paged-attention kernels.
//
// Model: hidden 2048 (16 query heads / 4 KV heads of 128), 8 layers, SwiGLU MLP 5632,
// vocabulary 32000, bf16 weights and KV cache (about 1 GiB of weights; --kv-cache-dtype fp8_e4m3
// or fp8_e5m2: an fp8 cache, quantised with scale 1 by the cache write), f32 activations.
//
// The forward (one call per step, captured into a graph per bucket) reads nothing but the
// engine's static buffers (token ids, positions, slot mapping, query starts, lengths, block
// tables: rewritten before every replay) and enqueues, per layer: RMSNorm, the fused QKV
// product, rotary embedding into bf16 Q/K/V, rungs::attention cache write (slot -1: padded
// tokens write nothing), rungs::attention prefill/extend over the paged cache, the output
// product, RMSNorm and the MLP; then the final norm of each sequence's last token into its
// output row. No allocation, no synchronisation, no host branch on data: graph-safe.
//
// Attention: a graph whose shape declares one new token per sequence (graph_shape::query == 1:
// the uniform-decode graphs of vLLM V1's dispatch key, --dispatch) runs the split-KV decode
// kernel the planner picks (tensor cores at the full model's GQA group of 4, except on sm_90,
// where the SIMT decode measured faster at group 4; the SIMT decode at the tiny model's group
// of 2; --decode-kernel forces either); every other step (prefill, mixed, and any graph of a 1-D ladder, which serves mixed
// steps and whose shape alone cannot say that a step holds one token per sequence) runs the
// prefill/extend kernel the planner picks (tensor cores at both models' head dims;
// --prefill-kernel forces either). The attention plan is made on the host for the step's padded shape
// (FlashInfer's plan/run): the heuristic split-KV plan for bucket shapes, whose workspace is
// sized at setup from every bucket; an unsplit prefill plan (no workspace) for the live shapes
// of eager steps.
//
// A hybrid model (--layers with a pattern, e.g. full:4,sliding128:4): each layer's attention
// reads its group's block tables (cuda_backend options::groups, cuda_step::block_tables(g):
// the engine stages every group's tables, kv::hybrid_allocator) and runs the kernels' sliding
// window instance at its window; its cache write goes to the slots its group's table gives
// (group_slots, once per group and step, on the device). The groups share the KV pools as
// vLLM's do: a layer uses the pool of its rank within its group, so the pools are as many as
// the largest group's layers (a block belongs to one group at a time), the pages resolve()
// counts.
//
// Sampling happens outside the graph, as in vLLM: the engine's rows (final hidden states) go
// through the LM head and an argmax on the device; the tokens come back with one copy.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <rungs/attention/paged_attention.cuh>
#include <rungs/cuda/error.hpp>
#include <rungs/engine/cuda_backend.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <numeric>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "run.hpp"

namespace demo {
namespace {

namespace ra = rungs::attention;
using bf16 = __nv_bfloat16;

#ifdef RUNGS_DEMO_TINY_MODEL
// The cuda-sim build runs this file's kernels on the CPU (rungs' PTX executor, docs/kernels.md):
// the same architecture at a size it executes in seconds. Hidden 128 (2 query heads / 1 KV head
// of 64), 1 layer, MLP 256, vocabulary 512. --layers may give it up to kMaxLayers layers (a
// hybrid pattern needs two), which the CPU executes proportionally slower.
constexpr eng::model_shape gpu_model{.dtype = rungs::dtype::bf16, .num_qo_heads = 2, .num_kv_heads = 1,
                                     .head_dim = 64, .block_size = 16, .num_layers = 1};
constexpr int kVocab = 512, kFfn = 256, kMaxLayers = 4;
#else
constexpr eng::model_shape gpu_model{.dtype = rungs::dtype::bf16, .num_qo_heads = 16, .num_kv_heads = 4,
                                     .head_dim = 128, .block_size = 16, .num_layers = 8};
constexpr int kVocab = 32000, kFfn = 5632, kMaxLayers = gpu_model.num_layers;
#endif
constexpr int kHidden = gpu_model.num_qo_heads * gpu_model.head_dim;
constexpr int kHead = gpu_model.head_dim;
constexpr int kQCols = kHidden;
constexpr int kKvCols = gpu_model.num_kv_heads * gpu_model.head_dim;
constexpr int kQkvCols = kQCols + 2 * kKvCols;
constexpr int kGroup = gpu_model.num_qo_heads / gpu_model.num_kv_heads;
// The attention instances of the model's one shape: cache write, the SIMT and tensor-core
// prefill and decode (the tensor-core kernels take both models' shapes), over a bf16 cache and
// over E4M3 and E5M2 caches (--kv-cache-dtype; the tensor-core kernels too), so that plan_decode<Set> and plan_prefill<Set> choose among the kernels this file
// compiles and decode<Set> and prefill<Set> run the plan's.
using attention_instances =
    ra::instantiation_set<ra::dtypes<gpu_model.dtype>, ra::values<kHead>, ra::values<ra::dynamic_block_size>,
                          ra::values<kGroup>,
                          ra::fp8_kv_instances<ra::dtypes<gpu_model.dtype>,
                                               ra::dtypes<rungs::dtype::fp8_e4m3, rungs::dtype::fp8_e5m2>,
                                               ra::values<kHead>, ra::values<kGroup>>,
                          ra::tensor_core_decode_instances<ra::dtypes<gpu_model.dtype>, ra::values<kHead>, ra::values<kGroup>>,
                          ra::tensor_core_prefill_instances<ra::dtypes<gpu_model.dtype>, ra::values<kHead>>>;
// The instances of a sliding-window layer: the same set, the window compiled in.
constexpr ra::score_mod sliding{.sliding_window = true};

// A graph shape as the forward plans it: sequences, tokens, block-table width, uniform query
// length (graph_shape::query).
using shape_key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

model_config gpu_config(std::uint64_t seed) {
  return model_config{.vocab = kVocab, .ffn = kFfn, .rope_theta = 10000.0, .norm_eps = 1e-5f, .seed = seed};
}

// ---- kernels --------------------------------------------------------------------------------

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// w[i] = scale * uniform(-1, 1), a function of (seed, i) only.
__global__ void init_uniform(bf16* w, std::int64_t n, float scale, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t r = mix64(seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1));
    const float u = static_cast<float>(r >> 40) * 0x1p-23f - 1.0f;
    w[i] = __float2bfloat16(scale * u);
  }
}

__global__ void fill_bf16(bf16* w, std::int64_t n, float v) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    w[i] = __float2bfloat16(v);
}

__global__ void embed(const std::int32_t* tokens, const bf16* table, float* x, int vocab) {
  const std::int64_t t = blockIdx.x;
  std::int32_t id = tokens[t];
  id = id < 0 || id >= vocab ? 0 : id;  // padded rows carry 0; nothing else is out of range
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) x[t * kHidden + i] = __bfloat162float(table[std::int64_t{id} * kHidden + i]);
}

// Sum over a block of 256 threads.
__device__ float block_sum(float v) {
  __shared__ float partial[8];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s += partial[w];
  __syncthreads();
  return s;
}

// y[row] = x[row] / rms(x[row]) * g, one block of 256 threads per row.
__global__ void rms_norm(const float* x, const bf16* g, float* y, float eps) {
  const std::int64_t row = blockIdx.x;
  const float* xr = x + row * kHidden;
  float ss = 0;
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) ss += xr[i] * xr[i];
  const float scale = rsqrtf(block_sum(ss) / kHidden + eps);
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) y[row * kHidden + i] = xr[i] * scale * __bfloat162float(g[i]);
}

// C[M][N] (+)= A[M][K] . W[K][N]: 64 x 64 tiles, 256 threads of 4 x 4 outputs, f32 accumulation.
template <class TA>
__global__ void __launch_bounds__(256) gemm(const TA* A, const bf16* W, float* C, int M, int N, int K, bool accumulate) {
  __shared__ float As[16][64 + 4];
  __shared__ float Ws[16][64 + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int r = i / 16, c = i % 16, m = m0 + r, k = k0 + c;
      As[c][r] = m < M && k < K ? to_float(A[std::int64_t{m} * K + k]) : 0.0f;
    }
    for (int i = threadIdx.x; i < 16 * 64; i += 256) {
      const int r = i / 64, c = i % 64, k = k0 + r, n = n0 + c;
      Ws[r][c] = k < K && n < N ? __bfloat162float(W[std::int64_t{k} * N + n]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      float a[4], w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = As[kk][ty * 4 + i];
        w[i] = Ws[kk][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * w[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N) {
        float* c = C + std::int64_t{m} * N + n;
        *c = accumulate ? *c + acc[i][j] : acc[i][j];
      }
    }
}

// Rotary embedding of Q and K (pairs i, i + D/2), and Q, K, V to bf16 for the attention kernels.
__global__ void rope_split(const float* qkv, const std::int32_t* positions, const float* inv_freq, bf16* q, bf16* k,
                           bf16* v) {
  const std::int64_t t = blockIdx.x;
  const float* row = qkv + t * kQkvCols;
  const float pos = static_cast<float>(positions[t]);
  constexpr int half = kHead / 2;
  constexpr int rotated = (gpu_model.num_qo_heads + gpu_model.num_kv_heads) * half;
  for (int j = threadIdx.x; j < rotated; j += blockDim.x) {
    const int head = j / half, i = j % half;
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);
    const float* src = row + head * kHead;  // query heads, then key heads: contiguous in qkv
    const float a = src[i], b = src[i + half];
    bf16* dst = head < gpu_model.num_qo_heads ? q + t * kQCols + head * kHead
                                              : k + t * kKvCols + (head - gpu_model.num_qo_heads) * kHead;
    dst[i] = __float2bfloat16(a * c - b * s);
    dst[i + half] = __float2bfloat16(a * s + b * c);
  }
  for (int j = threadIdx.x; j < kKvCols; j += blockDim.x) v[t * kKvCols + j] = __float2bfloat16(row[kQCols + kKvCols + j]);
}

// A further attention group's slots: each real token's position through its sequence's row of
// the group's table (a new token's block never left the window); padded tokens keep slot -1,
// which the caller has written. One block of threads per sequence row.
__global__ void group_slots(const std::int32_t* query_start, const std::int32_t* positions, const std::int64_t* slots,
                            const std::int32_t* table, std::int64_t width, std::int64_t* out) {
  const std::int64_t s = blockIdx.x;
  constexpr int bs = gpu_model.block_size;
  for (std::int32_t i = query_start[s] + static_cast<std::int32_t>(threadIdx.x); i < query_start[s + 1];
       i += static_cast<std::int32_t>(blockDim.x))
    if (slots[i] >= 0) out[i] = std::int64_t{table[s * width + positions[i] / bs]} * bs + positions[i] % bs;
}

// act[t][j] = silu(gate[t][j]) * up[t][j], gate and up side by side in mlp[t].
__global__ void silu_mul(const float* mlp, float* act, int ffn) {
  const std::int64_t t = blockIdx.x;
  for (int j = threadIdx.x; j < ffn; j += blockDim.x) {
    const float g = mlp[t * 2 * ffn + j];
    act[t * ffn + j] = g / (1.0f + __expf(-g)) * mlp[t * 2 * ffn + ffn + j];
  }
}

// out[s] = final norm of the last new token of sequence s; zeros for a padded sequence.
__global__ void last_token_rows(const float* x, const std::int32_t* query_start, const std::int32_t* seq_lens,
                                const bf16* g, float* out, float eps) {
  const std::int64_t s = blockIdx.x;
  const std::int32_t first = query_start[s], last = query_start[s + 1] - 1;
  float* o = out + s * kHidden;
  if (seq_lens[s] <= 0 || last < first) {
    for (int i = threadIdx.x; i < kHidden; i += blockDim.x) o[i] = 0.0f;
    return;
  }
  const float* xr = x + std::int64_t{last} * kHidden;
  float ss = 0;
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) ss += xr[i] * xr[i];
  const float scale = rsqrtf(block_sum(ss) / kHidden + eps);
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) o[i] = xr[i] * scale * __bfloat162float(g[i]);
}

// tokens[r] = argmax over the vocabulary of logits[r] (the first index on a tie).
__global__ void argmax_rows(const float* logits, int vocab, std::int32_t* tokens) {
  const std::int64_t r = blockIdx.x;
  float best = -INFINITY;
  int index = vocab;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float x = logits[r * vocab + v];
    if (x > best) best = x, index = v;
  }
  __shared__ float bv[256];
  __shared__ int bi[256];
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = index;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float o = bv[threadIdx.x + s];
      const int oi = bi[threadIdx.x + s];
      if (o > bv[threadIdx.x] || (o == bv[threadIdx.x] && oi < bi[threadIdx.x])) bv[threadIdx.x] = o, bi[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) tokens[r] = bi[0];
}

// ---- the model --------------------------------------------------------------------------------

std::int64_t align256(std::int64_t n) { return (n + 255) / 256 * 256; }

template <class T>
T* device_alloc(std::int64_t n) {
  void* p = nullptr;
  RUNGS_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T)));
  return static_cast<T*>(p);
}

/// Weights, KV pools and the sampler's buffers on the device; the forward the engine captures.
class gpu_decoder {
 public:
  using dims = decoder_dims<gpu_model>;

  /// `num_layers`: gpu_model's (1 to kMaxLayers in cuda-sim); `bucket_shapes`: every graph shape
  /// captured; `max_seqs`: the most sequences a step samples (max_num_seqs); `decode_options`,
  /// `prefill_options`: every decode and prefill plan's (a forced kernel); `attention`: a hybrid
  /// model's window and group per layer (empty: every layer full attention, the staged table).
  gpu_decoder(const model_config& c, int num_layers, std::int64_t num_blocks, std::set<shape_key> bucket_shapes,
              std::int64_t max_seqs, const ra::plan_options& decode_options, const ra::plan_options& prefill_options,
              const layer_attention& attention = {})
      : c_(c),
        attention_(attention),
        config_{gpu_model.dtype, ra::attention_shape::of(gpu_model, num_blocks), 0.0f, {},
                {.type = c.kv_cache == gpu_model.dtype ? std::nullopt : std::optional<rungs::dtype>(c.kv_cache)}},
        device_(ra::query_device()),
        decode_options_(decode_options),
        prefill_options_(prefill_options),
        bucket_shapes_(std::move(bucket_shapes)),
        max_seqs_(max_seqs) {
    RUNGS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Weights: uniform with variance 1 / fan_in (embeddings 1), norms at 1.
    std::uint64_t tensor = 0;
    auto weights = [&](std::int64_t n, std::int64_t fan_in) {
      bf16* w = device_alloc<bf16>(n);
      init_uniform<<<1024, 256, 0, stream_>>>(w, n, std::sqrt(3.0f / static_cast<float>(fan_in)),
                                              c_.seed * 0x100000001b3ull + ++tensor);
      RUNGS_CUDA_CHECK(cudaGetLastError());
      owned_.push_back(w);
      return w;
    };
    auto ones = [&](std::int64_t n) {
      bf16* w = device_alloc<bf16>(n);
      fill_bf16<<<64, 256, 0, stream_>>>(w, n, 1.0f);
      RUNGS_CUDA_CHECK(cudaGetLastError());
      owned_.push_back(w);
      return w;
    };
    const std::int64_t H = kHidden, F = c_.ffn;
    embed_ = weights(std::int64_t{c_.vocab} * H, 1);
    if (attention_.group.empty())
      for (int l = 0; l < num_layers; ++l) attention_.group.push_back(l), attention_.window.push_back(0);
    else
      groups_ = *std::max_element(attention_.group.begin(), attention_.group.end()) + 1;
    if (static_cast<int>(attention_.group.size()) != num_layers)
      throw std::logic_error("gpu model: " + std::to_string(attention_.group.size()) + " layers' attention for " +
                             std::to_string(num_layers) + " layers");
    // Layer l's pool: its rank within its group (without groups, each layer is a group of one).
    std::vector<int> rank(static_cast<std::size_t>(num_layers)), seen(static_cast<std::size_t>(num_layers));
    for (int l = 0; l < num_layers; ++l) rank[static_cast<std::size_t>(l)] = seen[static_cast<std::size_t>(attention_.group[static_cast<std::size_t>(l)])]++;
    if (groups_ == 1) std::iota(rank.begin(), rank.end(), 0);
    for (int l = 0; l < num_layers; ++l) {
      layer ly;
      ly.window = attention_.window[static_cast<std::size_t>(l)];
      ly.group = groups_ > 1 ? attention_.group[static_cast<std::size_t>(l)] : 0;
      ly.attn_norm = ones(H);
      ly.mlp_norm = ones(H);
      ly.wqkv = weights(H * kQkvCols, H);
      ly.wo = weights(H * H, H);
      ly.w_gate_up = weights(H * 2 * F, H);
      ly.w_down = weights(F * H, F);
      const std::size_t r = static_cast<std::size_t>(rank[static_cast<std::size_t>(l)]);
      if (r == pools_.size()) {
        const std::int64_t pool_bytes = config_.shape.pool_elements() * rungs::bytes_per_element(c.kv_cache);
        std::byte* k = device_alloc<std::byte>(pool_bytes);
        std::byte* v = device_alloc<std::byte>(pool_bytes);
        owned_.push_back(k);
        owned_.push_back(v);
        RUNGS_CUDA_CHECK(cudaMemsetAsync(k, 0, static_cast<std::size_t>(pool_bytes), stream_));
        RUNGS_CUDA_CHECK(cudaMemsetAsync(v, 0, static_cast<std::size_t>(pool_bytes), stream_));
        pools_.push_back({k, v});
      }
      ly.k_cache = pools_[r].first;
      ly.v_cache = pools_[r].second;
      layers_.push_back(ly);
    }
    final_norm_ = ones(H);
    lm_head_ = weights(H * c_.vocab, H);
    std::vector<float> inv(kHead / 2);
    for (int i = 0; i < kHead / 2; ++i)
      inv[static_cast<std::size_t>(i)] = static_cast<float>(std::pow(c_.rope_theta, -2.0 * i / kHead));
    inv_freq_ = device_alloc<float>(kHead / 2);
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    logits_ = device_alloc<float>(max_seqs_ * c_.vocab);
    sampled_ = device_alloc<std::int32_t>(max_seqs_);
    RUNGS_CUDA_CHECK(cudaMallocHost(&sampled_host_, static_cast<std::size_t>(max_seqs_) * sizeof(std::int32_t)));
    // The attention workspace every bucket's plan needs, at every window the layers use (eager
    // live shapes plan no split).
    for (const int window : windows())
      for (const auto& [seqs, tokens, width, query] : bucket_shapes_) {
        const std::size_t bytes = query == 1 ? decode_plan(seqs, width, window).workspace.bytes
                                             : plan(seqs, tokens, width, true, window).workspace.bytes;
        attention_workspace_ = std::max<std::int64_t>(attention_workspace_, static_cast<std::int64_t>(bytes));
      }
    RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  gpu_decoder(const gpu_decoder&) = delete;
  gpu_decoder& operator=(const gpu_decoder&) = delete;
  ~gpu_decoder() {
    cudaStreamSynchronize(stream_);
    for (void* p : owned_) cudaFree(p);
    cudaFree(inv_freq_);
    cudaFree(logits_);
    cudaFree(sampled_);
    cudaFreeHost(sampled_host_);
    cudaStreamDestroy(stream_);
  }

  cudaStream_t stream() const { return stream_; }

  /// Workspace of a step of `tokens` token rows: its activations, then room for the largest
  /// bucket's attention plan (cuda_backend sizes it once for the largest bucket and grows a
  /// separate one for eager steps above every bucket).
  /// Attention groups whose block tables the layers read (cuda_backend options::groups).
  std::int32_t groups() const { return groups_; }

  std::int64_t workspace_bytes(std::int64_t /*seqs*/, std::int64_t tokens) const {
    return activations(tokens).end + attention_workspace_;
  }

  void forward(const eng::cuda_step& st) {
    const eng::batch_view& b = st.batch;
    const std::int64_t T = b.tokens, S = b.seqs, H = kHidden, F = c_.ffn;
    const layout a = activations(T);
    if (static_cast<std::int64_t>(st.workspace_bytes) < a.end)
      throw std::runtime_error("gpu model: the workspace holds " + std::to_string(st.workspace_bytes) + " bytes; " +
                               std::to_string(T) + " tokens need " + std::to_string(a.end));
    std::byte* ws = st.workspace;
    float* x = reinterpret_cast<float*>(ws + a.x);
    float* h = reinterpret_cast<float*>(ws + a.h);
    float* qkv = reinterpret_cast<float*>(ws + a.qkv);
    bf16* q = reinterpret_cast<bf16*>(ws + a.q);
    bf16* k = reinterpret_cast<bf16*>(ws + a.k);
    bf16* v = reinterpret_cast<bf16*>(ws + a.v);
    bf16* attn = reinterpret_cast<bf16*>(ws + a.attn);
    float* mlp = reinterpret_cast<float*>(ws + a.mlp);
    float* act = reinterpret_cast<float*>(ws + a.act);
    std::byte* attn_ws = ws + a.end;
    const std::size_t attn_ws_bytes = st.workspace_bytes - static_cast<std::size_t>(a.end);

    const bool bucket = bucket_shapes_.contains({S, T, b.width, b.query});
    // One new token per sequence, declared by the graph's shape: the decode kernel. Its query
    // and output rows are the token rows (sequence i's token is row i; a padded sequence has
    // length 0 and gets a zero row).
    const bool decode = b.query == 1;
    if (decode && !bucket) throw std::logic_error("gpu model: a uniform-decode step outside every graph shape");
    // One plan per window the layers use (the window is part of the plan's configuration).
    std::vector<std::tuple<int, ra::prefill_plan, ra::decode_plan>> plans;
    for (const int window : windows()) {
      plans.emplace_back(window, decode ? ra::prefill_plan{} : plan(S, T, b.width, bucket, window),
                         decode ? decode_plan(S, b.width, window) : ra::decode_plan{});
      const std::size_t plan_ws = decode ? std::get<2>(plans.back()).workspace.bytes : std::get<1>(plans.back()).workspace.bytes;
      if (plan_ws > attn_ws_bytes)
        throw std::runtime_error("gpu model: the attention plan needs " + std::to_string(plan_ws) +
                                 " bytes of workspace, " + std::to_string(attn_ws_bytes) + " are left");
    }
    if (st.groups != groups_)
      throw std::logic_error("gpu model: the step carries " + std::to_string(st.groups) + " groups' block tables; the layers read " +
                             std::to_string(groups_));
    const cudaStream_t s = st.stream;
    // Every further group's slots: padding -1 (all bytes 0xff), then the real tokens'.
    std::int64_t* group_slot_rows = reinterpret_cast<std::int64_t*>(ws + a.slots);  // [groups - 1][T]
    auto slots_of = [&](int g) -> const std::int64_t* { return g == 0 ? b.slot_mapping : group_slot_rows + (g - 1) * T; };
    for (int g = 1; g < groups_; ++g) {
      std::int64_t* out = group_slot_rows + (g - 1) * T;
      RUNGS_CUDA_CHECK(cudaMemsetAsync(out, 0xff, static_cast<std::size_t>(T) * sizeof(std::int64_t), s));
      group_slots<<<static_cast<unsigned>(S), 128, 0, s>>>(b.query_start, b.positions, b.slot_mapping, st.block_tables(g),
                                                          b.width, out);
    }
    const unsigned rows = static_cast<unsigned>(T);
    auto product = [&](auto* A, const bf16* W, float* C, std::int64_t N, std::int64_t K, bool accumulate) {
      const dim3 grid(static_cast<unsigned>((N + 63) / 64), static_cast<unsigned>((T + 63) / 64));
      gemm<<<grid, 256, 0, s>>>(A, W, C, static_cast<int>(T), static_cast<int>(N), static_cast<int>(K), accumulate);
    };

    embed<<<rows, 256, 0, s>>>(b.token_ids, embed_, x, c_.vocab);
    for (const layer& ly : layers_) {
      rms_norm<<<rows, 256, 0, s>>>(x, ly.attn_norm, h, c_.norm_eps);
      product(h, ly.wqkv, qkv, kQkvCols, H, false);
      rope_split<<<rows, 256, 0, s>>>(qkv, b.positions, inv_freq_, q, k, v);
      ra::cache_write<attention_instances>(
          config_, {.k = k, .v = v, .slot_mapping = slots_of(ly.group), .num_tokens = T, .k_cache = ly.k_cache, .v_cache = ly.v_cache},
          s);
      const auto& [window, p, dp] = *std::find_if(plans.begin(), plans.end(), [&](const auto& x) { return std::get<0>(x) == ly.window; });
      const std::int32_t* tables = st.block_tables(ly.group);
      if (decode) {  // every row written, zeros for padded sequences
        const ra::decode_args args{.q = q, .k_cache = ly.k_cache, .v_cache = ly.v_cache, .block_tables = tables,
                                   .block_table_stride = b.width, .seq_lens = b.seq_lens, .out = attn,
                                   .workspace = dp.workspace.bytes ? attn_ws : nullptr, .workspace_bytes = attn_ws_bytes};
        if (window > 0) ra::decode<attention_instances, sliding>(dp, args, s);
        else ra::decode<attention_instances>(dp, args, s);
      } else {
        // Rows of padded tokens are not written by prefill: clear them so the products read zeros.
        RUNGS_CUDA_CHECK(cudaMemsetAsync(attn, 0, static_cast<std::size_t>(T * H) * sizeof(bf16), s));
        const ra::prefill_args args{.q = q, .k_cache = ly.k_cache, .v_cache = ly.v_cache, .block_tables = tables,
                                    .block_table_stride = b.width, .q_indptr = b.query_start, .kv_lens = b.seq_lens,
                                    .out = attn, .workspace = p.workspace.bytes ? attn_ws : nullptr,
                                    .workspace_bytes = attn_ws_bytes};
        if (window > 0) ra::prefill<attention_instances, sliding>(p, args, s);
        else ra::prefill<attention_instances>(p, args, s);
      }
      product(attn, ly.wo, x, H, H, true);
      rms_norm<<<rows, 256, 0, s>>>(x, ly.mlp_norm, h, c_.norm_eps);
      product(h, ly.w_gate_up, mlp, 2 * F, H, false);
      silu_mul<<<rows, 256, 0, s>>>(mlp, act, static_cast<int>(F));
      product(act, ly.w_down, x, H, F, true);
    }
    last_token_rows<<<static_cast<unsigned>(S), 256, 0, s>>>(x, b.query_start, b.seq_lens, final_norm_, st.out, c_.norm_eps);
    RUNGS_CUDA_CHECK(cudaGetLastError());
  }

  /// Greedy tokens of the first n rows: LM head, argmax, one copy back.
  void sample(const eng::device_rows& r, std::int64_t n, std::span<token_id> out) {
    if (n > max_seqs_) throw std::logic_error("gpu model: more rows to sample than max_num_seqs");
    const dim3 grid(static_cast<unsigned>((c_.vocab + 63) / 64), static_cast<unsigned>((n + 63) / 64));
    gemm<<<grid, 256, 0, stream_>>>(r.data, lm_head_, logits_, static_cast<int>(n), c_.vocab, kHidden, false);
    argmax_rows<<<static_cast<unsigned>(n), 256, 0, stream_>>>(logits_, c_.vocab, sampled_);
    RUNGS_CUDA_CHECK(cudaGetLastError());
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(sampled_host_, sampled_, static_cast<std::size_t>(n) * sizeof(std::int32_t),
                                     cudaMemcpyDeviceToHost, stream_));
    RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy_n(sampled_host_, n, out.begin());
  }

  /// The kernel of every full-attention decode plan (it depends on the shape, the device and
  /// the options, not on the batch).
  ra::decode_kernel decode_kernel() const { return decode_plan(1, 1, 0).kernel; }
  /// The kernel of every full-attention prefill plan (likewise).
  ra::attention_kernel prefill_kernel() const { return plan(1, 1, 1, true, 0).kernel; }
  /// The cache type the attention kernels are instantiated for and dispatched on.
  rungs::dtype cache_type() const { return config_.cache_type(); }

  /// Copy-on-write: whole blocks, every pool, on the model's stream (before the step's writes).
  void copy_blocks(std::span<const rungs::kv::block_copy> copies) {
    const std::size_t block = static_cast<std::size_t>(gpu_model.num_kv_heads) * gpu_model.block_size * kHead *
                              rungs::bytes_per_element(c_.kv_cache);
    for (const auto& [k_pool, v_pool] : pools_)
      for (std::byte* pool : {k_pool, v_pool})
        for (const rungs::kv::block_copy& c : copies)
          RUNGS_CUDA_CHECK(cudaMemcpyAsync(pool + c.dst * block, pool + c.src * block, block, cudaMemcpyDeviceToDevice,
                                           stream_));
  }

 private:
  struct layer {
    bf16 *attn_norm, *mlp_norm, *wqkv, *wo, *w_gate_up, *w_down;
    std::byte *k_cache, *v_cache;  // the cache's type: bf16, or fp8 (--kv-cache-dtype); its group's rank's pool
    int window = 0;                // sliding window in keys; 0: full attention
    int group = 0;                 // the attention group whose tables and slots it reads
  };
  struct layout {
    std::int64_t x, h, qkv, q, k, v, attn, mlp, act, slots, end;
  };

  // The distinct windows of the layers (0: full attention), in first-use order.
  std::vector<int> windows() const {
    std::vector<int> w;
    for (const int x : attention_.window)
      if (std::find(w.begin(), w.end(), x) == w.end()) w.push_back(x);
    return w;
  }
  ra::attention_config config_at(int window) const {
    ra::attention_config c = config_;
    c.scores.window = window;
    return c;
  }

  layout activations(std::int64_t T) const {
    const std::int64_t H = kHidden, F = c_.ffn;
    layout l{};
    l.x = 0;
    l.h = l.x + align256(T * H * 4);
    l.qkv = l.h + align256(T * H * 4);
    l.q = l.qkv + align256(T * kQkvCols * 4);
    l.k = l.q + align256(T * kQCols * 2);
    l.v = l.k + align256(T * kKvCols * 2);
    l.attn = l.v + align256(T * kKvCols * 2);
    l.mlp = l.attn + align256(T * H * 2);
    l.act = l.mlp + align256(T * 2 * F * 4);
    l.slots = l.act + align256(T * F * 4);
    l.end = l.slots + align256((groups_ - 1) * T * 8);
    return l;
  }

  // The attention plan of a padded shape: a sequence's new tokens fit its context, which is
  // the shape's block-table width. Bucket shapes get the split-KV heuristic; live shapes of
  // eager steps an unsplit plan, which needs no workspace.
  ra::prefill_plan plan(std::int64_t seqs, std::int64_t tokens, std::int64_t width, bool heuristic, int window) const {
    const auto context = static_cast<int>(width * gpu_model.block_size);
    const ra::prefill_bucket bucket{.max_batch = static_cast<int>(seqs),
                                    .max_q_len = static_cast<int>(std::min<std::int64_t>(tokens, context)),
                                    .max_total_q = static_cast<int>(tokens),
                                    .max_context = context};
    ra::plan_options o = prefill_options_;
    if (!heuristic) o.split_tokens = std::max(context, 1);
    return ra::plan_prefill<attention_instances>(config_at(window), bucket, device_, o);
  }

  // The decode plan of a uniform-decode graph shape (only graphs declare one token per
  // sequence): the split-KV heuristic over the shape's context.
  ra::decode_plan decode_plan(std::int64_t seqs, std::int64_t width, int window) const {
    const auto context = static_cast<int>(std::max<std::int64_t>(width * gpu_model.block_size, 1));
    return ra::plan_decode<attention_instances>(config_at(window), {.max_batch = static_cast<int>(seqs), .max_context = context},
                                                device_, decode_options_);
  }

  model_config c_;
  layer_attention attention_;
  std::int32_t groups_ = 1;
  ra::attention_config config_;
  ra::device_info device_;
  ra::plan_options decode_options_, prefill_options_;
  std::set<shape_key> bucket_shapes_;
  std::int64_t max_seqs_;
  std::int64_t attention_workspace_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> owned_;
  bf16 *embed_ = nullptr, *final_norm_ = nullptr, *lm_head_ = nullptr;
  std::vector<layer> layers_;
  std::vector<std::pair<std::byte*, std::byte*>> pools_;  // K and V pools, one pair per rank within a group
  float* inv_freq_ = nullptr;
  float* logits_ = nullptr;
  std::int32_t* sampled_ = nullptr;
  std::int32_t* sampled_host_ = nullptr;
};

// The model's layers: --layers' count in the cuda-sim build (resolve() checked it against
// cuda_backend_info's), else gpu_model's.
int model_layers(const run_setup& s) {
  return s.opts.layers && s.opts.layers->layers <= kMaxLayers ? static_cast<int>(s.opts.layers->layers) : gpu_model.num_layers;
}

}  // namespace

bool cuda_device_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

backend_info cuda_backend_info(std::uint64_t seed, std::int64_t layers) {
  backend_info b;
  int device = 0;
  cudaDeviceProp prop{};
  RUNGS_CUDA_CHECK(cudaGetDevice(&device));
  RUNGS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::size_t free = 0, total = 0;
  RUNGS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  b.device = std::string("cuda (") + prop.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
             "; rungs' paged-attention kernels, one CUDA graph per bucket)";
  b.shape = gpu_model;
  if (layers >= 1 && layers <= kMaxLayers) b.shape.num_layers = static_cast<int>(layers);  // else resolve() names the model's
  b.kv_cache_dtypes = {gpu_model.dtype, rungs::dtype::fp8_e4m3, rungs::dtype::fp8_e5m2};
  b.model = gpu_config(seed);
  using dims = decoder_dims<gpu_model>;
  b.weight_bytes = (dims::params(b.model) + (b.shape.num_layers - gpu_model.num_layers) * dims::layer_params(b.model)) *
                   static_cast<std::int64_t>(sizeof(bf16));
  b.default_memory = static_cast<std::int64_t>(static_cast<double>(free) * 0.9);
  b.memory_source = "0.9 of the device's free memory";
  // The paged-KV blog's pool (7 GiB of 2 MiB blocks = 3584 blocks, 11 chats of 5000 tokens at
  // once): with the blog's 14 chats, three wait. --memory or --kv-blocks overrides it.
  b.default_kv_blocks = 3584;
  b.kv_blocks_source = "the paged-KV blog's 3584-block pool; --kv-blocks or --memory to change";
  return b;
}

serve_result serve_cuda(const run_setup& s, std::ostream& log, bool terminal) {
  // The model is made once the bucket space is: it plans attention for every graph shape the
  // engine will capture, as the engine computes it (width: the bucket's context, or
  // max_model_len, in blocks).
  std::optional<gpu_decoder> model;
  auto make_backend = [&](const eng::any_buckets& space) {
    std::set<shape_key> shapes;
    const std::int64_t len = s.kv.max_model_len;
    for (std::size_t i = 0; i < space.size(); ++i) {
      const eng::graph_shape g = space.at(i).shape;
      const std::int64_t context = g.context > 0 ? std::min(g.context, len) : len;
      shapes.insert({g.seqs, g.tokens, eng::blocks_for(context, gpu_model.block_size), g.query});
    }
    auto options = [](kernel_choice k) {
      ra::plan_options o;
      if (k == kernel_choice::simt) o.kernel = ra::attention_kernel::simt;
      if (k == kernel_choice::tensor_cores) o.kernel = ra::attention_kernel::tensor_cores;
      return o;
    };
    gpu_decoder& m = model.emplace(s.model, model_layers(s), s.kv.num_blocks, std::move(shapes), s.scheduler.max_num_seqs,
                                   options(s.opts.decode_kernel), options(s.opts.prefill_kernel), s.attention);
    if (s.opts.dispatch) {
      log << "Decode kernel of uniform-decode graphs: " << ra::name(m.decode_kernel())
          << (s.opts.decode_kernel == decode_kernel_kind::automatic ? " (the planner's)" : " (--decode-kernel)") << "\n";
      log << "Prefill kernel of the other steps: " << ra::name(m.prefill_kernel())
          << (s.opts.prefill_kernel == kernel_choice::automatic ? " (the planner's)" : " (--prefill-kernel)") << "\n";
      log << "KV cache of the attention kernels: " << rungs::name(m.cache_type()) << " (queries "
          << rungs::name(gpu_model.dtype) << ")\n";
    }
    eng::cuda_backend::options o;
    o.workspace_bytes = [&m](std::int64_t seqs, std::int64_t tokens) { return m.workspace_bytes(seqs, tokens); };
    o.groups = m.groups();
    return eng::cuda_backend([&m](const eng::cuda_step& st) { m.forward(st); }, o, m.stream());
  };
  // The serving loop samples and copies blocks through the model, which exists by then.
  struct runtime {
    std::optional<gpu_decoder>& model;
    void sample(const eng::device_rows& r, std::int64_t n, std::span<token_id> out) { model->sample(r, n, out); }
    void copy_blocks(std::span<const rungs::kv::block_copy> copies) { model->copy_blocks(copies); }
  } rt{model};
  return serve_engine<gpu_model>(s, make_backend, rt, log, terminal);
}

bool verify_cuda(const run_setup& s, const serve_result& r, std::int32_t chats, std::ostream& log) {
  // The plain loop's model: every layer its own pool and the staged contiguous table, its window
  // applied by the kernel (as the host's plain_generate), so nothing of the group tables, the
  // group slots or the shared pools that the engine's steps go through is shared with it.
  const std::int64_t blocks = std::max<std::int64_t>(eng::blocks_for(longest_conversation(trace_rows(s.requests)), gpu_model.block_size), 1);
  const layer_attention plain{.window = s.attention.window, .group = std::vector<int>(s.attention.window.size(), 0)};
  gpu_decoder model(s.model, model_layers(s), blocks, {}, 1, ra::plan_options{}, ra::plan_options{}, plain);
  eng::cuda_backend::options o;
  o.workspace_bytes = [&model](std::int64_t seqs, std::int64_t tokens) { return model.workspace_bytes(seqs, tokens); };
  eng::cuda_backend backend([&model](const eng::cuda_step& st) { model.forward(st); }, o, model.stream());
  backend.setup({.slots = 0, .seqs = 1, .tokens = 1, .width = 1, .row_width = kHidden});
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);  // contiguous: token p lives in slot p
  eng::padded_batch staged;
  // The first forward takes the whole context, later ones the last sampled token.
  const plain_loop generate = [&](std::span<const token_id> context, std::int32_t max_output) {
    std::vector<token_id> tokens(context.begin(), context.end()), output;
    std::int64_t cached = 0;
    while (static_cast<std::int32_t>(output.size()) < max_output) {
      const auto q = static_cast<std::int64_t>(tokens.size()) - cached;
      const eng::sequence seq{.tokens = std::span<const std::int32_t>(tokens).subspan(static_cast<std::size_t>(cached)),
                              .context = cached, .block_table = table};
      staged.stage(std::span<const eng::sequence>(&seq, 1), 1, q, eng::blocks_for(cached + q, gpu_model.block_size),
                   gpu_model.block_size);
      backend.eager(staged);
      token_id next = 0;
      model.sample(backend.rows(1), 1, std::span<token_id>(&next, 1));
      cached += q;
      output.push_back(next);
      tokens.push_back(next);
    }
    return output;
  };
  return verify_with(s, r, chats, log, generate);
}

}  // namespace demo
