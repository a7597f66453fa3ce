# Read by cpack (CPACK_PROJECT_CONFIG_FILE): CPack's DEB generator warns that the Python
# extension module has no SONAME, which no extension module has; that warning only.
set(CMAKE_SUPPRESS_DEVELOPER_WARNINGS ON)
