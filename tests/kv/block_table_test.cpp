#include <rungs/kv/block_table.hpp>

#include <catch2/catch.hpp>
#include <vector>

using namespace rungs::kv;

TEST_CASE("block_tables: rows of one contiguous buffer, null past each sequence's blocks") {
  block_tables t(3, 4);
  t.row(1)[0] = 7;
  t.row(1)[1] = 2;
  const block_table_view v = t.view();
  CHECK(v.rows == 3);
  CHECK(v.stride == 4);
  CHECK(std::vector<block_id>(v.data, v.data + 12) ==
        std::vector<block_id>{-1, -1, -1, -1, 7, 2, -1, -1, -1, -1, -1, -1});
}

TEST_CASE("write_slots crosses block boundaries in order") {
  const std::vector<block_id> row{5, 0, 9};
  std::vector<slot_id> out(9, 99);
  write_slots(row, 4, 2, 9, out.data());
  // positions 2..10: block 5 offsets 2,3; block 0 offsets 0..3; block 9 offsets 0..2.
  CHECK(out == std::vector<slot_id>{22, 23, 0, 1, 2, 3, 36, 37, 38});
  write_slots(row, 4, 11, 0, out.data());  // nothing
  CHECK(out[0] == 22);
}

TEST_CASE("slots are 64-bit: block_id * block_size overflows int32 on large pools") {
  const std::vector<block_id> row{2'000'000'000};
  slot_id s = 0;
  write_slots(row, 16, 15, 1, &s);
  CHECK(s == 32'000'000'015LL);
}
