# Installs a build tree into a fresh staging prefix: cmake -DBUILD_DIR= -DSTAGE= -P ...
file(REMOVE_RECURSE "${STAGE}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${STAGE}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install into ${STAGE} failed (${rc})")
endif()
