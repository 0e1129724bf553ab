# The README's CMake install line, exactly as written, on a copy of the source tree: it must
# succeed, install the headers and the CMake package, and say that rungs-plan was not built
# (cmake --install never builds; docs/packaging.md).
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -P readme_install.cmake
cmake_minimum_required(VERSION 3.25)
file(STRINGS "${SOURCE_DIR}/README.md" lines REGEX "^- CMake: `cmake -S [^`]*cmake --install[^`]*`")
list(LENGTH lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "README.md: expected one '- CMake: `cmake -S ... cmake --install ...`' line, found ${n}")
endif()
string(REGEX REPLACE "^- CMake: `([^`]*)`.*" "\\1" line "${lines}")
set(src "${WORK_DIR}/rungs")
set(prefix "${WORK_DIR}/prefix")
string(REPLACE "PREFIX" "${prefix}" command "${line}")
message(STATUS "README: ${line}")

# A fresh copy without build trees (the line configures into ./build).
file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${SOURCE_DIR}/" DESTINATION "${src}"
     PATTERN ".git" EXCLUDE PATTERN "build" EXCLUDE PATTERN ".gpu-deps" EXCLUDE)
get_filename_component(cmake_dir "${CMAKE_COMMAND}" DIRECTORY)
execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PATH=${cmake_dir}:$ENV{PATH}" sh -c "${command}"
                WORKING_DIRECTORY "${src}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README's install line failed (${rc}):\n${out}")
endif()
foreach(f include/rungs/version.hpp include/rungs/ladder.hpp share/cmake/rungs/rungsConfig.cmake
          share/cmake/rungs/rungsConfigVersion.cmake)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the README's install line did not install ${f}:\n${out}")
  endif()
endforeach()
if(EXISTS "${prefix}/bin/rungs-plan" OR NOT out MATCHES "rungs-plan was not built, so not installed")
  message(FATAL_ERROR "without a build, rungs-plan must be left out, saying so:\n${out}")
endif()
message(STATUS "ok: headers and CMake package in ${prefix}; rungs-plan left out, as the install said")
