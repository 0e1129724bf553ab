# cmake -DCOMPILER=... -DINCLUDE=... -DSOURCE=... -DEXPECT="a;b" -P expect_error.cmake
# Passes when compiling SOURCE fails and the diagnostics contain every string in EXPECT.
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE} ${SOURCE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
foreach(s IN LISTS EXPECT)
  string(FIND "${out}${err}" "${s}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the diagnostics of ${SOURCE} lack '${s}':\n${err}")
  endif()
endforeach()
message(STATUS "failed to compile as expected, naming: ${EXPECT}")
