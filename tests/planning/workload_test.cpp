// Tests of include/rungs/serving/workload.hpp: trace files (CSV and JSON lines), their errors,
// and the blog's chat generator.
#include <rungs/serving/workload.hpp>

#include <catch2/catch.hpp>
#include <cmath>

#include <sstream>

using namespace rungs::serving;

TEST_CASE("traces: CSV with a header in any column order, and JSON lines") {
  const auto csv = parse_trace("# a comment\noutput_tokens,arrival,prompt_tokens\n10,0.5,20\n", "t.csv");
  CHECK(csv == std::vector<trace_request>{{.arrival = 0.5, .prompt_tokens = 20, .output_tokens = 10}});
  const auto json = parse_trace(
      "{\"arrival\": 1, \"prompt_tokens\": 150, \"output_tokens\": 350, \"conversation\": 3, \"turn\": 1}\n"
      "{\"arrival\": 1, \"prompt_tokens\": 150, \"output_tokens\": 350, \"conversation\": 3, \"turn\": 2, \"think\": 4}\n");
  REQUIRE(json.size() == 2);
  CHECK(json[1].think == 4);
  CHECK(json[1].conversation == 3);
  std::ostringstream out;
  write_trace(out, json);
  CHECK(parse_trace(out.str()) == json);
}

TEST_CASE("traces: every problem names the file, the line and the rule") {
  CHECK_THROWS_WITH(parse_trace("arrival,prompt,output_tokens\n", "t.csv"),
                    Catch::StartsWith("t.csv:1: unknown column 'prompt'"));
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens\n", "t.csv"), "t.csv:1: the header lacks column 'output_tokens'");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,x,1\n", "t.csv"),
                    "t.csv:2: prompt_tokens = 'x' is not a number");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n-1,5,1\n", "t.csv"),
                    "t.csv:2: arrival = -1.000000 must not be negative");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,0,1\n", "t.csv"),
                    "t.csv:2: prompt_tokens = 0 must be positive");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,1,1,4\n", "t.csv"),
                    "t.csv:2: more than the header's 3 fields");
  CHECK_THROWS_WITH(parse_trace("{\"arrival\": 0, \"prompt_tokens\": 1}\n", "t.jsonl"), "t.jsonl:1: missing output_tokens");
  CHECK_THROWS_WITH(parse_trace("{\"arrival\": 0, \"prompt_tokens\": 1, \"output_tokens\": 2, \"colour\": 1}\n", "t.jsonl"),
                    "t.jsonl:1: unknown key \"colour\"");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,2\n0,1,1,5,1\n", "t.csv"),
                    "t.csv:3: turn 1 of conversation 5 comes after turn 2");
  CHECK_THROWS_WITH(parse_trace("# nothing\n", "t.csv"), "t.csv: no requests");
  CHECK_THROWS_WITH(read_trace("/nonexistent/trace.csv"), Catch::StartsWith("/nonexistent/trace.csv: cannot open"));
}

TEST_CASE("the blog's chat workload: N chats of 10 turns, 150 in and 350 out, all at once") {
  const auto rows = generate_chat({.conversations = 12});
  CHECK(rows.size() == 120);
  std::int64_t tokens = 0;
  for (const trace_request& r : rows) {
    CHECK(r.arrival == 0);
    if (r.conversation == 1) tokens += r.prompt_tokens + r.output_tokens;
  }
  CHECK(tokens == 5000);  // the blog's 5000 tokens per chat (313 blocks of 16)
  const auto jittered = generate_chat({.conversations = 50, .jitter = 0.5, .seed = 3});
  for (const trace_request& r : jittered) {
    CHECK(r.prompt_tokens >= 75);
    CHECK(r.prompt_tokens <= 225);
  }
  CHECK(jittered == generate_chat({.conversations = 50, .jitter = 0.5, .seed = 3}));
  CHECK_THROWS_WITH(generate_chat({.conversations = 0}), "chat workload: conversations = 0 must be positive");
}

TEST_CASE("turn_arrivals: a chat's next turn comes after the previous answer and the think time") {
  const std::vector<trace_request> rows = {
      {.arrival = 0, .prompt_tokens = 4, .output_tokens = 2, .conversation = 1, .turn = 1},
      {.arrival = 0, .prompt_tokens = 4, .output_tokens = 2, .conversation = 1, .turn = 2, .think = 0.5},
      {.arrival = 0.25, .prompt_tokens = 4, .output_tokens = 2},
      {.arrival = 3, .prompt_tokens = 4, .output_tokens = 2, .conversation = 1, .turn = 3, .think = 0}};
  turn_arrivals a(rows);
  CHECK(a.remaining() == 4);
  CHECK(a.take(0) == std::vector<std::size_t>{0});
  CHECK(a.next() == 0.25);
  CHECK(a.take(0.25) == std::vector<std::size_t>{2});
  CHECK_FALSE(a.next().has_value());        // turn 2 waits for turn 1's answer
  CHECK_FALSE(a.finished(0, 1.0));          // not the chat's last turn
  CHECK(a.next() == 1.5);                   // answer at 1.0 + think 0.5
  CHECK(a.take(1.4).empty());
  CHECK(a.take(1.5) == std::vector<std::size_t>{1});
  CHECK(a.available_at(1) == 1.5);
  CHECK(std::isnan(a.available_at(3)));      // not available yet
  CHECK_FALSE(a.finished(1, 2.0));
  CHECK(a.next() == 3.0);                   // turn 3's own arrival is later than the answer
  CHECK(a.finished(2, 2.0));                // a standalone request is its own last turn
  CHECK(a.take(3.0) == std::vector<std::size_t>{3});
  CHECK(a.finished(3, 4.0));
  CHECK(a.remaining() == 0);
}
