# serve_demo_dp's own refusals (dp_main.cpp) and --help, started without mpirun (an MPI
# singleton: one rank; every rank decides from the same flags alike, and mpirun would add its
# own lines and 2 s of teardown per case). A refusal: exit status 2, nothing on stdout, one
# line on stderr naming the flag. serve_demo's shared flags are checked by
# examples/serve/check_flags.cmake.
#   cmake -DDP_DEMO=... -P check_dp_flags.cmake
set(cases "--clock wall|--clock,wall" "--backend cuda|--backend,cuda" "--json and --plot|--json,out.json")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(POP_FRONT parts flag)
  string(REPLACE "," ";" args "${parts}")
  execute_process(COMMAND "${DP_DEMO}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT out STREQUAL "" OR NOT err MATCHES "^serve_demo_dp: error: ${flag}[^\n]*\n$")
    message(FATAL_ERROR "serve_demo_dp ${args}: exit ${rc} (want 2); want nothing on stdout and one line on stderr "
                        "naming ${flag}:\nstdout: ${out}\nstderr: ${err}")
  endif()
  message(STATUS "serve_demo_dp ${args}: ${err}")
endforeach()
# --help: exit 0, what serve_demo_dp changes about serve_demo's flags, then their list; also
# beside a flag the run would refuse (help wins, as in serve_demo).
foreach(args "--help" "--help;--clock;wall")
  execute_process(COMMAND "${DP_DEMO}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^serve_demo_dp: serve_demo on data-parallel ranks.*Usage: serve_demo_dp")
    message(FATAL_ERROR "serve_demo_dp ${args}: exit ${rc}:\n${out}${err}")
  endif()
endforeach()
