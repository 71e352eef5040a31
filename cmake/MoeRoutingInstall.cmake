# Install the headers and export moe_routing::moe_routing, moe_routing::cpu and moe_routing::cuda for
# find_package(moe_routing CONFIG).
include(CMakePackageConfigHelpers)

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY backends/cpu/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY backends/cuda/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS moe_routing moe_routing_cpu moe_routing_cuda EXPORT moe_routing_targets)
install(EXPORT moe_routing_targets NAMESPACE moe_routing:: FILE moe_routing-targets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_routing)
export(EXPORT moe_routing_targets NAMESPACE moe_routing::
       FILE ${CMAKE_CURRENT_BINARY_DIR}/moe_routing-targets.cmake)

configure_package_config_file(cmake/moe_routing-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/moe_routing-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_routing)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/moe_routing-config-version.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/moe_routing-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/moe_routing-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_routing)
install(FILES LICENSE CHANGELOG.md README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
