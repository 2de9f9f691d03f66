/* vkflash's version (C and C++). The build reads the version from these three lines: keep their form. */
#define VKFLASH_VERSION_MAJOR 0
#define VKFLASH_VERSION_MINOR 1
#define VKFLASH_VERSION_PATCH 0
