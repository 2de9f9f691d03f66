# `cmake --install`: the public headers, the library (static, or shared with BUILD_SHARED_LIBS=ON),
# the CMake package (find_package(vkflash) -> vkflash::vkflash), the pkg-config file (vkflash.pc)
# and, where built, the vkflash CLI. tests/consumers/ builds small programs against the result.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkflash DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS vkflash_lib EXPORT vkflashTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(VKFLASH_BUILD_CLI)
  install(TARGETS vkflash RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(vkflash_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/vkflash)
install(EXPORT vkflashTargets NAMESPACE vkflash:: DESTINATION ${vkflash_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/vkflashConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/vkflashConfig.cmake INSTALL_DESTINATION ${vkflash_cmake_dir})
# 0.x: a new minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkflashConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkflashConfig.cmake ${PROJECT_BINARY_DIR}/vkflashConfigVersion.cmake
        DESTINATION ${vkflash_cmake_dir})

# pkg-config: a static libvkflash needs the C++ runtime and libm where a C program links it
# (`pkg-config --static`); the shared one carries them itself.
file(RELATIVE_PATH vkflash_pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" vkflash_pc_to_prefix "${vkflash_pc_to_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/vkflash.pc.in ${PROJECT_BINARY_DIR}/vkflash.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vkflash.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
