#include <rungs/blocks.hpp>
#include <rungs/kv/detail/block_divider.hpp>

#include <catch2/catch.hpp>

TEST_CASE("blocks_for rounds a token count up to whole blocks") {
  static_assert(rungs::blocks_for(0, 16) == 0);
  CHECK(rungs::blocks_for(1, 16) == 1);
  CHECK(rungs::blocks_for(16, 16) == 1);
  CHECK(rungs::blocks_for(17, 16) == 2);
  CHECK(rungs::blocks_for(8192, 128) == 64);
  CHECK(rungs::blocks_for(100, 24) == 5);
  CHECK(rungs::blocks_for(std::int64_t{1} << 40, 1) == std::int64_t{1} << 40);
}

TEST_CASE("the allocator's block divider agrees with blocks_for for power-of-two and other sizes") {
  for (std::int32_t size : {1, 3, 16, 24, 128}) {
    const rungs::kv::detail::block_divider d(size);
    for (std::int32_t x : {0, 1, size - 1, size, size + 1, 1000, 2147483647 - 200})
      CHECK(d.ceil(x) == rungs::blocks_for(x, size));
  }
}
