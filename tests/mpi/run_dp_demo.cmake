# The serving demo on data-parallel ranks (serve_demo_dp under mpirun) against one rank
# (serve_demo) on the same flags: the token digest over every request must be equal, every
# rank must verify its chats against the plain loop, and the report must show each rank and
# the total, with dummy steps where a rank ran out of work before the others.
#   cmake -DMPIEXEC=<mpirun;flags;-np;N> -DRANKS=N -DDP_DEMO=... -DDEMO=... -DARGS=<;-separated flags> -P run_dp_demo.cmake
include("${CMAKE_CURRENT_LIST_DIR}/../../examples/serve/demo_digest.cmake")
run_demo_for_digest(digest one COMMAND "${DEMO}" --clock virtual ${ARGS})
run_demo_for_digest(digest_ranks out COMMAND ${MPIEXEC} "${DP_DEMO}" ${ARGS})
message("${out}")
if(NOT digest_ranks STREQUAL digest)
  message(FATAL_ERROR "the ranks' tokens differ from one rank's: digest ${digest_ranks} on ${RANKS} ranks, ${digest} on one")
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
