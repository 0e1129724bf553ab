# Fails at configure time, with what to install, when the C++ compiler cannot build rungs.
# rungs needs C++20 concepts and class-type non-type template parameters (P0732, P1907).
function(rungs_check_compiler)
  set(id "${CMAKE_CXX_COMPILER_ID}")
  set(ver "${CMAKE_CXX_COMPILER_VERSION}")
  set(need "")
  if(id STREQUAL "GNU" AND ver VERSION_LESS 11)
    set(need "GCC 11")
  elseif(id STREQUAL "Clang" AND ver VERSION_LESS 14)
    set(need "Clang 14")
  elseif(id STREQUAL "AppleClang" AND ver VERSION_LESS 14)
    set(need "AppleClang 14")
  elseif(id STREQUAL "MSVC" AND ver VERSION_LESS 19.30)
    set(need "MSVC 19.30 (Visual Studio 2022)")
  endif()
  if(need)
    message(FATAL_ERROR
      "rungs needs a C++20 compiler with concepts and class-type template parameters: "
      "${need} or newer. Found ${id} ${ver} (${CMAKE_CXX_COMPILER}). "
      "On Debian/Ubuntu: 'apt-get install g++-12' and configure with -DCMAKE_CXX_COMPILER=g++-12.")
  endif()
endfunction()
