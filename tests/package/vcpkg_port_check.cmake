# Validates ports/rungs the way vcpkg builds it, without vcpkg (which cannot be installed
# offline): configure with the flags vcpkg_cmake_configure passes and the options the
# portfile sets, install into a staging prefix, then check what vcpkg's post-build checks
# check: only include/ and share/ installed, no absolute paths in the installed CMake files,
# the usage file present, and a consumer that builds against the staged package.
#
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... -DGENERATOR=... -P vcpkg_port_check.cmake
cmake_minimum_required(VERSION 3.25)
set(build "${WORK_DIR}/build")
set(stage "${WORK_DIR}/packages/rungs_x64-linux")
file(REMOVE_RECURSE "${WORK_DIR}")

# The options the portfile passes (kept in step by reading them from the portfile itself).
file(READ "${SOURCE_DIR}/ports/rungs/portfile.cmake" portfile)
string(REGEX MATCH "OPTIONS([^)]*)" _ "${portfile}")
string(REGEX MATCHALL "-D[A-Za-z0-9_]+=[^ \t\r\n)]+" port_options "${CMAKE_MATCH_1}")
if(NOT port_options)
  message(FATAL_ERROR "could not read the OPTIONS of ports/rungs/portfile.cmake")
endif()
message(STATUS "portfile options: ${port_options}")

# vcpkg_cmake_configure's own flags.
set(vcpkg_flags
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_BINDIR=bin
  -DFETCHCONTENT_FULLY_DISCONNECTED=ON -DCMAKE_EXPORT_NO_PACKAGE_REGISTRY=ON
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON
  -DCMAKE_INSTALL_SYSTEM_RUNTIME_LIBS_SKIP=TRUE -DCMAKE_VERBOSE_MAKEFILE=ON
  -DCMAKE_ERROR_ON_ABSOLUTE_INSTALL_DESTINATION=ON "-DCMAKE_INSTALL_PREFIX=${stage}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()

run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${vcpkg_flags} ${port_options})
run(${CMAKE_COMMAND} --build "${build}")
run(${CMAKE_COMMAND} --install "${build}")

# The portfile installs the config straight into share/rungs, where vcpkg wants it, so
# vcpkg_cmake_config_fixup has no path to rewrite; check that it is there.
if(NOT EXISTS "${stage}/share/rungs/rungsConfig.cmake")
  message(FATAL_ERROR "the port must install rungsConfig.cmake into share/rungs")
endif()
# vcpkg deletes share/doc-style leftovers the portfile removes; do the same.
file(REMOVE_RECURSE "${stage}/share/doc")
file(INSTALL "${SOURCE_DIR}/ports/rungs/usage" DESTINATION "${stage}/share/rungs")
file(INSTALL "${SOURCE_DIR}/LICENSE" DESTINATION "${stage}/share/rungs" RENAME copyright)

# Only include/ and share/ for a header-only port.
file(GLOB top RELATIVE "${stage}" "${stage}/*")
foreach(entry IN LISTS top)
  if(NOT entry MATCHES "^(include|share)$")
    message(FATAL_ERROR "the port installs '${entry}/': a header-only port installs only include/ and share/")
  endif()
endforeach()
if(NOT EXISTS "${stage}/include/rungs/version.hpp")
  message(FATAL_ERROR "the port did not install the headers")
endif()

# No absolute paths in the installed CMake files (they must be relocatable).
file(GLOB_RECURSE cmake_files "${stage}/share/*.cmake")
foreach(f IN LISTS cmake_files)
  file(READ "${f}" text)
  foreach(abs "${stage}" "${SOURCE_DIR}" "${build}")
    string(FIND "${text}" "${abs}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} contains the absolute path ${abs}")
    endif()
  endforeach()
endforeach()

# Move the staged package (relocation) and build a consumer against it.
set(moved "${WORK_DIR}/installed/x64-linux")
file(COPY "${stage}/" DESTINATION "${moved}")
file(REMOVE_RECURSE "${stage}")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/package/host_consumer" -B "${WORK_DIR}/consumer"
    -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${moved}"
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DRUNGS_CONSUMER_EXPECT_NO_CUDA=ON)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/consumer")
message(STATUS "vcpkg port validated: include/ and share/ only, relocatable, consumer built")
