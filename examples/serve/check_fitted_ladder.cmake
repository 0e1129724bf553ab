# A ladder of one's own in the demo: --ladder explicit --rungs, and the files rungs-plan fit
# writes (a 1-D ladder for --ladder explicit, a 2-D grid for --ladder gaudi-file). Each run
# must serve (exit 0) on the ladder it was given.
#   cmake -DDEMO=serve_demo -DPLAN=rungs-plan -DDIR=scratch-dir -P check_fitted_ladder.cmake
function(run_ok expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expect}")
    message(FATAL_ERROR "${ARGN}: expected status 0 and '${expect}'; got ${rc}: ${err}\n${out}")
  endif()
  message(STATUS "ok: ${ARGN}")
endfunction()

set(chats --chats 3 --turns 2)
run_ok("CUDA graph capture sizes \\(explicit, tokens per step, 5 rungs\\): \\[4, 8, 16, 64, 128\\]"
       "${DEMO}" --ladder explicit --rungs 4,8,16,64,128 ${chats})
file(MAKE_DIRECTORY "${DIR}")
run_ok("fitted ladder \\(3 rungs\\): 3 450 1950" "${PLAN}" fit --chat 3 --turns 2 --rungs 6 --write-bucket-file "${DIR}/ladder.txt")
run_ok("CUDA graph capture sizes \\(explicit, tokens per step, 3 rungs\\): \\[3, 450, 1950\\]"
       "${DEMO}" --ladder explicit --bucket-file "${DIR}/ladder.txt" ${chats})
file(WRITE "${DIR}/grid_values.txt" "1 64\n2 128\n3 256\n1 300\n")
run_ok("fitted grid" "${PLAN}" fit --trace "${DIR}/grid_values.txt" --rungs 4 --write-bucket-file "${DIR}/grid.txt")
run_ok("prompt buckets \\[bs, query, num_blocks\\]" "${DEMO}" --ladder gaudi-file --bucket-file "${DIR}/grid.txt" ${chats})
