// The block-allocator concept: what an Engine needs from its KV-cache policy each step.
//
//   admission   a.can_admit(tokens)                      -> bool
//               a.create(prompt, params)                 -> result<sequence_start>
//   growth      a.append(seq, tokens, lookahead)         -> errc
//               a.commit(seq, tokens)                    -> errc (the step that computed them ran)
//               a.fork(seq)                              -> result<sequence_id>
//   retirement  a.finish(seq), a.free(seq)               -> errc
//   device      a.block_table(seq)                       -> result<span<const block_id>>
//               a.block_tables()                         -> block_table_view (one upload)
//               a.slot_mapping(ranges, out)              -> result<int32_t> (rest = -1)
//               a.copies(), a.clear_copies()             copy-on-write (src, dst) pairs
//   shape       a.block_size(), a.num_blocks()           -> int32_t
//   metrics     a.metrics()                              -> kv_metrics
//
// Hot-path calls never throw; a failed call returns an errc and changes nothing. Engines
// check a policy with static_assert(rungs::kv::check_block_allocator<A>()), which names the
// first missing operation.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include <rungs/kv/metrics.hpp>
#include <rungs/kv/result.hpp>
#include <rungs/kv/types.hpp>

namespace rungs::kv {

namespace detail {
template <class A>
concept allocator_has_shape = requires(const A a) {
  { a.block_size() } -> std::same_as<std::int32_t>;
  { a.num_blocks() } -> std::same_as<std::int32_t>;
  { a.max_model_len() } -> std::same_as<std::int32_t>;
};
template <class A>
concept allocator_has_admission =
    requires(A a, const A ca, std::span<const token_id> prompt, const sequence_params& p) {
      { ca.can_admit(std::int32_t{}) } -> std::same_as<bool>;
      { a.create(prompt, p) } -> std::same_as<result<sequence_start>>;
    };
template <class A>
concept allocator_has_append = requires(A a, sequence_id s, std::span<const token_id> tokens) {
  { a.append(s, tokens, std::int32_t{}) } -> std::same_as<errc>;
};
template <class A>
concept allocator_has_commit = requires(A a, sequence_id s) {
  { a.commit(s, std::int32_t{}) } -> std::same_as<errc>;
};
template <class A>
concept allocator_has_fork = requires(A a, sequence_id s) {
  { a.fork(s) } -> std::same_as<result<sequence_id>>;
};
template <class A>
concept allocator_has_retirement = requires(A a, sequence_id s) {
  { a.finish(s) } -> std::same_as<errc>;
  { a.free(s) } -> std::same_as<errc>;
};
template <class A>
concept allocator_has_block_tables = requires(const A a, sequence_id s) {
  { a.block_table(s) } -> std::same_as<result<std::span<const block_id>>>;
  { a.block_tables() } -> std::same_as<block_table_view>;
};
template <class A>
concept allocator_has_slot_mapping =
    requires(const A a, std::span<const slot_range> ranges, std::span<slot_id> out) {
      { a.slot_mapping(ranges, out) } -> std::same_as<result<std::int32_t>>;
    };
template <class A>
concept allocator_has_copies = requires(A a, const A ca) {
  { ca.copies() } -> std::same_as<std::span<const block_copy>>;
  { a.clear_copies() } -> std::same_as<void>;
};
template <class A>
concept allocator_has_metrics = requires(const A a) {
  { a.metrics() } -> std::same_as<kv_metrics>;
};
}  // namespace detail

template <class A>
concept block_allocator =
    detail::allocator_has_shape<A> && detail::allocator_has_admission<A> &&
    detail::allocator_has_append<A> && detail::allocator_has_commit<A> &&
    detail::allocator_has_fork<A> &&
    detail::allocator_has_retirement<A> && detail::allocator_has_block_tables<A> &&
    detail::allocator_has_slot_mapping<A> && detail::allocator_has_copies<A> &&
    detail::allocator_has_metrics<A>;

/// static_assert(check_block_allocator<A>()): one message per missing operation.
template <class A>
consteval bool check_block_allocator() {
  static_assert(detail::allocator_has_shape<A>,
                "block_allocator: lacks `std::int32_t block_size() const`, "
                "`std::int32_t num_blocks() const` or `std::int32_t max_model_len() const`");
  static_assert(detail::allocator_has_admission<A>,
                "block_allocator: lacks `bool can_admit(std::int32_t) const` or "
                "`result<sequence_start> create(std::span<const token_id>, const sequence_params&)`");
  static_assert(detail::allocator_has_append<A>,
                "block_allocator: lacks `errc append(sequence_id, std::span<const token_id>, "
                "std::int32_t lookahead)`");
  static_assert(detail::allocator_has_commit<A>,
                "block_allocator: lacks `errc commit(sequence_id, std::int32_t num_tokens)`");
  static_assert(detail::allocator_has_fork<A>,
                "block_allocator: lacks `result<sequence_id> fork(sequence_id)`");
  static_assert(detail::allocator_has_retirement<A>,
                "block_allocator: lacks `errc finish(sequence_id)` or `errc free(sequence_id)`");
  static_assert(detail::allocator_has_block_tables<A>,
                "block_allocator: lacks `result<std::span<const block_id>> block_table(sequence_id) "
                "const` or `block_table_view block_tables() const`");
  static_assert(detail::allocator_has_slot_mapping<A>,
                "block_allocator: lacks `result<std::int32_t> slot_mapping(std::span<const "
                "slot_range>, std::span<slot_id>) const`");
  static_assert(detail::allocator_has_copies<A>,
                "block_allocator: lacks `std::span<const block_copy> copies() const` or "
                "`void clear_copies()`");
  static_assert(detail::allocator_has_metrics<A>,
                "block_allocator: lacks `kv_metrics metrics() const`");
  return block_allocator<A>;
}

}  // namespace rungs::kv
