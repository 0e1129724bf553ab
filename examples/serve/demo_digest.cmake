# run_demo_for_digest(<digest var> <output var> COMMAND <command...>): runs a serving demo
# (serve_demo, or serve_demo_dp under mpirun), fails the test unless it exits 0 and prints a
# token digest, and returns the digest and the whole stdout. Included by the demo checks
# (check_dispatch.cmake, tests/mpi/run_dp_demo.cmake), which compare digests across runs.
function(run_demo_for_digest digest_var out_var)
  cmake_parse_arguments(R "" "" "COMMAND" ${ARGN})
  execute_process(COMMAND ${R_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "tokens out   digest ([0-9a-f]+)")
    message(FATAL_ERROR "${R_COMMAND} exited ${rc} or printed no token digest:\n${out}\n${err}")
  endif()
  set(${digest_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
