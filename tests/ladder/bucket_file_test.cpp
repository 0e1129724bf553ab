#include <rungs/ladder/bucket_file.hpp>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using rungs::bucket;
using b3 = std::vector<bucket<3>>;

namespace {
b3 parse(std::string_view text, rungs::bucket_file_options options = {}) {
  return rungs::parse_bucket_file<3>(text, "buckets.txt", options);
}
std::string error_of(std::string_view text, rungs::bucket_file_options options = {}) {
  try {
    parse(text, options);
  } catch (const rungs::bucket_file_error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("exact buckets, lists and ranges (the Gaudi document's examples)") {
  CHECK(parse("(1, 2048, 0)\n(64, 1, 1024)\n") == b3{{1, 2048, 0}, {64, 1, 1024}});
  CHECK(parse("(1, [256, 512], [0, 4, 8])") ==
        b3{{1, 256, 0}, {1, 256, 4}, {1, 256, 8}, {1, 512, 0}, {1, 512, 4}, {1, 512, 8}});
  // range(256, 512, 128) is 256 and 384 under Python's rules (the document says three).
  CHECK(parse("(1, 1, range(256, 512, 128))") == b3{{1, 1, 256}, {1, 1, 384}});
  CHECK(parse("(1, 1, range(256, 513, 128))") == b3{{1, 1, 256}, {1, 1, 384}, {1, 1, 512}});
  const b3 mixed = parse("([64, 128, 256], 1, range(512, 1024, 32))");
  CHECK(mixed.size() == 3 * 16);
  CHECK(mixed.front() == bucket<3>{64, 1, 512});
  CHECK(mixed[1] == bucket<3>{64, 1, 544});
  CHECK(mixed.back() == bucket<3>{256, 1, 992});
}

TEST_CASE("Python's range rules: one argument, negative steps") {
  CHECK(parse("(1, 1, range(3))") == b3{{1, 1, 0}, {1, 1, 1}, {1, 1, 2}});
  CHECK(parse("(1, 1, range(512, 255, -128))") == b3{{1, 1, 512}, {1, 1, 384}, {1, 1, 256}});
  CHECK(parse("(1, 1, range(0, 10, 3))") == b3{{1, 1, 0}, {1, 1, 3}, {1, 1, 6}, {1, 1, 9}});
}

TEST_CASE("an empty list or range is an error naming the pattern, not a line without buckets") {
  CHECK(error_of("(1, 1, range(5, 1))") ==
        "buckets.txt:1:8: bucket pattern (1, 1, range(5, 1)): range(5, 1) yields no value "
        "(every value of a pattern must yield at least one)");
  CHECK(error_of("(1, 1, range( 1, 5, -1 ))") ==
        "buckets.txt:1:8: bucket pattern (1, 1, range( 1, 5, -1 )): range( 1, 5, -1 ) yields no value "
        "(every value of a pattern must yield at least one)");
  CHECK(error_of("(2048, 1, 0)\n  (1, [], 0)  # empty") ==
        "buckets.txt:2:7: bucket pattern (1, [], 0): [] yields no value "
        "(every value of a pattern must yield at least one)");
  CHECK(error_of("([],)", {}) == "buckets.txt:1:5: expected 3 values in a bucket, found 1");
}

TEST_CASE("comments, blank lines, spacing and trailing commas") {
  const char* text =
      "# This is a sample bucketing file\n"
      "\n"
      "   # Prompt: (batch_size, query_len, context)\n"
      "(1,2048,0)   # exact\n"
      "\t( 2 , [ 128 , 256 , ] , 0 , )\r\n"
      "(+3, range( 1 , 3 ), 0)\n";
  CHECK(parse(text) == b3{{1, 2048, 0}, {2, 128, 0}, {2, 256, 0}, {3, 1, 0}, {3, 2, 0}});
  CHECK(parse("").empty());
  CHECK(parse("# only comments\n\n").empty());
}

TEST_CASE("malformed lines: file, line, column and the reason") {
  CHECK(error_of("(1, 2048, 0)\n\n(1, 2048 0)") == "buckets.txt:3:10: expected ',' or ')' after a value, found '0'");
  CHECK(error_of("(1, 2048, 0") == "buckets.txt:1:12: expected ',' or ')' after a value, found the end of the line");
  CHECK(error_of("1, 2048, 0") == "buckets.txt:1:1: expected '(' to start a bucket, found '1'");
  CHECK(error_of("(1, x, 0)") == "buckets.txt:1:5: expected an integer, a list [...] or range(...), found 'x'");
  CHECK(error_of("(1, 2048)") == "buckets.txt:1:9: expected 3 values in a bucket, found 2");
  CHECK(error_of("(1, 2, 3, 4)") == "buckets.txt:1:12: expected 3 values in a bucket, found 4");
  CHECK(error_of("(1, 2, 3) (4, 5, 6)") == "buckets.txt:1:11: expected the end of the line after the bucket, found '('");
  CHECK(error_of("(1, [2, 3, 0)") == "buckets.txt:1:13: expected ',' or ']' in a list, found ')'");
  CHECK(error_of("(1, [2, a], 0)") == "buckets.txt:1:9: expected an integer or ']' in a list, found 'a'");
  CHECK(error_of("(1, range[1, 2], 0)") == "buckets.txt:1:10: expected '(' after 'range', found '['");
  CHECK(error_of("(1, range(1, 2, 0), 0)") == "buckets.txt:1:5: range() step must not be zero");
  CHECK(error_of("(1, range(), 0)") == "buckets.txt:1:5: range() takes 1 to 3 integer arguments, found none");
  CHECK(error_of("(1, range(1, 2, 3, 4), 0)") == "buckets.txt:1:20: expected at most 3 integers in range(), found another");
  CHECK(error_of("(1, range(1, x), 0)") == "buckets.txt:1:14: expected an integer or ')' in range(), found 'x'");
  CHECK(error_of("(1, range(1; 2), 0)") == "buckets.txt:1:12: expected ',' or ')' in range(), found ';'");
  CHECK(error_of("(1, -5, 0)") == "buckets.txt:1:5: bucket value -5 is negative");
  CHECK(error_of("(1, range(-2, 3), 0)") == "buckets.txt:1:5: bucket value -2 is negative");
  CHECK(error_of("(1, [1, 3000000000], 0)") ==
        "buckets.txt:1:5: bucket value 3000000000 exceeds the largest supported 2147483647");
  CHECK(error_of("(1, 99999999999999999999, 0)") == "buckets.txt:1:5: integer 99999999999999999999 is out of range");
}

TEST_CASE("the expansion is bounded before anything is expanded") {
  CHECK(error_of("(range(1, 1000000000), range(1, 1000000000), 0)") ==
        "buckets.txt:1:1: the buckets expand to more than 1048576 (bucket_file_options::max_buckets)");
  rungs::bucket_file_options small;
  small.max_buckets = 6;
  CHECK(parse("(1, [1, 2, 3], [0, 1])", small).size() == 6);
  CHECK(error_of("(1, [1, 2, 3], [0, 1])\n (2, 1, 0)", small) ==
        "buckets.txt:2:2: the buckets expand to more than 6 (bucket_file_options::max_buckets)");
}

TEST_CASE("the error carries its parts; a missing file is reported too") {
  try {
    parse("\n  (1, 2, 3]");
    FAIL("no error");
  } catch (const rungs::bucket_file_error& e) {
    CHECK(e.file() == "buckets.txt");
    CHECK(e.line() == 2);
    CHECK(e.column() == 11);
    CHECK(e.reason() == "expected ',' or ')' after a value, found ']'");
  }
  CHECK_THROWS_WITH(rungs::read_bucket_file<3>("/nonexistent/buckets.txt"),
                    "/nonexistent/buckets.txt: cannot open: No such file or directory");
  CHECK_THROWS_AS(rungs::read_bucket_file<3>("/nonexistent/buckets.txt"), std::invalid_argument);
}

TEST_CASE("other arities") {
  CHECK(rungs::parse_bucket_file<2>("([1, 2], 128)") == std::vector<bucket<2>>{{1, 128}, {2, 128}});
}
