# Runs a short serve_demo with --json and checks the file: valid JSON (CMake's parser) with a
# step series as long as the run and a report whose counts agree with it, and the cache type
# the run asked for (--kv-cache-dtype bf16, which both backends take) in config.model.
#   cmake -DDEMO=path/to/serve_demo -DOUT=file.json -P check_json.cmake
execute_process(COMMAND "${DEMO}" --chats 3 --turns 2 --kv-cache-dtype bf16 --json "${OUT}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "serve_demo --json failed (${rc}): ${err}")
endif()
file(READ "${OUT}" json)
string(JSON steps LENGTH "${json}" steps)
string(JSON turns LENGTH "${json}" turns)
string(JSON scheduler_steps GET "${json}" report scheduler_steps)
string(JSON requests GET "${json}" report requests)
string(JSON kv_blocks GET "${json}" config kv_blocks)
math(EXPR last "${steps} - 1")
string(JSON last_waiting GET "${json}" steps ${last} waiting)
string(JSON last_running GET "${json}" steps ${last} running)
string(JSON first_bucket GET "${json}" steps 0 runs 0 bucket)
string(JSON kv_cache_dtype GET "${json}" config model kv_cache_dtype)
if(NOT kv_cache_dtype STREQUAL "bf16")
  message(FATAL_ERROR "config.model.kv_cache_dtype is '${kv_cache_dtype}', not the bf16 the run asked for")
endif()
if(NOT steps EQUAL scheduler_steps OR NOT turns EQUAL 6 OR NOT requests EQUAL 6 OR kv_blocks LESS 1
   OR NOT last_waiting EQUAL 0 OR last_running LESS 1 OR first_bucket STREQUAL "")
  message(FATAL_ERROR "unexpected JSON: ${steps} steps (report: ${scheduler_steps}), ${turns} turns, "
                      "${requests} requests, ${kv_blocks} blocks, last step running ${last_running} waiting ${last_waiting}")
endif()
message(STATUS "ok: ${steps} steps, ${turns} turns, first bucket ${first_bucket}")
