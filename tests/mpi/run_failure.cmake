# Runs PROGRAM MODE under MPIEXEC (a list) and checks how the job ends:
#   cmake -DMPIEXEC=... -DPROGRAM=... -DMODE=finalize|stall|crash|none -DEXPECT=REGEX -P run_failure.cmake
# MODE none must exit 0; every other mode must fail (non-zero) with EXPECT in its output.
execute_process(COMMAND ${MPIEXEC} "${PROGRAM}" "${MODE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(MODE STREQUAL "none")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mode none: mpirun exited with ${rc}, expected 0")
  endif()
elseif(rc EQUAL 0)
  message(FATAL_ERROR "mode ${MODE}: the job exited 0; a failed rank must fail it")
endif()
if(NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "mode ${MODE}: the output lacks '${EXPECT}'")
endif()
