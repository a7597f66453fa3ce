# Fails the configure step when any flag that lets the compiler reorder or
# approximate floating-point arithmetic is present: bitgrad's results are a
# documented function of the inputs only because every operation is IEEE-exact.
set(_bitgrad_forbidden -ffast-math -Ofast -funsafe-math-optimizations -fassociative-math
    -freciprocal-math -ffinite-math-only -fno-signed-zeros -ffp-contract=fast -ffp-model=fast -fapprox-func
    -fno-honor-nans -fno-honor-infinities -mfpmath=387 -mdaz-ftz)

function(bitgrad_check_no_fast_math)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
  get_directory_property(_dir_opts COMPILE_OPTIONS)
  set(_all "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_bt}} ${_dir_opts} $ENV{CXXFLAGS}")
  foreach(_f IN LISTS _bitgrad_forbidden)
    string(FIND "${_all}" "${_f}" _pos)
    if(NOT _pos EQUAL -1)
      message(FATAL_ERROR
        "bitgrad: compile flag '${_f}' found in the build flags ('${_all}'). "
        "It changes floating-point results and breaks the reproducibility contract; remove it.")
    endif()
  endforeach()
endfunction()
