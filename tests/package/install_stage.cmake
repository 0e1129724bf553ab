# Installs a build tree into a fresh staging prefix: cmake -DBUILD_DIR= -DSTAGE= [-DTOOL=rungs-plan] -P ...
# With TOOL (the build has it), the installed tool must be there and answer --help.
file(REMOVE_RECURSE "${STAGE}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${STAGE}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install into ${STAGE} failed (${rc})")
endif()
if(TOOL)
  execute_process(COMMAND "${STAGE}/bin/${TOOL}" --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the installed ${STAGE}/bin/${TOOL} --help failed (${rc}): ${err}")
  endif()
endif()
