# --kv-cache-dtype: a run with the cache in DTYPE serves (and, on the host, verifies its tokens
# against the plain loop with the same cache type), names the type in its model line (and
# prints WANT, a regular expression, when given), and gives the token digest EXPECTED. With
# -DDIFFERS=ON, the same run with the model's own cache type must give another digest. Called by
# CTest:
#   cmake -DDEMO=path/to/serve_demo -DARGS=<;-separated demo flags> -DDTYPE=fp8 -DNAME=fp8_e4m3
#         -DEXPECTED=<digest> [-DDIFFERS=ON] [-DWANT=<regex>] -P check_kv_cache_dtype.cmake
foreach(var DEMO ARGS DTYPE NAME EXPECTED)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_kv_cache_dtype.cmake: pass -D${var}=...")
  endif()
endforeach()
include("${CMAKE_CURRENT_LIST_DIR}/demo_digest.cmake")
run_demo_for_digest(digest out COMMAND "${DEMO}" ${ARGS} --kv-cache-dtype ${DTYPE})
foreach(want "KV cache ${NAME}," ${WANT})
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "the --kv-cache-dtype ${DTYPE} run's output lacks /${want}/:\n${out}")
  endif()
endforeach()
if(NOT digest STREQUAL EXPECTED)
  message(FATAL_ERROR "--kv-cache-dtype ${DTYPE}: digest ${digest}, expected ${EXPECTED}")
endif()
if(DIFFERS)
  run_demo_for_digest(base out_base COMMAND "${DEMO}" ${ARGS})
  if(base STREQUAL digest)
    message(FATAL_ERROR "--kv-cache-dtype ${DTYPE} gives the digest of the model's own cache type, ${base}")
  endif()
  message(STATUS "--kv-cache-dtype ${DTYPE}: digest ${digest} (the model's own cache type: ${base})")
else()
  message(STATUS "--kv-cache-dtype ${DTYPE}: digest ${digest}")
endif()
