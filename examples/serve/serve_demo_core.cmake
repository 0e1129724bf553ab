# serve_demo_core(): the object library of the demo's host-side run (run.cpp), defined once
# whichever of tests/serve and examples/serve comes first.
function(serve_demo_core)
  if(TARGET serve_demo_core)
    return()
  endif()
  rungs_cli_target()  # options.hpp parses the flags with CLI11
  set(dir "${PROJECT_SOURCE_DIR}/examples/serve")
  add_library(serve_demo_core OBJECT "${dir}/run.cpp")
  target_include_directories(serve_demo_core PUBLIC "${dir}")
  target_link_libraries(serve_demo_core PUBLIC rungs::rungs rungs_cli)
  target_compile_options(serve_demo_core PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
endfunction()
