# Runs serve_demo with bad flags and checks the contract: exit status 2, nothing on stdout,
# exactly one line on stderr, naming the flag. With -DCUDA=ON, the cases of the CUDA backend
# (a build with it: the cuda-sim step) instead. Called by CTest:
#   cmake -DDEMO=path/to/serve_demo [-DCUDA=ON] -P check_flags.cmake
if(NOT DEMO)
  message(FATAL_ERROR "check_flags.cmake: pass -DDEMO=<serve_demo>")
endif()

# Each case: the flag the error must name, "|", then the arguments separated by commas.
set(cases
  "--capture-timing|--capture-timing,eventually"
  "--capture-order|--capture-order,random"
  "--allocator|--allocator,buddy"
  "--ladder|--ladder,fibonacci"
  "--kv-blocks|--kv-blocks,0"
  "--kv-blocks|--kv-blocks,3"
  "--memory|--memory,1MiB"
  "--memory|--memory,4KB"
  "--backend|--backend,tpu"
  "--unknown|--unknown"
  "--chats|--chats"
  # flags that would do nothing in the chosen configuration
  "--eager-uses|--eager-uses,2"
  "--largest-at-startup|--largest-at-startup,--capture-timing,lazy"
  "--bucket-file|--bucket-file,buckets.txt"
  "--rungs|--rungs,8"
  "--ladder explicit|--ladder,explicit"
  "--dispatch|--dispatch,--ladder,gaudi-linear"
  "--dispatch|--dispatch,--backend,host"
  "--decode-kernel|--decode-kernel,fast"
  "--decode-kernel applies to --dispatch runs only|--decode-kernel,simt"
  "--decode-kernel needs --backend cuda|--decode-kernel,tensor-cores,--dispatch,--ladder,vllm,--backend,host"
  "--prefill-kernel|--prefill-kernel,fast"
  "--prefill-kernel applies to --dispatch runs only|--prefill-kernel,simt"
  "--prefill-kernel needs --backend cuda|--prefill-kernel,tensor-cores,--dispatch,--ladder,vllm,--backend,host"
  "--kv-cache-dtype|--kv-cache-dtype,int8"
  "--kv-cache-dtype|--kv-cache-dtype,FP8"
  "--max-capture-size applies to --ladder vllm, sglang and trtllm only|--max-capture-size,64,--ladder,explicit,--rungs,8"
  "--max-capture-size applies to --ladder vllm, sglang and trtllm only|--max-capture-size,64,--ladder,gaudi-exponential"
  "the default gaudi-linear|--max-capture-size,64,--backend,host"
  # values that would wrap
  "--seed|--seed,-1"
  # a trace row longer than any max_model_len: refused before its prompt is built (8 GiB)
  "longer than any --max-model-len (at most 2147483520)|--trace,${CMAKE_CURRENT_BINARY_DIR}/huge_prompt.csv")
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/huge_prompt.csv" "arrival,prompt_tokens,output_tokens\n0,2147483647,1\n")
if(CUDA)
  set(cases
    "--kv-cache-dtype = fp16 is not supported by the cuda backend|--backend,cuda,--kv-cache-dtype,fp16"
    "--kv-cache-dtype = fp32 is not supported by the cuda backend|--backend,cuda,--kv-cache-dtype,fp32"
    # a hybrid model on the CUDA backend: windows, not chunks; at most 4 layers in the cuda-sim model
    "the cuda model's attention has sliding windows, not chunked local attention|--backend,cuda,--layers,chunked32:1"
    "--layers: the pattern has 5 layers|--backend,cuda,--layers,5")
endif()

foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(POP_FRONT parts flag)
  string(REPLACE "," ";" parts "${parts}")
  execute_process(COMMAND "${DEMO}" ${parts}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(STRIP "${err}" err_line)
  string(FIND "${err_line}" "\n" newline)
  string(FIND "${err_line}" "${flag}" named)
  if(NOT rc EQUAL 2 OR NOT out STREQUAL "" OR NOT newline EQUAL -1 OR named EQUAL -1
     OR NOT err_line MATCHES "^serve_demo: error: ")
    message(FATAL_ERROR "serve_demo ${parts}: expected exit status 2 and one line naming ${flag} on stderr; "
                        "got status ${rc}, stdout '${out}', stderr '${err}'")
  endif()
  message(STATUS "ok: serve_demo ${parts} -> ${err_line}")
endforeach()
