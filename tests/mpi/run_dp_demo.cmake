# The serving demo on data-parallel ranks (serve_demo_dp under mpirun) against one rank
# (serve_demo) on the same flags: the token digest over every request must be equal, every
# rank must verify its chats against the plain loop, and the report must show each rank and
# the total, with dummy steps where a rank ran out of work before the others.
#   cmake -DMPIEXEC=<mpirun;flags;-np;N> -DRANKS=N -DDP_DEMO=... -DDEMO=... -DARGS=<;-separated flags> -P run_dp_demo.cmake
execute_process(COMMAND "${DEMO}" --clock virtual ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE one ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT one MATCHES "tokens out   digest ([0-9a-f]+)")
  message(FATAL_ERROR "serve_demo ${ARGS} exited ${rc} or printed no digest:\n${one}\n${err}")
endif()
set(digest "${CMAKE_MATCH_1}")
execute_process(COMMAND ${MPIEXEC} "${DP_DEMO}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "serve_demo_dp on ${RANKS} ranks exited ${rc}")
endif()
if(NOT out MATCHES "tokens out   digest ${digest} ")
  message(FATAL_ERROR "the ranks' tokens differ from one rank's: its digest is ${digest}")
endif()
# A report line per rank, each rank's plain-loop check, the total, the data-parallel line.
math(EXPR last "${RANKS} - 1")
set(wanted "\n +total +${REQUESTS} " "Data parallel: ${RANKS} ranks \\(MPI\\)")
foreach(r RANGE ${last})
  list(APPEND wanted "\n +${r} +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+% +[0-9]+ " "rank ${r}: verified ")
endforeach()
foreach(want IN LISTS wanted)
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "serve_demo_dp's output on ${RANKS} ranks lacks /${want}/")
  endif()
endforeach()
message(STATUS "${RANKS} ranks: digest ${digest}, as one rank")
