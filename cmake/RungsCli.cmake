# rungs_cli_target(): the INTERFACE target `rungs_cli` of the command-line conventions shared by
# rungs-plan and the serving demo (tools/cli: CLI11 for arguments, nlohmann/json for output).
# Tools and examples only; the library itself needs neither. Defined once, by whichever of
# tools/, examples/ and tests/ comes first.
function(rungs_cli_target)
  if(TARGET rungs_cli)
    return()
  endif()
  find_package(CLI11 2.1 CONFIG QUIET)
  find_package(nlohmann_json 3.10 CONFIG QUIET)
  if(NOT CLI11_FOUND OR NOT nlohmann_json_FOUND)
    message(FATAL_ERROR
      "rungs-plan and the serving demo need CLI11 (2.1 or later) and nlohmann/json (3.10 or later); "
      "on Debian or Ubuntu: apt-get install libcli11-dev nlohmann-json3-dev (scripts/deps installs them). "
      "Or build the library alone: -DRUNGS_BUILD_TOOLS=OFF -DRUNGS_BUILD_EXAMPLES=OFF -DRUNGS_BUILD_TESTS=OFF.")
  endif()
  add_library(rungs_cli INTERFACE)
  target_include_directories(rungs_cli INTERFACE "${PROJECT_SOURCE_DIR}/tools/cli")
  target_link_libraries(rungs_cli INTERFACE CLI11::CLI11 nlohmann_json::nlohmann_json)
endfunction()
