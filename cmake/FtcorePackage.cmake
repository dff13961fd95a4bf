# The installed CMake package: find_package(ftcore) gives ftcore::sdk,
# ftcore::core and ftcore_add_plugin(), and finds the same libtorch.
include(CMakePackageConfigHelpers)
install(EXPORT ftcoreTargets NAMESPACE ftcore:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftcore)
configure_package_config_file(
  "${CMAKE_SOURCE_DIR}/sdk/cmake/ftcoreConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/ftcoreConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftcore
  PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file("${CMAKE_BINARY_DIR}/ftcoreConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/ftcoreConfig.cmake" "${CMAKE_BINARY_DIR}/ftcoreConfigVersion.cmake"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftcore)
