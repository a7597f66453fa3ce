// The library's version (semantic versioning; docs/install.md#versions), written here only:
// CMakeLists.txt reads these three numbers into project(), from which `bitgrad --version`, the
// shared library's SONAME, the CMake and pkg-config files, the man pages and the Debian package
// take it. A plain header in include/ rather than one generated into the build tree, so that
// every user of the library, from the build tree, as a subproject or installed, needs one
// include path. Included by <bitgrad/version.hpp>.
#pragma once

#define BITGRAD_VERSION_MAJOR 0
#define BITGRAD_VERSION_MINOR 2
#define BITGRAD_VERSION_PATCH 0

#define BITGRAD_VERSION_TEXT_(x) #x
#define BITGRAD_VERSION_TEXT(x) BITGRAD_VERSION_TEXT_(x)
#define BITGRAD_VERSION_STRING \
  BITGRAD_VERSION_TEXT(BITGRAD_VERSION_MAJOR) "." BITGRAD_VERSION_TEXT(BITGRAD_VERSION_MINOR) "." BITGRAD_VERSION_TEXT(BITGRAD_VERSION_PATCH)
