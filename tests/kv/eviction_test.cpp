// The eviction concept is implementable by a user: a FIFO policy (blocks reused in the order
// they were released, cached or not) plugs into block_pool and paged_allocator.
#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/eviction.hpp>
#include <rungs/kv/paged_allocator.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <deque>
#include <vector>

using namespace rungs::kv;

namespace {
// Deliberately simple (O(n) claim): only the concept matters here.
class fifo {
 public:
  explicit fifo(std::int32_t) {}
  void release(block_id b, block_info) { q_.push_back(b); }
  block_id evict() {
    if (q_.empty()) return null_block;
    const block_id b = q_.front();
    q_.pop_front();
    return b;
  }
  void claim(block_id b) { std::erase(q_, b); }
  std::int32_t size() const { return static_cast<std::int32_t>(q_.size()); }
  bool contains(block_id b) const { return std::find(q_.begin(), q_.end(), b) != q_.end(); }

 private:
  std::deque<block_id> q_;
};

struct no_claim {
  explicit no_claim(std::int32_t) {}
  void release(block_id, block_info) {}
  block_id evict() { return null_block; }
  std::int32_t size() const { return 0; }
  bool contains(block_id) const { return false; }
};
}  // namespace

static_assert(check_eviction_policy<fifo>());
static_assert(!eviction_policy<no_claim>);
static_assert(!eviction_policy<int>);

TEST_CASE("a user-written eviction policy drives the pool") {
  block_pool<fifo> pool(3);
  // The pool releases N-1 .. 0 at construction; FIFO hands them out in that order.
  CHECK(pool.allocate().value() == 2);
  CHECK(pool.allocate().value() == 1);
  CHECK(pool.release(2) == errc::ok);
  CHECK(pool.allocate().value() == 0);
  CHECK(pool.allocate().value() == 2);
  CHECK(pool.check_consistency().empty());
}

TEST_CASE("a user-written eviction policy drives a prefix-caching allocator") {
  prefix_caching_allocator<wyhash64, fifo> a({.num_blocks = 4, .block_size = 2, .max_model_len = 8});
  const std::vector<token_id> prompt{1, 2, 3, 4, 5};
  const sequence_start s = a.create(prompt).value();
  CHECK(a.append(s.id, prompt) == errc::ok);
  CHECK(a.commit(s.id, 5) == errc::ok);
  CHECK(a.free(s.id) == errc::ok);
  const sequence_start again = a.create(prompt).value();
  CHECK(again.cached_tokens == 4);
  CHECK(a.check_consistency().empty());
}
