// Tests of include/rungs/serving/workload.hpp: trace files (CSV and JSON lines), their errors,
// and the blog's chat generator.
#include <rungs/serving/workload.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
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
                    "t.csv:2: arrival = -1 must not be negative");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,0,1\n", "t.csv"),
                    "t.csv:2: prompt_tokens = 0 must be positive");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,1,1,4\n", "t.csv"),
                    "t.csv:2: more than the header's 3 fields");
  CHECK_THROWS_WITH(parse_trace("{\"arrival\": 0, \"prompt_tokens\": 1}\n", "t.jsonl"), "t.jsonl:1: missing output_tokens");
  CHECK_THROWS_WITH(parse_trace("{\"arrival\": 0, \"prompt_tokens\": 1, \"output_tokens\": 2, \"colour\": 1}\n", "t.jsonl"),
                    "t.jsonl:1: unknown key \"colour\" (rungs trace keys: arrival,prompt_tokens,output_tokens,conversation,"
                    "turn,think,hash_ids)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,2\n0,1,1,5,1\n", "t.csv"),
                    "t.csv:3: turn 1 of conversation 5 comes after turn 2");
  CHECK_THROWS_WITH(parse_trace("# nothing\n", "t.csv"), "t.csv: no requests");
  CHECK_THROWS_WITH(read_trace("/nonexistent/trace.csv"), Catch::StartsWith("/nonexistent/trace.csv: cannot open"));
}

TEST_CASE("traces: issue 14's hostile rows are refused with the limit they break, or read") {
  // A turn left out after turn 2147483647 would overflow; a turn 1 after it would be accepted.
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,2147483647\n0,1,1,5,\n", "t.csv"),
                    "t.csv:3: conversation 5 has a turn after turn 2147483647, the largest turn number");
  CHECK_THROWS_WITH(
      parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,2147483647\n0,1,1,5,\n0,1,1,5,1\n", "t.csv"),
      "t.csv:3: conversation 5 has a turn after turn 2147483647, the largest turn number");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,2147483648\n", "t.csv"),
                    "t.csv:2: turn = 2147483648 is out of range (at most 2147483647)");
  // Turns left out count on from the previous one.
  const auto implicit = parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,\n0,1,1,5,\n0,1,1,5,7\n0,1,1,5,\n");
  CHECK(implicit[0].turn == 1);
  CHECK(implicit[1].turn == 2);
  CHECK(implicit[3].turn == 8);
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,turn\n0,1,1,5,3\n0,1,1,5,\n0,1,1,5,4\n", "t.csv"),
                    "t.csv:4: turn 4 of conversation 5 comes after turn 4");
  // Conversation ids are 64-bit; past 2^63 - 1 (the simulator's standalone ids) out of range.
  CHECK(parse_trace("arrival,prompt_tokens,output_tokens,conversation\n0,1,1,4294967296\n")[0].conversation == 4294967296u);
  CHECK(parse_trace("{\"arrival\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"conversation\": 9223372036854775807}")[0]
            .conversation == 9223372036854775807u);
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation\n0,1,1,9223372036854775808\n", "t.csv"),
                    "t.csv:2: conversation = 9223372036854775808 is out of range (at most 9223372036854775807)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation\n0,1,1,99999999999999999999\n", "t.csv"),
                    "t.csv:2: conversation = 99999999999999999999 is out of range (at most 9223372036854775807)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation\n0,1,1,2.5\n", "t.csv"),
                    "t.csv:2: conversation = 2.5 is not an integer");
  CHECK(parse_trace("arrival,prompt_tokens,output_tokens\n0,1e3,2.0\n")[0].prompt_tokens == 1000);
  // A UTF-8 byte-order mark before the header.
  CHECK(parse_trace("\xEF\xBB\xBF" "arrival,prompt_tokens,output_tokens\n0,150,350\n") ==
        std::vector<trace_request>{{.prompt_tokens = 150, .output_tokens = 350}});
  // Times must stay finite in every sum: at most max_trace_seconds.
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n1e308,1,1\n", "t.csv"),
                    "t.csv:2: arrival = 1e308 is out of range (at most 1000000000)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n1e999,1,1\n", "t.csv"),
                    "t.csv:2: arrival = 1e999 is out of range (at most 1000000000)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\ninf,1,1\n", "t.csv"),
                    "t.csv:2: arrival = inf is out of range (at most 1000000000)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\nnan,1,1\n", "t.csv"),
                    "t.csv:2: arrival = nan is out of range (at most 1000000000)");
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens,conversation,think\n0,1,1,1,1e10\n", "t.csv"),
                    "t.csv:2: think = 1e10 is out of range (at most 1000000000)");
  CHECK(parse_trace("arrival,prompt_tokens,output_tokens\n1e9,1,1\n")[0].arrival == 1e9);
  CHECK_THROWS_WITH(parse_trace("arrival,prompt_tokens,output_tokens\n0,2147483648,1\n", "t.csv"),
                    "t.csv:2: prompt_tokens = 2147483648 is out of range (at most 2147483647)");
}

TEST_CASE("traces: write_trace's output reads back as the same requests") {
  // A standalone request's turn is written empty (a 0 would be refused), times exactly.
  const auto standalone = parse_trace("arrival,prompt_tokens,output_tokens\n0,150,350\n");
  std::ostringstream out;
  write_trace(out, standalone);
  CHECK(out.str() == "arrival,prompt_tokens,output_tokens,conversation,turn,think\n0,150,350,0,,0\n");
  CHECK(parse_trace(out.str()) == standalone);
  const std::vector<trace_request> rows = {
      {.arrival = 3600.1234567, .prompt_tokens = 1, .output_tokens = 2, .conversation = 4294967296, .turn = 1, .think = 0.1},
      {.arrival = 1e-7, .prompt_tokens = 600, .output_tokens = 2, .hash_ids = {7, 18446744073709551615u}}};
  std::ostringstream both;
  write_trace(both, rows);
  CHECK(parse_trace(both.str()) == rows);
}

TEST_CASE("traces: Azure LLM inference CSV, read natively") {
  // The first rows of azure-llm-2023-conv.csv (Azure/AzurePublicDataset, CC-BY 4.0: Patel et
  // al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024).
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:15:46.6805900,374,44\r\n"
      "2023-11-16 18:15:50.9951690,396,109\r\n"
      "2023-11-16 18:15:51.0000000,879,19\r\n"
      "2023-11-17 00:00:00.1,1,1\r\n";
  const auto rows = parse_trace(text, "azure.csv");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == trace_request{.arrival = 0, .prompt_tokens = 374, .output_tokens = 44});
  CHECK(rows[1].arrival == Approx(4.3145790).epsilon(1e-12));
  CHECK(rows[1].prompt_tokens == 396);
  CHECK(rows[1].output_tokens == 109);
  CHECK(rows[2].arrival == Approx(4.3194100).epsilon(1e-12));
  // Across midnight: 5 h 44 min 13.4194100 s after the first.
  CHECK(rows[3].arrival == Approx(5 * 3600 + 44 * 60 + 13.41941).epsilon(1e-12));
  CHECK(parse_trace(text, "azure.csv", trace_format::azure) == rows);
  // Arrivals count from the earliest timestamp, whatever the row order.
  const auto unsorted = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:01,5,5\n2023-01-01 00:00:00,5,5\n");
  CHECK(unsorted[0].arrival == 1);
  CHECK(unsorted[1].arrival == 0);
  // Across a leap day and a year's end.
  const auto leap = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-12-31 23:59:59,5,5\n2024-03-01 00:00:00,5,5\n");
  CHECK(leap[1].arrival == (31 + 29 + 0) * 86400.0 + 1);
  CHECK_THROWS_WITH(parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68059001,1,1\r\n", "a.csv"),
                    "a.csv:2: TIMESTAMP = '2023-11-16 18:15:46.68059001' has a bad fraction (1 to 7 digits) "
                    "(expected YYYY-MM-DD HH:MM:SS.fffffff)");
  CHECK_THROWS_WITH(parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-13-16 18:15:46,1,1\r\n", "a.csv"),
                    "a.csv:2: TIMESTAMP = '2023-13-16 18:15:46' is not a valid time (expected YYYY-MM-DD HH:MM:SS.fffffff)");
  CHECK_THROWS_WITH(parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46,0,1\r\n", "a.csv"),
                    "a.csv:2: ContextTokens = 0 must be positive");
  CHECK_THROWS_WITH(parse_trace("TIMESTAMP,ContextTokens,arrival\r\n", "a.csv"),
                    "a.csv:1: unknown column 'arrival' (a CSV trace starts with a header: Azure's "
                    "TIMESTAMP,ContextTokens,GeneratedTokens)");
  // The override: read as rungs' own CSV, the Azure header is unknown.
  CHECK_THROWS_WITH(parse_trace(text, "azure.csv", trace_format::rungs),
                    Catch::StartsWith("azure.csv:1: unknown column 'TIMESTAMP' (a CSV trace starts with a header: "
                                      "arrival,prompt_tokens,output_tokens"));
  CHECK_THROWS_WITH(parse_trace(text, "azure.csv", trace_format::mooncake), "azure.csv:1: a Mooncake trace is JSON lines, not CSV");
}

TEST_CASE("traces: Mooncake JSON lines with hash_ids, read natively") {
  // Shaped like FAST25-release/traces (kvcache-ai/Mooncake, Apache-2.0).
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 6, \"hash_ids\": [0, 1, 2]}\n"
      "{\"timestamp\": 1500, \"input_length\": 1024, \"output_length\": 4, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 2500, \"input_length\": 10, \"output_length\": 4, \"hash_ids\": []}\n";
  const auto rows = parse_trace(text, "m.jsonl");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == trace_request{.arrival = 0, .prompt_tokens = 1100, .output_tokens = 6, .hash_ids = {0, 1, 2}});
  CHECK(rows[1] == trace_request{.arrival = 1.5, .prompt_tokens = 1024, .output_tokens = 4, .hash_ids = {0, 1}});
  CHECK(rows[2].hash_ids.empty());
  CHECK(parse_trace(text, "m.jsonl", trace_format::mooncake) == rows);
  CHECK_THROWS_WITH(parse_trace(text, "m.jsonl", trace_format::rungs),
                    Catch::StartsWith("m.jsonl:1: unknown key \"timestamp\" (rungs trace keys:"));
  CHECK_THROWS_WITH(parse_trace(text, "m.jsonl", trace_format::azure), "m.jsonl:1: an Azure trace is CSV, not JSON lines");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 1, 2]}", "m.jsonl"),
                    "m.jsonl:1: hash_ids has 3 ids; a prompt of 1024 tokens has at most 2 blocks of 512");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-1]}", "m.jsonl"),
                    "m.jsonl:1: hash_ids = -1 must not be negative");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": 5}", "m.jsonl"),
                    "m.jsonl:1: the value of \"hash_ids\" must be an array of numbers");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": [0], \"input_length\": 1, \"output_length\": 1}", "m.jsonl"),
                    "m.jsonl:1: the value of \"timestamp\" must be a number, not an array");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": \"0\", \"input_length\": 1}", "m.jsonl"),
                    "m.jsonl:1: the value of \"timestamp\" must be a number, not a string");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1}", "m.jsonl"), "m.jsonl:1: missing output_length");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1,", "m.jsonl"),
                    "m.jsonl:1: the value of \"hash_ids\" is missing");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 1e13, \"input_length\": 1, \"output_length\": 1}", "m.jsonl"),
                    "m.jsonl:1: timestamp = 1e13 is out of range (at most 1000000000000)");
  CHECK_THROWS_WITH(parse_trace("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"arrival\": 0}", "m.jsonl"),
                    Catch::StartsWith("m.jsonl:2: unknown key \"arrival\" (Mooncake trace keys: "
                                      "timestamp,input_length,output_length,hash_ids)"));
}

TEST_CASE("traces: trace_prompt gives equal leading hash_ids equal leading tokens") {
  const trace_request a{.prompt_tokens = 1100, .output_tokens = 1, .hash_ids = {0, 1, 2}};
  const trace_request b{.prompt_tokens = 1100, .output_tokens = 1, .hash_ids = {0, 1, 3}};
  std::vector<rungs::kv::token_id> ta(1100), tb(1100);
  trace_prompt(a, 0, ta);
  trace_prompt(b, 1, tb);
  const auto differ = std::mismatch(ta.begin(), ta.end(), tb.begin()).first - ta.begin();
  CHECK(differ >= 1024);  // the first two 512-token blocks are equal
  CHECK(differ < 1034);   // the third differs (a chance match of a few tokens at most)
  // Without ids, two standalone requests share nothing; one conversation's turns differ by turn.
  const trace_request c{.prompt_tokens = 16, .output_tokens = 1};
  std::vector<rungs::kv::token_id> tc(16), td(16);
  trace_prompt(c, 0, tc);
  trace_prompt(c, 1, td);
  CHECK(tc != td);
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
  CHECK(a.next_turn(0) == 1);
  CHECK(a.next_turn(1) == 3);
  CHECK_FALSE(a.next_turn(2).has_value());

  // Held (one replica of a fleet): nothing until a router releases a conversation or request.
  turn_arrivals h(rows, true);
  CHECK(h.remaining() == 0);
  CHECK_FALSE(h.next().has_value());
  h.release(2);
  CHECK(h.remaining() == 1);
  h.release(0);  // its conversation: three turns
  CHECK(h.remaining() == 4);
  CHECK(h.take(0.25) == std::vector<std::size_t>{0, 2});
  CHECK_FALSE(h.finished(0, 1.0));
  CHECK(h.next() == 1.5);
}
