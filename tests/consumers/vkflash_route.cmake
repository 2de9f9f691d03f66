# How the consumer project (CMakeLists.txt here) gets vkflash::vkflash: VKFLASH_CONSUME=package (find_package
# of an install) or subdirectory (add_subdirectory of VKFLASH_SOURCE_DIR, as FetchContent does).
set(VKFLASH_CONSUME package CACHE STRING "package or subdirectory")
set(VKFLASH_SOURCE_DIR "" CACHE PATH "vkflash's sources, for VKFLASH_CONSUME=subdirectory")
if(VKFLASH_CONSUME STREQUAL "package")
  find_package(vkflash 0.1 REQUIRED)
elseif(VKFLASH_CONSUME STREQUAL "subdirectory")
  add_subdirectory(${VKFLASH_SOURCE_DIR} vkflash)
else()
  message(FATAL_ERROR "VKFLASH_CONSUME must be package or subdirectory, not '${VKFLASH_CONSUME}'")
endif()
