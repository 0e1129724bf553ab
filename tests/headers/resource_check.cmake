# Checks that the ptxas flags of RUNGS_CUDA_RESOURCE_CHECKS still reject local memory and
# spills, and accept a clean kernel (resource_check_probe.cu says how).
#   cmake -DNVCC=... -DSOURCE=... -DARCHS="80;90" -DFLAGS=... -DWORK=... -P resource_check.cmake
foreach(v NVCC SOURCE ARCHS FLAGS WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "resource_check.cmake: -D${v}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK}")
set(arch_flags "")
foreach(a IN LISTS ARCHS)
  list(APPEND arch_flags "--generate-code=arch=compute_${a},code=sm_${a}")
endforeach()

function(probe n expect_ok expect_text)
  execute_process(
    COMMAND "${NVCC}" -c "${SOURCE}" -DPROBE=${n} ${arch_flags} "-Xptxas=${FLAGS}" -o "${WORK}/probe${n}.o"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND NOT rc EQUAL 0)
    message(FATAL_ERROR "PROBE=${n}: a kernel without local memory or spills was rejected (exit ${rc}):\n${out}${err}")
  endif()
  if(NOT expect_ok)
    if(rc EQUAL 0)
      message(FATAL_ERROR "PROBE=${n}: ptxas accepted a kernel with ${expect_text}; "
                          "-Xptxas=${FLAGS} no longer catches it")
    endif()
    string(FIND "${out}${err}" "${expect_text}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "PROBE=${n}: rejected, but without '${expect_text}':\n${out}${err}")
    endif()
  endif()
  message(STATUS "PROBE=${n}: as expected")
endfunction()

probe(0 TRUE "")
probe(1 FALSE "Local memory used")
probe(2 FALSE "Registers are spilled")
