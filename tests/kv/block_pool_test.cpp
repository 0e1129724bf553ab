#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/priority_lru.hpp>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

using namespace rungs::kv;

namespace {
template <class Pool>
std::vector<block_id> take(Pool& pool, int n) {
  std::vector<block_id> ids;
  for (int i = 0; i < n; ++i) ids.push_back(pool.allocate().value());
  return ids;
}
using ids = std::vector<block_id>;
}  // namespace

TEMPLATE_TEST_CASE("a fresh pool hands out 0, 1, 2, ... then reports out_of_blocks", "", lru,
                   priority_lru<>, free_stack) {
  block_pool<TestType> pool(4);
  CHECK(pool.num_free() == 4);
  CHECK(take(pool, 4) == ids{0, 1, 2, 3});
  CHECK(pool.num_live() == 4);
  const result<block_id> none = pool.allocate();
  CHECK_FALSE(none.has_value());
  CHECK(none.error() == errc::out_of_blocks);
  CHECK(pool.num_live() == 4);
  CHECK(pool.check_consistency().empty());
}

TEMPLATE_TEST_CASE("uncached blocks are reused most recently released first", "", lru,
                   priority_lru<>, free_stack) {
  block_pool<TestType> pool(6);
  (void)take(pool, 4);
  CHECK(pool.release(1) == errc::ok);
  CHECK(pool.release(3) == errc::ok);
  CHECK(pool.num_free() == 4);
  // 3 was released last, then 1, then the never-used 4 and 5.
  CHECK(take(pool, 4) == ids{3, 1, 4, 5});
  CHECK(pool.check_consistency().empty());
}

TEST_CASE("lru: cached blocks wait behind free ones and leave least recently used first") {
  block_pool<lru> pool(5);
  (void)take(pool, 5);
  for (block_id b : {0, 1, 2}) CHECK(pool.mark_cached(b) == errc::ok);
  // Released in the order 2, 0, 4(uncached), 1, 3(uncached).
  for (block_id b : {2, 0, 4, 1, 3}) CHECK(pool.release(b) == errc::ok);
  CHECK(pool.num_evictable() == 3);
  CHECK(pool.num_free() == 2);
  std::vector<block_id> evicted;
  auto on_evict = [&](block_id b) { evicted.push_back(b); };
  std::vector<block_id> order;
  for (int i = 0; i < 5; ++i) order.push_back(pool.allocate(0, on_evict).value());
  CHECK(order == ids{3, 4, 2, 0, 1});
  CHECK(evicted == ids{2, 0, 1});
  CHECK(pool.evictions() == 3);
  CHECK(pool.num_evictable() == 0);
  CHECK_FALSE(pool.cached(2));
}

TEST_CASE("sharing an evictable block takes it back from the eviction list") {
  block_pool<lru> pool(3);
  (void)take(pool, 3);
  CHECK(pool.mark_cached(1) == errc::ok);
  CHECK(pool.release(1) == errc::ok);
  CHECK(pool.ref_count(1) == 0);
  CHECK(pool.num_evictable() == 1);
  CHECK(pool.share(1) == errc::ok);  // a prefix hit
  CHECK(pool.ref_count(1) == 1);
  CHECK(pool.num_evictable() == 0);
  CHECK(pool.num_live() == 3);
  CHECK(pool.cached(1));
  CHECK(pool.share(1) == errc::ok);  // a fork
  CHECK(pool.ref_count(1) == 2);
  CHECK(pool.release(1) == errc::ok);
  CHECK(pool.release(1) == errc::ok);
  CHECK(pool.num_evictable() == 1);
  CHECK(pool.check_consistency().empty());
}

TEST_CASE("priority_lru evicts the lowest level first, LRU within a level") {
  block_pool<priority_lru<3>> pool(6);
  (void)take(pool, 6);
  // (block, priority): shared-then-released blocks keep the highest priority seen.
  for (block_id b = 0; b < 6; ++b) CHECK(pool.mark_cached(b) == errc::ok);
  CHECK(pool.share(0, 2) == errc::ok);
  CHECK(pool.share(1, 1) == errc::ok);
  CHECK(pool.share(3, 9) == errc::ok);  // clamped to the top level, 2
  CHECK(pool.priority(3) == 9);
  for (block_id b : {0, 1, 3}) CHECK(pool.release(b) == errc::ok);  // back to one user each
  for (block_id b : {5, 3, 1, 0, 4, 2}) CHECK(pool.release(b) == errc::ok);
  std::vector<block_id> order;
  for (int i = 0; i < 6; ++i) order.push_back(pool.allocate().value());
  // level 0: 5, 4, 2 (release order); level 1: 1; level 2: 3, 0.
  CHECK(order == ids{5, 4, 2, 1, 3, 0});
  CHECK(pool.evictions() == 6);
}

TEST_CASE("priority_lru reuses free blocks before any cached block") {
  block_pool<priority_lru<2>> pool(3);
  (void)take(pool, 3);
  CHECK(pool.mark_cached(0) == errc::ok);
  CHECK(pool.release(0) == errc::ok);  // cached, priority 0
  CHECK(pool.release(1) == errc::ok);  // free
  CHECK(pool.allocate().value() == 1);
  CHECK(pool.allocate().value() == 0);
  CHECK(pool.evictions() == 1);
}

TEST_CASE("free_stack used with a cache evicts the most recently released block (MRU)") {
  block_pool<free_stack> pool(3);
  (void)take(pool, 3);
  for (block_id b : {0, 1, 2}) CHECK(pool.mark_cached(b) == errc::ok);
  for (block_id b : {0, 1, 2}) CHECK(pool.release(b) == errc::ok);
  CHECK(pool.share(1) == errc::ok);  // claim from the middle of the stack
  CHECK(pool.allocate().value() == 2);
  CHECK(pool.allocate().value() == 0);
  CHECK(pool.check_consistency().empty());
}

TEMPLATE_TEST_CASE("bad block ids are errors that change nothing", "", lru, priority_lru<>,
                   free_stack) {
  block_pool<TestType> pool(4);
  (void)take(pool, 2);
  CHECK(pool.release(-1) == errc::block_out_of_range);
  CHECK(pool.release(4) == errc::block_out_of_range);
  CHECK(pool.share(7) == errc::block_out_of_range);
  CHECK(pool.mark_cached(-5) == errc::block_out_of_range);
  CHECK(pool.release(2) == errc::block_not_in_use);  // never allocated
  CHECK(pool.share(3) == errc::block_not_in_use);    // free: nothing to share
  CHECK(pool.mark_cached(3) == errc::block_not_in_use);
  CHECK(pool.release(1) == errc::ok);
  CHECK(pool.release(1) == errc::block_not_in_use);  // double free
  CHECK(pool.num_live() == 1);
  CHECK(pool.num_free() == 3);
  CHECK(pool.ref_count(0) == 1);
  CHECK(pool.check_consistency().empty());
  CHECK(take(pool, 3) == ids{1, 2, 3});
}

TEST_CASE("a pool of a bad size is a configuration error") {
  CHECK_THROWS_WITH(block_pool<>(0), "block_pool: num_blocks = 0 must be in [1, 2147483583]");
  CHECK_THROWS_AS(block_pool<>(-3), std::invalid_argument);
}

TEST_CASE("result<T> reports its error and refuses value() on failure") {
  const result<block_id> ok = 7;
  CHECK(ok.has_value());
  CHECK(*ok == 7);
  const result<block_id> bad = errc::out_of_blocks;
  CHECK_FALSE(bad);
  CHECK(bad.error() == errc::out_of_blocks);
  CHECK_THROWS_AS(bad.value(), bad_result_access);
  CHECK(to_string(errc::unknown_sequence) == "unknown sequence (never created or already freed)");
}
