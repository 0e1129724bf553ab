// The host reference (rungs/attention/reference.hpp) against a naive dense attention over
// KV gathered from the pool with its own index arithmetic, over every head dim, block size and
// a few GQA groups, with and without score transforms; plus hand-checkable cases for the mask
// alignment, the sliding window, the soft-cap, the sinks, the GQA head mapping and the cache
// write.
#include <rungs/attention/reference.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "paged_problem.hpp"

namespace ra = rungs::attention;
namespace ref = rungs::attention::reference;
using rungs_test::make_pools;
using rungs_test::make_problem;
using rungs_test::paged_problem;

namespace {

// Dense [q_len][num_qo_heads][head_dim] attention of sequence b's queries (rows q_row0 ..)
// over its first kv_len tokens, gathered from the pool without layout.hpp's helpers. Under a
// window w the query at position x sees keys x - w + 1 .. x; a cap c maps a logit l to
// c tanh(l / c); head h's sink adds e^sink[h] to the softmax denominator.
template <class T, class Q>
std::vector<double> dense_attention(const paged_problem& p, const rungs_test::pools<T>& pools, const std::vector<Q>& q,
                                    int b, int q_row0, int q_len, double scale, const ref::score_options& opt = {}) {
  const ra::attention_shape& s = p.shape;
  const int len = p.kv_lens[static_cast<std::size_t>(b)];
  const int hkv = s.num_kv_heads;
  const int d = s.head_dim;
  std::vector<double> k(static_cast<std::size_t>(len) * hkv * d);
  std::vector<double> v(k.size());
  for (int t = 0; t < len; ++t) {
    const std::int64_t block = p.tables[static_cast<std::size_t>(b * p.table_stride + t / s.block_size)];
    for (int h = 0; h < hkv; ++h) {
      for (int i = 0; i < d; ++i) {
        const std::int64_t src = block * hkv * s.block_size * d + h * s.block_size * d + (t % s.block_size) * d + i;
        const std::size_t dst = (static_cast<std::size_t>(t) * hkv + h) * d + i;
        k[dst] = rungs::to_double(pools.k[static_cast<std::size_t>(src)]);
        v[dst] = rungs::to_double(pools.v[static_cast<std::size_t>(src)]);
      }
    }
  }
  const int hq = s.num_qo_heads;
  const int group = hq / hkv;
  std::vector<double> out(static_cast<std::size_t>(q_len) * hq * d, 0.0);
  for (int i = 0; i < q_len; ++i) {
    const int visible = len - q_len + i + 1;
    const int first = opt.values.window > 0 ? std::max(0, visible - opt.values.window) : 0;
    for (int h = 0; h < hq; ++h) {
      const int kvh = h / group;
      std::vector<double> logits(static_cast<std::size_t>(std::max(visible, 0)), 0.0);
      for (int t = first; t < visible; ++t) {
        double dot = 0;
        for (int x = 0; x < d; ++x) {
          dot += rungs::to_double(q[(static_cast<std::size_t>(q_row0 + i) * hq + h) * d + x]) *
                 k[(static_cast<std::size_t>(t) * hkv + kvh) * d + x];
        }
        const double l = dot * scale;
        const double c = opt.values.logit_soft_cap;
        logits[static_cast<std::size_t>(t)] = c > 0 ? c * std::tanh(l / c) : l;
      }
      if (visible <= first) continue;
      const double sink = opt.sinks.empty() ? -std::numeric_limits<double>::infinity() : opt.sinks[static_cast<std::size_t>(h)];
      const double mx = std::max(sink, *std::max_element(logits.begin() + first, logits.end()));
      double sum = std::exp(sink - mx);
      for (int t = first; t < visible; ++t) sum += (logits[static_cast<std::size_t>(t)] = std::exp(logits[static_cast<std::size_t>(t)] - mx));
      for (int t = first; t < visible; ++t) {
        for (int x = 0; x < d; ++x) {
          out[(static_cast<std::size_t>(i) * hq + h) * d + x] +=
              logits[static_cast<std::size_t>(t)] / sum * v[(static_cast<std::size_t>(t) * hkv + kvh) * d + x];
        }
      }
    }
  }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const double* b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// A problem (head dim 8, block size 8, one KV head) whose values are their positions: V[t] = t
// in every dim. With zero queries every visible key weighs the same, so an output is the mean
// of the positions its query sees.
struct positional {
  paged_problem p;
  rungs_test::pools<double> pools;
};
positional positional_problem(std::uint64_t seed, int num_qo_heads, const std::vector<std::int32_t>& kv_lens,
                              const std::vector<std::int32_t>& q_lens) {
  std::mt19937_64 rng(seed);
  const ra::attention_shape s{.num_qo_heads = num_qo_heads, .num_kv_heads = 1, .head_dim = 8, .block_size = 8};
  positional r{make_problem(rng, s, kv_lens, q_lens), {}};
  r.pools = make_pools<double>(rng, r.p);
  for (int b = 0; b < r.p.batch(); ++b) {
    for (int t = 0; t < kv_lens[static_cast<std::size_t>(b)]; ++t) {
      const auto at = r.p.shape.kv_offset(r.p.blocks[static_cast<std::size_t>(b)][static_cast<std::size_t>(t / 8)], 0, t % 8);
      for (int d = 0; d < 8; ++d) r.pools.v[static_cast<std::size_t>(at + d)] = t;
    }
  }
  return r;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

template <class T>
void check_shape_against_dense(std::mt19937_64& rng, int head_dim, int block_size, int group,
                               ref::score_options opt = {}) {
  ra::attention_shape s{.num_qo_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim, .block_size = block_size};
  const int max_len = std::min(2 * block_size + 7, 150);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));

  // Decode: three sequences (one of length 0) plus one of the maximum length.
  auto lens = rungs_test::random_lengths(rng, 3, max_len, block_size);
  lens.insert(lens.begin() + 1, 0);
  const paged_problem p = make_problem(rng, s, lens);
  const auto pools = make_pools<T>(rng, p);
  const auto q = rungs_test::random_vector<T>(rng, static_cast<std::size_t>(p.batch() * s.q_row_elements()));
  std::vector<double> out(q.size(), -1.0);
  ref::decode<T, T, double>(p.shape, pools.k, pools.v, q, p.kv_lens, {p.tables, p.table_stride}, 0.0, out, opt);
  REQUIRE(all_finite(out));  // a read of a poisoned slot or table entry would show as NaN or throw
  for (int b = 0; b < p.batch(); ++b) {
    const auto dense = dense_attention(p, pools, q, b, b, 1, scale, opt);
    CHECK(max_abs_diff(dense, out.data() + b * s.q_row_elements()) <= 1e-12);
  }
  for (std::int64_t i = 0; i < s.q_row_elements(); ++i) CHECK(out[static_cast<std::size_t>(s.q_row_elements() + i)] == 0.0);

  // Prefill/extend: some sequences fully new (q_len == kv_len), some extending a context.
  std::vector<std::int32_t> kv_lens = rungs_test::random_lengths(rng, 3, max_len, block_size);
  std::vector<std::int32_t> q_lens;
  std::uniform_int_distribution<int> pick_q(1, 9);
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    q_lens.push_back(b == 1 ? std::min(kv_lens[b], 9) : std::min(kv_lens[b], pick_q(rng)));
  }
  kv_lens[1] = q_lens[1];  // a pure prefill
  const paged_problem pp = make_problem(rng, s, kv_lens, q_lens);
  const auto ppools = make_pools<T>(rng, pp);
  const auto pq = rungs_test::random_vector<T>(rng, static_cast<std::size_t>(pp.total_q() * s.q_row_elements()));
  std::vector<double> pout(pq.size(), -1.0);
  ref::prefill<T, T, double>(pp.shape, ppools.k, ppools.v, pq, pp.q_indptr, pp.kv_lens, {pp.tables, pp.table_stride},
                             0.0, pout, opt);
  REQUIRE(all_finite(pout));
  for (int b = 0; b < pp.batch(); ++b) {
    const int row0 = pp.q_indptr[static_cast<std::size_t>(b)];
    const auto dense = dense_attention(pp, ppools, pq, b, row0, pp.q_lens[static_cast<std::size_t>(b)], scale, opt);
    CHECK(max_abs_diff(dense, pout.data() + row0 * s.q_row_elements()) <= 1e-12);
  }
}

}  // namespace

TEST_CASE("reference decode and prefill match dense attention for every head dim, block size and some groups") {
  std::mt19937_64 rng(20260105);
  for (int head_dim : {64, 80, 96, 128, 256}) {
    for (int block_size : {8, 16, 32, 64, 128}) {
      for (int group : {1, 3, 8}) {
        INFO("head_dim " << head_dim << ", block_size " << block_size << ", group " << group);
        check_shape_against_dense<rungs::bf16>(rng, head_dim, block_size, group);
      }
    }
  }
}

TEST_CASE("reference score transforms (window, soft-cap, sinks, together) match dense attention") {
  std::mt19937_64 rng(20261124);
  std::uniform_real_distribution<float> sink_logit(-2.0f, 2.0f);
  for (int block_size : {8, 32}) {
    for (int group : {1, 4}) {
      std::vector<float> sinks(static_cast<std::size_t>(2 * group));
      for (float& x : sinks) x = sink_logit(rng);
      // A cap below the scores' spread (about +-1 here) makes tanh bend them.
      for (const ref::score_options& opt :
           {ref::score_options{.values = {.window = 1}}, ref::score_options{.values = {.window = block_size + 3}},
            ref::score_options{.values = {.logit_soft_cap = 0.4f}}, ref::score_options{.sinks = sinks},
            ref::score_options{.values = {.window = 5, .logit_soft_cap = 0.4f}, .sinks = sinks}}) {
        INFO("block_size " << block_size << ", group " << group << ", window " << opt.values.window << ", cap "
                           << opt.values.logit_soft_cap << ", sinks " << opt.sinks.size());
        check_shape_against_dense<rungs::bf16>(rng, 64, block_size, group, opt);
      }
    }
  }
}

TEMPLATE_TEST_CASE("reference works on every storage type", "", rungs::f16, rungs::bf16, rungs::e4m3, rungs::e5m2,
                   float, double) {
  std::mt19937_64 rng(7);
  check_shape_against_dense<TestType>(rng, 64, 16, 4);
  check_shape_against_dense<TestType>(rng, 80, 8, 2);
}

TEST_CASE("reference decode: one key gives its value; softmax weights by hand") {
  // One head, head_dim 2, block size 2; the sequence's 3 tokens sit in blocks 1 and 0.
  ra::attention_shape s{.num_qo_heads = 1, .num_kv_heads = 1, .head_dim = 2, .block_size = 2, .num_blocks = 2};
  std::vector<double> k(8, std::nan("")), v(8, std::nan(""));
  auto put = [&](int block, int pos, double k0, double k1, double v0, double v1) {
    const auto at = static_cast<std::size_t>(s.kv_offset(block, 0, pos));
    k[at] = k0, k[at + 1] = k1, v[at] = v0, v[at + 1] = v1;
  };
  put(1, 0, 1, 0, 10, 1);  // token 0
  put(1, 1, 0, 1, 20, 2);  // token 1
  put(0, 0, 1, 1, 30, 3);  // token 2
  const std::vector<std::int32_t> table = {1, 0};
  const std::vector<double> q = {2.0, 0.0};
  std::vector<double> out(2);

  ref::decode<double, double, double>(s, k, v, q, std::vector<std::int32_t>{1}, {table, 2}, 1.0, out);
  CHECK(out[0] == 10.0);
  CHECK(out[1] == 1.0);

  ref::decode<double, double, double>(s, k, v, q, std::vector<std::int32_t>{3}, {table, 2}, 0.5, out);
  // logits (q.k * 0.5): 1, 0, 1 -> weights e, 1, e over 2e + 1
  const double e = std::exp(1.0);
  CHECK(out[0] == Approx((10 * e + 20 + 30 * e) / (2 * e + 1)).epsilon(1e-15));
  CHECK(out[1] == Approx((1 * e + 2 + 3 * e) / (2 * e + 1)).epsilon(1e-15));
}

TEST_CASE("reference prefill: the causal mask is aligned to the end of the context") {
  // Query i of q_len new tokens sees keys 0 .. kv_len - q_len + i. With q = 0 every visible
  // key weighs the same, so with V[t] = t the output is the mean of the visible positions.
  const std::vector<std::int32_t> kv_lens = {13, 5, 9};
  const std::vector<std::int32_t> q_lens = {4, 5, 1};
  const auto [p, pools] = positional_problem(3, 2, kv_lens, q_lens);
  const std::vector<double> q(static_cast<std::size_t>(p.total_q() * 16), 0.0);
  std::vector<double> out(q.size());
  ref::prefill<double, double, double>(p.shape, pools.k, pools.v, q, p.q_indptr, p.kv_lens, {p.tables, p.table_stride},
                                       0.0, out);
  for (int b = 0; b < p.batch(); ++b) {
    for (int i = 0; i < q_lens[static_cast<std::size_t>(b)]; ++i) {
      const int last = kv_lens[static_cast<std::size_t>(b)] - q_lens[static_cast<std::size_t>(b)] + i;
      const std::size_t row = static_cast<std::size_t>(p.q_indptr[static_cast<std::size_t>(b)] + i) * 16;
      INFO("sequence " << b << ", query " << i);
      CHECK(out[row] == Approx(last / 2.0).epsilon(1e-14));
      CHECK(out[row + 8 + 7] == Approx(last / 2.0).epsilon(1e-14));
    }
  }
}

TEST_CASE("reference sliding window: a query at position p sees keys p - W + 1 .. p") {
  // As in the causal test: q = 0 weighs every visible key the same and V[t] = t, so the
  // output is the mean of the visible positions, (first + last) / 2.
  const std::vector<std::int32_t> kv_lens = {13, 5, 2};
  const std::vector<std::int32_t> q_lens = {4, 5, 1};
  const auto [p, pools] = positional_problem(5, 1, kv_lens, q_lens);
  const std::vector<double> q(static_cast<std::size_t>(p.total_q() * 8), 0.0);
  std::vector<double> out(q.size());
  // Window 3. Sequence 0: queries at 9, 10, 11, 12 see 7-9, 8-10, 9-11, 10-12 (means 8 .. 11);
  // sequence 1 (a pure prefill): 0, 0-1, 0-2, 1-3, 2-4; sequence 2: query at 1 sees 0-1.
  const std::vector<double> want = {8, 9, 10, 11, 0, 0.5, 1, 2, 3, 0.5};
  ref::prefill<double, double, double>(p.shape, pools.k, pools.v, q, p.q_indptr, p.kv_lens, {p.tables, p.table_stride},
                                       0.0, out, {.values = {.window = 3}});
  for (std::size_t r = 0; r < want.size(); ++r) {
    INFO("query row " << r);
    CHECK(out[r * 8] == Approx(want[r]).epsilon(1e-14));
    CHECK(out[r * 8 + 7] == Approx(want[r]).epsilon(1e-14));
  }
  // Decode is the last query of each sequence: windows 1 (only itself) and 100 (no effect).
  const std::vector<double> dq(static_cast<std::size_t>(3 * 8), 0.0);
  std::vector<double> dout(dq.size());
  ref::decode<double, double, double>(p.shape, pools.k, pools.v, dq, kv_lens, {p.tables, p.table_stride}, 0.0, dout,
                                      {.values = {.window = 1}});
  CHECK(dout[0] == 12.0);
  CHECK(dout[8] == 4.0);
  CHECK(dout[16] == 1.0);
  ref::decode<double, double, double>(p.shape, pools.k, pools.v, dq, kv_lens, {p.tables, p.table_stride}, 0.0, dout,
                                      {.values = {.window = 100}});
  CHECK(dout[0] == Approx(6.0).epsilon(1e-14));
  CHECK(dout[8] == Approx(2.0).epsilon(1e-14));
  CHECK(dout[16] == Approx(0.5).epsilon(1e-14));
}

TEST_CASE("reference soft-cap and sinks by hand") {
  // One head, head_dim 1, one block: keys k = 3, 0 with values 1, 0; q = 1 and scale 1, so
  // the logits are 3 and 0 and the output is the first key's weight.
  ra::attention_shape s{.num_qo_heads = 1, .num_kv_heads = 1, .head_dim = 1, .block_size = 2, .num_blocks = 1};
  const std::vector<double> k = {3.0, 0.0}, v = {1.0, 0.0}, q = {1.0};
  const std::vector<std::int32_t> table = {0}, two = {2}, one = {1};
  std::vector<double> out(1);
  ref::decode<double, double, double>(s, k, v, q, two, {table, 1}, 1.0, out);
  CHECK(out[0] == Approx(1.0 / (1.0 + std::exp(-3.0))).epsilon(1e-15));
  // Cap 2: the logit 3 becomes 2 tanh(1.5) = 1.8102965..., the logit 0 stays 0.
  ref::decode<double, double, double>(s, k, v, q, two, {table, 1}, 1.0, out, {.values = {.logit_soft_cap = 2.0f}});
  CHECK(out[0] == Approx(1.0 / (1.0 + std::exp(-1.8102965072897328))).epsilon(1e-15));
  // Sinks: one key of value 1 and logit 3; a sink of logit 3 halves its weight, a sink of
  // 3 + ln 3 quarters it; a sink of 1000 leaves e^-997 (0 in double) and no overflow; -inf is
  // no sink. The sink is not capped: with cap 2 the key's logit is 1.81..., the sink's 3.
  const std::vector<float> half = {3.0f}, huge = {1000.0f}, none = {-std::numeric_limits<float>::infinity()};
  ref::decode<double, double, double>(s, k, v, q, one, {table, 1}, 1.0, out, {.sinks = half});
  CHECK(out[0] == 0.5);
  const std::vector<float> quarter = {static_cast<float>(3.0 + std::log(3.0))};
  ref::decode<double, double, double>(s, k, v, q, one, {table, 1}, 1.0, out, {.sinks = quarter});
  CHECK(out[0] == Approx(1.0 / (1.0 + std::exp(static_cast<double>(quarter[0]) - 3.0))).epsilon(1e-15));
  CHECK(out[0] == Approx(0.25).epsilon(1e-6));  // quarter[0] is ln 3 rounded to float
  ref::decode<double, double, double>(s, k, v, q, one, {table, 1}, 1.0, out, {.sinks = huge});
  CHECK(out[0] == 0.0);
  ref::decode<double, double, double>(s, k, v, q, one, {table, 1}, 1.0, out, {.sinks = none});
  CHECK(out[0] == 1.0);
  ref::decode<double, double, double>(s, k, v, q, one, {table, 1}, 1.0, out,
                                      {.values = {.logit_soft_cap = 2.0f}, .sinks = half});
  CHECK(out[0] == Approx(1.0 / (1.0 + std::exp(3.0 - 1.8102965072897328))).epsilon(1e-15));
  // A sequence of length 0 still gives zeros (the sink has no value to give).
  ref::decode<double, double, double>(s, k, v, q, std::vector<std::int32_t>{0}, {table, 1}, 1.0, out, {.sinks = half});
  CHECK(out[0] == 0.0);
}

TEST_CASE("reference: query head h reads KV head h / group") {
  std::mt19937_64 rng(11);
  ra::attention_shape s{.num_qo_heads = 12, .num_kv_heads = 3, .head_dim = 64, .block_size = 16};
  const paged_problem p = make_problem(rng, s, {37, 16});
  auto pools = make_pools<float>(rng, p);
  for (std::size_t i = 0; i < pools.v.size(); ++i) {  // V of KV head h is h + 1 everywhere used
    if (!std::isnan(pools.v[i])) pools.v[i] = static_cast<float>((i / (16 * 64)) % 3 + 1);
  }
  const auto q = rungs_test::random_vector<float>(rng, static_cast<std::size_t>(2 * s.q_row_elements()));
  std::vector<float> out(q.size());
  ref::decode<float, float, float>(p.shape, pools.k, pools.v, q, p.kv_lens, {p.tables, p.table_stride}, 0.0, out);
  for (int b = 0; b < 2; ++b) {
    for (int h = 0; h < 12; ++h) {
      INFO("sequence " << b << ", head " << h);
      CHECK(out[static_cast<std::size_t>((b * 12 + h) * 64 + 5)] == Approx(h / 4 + 1).epsilon(1e-6));
    }
  }
}

TEST_CASE("reference cache write: exact copies into slots; padded rows and other slots unchanged") {
  std::mt19937_64 rng(5);
  for (int block_size : {8, 128}) {
    ra::attention_shape s{.num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 80, .block_size = block_size, .num_blocks = 6};
    const std::int64_t stride = s.kv_row_elements() + 24;  // fused-QKV style rows
    auto k_cache = rungs_test::random_vector<rungs::bf16>(rng, static_cast<std::size_t>(s.pool_elements()));
    auto v_cache = rungs_test::random_vector<rungs::bf16>(rng, static_cast<std::size_t>(s.pool_elements()));
    const auto k_before = k_cache, v_before = v_cache;

    std::vector<std::int64_t> all_slots(static_cast<std::size_t>(s.num_slots()));
    std::iota(all_slots.begin(), all_slots.end(), 0);
    std::shuffle(all_slots.begin(), all_slots.end(), rng);
    std::vector<std::int64_t> slots(all_slots.begin(), all_slots.begin() + 11);
    slots[3] = -1;
    slots[7] = -1;
    const auto k = rungs_test::random_vector<rungs::bf16>(rng, static_cast<std::size_t>(11 * stride));
    const auto v = rungs_test::random_vector<rungs::bf16>(rng, static_cast<std::size_t>(11 * stride));
    ref::cache_write<rungs::bf16>(s, k_cache, v_cache, k, v, slots, stride, stride);

    std::vector<bool> written(k_cache.size(), false);
    for (std::size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] < 0) continue;
      for (int h = 0; h < 2; ++h) {
        for (int d = 0; d < 80; ++d) {
          // slot -> (block, position) -> [block][head][position][dim], spelled out
          const std::int64_t block = slots[t] / block_size, pos = slots[t] % block_size;
          const auto at = static_cast<std::size_t>(((block * 2 + h) * block_size + pos) * 80 + d);
          const auto src = static_cast<std::size_t>(static_cast<std::int64_t>(t) * stride + h * 80 + d);
          CHECK(k_cache[at].bits == k[src].bits);
          CHECK(v_cache[at].bits == v[src].bits);
          written[at] = true;
        }
      }
    }
    std::size_t unchanged = 0;
    for (std::size_t i = 0; i < k_cache.size(); ++i) {
      if (written[i]) continue;
      unchanged += k_cache[i].bits == k_before[i].bits && v_cache[i].bits == v_before[i].bits;
    }
    CHECK(unchanged == k_cache.size() - 9 * 2 * 80);

    std::vector<std::int64_t> beyond = {s.num_slots()};
    CHECK_THROWS_WITH(ref::cache_write<rungs::bf16>(s, k_cache, v_cache, k, v, beyond),
                      Catch::Contains("slot " + std::to_string(s.num_slots()) + " is outside the pool"));
  }
}

TEST_CASE("reference over an fp8 cache: a cached x stands for x * scale; the cache write quantises") {
  // Two KV heads (one query head each), head_dim 2, one block of 2 tokens.
  ra::attention_shape s{.num_qo_heads = 2, .num_kv_heads = 2, .head_dim = 2, .block_size = 2, .num_blocks = 1};
  std::vector<rungs::e4m3> k(8), v(8);
  const std::vector<rungs::bf16> new_k = {rungs::bf16(1.0f), rungs::bf16(-0.5f), rungs::bf16(200.0f), rungs::bf16(0.1f),
                                          rungs::bf16(0.25f), rungs::bf16(0.0f), rungs::bf16(3.0f), rungs::bf16(-9.0f)};
  const std::vector<rungs::bf16> new_v = new_k;
  const std::vector<float> k_scale = {0.25f, 2.0f}, v_scale = {0.5f};  // K per head, V per tensor
  const std::vector<std::int64_t> slots = {0, 1};
  ref::cache_write<rungs::e4m3, rungs::bf16>(s, k, v, new_k, new_v, slots, 0, 0, {k_scale, v_scale});
  // K head 0 (scale 1/4), token 0: 1 -> 4 (0x48), -0.5 -> -2 (0xc0); token 1: 0.25 -> 1 (0x38), 0.
  // K head 1 (scale 2), token 0: 200 -> 100 = 1.5625 x 64: 12.5/8, a tie, to 1.5 x 64 = 96 (0x6c);
  // 0.1 (bf16 0.10009765625) -> 0.050048828125 = 1.6015625 x 2^-5: 4.8125/8 -> 5 (0x15).
  // V (scale 1/2) head 1, token 1: 3 -> 6 = 1.5 x 4 (0x4c); -9 -> -18 = 1.125 x 16 (0xd9).
  const auto at = [&](int head, int pos, int d) { return static_cast<std::size_t>(s.kv_offset(0, head, pos) + d); };
  CHECK(k[at(0, 0, 0)].bits == 0x48);
  CHECK(k[at(0, 0, 1)].bits == 0xc0);
  CHECK(k[at(0, 1, 0)].bits == 0x38);
  CHECK(k[at(0, 1, 1)].bits == 0x00);
  CHECK(k[at(1, 0, 0)].bits == 0x6c);
  CHECK(k[at(1, 0, 1)].bits == 0x15);
  CHECK(v[at(1, 1, 0)].bits == 0x4c);
  CHECK(v[at(1, 1, 1)].bits == 0xd9);
  // 200 / 0.5 = 400 and 200 / 0.25 = 800: the latter saturates to 448.
  const std::vector<float> small = {0.25f};
  ref::cache_write<rungs::e4m3, rungs::bf16>(s, k, v, new_k, new_v, slots, 0, 0, {small, small});
  CHECK(k[at(1, 0, 0)].bits == 0x7e);

  // Decode of head 1 over token 0 only: its value, dequantised. V (scale 1/4): 200 -> 448 (0x7e,
  // saturated), 0.10009765625 -> 0.400390625 = 1.6015625 x 2^-2 -> 1.625 x 2^-2 (0x2d).
  const std::vector<float> q = {0.0f, 0.0f, 1.0f, 1.0f};
  std::vector<double> out(4);
  const std::vector<std::int32_t> table = {0};
  ref::decode<rungs::e4m3, float, double>(s, k, v, q, std::vector<std::int32_t>{1}, {table, 1}, 1.0, out, {},
                                          {small, small});
  CHECK(out[2] == 448.0 * 0.25);
  CHECK(v[at(1, 0, 1)].bits == 0x2d);
  CHECK(out[3] == 0.40625 * 0.25);
  // Over both tokens, head 0 with K scale 2 and V scale 3: keys (4, -2) x 2 and (1, 0) x 2,
  // q = (1, 0) scaled by 0.5: logits 4 and 1; values (4, -2) x 3 and (1, 0) x 3.
  ref::cache_write<rungs::e4m3, rungs::bf16>(s, k, v, new_k, new_v, slots, 0, 0, {k_scale, k_scale});
  const std::vector<float> k2 = {2.0f, 7.0f}, v3 = {3.0f, 7.0f};
  const std::vector<float> q0 = {1.0f, 0.0f, 0.0f, 0.0f};
  ref::decode<rungs::e4m3, float, double>(s, k, v, q0, std::vector<std::int32_t>{2}, {table, 1}, 0.5, out, {},
                                          {k2, v3});
  const double w = std::exp(4.0) / (std::exp(4.0) + std::exp(1.0));
  CHECK(out[0] == Approx(3 * (4 * w + 1 * (1 - w))).epsilon(1e-15));
  CHECK(out[1] == Approx(3 * (-2 * w)).epsilon(1e-15));
}

TEST_CASE("reference fp8 scales: bad counts and values are rejected with the rule") {
  ra::attention_shape s{.num_qo_heads = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = 8, .num_blocks = 1};
  std::vector<rungs::e5m2> pool(static_cast<std::size_t>(s.pool_elements()));
  std::vector<float> bf_pool(pool.size()), q(2 * 8), out(2 * 8);
  const std::vector<std::int32_t> lens = {1}, table = {0};
  const std::vector<float> three = {1.0f, 1.0f, 1.0f}, zero = {0.0f}, nan = {1.0f, std::nanf("")},
                           infinite = {std::numeric_limits<float>::infinity()}, one = {1.0f};
  CHECK_THROWS_WITH((ref::decode<rungs::e5m2, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out, {}, {three, {}})),
                    Catch::Contains("k_scale has 3 values; it needs 1 (per tensor) or num_kv_heads = 2 (per head)"));
  CHECK_THROWS_WITH((ref::decode<rungs::e5m2, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out, {}, {{}, zero})),
                    Catch::Contains("v_scale[0] = 0 must be finite and positive"));
  CHECK_THROWS_WITH((ref::decode<rungs::e5m2, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out, {}, {nan, {}})),
                    Catch::Contains("k_scale[1] = nan must be finite and positive"));
  CHECK_THROWS_WITH((ref::decode<rungs::e5m2, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out, {}, {infinite, {}})),
                    Catch::Contains("k_scale[0] = inf must be finite and positive"));
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, bf_pool, bf_pool, q, lens, {table, 1}, 0.0, out, {}, {one, {}})),
                    Catch::Contains("k_scale is given for a cache of 16 bits or more (scales apply to fp8 caches only)"));
}

TEST_CASE("fp8 quantisation error of the attention output against the bf16 cache (measured)", "[fp8-error]") {
  // Decode over a bf16 cache, and over the fp8 caches the cache write makes of it with
  // per-head scales amax / largest finite (the convention of vLLM's calibrated scales), both in
  // float64: the difference is the error fp8 storage adds before any kernel rounding.
  // docs/kernels.md ("fp8 KV caches") records these figures; the bounds below are twice them.
  std::mt19937_64 rng(17);
  const paged_problem p = make_problem(rng, {.num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128, .block_size = 16},
                                       rungs_test::random_lengths(rng, 4, 1000, 16));
  const auto pools = make_pools<rungs::bf16>(rng, p);
  const auto q = rungs_test::random_vector<rungs::bf16>(rng, static_cast<std::size_t>(4 * p.shape.q_row_elements()));
  std::vector<double> exact(q.size());
  ref::decode<rungs::bf16, rungs::bf16, double>(p.shape, pools.k, pools.v, q, p.kv_lens, {p.tables, p.table_stride},
                                                0.0, exact);
  // Every used slot, as a cache write of the whole pool would see it (NaN slots are unused).
  std::vector<std::int64_t> slots;
  std::vector<rungs::bf16> rows_k, rows_v;
  std::vector<float> amax_k(8, 0.0f), amax_v(8, 0.0f);
  for (std::int64_t slot = 0; slot < p.shape.num_slots(); ++slot) {
    if (rungs_test::is_nan(pools.k[static_cast<std::size_t>(p.shape.slot_offset(slot, 0))])) continue;
    slots.push_back(slot);
    for (int h = 0; h < 8; ++h) {
      for (int d = 0; d < 128; ++d) {
        const auto i = static_cast<std::size_t>(p.shape.slot_offset(slot, h) + d);
        rows_k.push_back(pools.k[i]), rows_v.push_back(pools.v[i]);
        amax_k[static_cast<std::size_t>(h)] = std::max(amax_k[static_cast<std::size_t>(h)], std::abs(static_cast<float>(pools.k[i])));
        amax_v[static_cast<std::size_t>(h)] = std::max(amax_v[static_cast<std::size_t>(h)], std::abs(static_cast<float>(pools.v[i])));
      }
    }
  }
  auto measure = [&]<class C>(float largest) {
    std::vector<float> k_scale(amax_k), v_scale(amax_v);
    for (float& x : k_scale) x /= largest;
    for (float& x : v_scale) x /= largest;
    std::vector<C> k(static_cast<std::size_t>(p.shape.pool_elements()), rungs_test::poison<C>()), v = k;
    ref::cache_write<C, rungs::bf16>(p.shape, k, v, rows_k, rows_v, slots, 0, 0, {k_scale, v_scale});
    std::vector<double> got(q.size());
    ref::decode<C, rungs::bf16, double>(p.shape, k, v, q, p.kv_lens, {p.tables, p.table_stride}, 0.0, got, {},
                                        {k_scale, v_scale});
    double worst = 0, sum = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - exact[i]));
      sum += std::abs(got[i] - exact[i]);
    }
    return std::pair{worst, sum / static_cast<double>(got.size())};
  };
  const auto [e4m3_max, e4m3_mean] = measure.operator()<rungs::e4m3>(448.0f);
  const auto [e5m2_max, e5m2_mean] = measure.operator()<rungs::e5m2>(57344.0f);
  INFO("fp8 quantisation error of decode outputs (|out| < 1): e4m3 max " << e4m3_max << " mean " << e4m3_mean
                                                                         << "; e5m2 max " << e5m2_max << " mean " << e5m2_mean);
  // Measured at this seed: e4m3 max 0.0113, mean 0.00102; e5m2 max 0.0255, mean 0.00210.
  CHECK(e4m3_max > 0.0);
  CHECK(e4m3_max < 0.023);
  CHECK(e4m3_mean < 0.0021);
  CHECK(e5m2_max > e4m3_max);  // one mantissa bit fewer
  CHECK(e5m2_max < 0.052);
  CHECK(e5m2_mean < 0.0042);
}

TEST_CASE("reference rejects bad inputs with the value and the rule") {
  ra::attention_shape s{.num_qo_heads = 3, .num_kv_heads = 2, .head_dim = 8, .block_size = 8, .num_blocks = 1};
  std::vector<float> pool(static_cast<std::size_t>(8 * 8 * 2)), q(4 * 8), out(4 * 8);
  const std::vector<std::int32_t> lens = {1}, table = {0};
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out)),
                    Catch::Contains("num_qo_heads = 3 must be a positive multiple of num_kv_heads = 2"));
  s.num_qo_heads = 2;
  const std::vector<std::int32_t> bad_table = {4};
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, lens, {bad_table, 1}, 0.0, out)),
                    Catch::Contains("block id 4 is outside the pool [0, 1)"));
  const std::vector<std::int32_t> long_lens = {9};
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, long_lens, {table, 1}, 0.0, out)),
                    Catch::Contains("token 8 needs block-table entry 1 beyond the row"));
  const std::vector<std::int32_t> indptr = {0, 2}, kv = {1};
  CHECK_THROWS_WITH((ref::prefill<float, float, float>(s, pool, pool, q, indptr, kv, {table, 1}, 0.0, out)),
                    Catch::Contains("q_len = 2 and kv_len = 1 need 0 <= q_len <= kv_len"));
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out,
                                                      {.values = {.window = -1}})),
                    Catch::Contains("window = -1 must be 0 (none) or positive"));
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out,
                                                      {.values = {.logit_soft_cap = -1.0f}})),
                    Catch::Contains("logit_soft_cap = -1 must be finite and non-negative (0: none)"));
  const std::vector<float> one_sink = {0.0f}, nan_sinks = {0.0f, std::nanf("")};
  CHECK_THROWS_WITH((ref::prefill<float, float, float>(s, pool, pool, q, indptr, kv, {table, 1}, 0.0, out,
                                                       {.sinks = one_sink})),
                    Catch::Contains("sinks has 1 logits; it needs one per query head (2) or none"));
  CHECK_THROWS_WITH((ref::decode<float, float, float>(s, pool, pool, q, lens, {table, 1}, 0.0, out,
                                                      {.sinks = nan_sinks})),
                    Catch::Contains("sinks[1] = nan must be finite or -inf (no sink)"));
}
