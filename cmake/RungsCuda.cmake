# CUDA discovery for rungs. The library targets never need the CUDA *language*; only
# rungs' own .cu tests, examples and benchmarks do.

# Finds the CUDA toolkit and CCCL (CUB, Thrust, libcu++). CUDA 13 keeps CCCL under
# include/cccl, so CUDA::cudart alone does not reach <cuda/std/...>: CCCL::CCCL does.
function(rungs_find_cuda_toolkit out_var)
  set(${out_var} OFF PARENT_SCOPE)
  if(RUNGS_ENABLE_CUDA STREQUAL "OFF")
    return()
  endif()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    if(RUNGS_ENABLE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "RUNGS_ENABLE_CUDA=ON but no CUDA toolkit was found. Install the "
        "CUDA Toolkit (12.4+; nvcc and the cudart library) and point CUDAToolkit_ROOT at it, "
        "or configure with -DRUNGS_ENABLE_CUDA=OFF.")
    endif()
    return()
  endif()
  if(NOT TARGET CCCL::CCCL)
    find_package(CCCL CONFIG QUIET
      HINTS "${CUDAToolkit_LIBRARY_DIR}/cmake/cccl" "${CUDAToolkit_LIBRARY_ROOT}/lib64/cmake/cccl")
  endif()
  if(NOT TARGET CCCL::CCCL)
    if(RUNGS_ENABLE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "The CUDA toolkit at ${CUDAToolkit_LIBRARY_ROOT} has no CCCL CMake "
        "package (lib64/cmake/cccl). Install a toolkit that ships CCCL (CUDA 12.4+) or set CCCL_DIR.")
    endif()
    return()
  endif()
  set(RUNGS_CUDAToolkit_VERSION "${CUDAToolkit_VERSION}" PARENT_SCOPE)
  set(${out_var} ON PARENT_SCOPE)
endfunction()

# Decides whether rungs' own targets can use the CUDA language (toolkit and nvcc
# present, architectures named). The caller enables the language at file scope, as
# enable_language() requires.
function(rungs_cuda_language_available out_var)
  set(${out_var} OFF PARENT_SCOPE)
  if(RUNGS_ENABLE_CUDA STREQUAL "OFF" OR NOT RUNGS_HAVE_CUDA_TOOLKIT)
    return()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    if(RUNGS_ENABLE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "RUNGS_ENABLE_CUDA=ON but CMake found no CUDA compiler (nvcc). "
        "Put nvcc on PATH or set CMAKE_CUDA_COMPILER.")
    endif()
    return()
  endif()
  if(RUNGS_CUDA_ARCHITECTURES MATCHES "native|all")
    message(FATAL_ERROR "RUNGS_CUDA_ARCHITECTURES='${RUNGS_CUDA_ARCHITECTURES}': name the "
      "architectures explicitly (e.g. 80;90); 'native' fails on machines without a GPU.")
  endif()
  set(${out_var} ON PARENT_SCOPE)
endfunction()

# Properties every rungs-owned CUDA target gets. CMake 3.25 has no cuda_std_20, so
# C++20 is requested with -std=c++20 for the CUDA language.
#
# RUNGS_CUDA_RESOURCE_CHECKS (default ON) turns ptxas's spill and local-memory warnings into
# errors: a kernel that spills (or indexes a register array dynamically) fails the build on
# every architecture named, so a register-pressure regression shows in CI, which has no GPU.
# (Not under RUNGS_CUDA_SIM: a PTX-only build never runs ptxas.)
# It applies to rungs' own targets only; consumers' flags are untouched.
set(RUNGS_PTXAS_RESOURCE_FLAGS "-warn-spills,-warn-lmem-usage,-Werror")
function(rungs_cuda_target target)
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${RUNGS_CUDA_ARCHITECTURES}")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr -Xcompiler=-Wall>)
  if(RUNGS_CUDA_SIM)
    # The host runtime reads the PTX out of the fatbinary, which nvcc 13 compresses by default.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--compress-mode=none>)
  endif()
  if(RUNGS_CUDA_RESOURCE_CHECKS AND NOT RUNGS_CUDA_SIM)
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=${RUNGS_PTXAS_RESOURCE_FLAGS}>")
  endif()
  target_link_libraries(${target} PRIVATE rungs::cuda)
endfunction()
