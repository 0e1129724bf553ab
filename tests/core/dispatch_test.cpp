#include <rungs/dispatch.hpp>

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("dispatch picks the instantiation equal to the run-time value") {
  auto twice = []<int D>() { return 2 * D; };
  CHECK(rungs::dispatch<64, 80, 96, 128, 256>("head_dim", 96, twice) == 192);
  CHECK(rungs::dispatch<64, 80, 96, 128, 256>("head_dim", 256, twice) == 512);
  CHECK(rungs::dispatch<8>("block_size", 8, []<int B>() { return B; }) == 8);
}

TEST_CASE("dispatch rejects an unsupported value and lists what is supported") {
  auto f = []<int D>() { return D; };
  try {
    (void)rungs::dispatch<64, 80, 96, 128, 256>("head_dim", 72, f);
    FAIL("no exception");
  } catch (const rungs::unsupported_value& e) {
    CHECK(std::string(e.what()) ==
          "head_dim = 72 is not supported by this build; supported: 64, 80, 96, 128, 256");
  }
}

TEST_CASE("dispatch works for void callables, references and non-int values") {
  int seen = 0;
  rungs::dispatch<1, 2, 3>("group", 2, [&]<int G>() { seen = G; });
  CHECK(seen == 2);
  int storage[3] = {10, 20, 30};
  int& r = rungs::dispatch<0, 1, 2>("index", 1, [&]<int I>() -> int& { return storage[I]; });
  r = 21;
  CHECK(storage[1] == 21);
  CHECK(rungs::dispatch<'a', 'b'>("tag", 'b', []<char C>() { return C == 'b'; }));
  CHECK_THROWS_AS(rungs::dispatch<true>("flag", false, []<bool B>() { return B; }),
                  rungs::unsupported_value);
  CHECK(rungs::is_one_of<8, 16, 32>(16));
  CHECK_FALSE(rungs::is_one_of<8, 16, 32>(24));
}
