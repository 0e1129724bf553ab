// Random paged-attention problems for rungs' attention tests, host and GPU alike (plain C++).
//
// Following the correctness practice of docs/kernels.md: block tables are drawn from a
// permutation of a pool several times larger than needed (no block is used twice, ids are
// scattered), lengths are random and mostly not multiples of the block size with the longest
// forced to the maximum, every slot the problem does not use is poisoned with NaN (so a read
// past a sequence's end shows up in the output), table entries past a sequence's blocks hold
// ids outside the pool, and values are fresh seeded random numbers, never zeros.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <rungs/attention/layout.hpp>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/score_mod.hpp>
#include <rungs/blocks.hpp>
#include <rungs/numeric/float16.hpp>

namespace rungs_test {

using rungs::attention::attention_shape;

template <class T>
T poison() {
  if constexpr (std::is_same_v<T, rungs::f16>) {
    return rungs::f16::from_bits(0x7e01);
  } else if constexpr (std::is_same_v<T, rungs::bf16>) {
    return rungs::bf16::from_bits(0x7fc1);
  } else if constexpr (rungs::fp8_element<T>) {
    return T::from_bits(0x7f);  // NaN in both formats
  } else {
    return std::numeric_limits<T>::quiet_NaN();
  }
}

template <class T>
bool is_nan(T x) {
  return std::isnan(rungs::to_double(x));
}

/// Uniform in [-1, -1/16] u [1/16, 1]: never zero, so a dropped or zeroed term changes results.
template <class T>
T random_value(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> magnitude(1.0 / 16, 1.0);
  const double x = std::bernoulli_distribution(0.5)(rng) ? magnitude(rng) : -magnitude(rng);
  return rungs::narrow<T>(x);
}

template <class T>
std::vector<T> random_vector(std::mt19937_64& rng, std::size_t n) {
  std::vector<T> v(n);
  for (T& x : v) x = random_value<T>(rng);
  return v;
}

/// Random lengths in [1, max_len], the first forced to max_len, at most one other multiple of
/// the block size.
inline std::vector<std::int32_t> random_lengths(std::mt19937_64& rng, int batch, int max_len, int block_size) {
  std::uniform_int_distribution<int> pick(1, max_len);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
  bool multiple_seen = max_len % block_size == 0;
  for (int b = 0; b < batch; ++b) {
    int len = b == 0 ? max_len : pick(rng);
    while (b > 0 && len % block_size == 0 && multiple_seen && max_len > 1) len = pick(rng);
    multiple_seen = multiple_seen || len % block_size == 0;
    lens[static_cast<std::size_t>(b)] = len;
  }
  return lens;
}

/// Sequences over a paged pool: lengths, block tables, query packing.
struct paged_problem {
  attention_shape shape{};
  std::vector<std::int32_t> kv_lens;   ///< context tokens per sequence (decode: seq_lens)
  std::vector<std::int32_t> q_lens;    ///< new tokens per sequence (decode: 1 each)
  std::vector<std::int32_t> q_indptr;  ///< batch + 1
  std::vector<std::vector<std::int32_t>> blocks;  ///< per sequence, ceil(kv_len / block_size) ids
  std::int64_t table_stride = 0;
  std::vector<std::int32_t> tables;    ///< batch x table_stride; unused entries are out-of-pool ids

  int batch() const { return static_cast<int>(kv_lens.size()); }
  int total_q() const { return q_indptr.empty() ? 0 : q_indptr.back(); }
  std::vector<std::span<const std::int32_t>> block_spans() const {
    return {blocks.begin(), blocks.end()};
  }
};

/// Lays out sequences of kv_lens (and q_lens new tokens each) over a pool of shape.num_blocks
/// blocks (0: four times what they need, at least 8). Table rows are table_stride entries
/// (0: exactly the longest sequence's blocks).
inline paged_problem make_problem(std::mt19937_64& rng, attention_shape shape, std::vector<std::int32_t> kv_lens,
                                  std::vector<std::int32_t> q_lens = {}, std::int64_t table_stride = 0) {
  paged_problem p;
  if (q_lens.empty()) q_lens.assign(kv_lens.size(), 1);
  std::int64_t needed = 0;
  std::int64_t longest = 0;
  for (std::int32_t len : kv_lens) {
    const std::int64_t blocks = rungs::blocks_for(len, shape.block_size);
    needed += blocks;
    longest = std::max(longest, blocks);
  }
  if (shape.num_blocks == 0) shape.num_blocks = std::max<std::int64_t>(8, 4 * needed);
  if (shape.num_blocks < needed) throw std::invalid_argument("make_problem: pool too small");
  p.shape = shape;
  p.kv_lens = std::move(kv_lens);
  p.q_lens = std::move(q_lens);
  p.table_stride = table_stride != 0 ? table_stride : std::max<std::int64_t>(1, longest);

  std::vector<std::int32_t> pool(static_cast<std::size_t>(shape.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::size_t next = 0;
  p.tables.assign(static_cast<std::size_t>(p.batch() * p.table_stride), 0);
  std::uniform_int_distribution<std::int32_t> bad(0, 1 << 20);
  for (auto& id : p.tables) id = bad(rng) % 2 == 0 ? -1 - bad(rng) : static_cast<std::int32_t>(shape.num_blocks) + bad(rng);
  p.q_indptr.assign(1, 0);
  for (int b = 0; b < p.batch(); ++b) {
    const std::int32_t len = p.kv_lens[static_cast<std::size_t>(b)];
    std::vector<std::int32_t> ids(static_cast<std::size_t>(rungs::blocks_for(len, shape.block_size)));
    for (auto& id : ids) id = pool[next++];
    std::copy(ids.begin(), ids.end(), p.tables.begin() + static_cast<std::ptrdiff_t>(b * p.table_stride));
    p.blocks.push_back(std::move(ids));
    p.q_indptr.push_back(p.q_indptr.back() + p.q_lens[static_cast<std::size_t>(b)]);
  }
  return p;
}

/// K and V pools: NaN everywhere except the slots of the problem's tokens, which get random
/// values.
template <class T>
struct pools {
  std::vector<T> k, v;
};

template <class T>
pools<T> make_pools(std::mt19937_64& rng, const paged_problem& p) {
  const attention_shape& s = p.shape;
  pools<T> out{std::vector<T>(static_cast<std::size_t>(s.pool_elements()), poison<T>()),
               std::vector<T>(static_cast<std::size_t>(s.pool_elements()), poison<T>())};
  for (int b = 0; b < p.batch(); ++b) {
    for (int t = 0; t < p.kv_lens[static_cast<std::size_t>(b)]; ++t) {
      const std::int32_t block = p.blocks[static_cast<std::size_t>(b)][static_cast<std::size_t>(t / s.block_size)];
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const std::int64_t at = s.kv_offset(block, h, t % s.block_size);
        for (int d = 0; d < s.head_dim; ++d) {
          out.k[static_cast<std::size_t>(at + d)] = random_value<T>(rng);
          out.v[static_cast<std::size_t>(at + d)] = random_value<T>(rng);
        }
      }
    }
  }
  return out;
}

/// The run-time values of Mod's score transforms for a kernel test (zeros for what Mod lacks):
/// the given window (no multiple of a block or tile), a cap below the scores' spread, and fresh
/// sink logits, one per query head.
struct mod_values {
  rungs::attention::score_values values;
  std::vector<float> sinks;
};
template <rungs::attention::score_mod Mod>
mod_values draw_mod_values(std::mt19937_64& rng, int num_qo_heads, int window) {
  mod_values v;
  if (Mod.sliding_window) v.values.window = window;
  if (Mod.soft_cap) v.values.logit_soft_cap = 1.5f;
  if (Mod.sinks) {
    std::uniform_real_distribution<float> logit(-1.0f, 2.0f);
    for (int h = 0; h < num_qo_heads; ++h) v.sinks.push_back(logit(rng));
  }
  return v;
}

/// Dequantisation scales of a kernel test over an fp8 cache KV (none for a 16-bit one): fresh
/// values in [lo, hi], one per KV head or one for the tensor, for K and for V; the format
/// to put in attention_config::kv.
struct kv_scale_values {
  std::vector<float> k, v;
  rungs::attention::kv_cache_format format{};
};
template <class KV>
kv_scale_values draw_kv_scales(std::mt19937_64& rng, int num_kv_heads, bool per_head, float lo = 0.5f, float hi = 2.0f) {
  kv_scale_values s;
  if constexpr (rungs::fp8_element<KV>) {
    std::uniform_real_distribution<float> scale(lo, hi);
    for (int h = 0; h < (per_head ? num_kv_heads : 1); ++h) s.k.push_back(scale(rng)), s.v.push_back(scale(rng));
    s.format = {std::is_same_v<KV, rungs::e4m3> ? rungs::dtype::fp8_e4m3 : rungs::dtype::fp8_e5m2, per_head};
  }
  return s;
}

/// Every score transform at once (score_mod.hpp): what the kernel tests of the transforms run.
inline constexpr rungs::attention::score_mod all_score_mods{.sliding_window = true, .soft_cap = true, .sinks = true};

}  // namespace rungs_test
