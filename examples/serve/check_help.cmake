# `scripts/demo --help` prints serve_demo's --help text at once: the same bytes as the program,
# without building (a `cmake` that fails comes first on PATH, so a build attempt fails the test).
#   cmake -DDEMO=path/to/serve_demo -DSOURCE_DIR=... -DWORK_DIR=... -P check_help.cmake
execute_process(COMMAND "${DEMO}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "serve_demo --help failed (${rc})")
endif()
file(WRITE "${WORK_DIR}/no-build/cmake" "#!/bin/sh\necho 'scripts/demo --help tried to build' >&2\nexit 99\n")
file(CHMOD "${WORK_DIR}/no-build/cmake" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PATH=${WORK_DIR}/no-build:$ENV{PATH}"
                        "${SOURCE_DIR}/scripts/demo" --chats 2 --help
                RESULT_VARIABLE rc OUTPUT_VARIABLE got ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT got STREQUAL expected)
  message(FATAL_ERROR "scripts/demo --help (${rc}, ${err}) differs from serve_demo --help; "
                      "update the block after '<!-- serve_demo --help -->' in docs/demo.md:\n${got}")
endif()
message(STATUS "ok: scripts/demo --help is serve_demo's --help")
