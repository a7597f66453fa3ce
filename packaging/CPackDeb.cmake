# The Debian package, `make package` (docs/install.md#the-debian-package): CPack's DEB generator
# packs what `cmake --install` puts under /usr from this build tree, so the package is made of
# the binaries `make test` has just tested, without a second build. dpkg-shlibdeps (dpkg-dev)
# computes the dependencies on the runtime libraries; the Python module adds python3 (the
# version it was built for) and python3-numpy.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME bitgrad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "\
bitgrad is a C++20 library and command-line tool for reverse-mode automatic
differentiation and neural-network training whose results are bitwise reproducible
by construction: the same trained weights for any number of threads, data-loader
workers, micro-batch split, MPI ranks, stop and resume, code path and build.
.
This package holds the bitgrad command (with man pages and bash completion), the
shared and static libraries with their headers, CMake package and pkg-config file,
and the Python module for python3.")
set(BITGRAD_DEB_MAINTAINER "bitgrad maintainers <maintainers@users.noreply.a-seed-e9ddab25.example>"
  CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${BITGRAD_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # bitgrad_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# a shlibs file for libbitgrad.so and the ldconfig trigger
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(_bitgrad_deb_depends "")
if(BITGRAD_PYTHON_ENABLED)
  # the extension module is built for one CPython (_bitgrad.cpython-3XY-...so)
  math(EXPR _py_next "${Python_VERSION_MINOR} + 1")
  set(_bitgrad_deb_depends
    "python3 (>= ${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}~), python3 (<< ${Python_VERSION_MAJOR}.${_py_next}), python3-numpy")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_bitgrad_deb_depends}")
# postinst: ldconfig (which CPack writes only into a postinst of its own) and the Python
# package byte-compiled (py3compile); prerm: the compiled files removed (py3clean); CPack's postrm
# runs ldconfig after removal
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/deb/postinst ${CMAKE_CURRENT_LIST_DIR}/deb/prerm)
# the examples' data, what linking libbitgrad.a needs, mpirun for data parallel
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "dataset-fashion-mnist, fortunes, cmake, pkg-config, libxxhash-dev, zlib1g-dev")
if(MPI_CXX_FOUND)
  string(APPEND CPACK_DEBIAN_PACKAGE_SUGGESTS ", libopenmpi-dev, openmpi-bin")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/CPackProject.cmake)
include(CPack)
