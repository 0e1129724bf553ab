// Fitted ladders: the rungs that minimise padded work over an observed distribution of
// bucket-dimension values (batch sizes, tokens per step), under a rung budget.
//
//   size_histogram h;  for (auto n : step_sizes) h.add(n);
//   fitted_ladder f = fit_ladder(h, 11);    // the best 11 rungs, top rung = max(h)
//   rungs::ladder l = f.to_ladder();        // an Explicit ladder like any other
//
// Exactness. A batch of n rows on a ladder runs at the smallest rung r >= n and pads r - n
// rows. With the top rung fixed at the maximum T (nothing in [1, T] falls back to eager),
// choosing K rungs to minimise sum_n count(n) * (rung(n) - n) is a 1-D K-segmentation:
// some optimum puts every rung on an observed value (moving a rung down to the largest
// value it covers never adds padding), so with the distinct values x_1 < ... < x_m and
//   w(a, b) = sum_{t=a..b} c_t (x_b - x_t)       (values a..b padded up to x_b)
//   D[k][j] = min_{i<j} D[k-1][i] + w(i+1, j)     (k rungs, the k-th at x_j)
// D[K][m] is the optimum. w obeys the quadrangle inequality (w(a,c) + w(b,d) <= w(a,d) +
// w(b,c): the difference is sum_{t=a..b-1} c_t (x_d - x_c) >= 0), so the smallest optimal
// split point is monotone in j and each layer is computed exactly by divide and conquer in
// O(m log m): O(K m log m) in all. tests/planning/fit_test.cpp checks it against brute force.
//
// Minimising padded rows is minimising the padded fraction padding / (real + padding),
// since the real rows are fixed by the trace.
//
// 2-D grids ([bs, seq] prompt buckets, Gaudi's product grids) are fitted as products of two
// ladders B x S with at most K buckets; see fit_grid below for the method.
#pragma once

#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/rung.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rungs::planning {

/// One observed value and how often it occurred (its weight).
struct value_count {
  rung_t value = 0;
  std::int64_t count = 0;
  friend constexpr bool operator==(const value_count&, const value_count&) = default;
};

/// Counts of observed bucket-dimension values (e.g. tokens per step), kept sorted.
class size_histogram {
 public:
  /// Adds `count` observations of `value` (1 <= value <= max_rung, count >= 0).
  void add(rung_t value, std::int64_t count = 1) {
    if (value < 1 || value > max_rung)
      throw std::invalid_argument("size histogram: value = " + std::to_string(value) + " must be in [1, 2147483647]");
    if (count < 0) throw std::invalid_argument("size histogram: count = " + std::to_string(count) + " must not be negative");
    if (count == 0) return;
    counts_[value] += count;
    total_ += count;
  }
  /// Distinct values ascending, with their counts.
  std::vector<value_count> values() const {
    std::vector<value_count> v;
    v.reserve(counts_.size());
    for (const auto& [value, count] : counts_) v.push_back({value, count});
    return v;
  }
  bool empty() const { return counts_.empty(); }
  std::size_t distinct() const { return counts_.size(); }
  std::int64_t total() const { return total_; }
  rung_t max() const { return counts_.empty() ? 0 : counts_.rbegin()->first; }

 private:
  std::map<rung_t, std::int64_t> counts_;
  std::int64_t total_ = 0;
};

/// Padding of a ladder over a distribution: rows run on rungs, padded rows, and values above
/// the top rung (eager, unpadded).
struct ladder_cost {
  std::int64_t real = 0;        ///< rows of the values that ran on a rung
  std::int64_t padding = 0;     ///< padded rows
  std::int64_t eager = 0;       ///< observations above the top rung
  std::int64_t eager_real = 0;  ///< their rows
  double padded_fraction() const {
    return real + padding > 0 ? static_cast<double>(padding) / static_cast<double>(real + padding) : 0.0;
  }
  friend constexpr bool operator==(const ladder_cost&, const ladder_cost&) = default;
};

/// Evaluates ascending `rungs` over `values` (each value weighted by its count).
inline ladder_cost evaluate_ladder(std::span<const rung_t> rungs, std::span<const value_count> values) {
  ladder_cost c;
  std::size_t r = 0;
  for (const value_count& v : values) {  // values ascending: one merge pass
    while (r < rungs.size() && rungs[r] < v.value) ++r;
    if (r == rungs.size()) {
      c.eager += v.count;
      c.eager_real += v.count * v.value;
    } else {
      c.real += v.count * v.value;
      c.padding += v.count * (rungs[r] - v.value);
    }
  }
  return c;
}

struct fitted_ladder {
  std::vector<rung_t> rungs;  ///< ascending; the last is the top
  ladder_cost cost;

  double padded_fraction() const { return cost.padded_fraction(); }
  /// The rungs as an Explicit ladder policy (for bucket files, configs, the engine).
  Explicit<> policy() const { return Explicit<>{rungs}; }
  rungs::ladder to_ladder() const { return rungs::ladder{policy()}; }
};

namespace detail {

/// The 1-D K-segmentation over weighted points (x ascending, distinct). Prefix sums make
/// w(a, b) O(1); every layer is filled by divide and conquer over the monotone split points.
class segmentation {
 public:
  segmentation(std::span<const rung_t> x, std::span<const std::int64_t> w) : x_(x.begin(), x.end()) {
    const std::size_t m = x.size();
    cw_.assign(m + 1, 0);
    cwx_.assign(m + 1, 0);
    for (std::size_t i = 0; i < m; ++i) {
      cw_[i + 1] = add(cw_[i], w[i]);
      cwx_[i + 1] = add(cwx_[i], mul(w[i], x[i]));
    }
    (void)mul(cw_[m], x.empty() ? 0 : x.back());  // the largest w(a, b) term must fit
  }

  std::size_t size() const { return x_.size(); }

  /// Padding of points [a, b] (0-based, inclusive) run at x_b.
  std::int64_t cost(std::size_t a, std::size_t b) const {
    return (cw_[b + 1] - cw_[a]) * x_[b] - (cwx_[b + 1] - cwx_[a]);
  }

  /// Indices of the optimal min(K, size()) rungs, the last one at the last point.
  std::vector<std::size_t> solve(std::size_t K) const {
    const std::size_t m = x_.size();
    K = std::min(K, m);
    std::vector<std::int64_t> prev(m), cur(m);
    std::vector<std::vector<std::uint32_t>> split(K);  // split[k][j]: previous rung index + 1 (0: none)
    for (std::size_t j = 0; j < m; ++j) prev[j] = cost(0, j);
    split[0].assign(m, 0);
    for (std::size_t k = 1; k < K; ++k) {
      split[k].assign(m, 0);
      // With k+1 rungs the top at j needs j >= k (one point per rung at least).
      for (std::size_t j = 0; j < k; ++j) cur[j] = 0, split[k][j] = 0;
      layer(prev, cur, split[k], k, m - 1, k - 1, m - 2);
      std::swap(prev, cur);
    }
    std::vector<std::size_t> rungs;
    std::size_t j = m - 1;
    for (std::size_t k = K; k-- > 0;) {
      rungs.push_back(j);
      if (k == 0) break;
      j = split[k][j] - 1;
    }
    std::reverse(rungs.begin(), rungs.end());
    return rungs;
  }

 private:
  // cur[j] for j in [lo, hi], with the previous rung's index i in [ilo, ihi] (i < j).
  void layer(const std::vector<std::int64_t>& prev, std::vector<std::int64_t>& cur, std::vector<std::uint32_t>& split,
             std::size_t lo, std::size_t hi, std::size_t ilo, std::size_t ihi) const {
    if (lo > hi) return;
    const std::size_t mid = lo + (hi - lo) / 2;
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    std::size_t arg = ilo;
    for (std::size_t i = ilo; i <= std::min(ihi, mid - 1); ++i) {
      const std::int64_t v = prev[i] + cost(i + 1, mid);
      if (v < best) best = v, arg = i;  // strict: the smallest optimal split
    }
    cur[mid] = best;
    split[mid] = static_cast<std::uint32_t>(arg + 1);
    if (mid > lo) layer(prev, cur, split, lo, mid - 1, ilo, arg);
    layer(prev, cur, split, mid + 1, hi, arg, ihi);
  }

  static std::int64_t add(std::int64_t a, std::int64_t b) {
    if (a > std::numeric_limits<std::int64_t>::max() - b) overflow();
    return a + b;
  }
  static std::int64_t mul(std::int64_t a, std::int64_t b) {
    if (b != 0 && a > std::numeric_limits<std::int64_t>::max() / b) overflow();
    return a * b;
  }
  [[noreturn]] static void overflow() {
    throw std::invalid_argument("ladder fit: counts x values overflow 64 bits; scale the counts down");
  }

  std::vector<rung_t> x_;
  std::vector<std::int64_t> cw_, cwx_;
};

inline void check_fit_input(std::span<const value_count> values, std::size_t max_rungs_wanted, rung_t top) {
  if (max_rungs_wanted < 1) throw std::invalid_argument("ladder fit: rungs = 0 must be positive");
  if (values.empty()) throw std::invalid_argument("ladder fit: no observed values to fit");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].value < 1 || values[i].value > max_rung)
      throw std::invalid_argument("ladder fit: value " + std::to_string(values[i].value) + " must be in [1, 2147483647]");
    if (values[i].count < 0) throw std::invalid_argument("ladder fit: count of " + std::to_string(values[i].value) + " is negative");
    if (i > 0 && values[i].value <= values[i - 1].value)
      throw std::invalid_argument("ladder fit: values must be distinct and ascending (" + std::to_string(values[i].value) +
                                  " after " + std::to_string(values[i - 1].value) + ")");
  }
  if (top != 0 && top < values.back().value)
    throw std::invalid_argument("ladder fit: top = " + std::to_string(top) + " must not be below the largest value " +
                                std::to_string(values.back().value));
  if (top > max_rung) throw std::invalid_argument("ladder fit: top = " + std::to_string(top) + " exceeds 2147483647");
}

/// Points of the segmentation: the values, plus the forced top with weight 0 when it lies
/// above them.
inline void fit_points(std::span<const value_count> values, rung_t top, std::vector<rung_t>& x,
                       std::vector<std::int64_t>& w) {
  x.clear();
  w.clear();
  for (const value_count& v : values) x.push_back(v.value), w.push_back(v.count);
  if (top > x.back()) x.push_back(top), w.push_back(0);
}

}  // namespace detail

/// The ladder of at most `max_rungs` rungs minimising padded rows over `values` (distinct,
/// ascending), with its top rung at `top` (0: the largest value). Exact. When there are no
/// more distinct values than rungs, every value is a rung and nothing is padded.
inline fitted_ladder fit_ladder(std::span<const value_count> values, std::size_t max_rungs, rung_t top = 0) {
  detail::check_fit_input(values, max_rungs, top);
  std::vector<rung_t> x;
  std::vector<std::int64_t> w;
  detail::fit_points(values, top, x, w);
  const detail::segmentation seg(x, w);
  fitted_ladder f;
  for (std::size_t i : seg.solve(max_rungs)) f.rungs.push_back(x[i]);
  f.cost = evaluate_ladder(f.rungs, values);
  return f;
}

inline fitted_ladder fit_ladder(const size_histogram& h, std::size_t max_rungs, rung_t top = 0) {
  const std::vector<value_count> v = h.values();
  return fit_ladder(v, max_rungs, top);
}

/// Each graph's memory: base + per_token x rung bytes (the cost model's figure).
struct rung_memory {
  std::int64_t base = 0;
  std::int64_t per_token = 0;
  std::int64_t bytes(rung_t r) const { return base + per_token * r; }
  std::int64_t total(std::span<const rung_t> rungs) const {
    std::int64_t t = 0;
    for (rung_t r : rungs) t += bytes(r);
    return t;
  }
};

/// The fitted ladder whose graphs fit `budget_bytes`: the exact optimum over ladders of K
/// rungs, K being the most graphs the budget holds at the top rung's cost (no rung costs more
/// than the top's, so any K-rung ladder fits; with per_token = 0 this is the exact optimum
/// under the budget). Throws when not even the top rung fits.
inline fitted_ladder fit_ladder_to_memory(std::span<const value_count> values, std::int64_t budget_bytes,
                                          rung_memory memory, rung_t top = 0) {
  if (values.empty()) throw std::invalid_argument("ladder fit: no observed values to fit");
  if (memory.base < 0 || memory.per_token < 0 || memory.base + memory.per_token <= 0)
    throw std::invalid_argument("ladder fit: graph memory per rung must be positive");
  const rung_t t = top != 0 ? top : values.back().value;
  const std::int64_t each = memory.bytes(t);
  if (budget_bytes < each)
    throw std::invalid_argument("ladder fit: graph memory = " + std::to_string(budget_bytes) +
                                " bytes does not hold the top rung's graph (" + std::to_string(each) + " bytes)");
  const auto k = static_cast<std::size_t>(std::min<std::int64_t>(budget_bytes / each, static_cast<std::int64_t>(max_rungs)));
  return fit_ladder(values, k, top);
}

// ---- 2-D grids ----------------------------------------------------------------------------

/// One observed 2-D value ([bs, seq]) and its count.
struct grid_value {
  rung_t bs = 0, seq = 0;
  std::int64_t count = 0;
  friend constexpr bool operator==(const grid_value&, const grid_value&) = default;
};

/// Padded tokens of a product grid B x S over 2-D values: a value (b, s) runs at the bucket
/// (B(b), S(s)) and pads B(b) * S(s) - b * s tokens; values outside the grid run eagerly.
inline ladder_cost evaluate_grid(std::span<const rung_t> bs_rungs, std::span<const rung_t> seq_rungs,
                                 std::span<const grid_value> values) {
  ladder_cost c;
  for (const grid_value& v : values) {
    auto b = std::lower_bound(bs_rungs.begin(), bs_rungs.end(), v.bs);
    auto s = std::lower_bound(seq_rungs.begin(), seq_rungs.end(), v.seq);
    const std::int64_t real = v.count * v.bs * v.seq;
    if (b == bs_rungs.end() || s == seq_rungs.end()) {
      c.eager += v.count;
      c.eager_real += real;
    } else {
      c.real += real;
      c.padding += v.count * (*b * *s) - real;
    }
  }
  return c;
}

struct fitted_grid {
  std::vector<rung_t> bs, seq;  ///< the grid is their Cartesian product
  ladder_cost cost;             ///< in tokens
  bool exact = false;           ///< proven optimal for its (|bs|, |seq|), see fit_grid
  std::size_t buckets() const { return bs.size() * seq.size(); }
  double padded_fraction() const { return cost.padded_fraction(); }
};

struct grid_fit_options {
  /// Enumerate every ladder of the smaller side when there are at most this many.
  std::size_t exhaustive_limit = 2000;
  /// Alternation rounds at most (each round is two exact 1-D fits; it stops at a fixed point).
  std::size_t max_rounds = 50;
};

namespace detail {

/// Distinct values of one coordinate, ascending.
inline std::vector<rung_t> grid_axis(std::span<const grid_value> values, bool bs_axis) {
  std::vector<rung_t> a;
  for (const grid_value& v : values) a.push_back(bs_axis ? v.bs : v.seq);
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

/// The exact best ladder of `k` rungs on one axis given the other axis' ladder: a value
/// (b, s) costs count * other(b) * own(s), so the axis' own 1-D problem weighs each of its
/// values by sum(count * other rung) and is solved by the segmentation exactly.
inline std::vector<rung_t> fit_axis(std::span<const grid_value> values, std::span<const rung_t> other, bool fit_bs,
                                    const std::vector<rung_t>& axis, std::size_t k) {
  std::vector<std::int64_t> w(axis.size(), 0);
  for (const grid_value& v : values) {
    const rung_t own = fit_bs ? v.bs : v.seq, oth = fit_bs ? v.seq : v.bs;
    const rung_t o = *std::lower_bound(other.begin(), other.end(), oth);
    const auto i = static_cast<std::size_t>(std::lower_bound(axis.begin(), axis.end(), own) - axis.begin());
    w[i] += v.count * o;
  }
  const segmentation seg(axis, w);
  std::vector<rung_t> r;
  for (std::size_t i : seg.solve(k)) r.push_back(axis[i]);
  return r;
}

inline double binomial(std::size_t n, std::size_t k) {
  double c = 1;
  for (std::size_t i = 0; i < k; ++i) c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
  return c;
}

/// Calls f(ladder) for every ladder of k rungs on `axis` whose top is axis.back().
template <class F>
void each_ladder(const std::vector<rung_t>& axis, std::size_t k, F&& f) {
  const std::size_t m = axis.size();
  std::vector<std::size_t> pick(k - 1);  // indices among axis[0 .. m-2], ascending
  for (std::size_t i = 0; i + 1 < k; ++i) pick[i] = i;
  std::vector<rung_t> l(k);
  for (;;) {
    for (std::size_t i = 0; i + 1 < k; ++i) l[i] = axis[pick[i]];
    l[k - 1] = axis.back();
    f(std::as_const(l));
    std::size_t i = k - 1;  // next combination of k-1 out of m-1
    while (i > 0 && pick[i - 1] == m - 1 - (k - 1) + (i - 1)) --i;
    if (i == 0) return;
    ++pick[i - 1];
    for (std::size_t j = i; j + 1 < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

/// Best grid with kb x ks rungs.
inline fitted_grid fit_grid_shape(std::span<const grid_value> values, const std::vector<rung_t>& bs_axis,
                                  const std::vector<rung_t>& seq_axis, std::size_t kb, std::size_t ks,
                                  const grid_fit_options& o) {
  fitted_grid best;
  auto consider = [&](std::vector<rung_t> b, std::vector<rung_t> s, bool exact) {
    const ladder_cost c = evaluate_grid(b, s, values);
    if (best.bs.empty() || c.padding < best.cost.padding) best = {std::move(b), std::move(s), c, exact};
  };
  const double nb = binomial(bs_axis.size() - 1, kb - 1), ns = binomial(seq_axis.size() - 1, ks - 1);
  if (std::min(nb, ns) <= static_cast<double>(o.exhaustive_limit)) {
    // Exact: every ladder of the smaller side, each with the exact best ladder of the other.
    if (nb <= ns) {
      each_ladder(bs_axis, kb, [&](const std::vector<rung_t>& b) {
        consider(b, fit_axis(values, b, false, seq_axis, ks), true);
      });
    } else {
      each_ladder(seq_axis, ks, [&](const std::vector<rung_t>& s) {
        consider(fit_axis(values, s, true, bs_axis, kb), s, true);
      });
    }
    return best;
  }
  // Alternating exact 1-D fits from two starts (each axis fitted first against the other's
  // single top rung). Each half-step is the exact optimum given the other axis, so the
  // padding never increases and the walk stops at a fixed point: a local optimum at least
  // as good as either start.
  for (int start = 0; start < 2; ++start) {
    std::vector<rung_t> b{bs_axis.back()}, s{seq_axis.back()};
    if (start == 0) b = fit_axis(values, s, true, bs_axis, kb);
    else s = fit_axis(values, b, false, seq_axis, ks);
    std::int64_t last = std::numeric_limits<std::int64_t>::max();
    for (std::size_t round = 0; round < o.max_rounds; ++round) {
      s = fit_axis(values, b, false, seq_axis, ks);
      b = fit_axis(values, s, true, bs_axis, kb);
      const std::int64_t p = evaluate_grid(b, s, values).padding;
      if (p >= last) break;
      last = p;
    }
    consider(std::move(b), std::move(s), false);
  }
  return best;
}

}  // namespace detail

/// The product grid of at most `max_buckets` buckets minimising padded tokens over 2-D
/// values, with the top of each axis at its largest value (nothing inside the range runs
/// eagerly).
///
/// Method: for every split kb x ks <= max_buckets (ks as large as the budget allows for each
/// kb), the best grid of that shape. Given one axis' ladder, the other axis' best ladder is a
/// 1-D segmentation with weights count x (the first axis' rung) and is solved exactly. So when
/// one side has few enough candidate ladders (C(m-1, k-1) <= exhaustive_limit) every one of
/// them is tried with its exact partner, which is the exact optimum for the shape
/// (fitted_grid::exact). Otherwise the two exact 1-D fits alternate until neither improves (a
/// local optimum; padding never increases along the way), from two starts.
inline fitted_grid fit_grid(std::span<const grid_value> values, std::size_t max_buckets,
                            const grid_fit_options& options = {}) {
  if (max_buckets < 1) throw std::invalid_argument("grid fit: buckets = 0 must be positive");
  if (values.empty()) throw std::invalid_argument("grid fit: no observed values to fit");
  for (const grid_value& v : values) {
    if (v.bs < 1 || v.seq < 1 || v.bs > max_rung || v.seq > max_rung)
      throw std::invalid_argument("grid fit: value (" + std::to_string(v.bs) + ", " + std::to_string(v.seq) +
                                  ") must be positive and at most 2147483647");
    if (v.count < 0) throw std::invalid_argument("grid fit: a count is negative");
  }
  const std::vector<rung_t> bs_axis = detail::grid_axis(values, true), seq_axis = detail::grid_axis(values, false);
  fitted_grid best;
  for (std::size_t kb = 1; kb <= std::min(max_buckets, bs_axis.size()); ++kb) {
    const std::size_t ks = std::min(max_buckets / kb, seq_axis.size());
    fitted_grid g = detail::fit_grid_shape(values, bs_axis, seq_axis, kb, ks, options);
    const bool better = best.bs.empty() || g.cost.padding < best.cost.padding ||
                        (g.cost.padding == best.cost.padding && g.buckets() < best.buckets());
    if (better) best = std::move(g);
  }
  return best;
}

}  // namespace rungs::planning
