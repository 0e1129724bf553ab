// A trace reader on arbitrary text: a trace_error, or requests that write_trace writes and
// parse_trace reads back equal (the documented round trip). The format is a compile-time
// definition, so each reader is one line in CMakeLists.txt:
//   rungs_add_fuzzer(trace_azure trace_fuzz.cpp DEFINITIONS RUNGS_FUZZ_TRACE_FORMAT=azure)
#include <rungs/serving/workload.hpp>

#include <sstream>

#include "fuzz.hpp"

#ifndef RUNGS_FUZZ_TRACE_FORMAT
#error "define RUNGS_FUZZ_TRACE_FORMAT to a rungs::serving::trace_format enumerator"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sv = rungs::serving;
  std::vector<sv::trace_request> rows;
  try {
    rows = sv::parse_trace(fuzz_text(data, size), "<fuzz>", sv::trace_format::RUNGS_FUZZ_TRACE_FORMAT);
  } catch (const sv::trace_error&) {
    return 0;
  }
  for (const sv::trace_request& r : rows) {
    RUNGS_FUZZ_CHECK(r.prompt_tokens >= 0 && r.output_tokens >= 0, "negative token count");
    RUNGS_FUZZ_CHECK(r.arrival >= 0 && r.arrival <= sv::max_trace_seconds, "arrival out of range");
    RUNGS_FUZZ_CHECK(r.think >= 0 && r.think <= sv::max_trace_seconds, "think time out of range");
  }
  std::ostringstream out;
  sv::write_trace(out, rows);
  std::vector<sv::trace_request> again;
  try {
    again = sv::parse_trace(out.str(), "<written>", sv::trace_format::rungs);
  } catch (const sv::trace_error& e) {
    RUNGS_FUZZ_CHECK(false, e.what());
  }
  RUNGS_FUZZ_CHECK(again == rows, "write_trace then parse_trace changed the requests");
  return 0;
}
