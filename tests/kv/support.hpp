// Helpers shared by the kv tests: token runs, block tables as vectors, admitting a prompt,
// and a snapshot of everything observable (to show a rejected call changed nothing).
#pragma once

#include <rungs/kv/types.hpp>
#include <rungs/kv/metrics.hpp>
#include <rungs/kv/result.hpp>

#include <catch2/catch.hpp>
#include <numeric>
#include <span>
#include <vector>

namespace kv_test {

using namespace rungs::kv;
using ids = std::vector<block_id>;

/// n consecutive token ids from `first`.
inline std::vector<token_id> tokens(int n, token_id first = 1) {
  std::vector<token_id> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

inline std::vector<token_id> concat(std::vector<token_id> a, const std::vector<token_id>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

template <class A>
ids table(const A& a, sequence_id s) {
  const auto t = a.block_table(s).value();
  return ids(t.begin(), t.end());
}

/// create(), append the prompt tokens that were not cached, and commit them (the prefill step
/// ran), checking consistency.
template <class A>
sequence_start admit(A& a, const std::vector<token_id>& prompt, const sequence_params& p = {}) {
  const sequence_start s = a.create(prompt, p).value();
  REQUIRE(a.append(s.id, std::span(prompt).subspan(static_cast<std::size_t>(s.cached_tokens))) ==
          errc::ok);
  REQUIRE(a.commit(s.id, static_cast<std::int32_t>(prompt.size())) == errc::ok);
  REQUIRE(a.check_consistency().empty());
  return s;
}

/// Everything an allocator shows: metrics, the whole block table, ref counts, pending copies.
struct snapshot {
  kv_metrics metrics;
  std::vector<block_id> tables;
  std::vector<std::int32_t> refs;
  std::vector<block_copy> copies;
  bool operator==(const snapshot&) const = default;
};

template <class A>
snapshot observe(const A& a) {
  snapshot s{a.metrics(), {}, {}, {a.copies().begin(), a.copies().end()}};
  const block_table_view v = a.block_tables();
  s.tables.assign(v.data, v.data + static_cast<std::size_t>(v.rows) * v.stride);
  for (block_id b = 0; b < a.num_blocks(); ++b) s.refs.push_back(a.pool().ref_count(b));
  return s;
}

}  // namespace kv_test
