# The seeded device-fault campaign on the CUDA demo (docs/engine.md, "Device faults"):
#   cmake -DDEMO=<serve_demo> -DARGS=a;b;c -DFIRST=<seed> -DCOUNT=<n> -DRATE=<p> -DCALLS=<list> -P check_faults.cmake
# Runs the demo once clean, then under COUNT seeded fault schedules (RUNGS_SIM_FAULT_SEED =
# FIRST..FIRST+COUNT-1, RUNGS_SIM_FAULT_RATE, RUNGS_SIM_FAULT_CALLS). Each faulted run must
# either exit 0 with the clean run's token digest, or exit 1 with the engine's documented
# fatal message. Prints one line per schedule and a summary.
#   cmake -DDEMO=<serve_demo> -DARGS=a;b;c -DFAULTS=<RUNGS_SIM_FAULTS value> -P check_faults.cmake
# Runs the demo once under that fixed schedule, which must stop it with the fatal message.
set(fatal_message "serve_demo: failed: engine: step [0-9]+ failed on the device \\([^\n]*\\); fatal: the device cannot continue; requests in flight, requeued:( [0-9]+)+")
if(DEFINED FAULTS)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "RUNGS_SIM_FAULTS=${FAULTS}" "${DEMO}" ${ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "${fatal_message}")
    message(FATAL_ERROR "RUNGS_SIM_FAULTS=${FAULTS}: exit ${rc}, not the documented fatal stop:\n${out}\n${err}")
  endif()
  string(REGEX MATCH "${fatal_message}" line "${err}")
  message(STATUS "RUNGS_SIM_FAULTS=${FAULTS}: ${line}")
  return()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/demo_digest.cmake")
run_demo_for_digest(clean clean_out COMMAND "${DEMO}" ${ARGS})
math(EXPR last "${FIRST} + ${COUNT} - 1")
set(finished 0)
set(stopped 0)
set(faulted 0)
foreach(seed RANGE ${FIRST} ${last})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env RUNGS_SIM_FAULT_SEED=${seed} RUNGS_SIM_FAULT_RATE=${RATE}
                          "RUNGS_SIM_FAULT_CALLS=${CALLS}" "${DEMO}" ${ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCHALL "rungs-sim: injected fault: [^\n]*" injected "${err}")
  list(LENGTH injected n)
  if(n GREATER 0)
    math(EXPR faulted "${faulted} + 1")
  endif()
  if(rc EQUAL 0 AND out MATCHES "tokens out   digest ([0-9a-f]+)")
    if(NOT CMAKE_MATCH_1 STREQUAL clean)
      message(FATAL_ERROR "schedule ${seed}: ${n} faults, digest ${CMAKE_MATCH_1} != the clean run's ${clean}:\n${err}")
    endif()
    math(EXPR finished "${finished} + 1")
    message(STATUS "schedule ${seed}: ${n} faults; finished, digest ${clean}")
  elseif(rc EQUAL 1 AND err MATCHES "${fatal_message}")
    math(EXPR stopped "${stopped} + 1")
    message(STATUS "schedule ${seed}: ${n} faults; stopped on a fatal fault")
  else()
    message(FATAL_ERROR "schedule ${seed}: ${n} faults; exit ${rc}, neither the clean digest nor the documented fatal stop:\n${out}\n${err}")
  endif()
endforeach()
if(faulted EQUAL 0)
  message(FATAL_ERROR "no schedule injected a fault: the campaign tested nothing (raise RATE)")
endif()
message(STATUS "fault campaign: ${COUNT} schedules (${faulted} with faults): ${finished} finished with digest ${clean}, ${stopped} stopped on a fatal fault")
