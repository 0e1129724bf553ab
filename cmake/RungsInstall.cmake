# Install and export rules: a relocatable package config in share/cmake/rungs with a
# version file. The host, CUDA and MPI targets are exported separately, so that
# find_package(rungs) never touches CUDA or MPI unless the component is asked for.
include(CMakePackageConfigHelpers)

set(RUNGS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/rungs" CACHE STRING
    "Where rungs' CMake package files are installed")

install(DIRECTORY include/rungs DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp")
# Device code (.cuh) installs into the same include tree; only rungs::cuda users reach it.
install(DIRECTORY kernels/rungs DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.cuh")
# Host code over the CUDA runtime (.hpp that include cuda_runtime.h) gets its own root,
# include/rungs-cuda, so every .hpp under include/rungs stays free of CUDA; only
# rungs::cuda_runtime (and rungs::cuda, which links it) users reach it.
install(DIRECTORY cuda/rungs DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/rungs-cuda"
        FILES_MATCHING PATTERN "*.hpp")
# Rank agreement over MPI likewise in its own root, include/rungs-mpi (rungs::mpi only).
install(DIRECTORY mpi/rungs DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/rungs-mpi" FILES_MATCHING PATTERN "*.hpp")

install(TARGETS rungs EXPORT rungsTargets)
install(EXPORT rungsTargets NAMESPACE rungs:: DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")
# The CUDA target is exported whether or not this machine has a toolkit: it names only
# imported targets (CCCL::CCCL, CUDA::cudart) that the config file finds on request.
if(NOT TARGET rungs_cuda)
  add_library(rungs_cuda_runtime INTERFACE)
  set_target_properties(rungs_cuda_runtime PROPERTIES EXPORT_NAME cuda_runtime)
  target_include_directories(rungs_cuda_runtime INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/rungs-cuda>)
  target_link_libraries(rungs_cuda_runtime INTERFACE rungs::rungs CUDA::cudart)
  add_library(rungs_cuda INTERFACE)
  set_target_properties(rungs_cuda PROPERTIES EXPORT_NAME cuda)
  target_include_directories(rungs_cuda INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(rungs_cuda INTERFACE rungs_cuda_runtime CCCL::CCCL)
endif()
install(TARGETS rungs_cuda_runtime rungs_cuda EXPORT rungsCudaTargets)
install(EXPORT rungsCudaTargets NAMESPACE rungs:: DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")
# The MPI target likewise, whether or not this machine has MPI (it names MPI::MPI_CXX).
if(NOT TARGET rungs_mpi)
  add_library(rungs_mpi INTERFACE)
  set_target_properties(rungs_mpi PROPERTIES EXPORT_NAME mpi)
  target_include_directories(rungs_mpi INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/rungs-mpi>)
  target_link_libraries(rungs_mpi INTERFACE rungs::rungs MPI::MPI_CXX)
endif()
install(TARGETS rungs_mpi EXPORT rungsMpiTargets)
install(EXPORT rungsMpiTargets NAMESPACE rungs:: DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")

# The CPU device (component 'sim'): the PTX executor and the CUDA runtime over it, built where
# CUDA's headers were found. Its headers get their own root, include/rungs-sim. `cmake --install`
# never builds: when the libraries were not built first the install says so, and
# find_package(rungs COMPONENTS sim) names the target to build (the config checks the file).
set(RUNGS_SIM_LIBRARY "")
if(TARGET rungs_sim_cudart)
  install(DIRECTORY sim/include/rungs_sim DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/rungs-sim"
          FILES_MATCHING PATTERN "*.hpp")
  install(TARGETS rungs_sim_executor rungs_sim_cudart EXPORT rungsSimTargets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" OPTIONAL)
  install(EXPORT rungsSimTargets NAMESPACE rungs:: DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")
  install(CODE "if(NOT EXISTS \"$<TARGET_FILE:rungs_sim_cudart>\")
  message(STATUS \"rungs' CPU device (component sim) was not built, so not installed: build it with 'cmake --build ${CMAKE_BINARY_DIR} --target rungs_sim_cudart', then install again\")
endif()")
  set(RUNGS_SIM_LIBRARY
      "${CMAKE_INSTALL_LIBDIR}/${CMAKE_STATIC_LIBRARY_PREFIX}rungs_sim_cudart${CMAKE_STATIC_LIBRARY_SUFFIX}")
endif()

configure_package_config_file(cmake/rungsConfig.cmake.in
  "${PROJECT_BINARY_DIR}/rungsConfig.cmake"
  INSTALL_DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/rungsConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/rungsConfig.cmake"
              "${PROJECT_BINARY_DIR}/rungsConfigVersion.cmake"
        DESTINATION "${RUNGS_INSTALL_CMAKEDIR}")
install(FILES LICENSE DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/rungs")
