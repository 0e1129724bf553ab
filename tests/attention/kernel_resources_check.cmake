# Runs scripts/kernel-resources on recorded ptxas logs (fixtures/) and checks its table and
# exit status: no nvcc needed.
#   cmake -DPYTHON=python3 -DSCRIPT=.../kernel-resources -DFIXTURES=.../fixtures -P kernel_resources_check.cmake
function(run log expect_rc)
  execute_process(COMMAND "${PYTHON}" "${SCRIPT}" --log "${FIXTURES}/${log}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${log}: exit ${rc}, expected ${expect_rc}:\n${out}${err}")
  endif()
  foreach(pattern IN LISTS ARGN)
    if(NOT out MATCHES "${pattern}")
      message(FATAL_ERROR "${log}: the report lacks '${pattern}':\n${out}")
    endif()
  endforeach()
endfunction()

# sm_90: 128 registers x 4 warps and 48 KiB + 1 KiB reserved of 228 KiB both allow exactly 4
# CTAs; 249 registers (256 per thread allocated) allow 2; the merge kernel (32 registers, 128
# threads) is held to 16 by both registers and threads.
run(resource_usage_sm90.log 0
    "H100/H200 \\(sm_90\\)"
    "decode g4 +128 / 48 / 4 \\(regs\\+smem\\)"
    "decode g8 +249 / 48 / 2 \\(regs\\)"
    "merge +32 / 0 / 16 \\(regs\\+threads\\)"
    "3 kernel compilations .*spills or local memory: none")
# A spill is reported by name and fails the run.
run(resource_usage_spill.log 1
    "A100 \\(sm_80\\)"
    "decode g4 +255 / 48 / 2 \\(regs\\)"
    "paged_attention_kernel<__nv_bfloat16, 128, 0, 4, 1, true>.*sm_80.*16 B stack, 12 B spill stores, 12 B spill loads")
