# Fails the configure step when any flag that lets the compiler reorder or
# approximate floating-point arithmetic is present: bitgrad's results are a
# documented function of the inputs only because every operation is IEEE-exact.
set(_bitgrad_forbidden -ffast-math -Ofast -funsafe-math-optimizations -fassociative-math
    -freciprocal-math -ffinite-math-only -fno-signed-zeros -ffp-contract=fast -ffp-model=fast -fapprox-func
    -fno-honor-nans -fno-honor-infinities -mfpmath=387 -mdaz-ftz)

function(bitgrad_check_no_fast_math)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
  get_directory_property(_dir_opts COMPILE_OPTIONS)
  # CXX="g++ -ffast-math" puts the flags after the compiler's name: CMAKE_CXX_COMPILER_ARG1
  set(_all "${CMAKE_CXX_COMPILER_ARG1} ${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_bt}} ${_dir_opts} $ENV{CXXFLAGS}")
  foreach(_f IN LISTS _bitgrad_forbidden)
    string(FIND "${_all}" "${_f}" _pos)
    if(NOT _pos EQUAL -1)
      message(FATAL_ERROR
        "bitgrad: compile flag '${_f}' found in the build flags ('${_all}'). "
        "It changes floating-point results and breaks the reproducibility contract; remove it.")
    endif()
  endforeach()
endfunction()

# The flags are not the whole story (a compiler's defaults, a wrapper script, a flag this list does
# not name): cmake/fp_probe.cpp is built with the compiler command and flags the library gets and
# run, and each of its checks computes a value IEEE 754 fixes from inputs the compiler cannot see.
# A value-changing option fails the configure step, naming what changed.
function(bitgrad_probe_fp)
  if(CMAKE_CROSSCOMPILING)
    message(STATUS "bitgrad: cross-compiling: the floating-point probe is not run")
    return()
  endif()
  get_directory_property(_opts COMPILE_OPTIONS)
  set(CMAKE_TRY_COMPILE_CONFIGURATION "${CMAKE_BUILD_TYPE}")
  try_run(_run _built ${CMAKE_BINARY_DIR}/fp_probe ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/fp_probe.cpp
          COMPILE_DEFINITIONS ${_opts}
          COMPILE_OUTPUT_VARIABLE _build_out RUN_OUTPUT_VARIABLE _run_out)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
  string(REPLACE ";" " " _opts_text "${_opts}")
  set(_cmd "${CMAKE_CXX_COMPILER} ${CMAKE_CXX_COMPILER_ARG1} ${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_bt}} ${_opts_text}")
  string(REGEX REPLACE "  +" " " _cmd "${_cmd}")
  if(NOT _built)
    message(FATAL_ERROR "bitgrad: the floating-point probe (cmake/fp_probe.cpp) does not build with '${_cmd}':\n${_build_out}")
  endif()
  if(NOT _run EQUAL 0)
    string(STRIP "${_run_out}" _run_out)
    message(FATAL_ERROR "bitgrad: the compiler command '${_cmd}' changes floating-point results: ${_run_out} "
      "(cmake/fp_probe.cpp exited ${_run}). bitgrad's results are a documented function of the inputs only with IEEE "
      "arithmetic; remove the option (from CXX, CXXFLAGS or CMAKE_CXX_FLAGS).")
  endif()
endfunction()
