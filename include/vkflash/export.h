/* vkflash: which declarations form the library's binary interface. Every public function and
 * class of vkflash.h and the C++ headers carries VKFLASH_API; the library is built with hidden
 * visibility otherwise, so a shared build exports exactly those (and a linker version script
 * keeps the C++ runtime's template instances out). C and C++. */
#ifndef VKFLASH_EXPORT_H_
#define VKFLASH_EXPORT_H_

#if defined(_WIN32) && defined(VKFLASH_SHARED)
#if defined(VKFLASH_BUILDING_LIBRARY)
#define VKFLASH_API __declspec(dllexport)
#else
#define VKFLASH_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define VKFLASH_API __attribute__((visibility("default")))
#else
#define VKFLASH_API
#endif

/* For the library's own sources: a private part of an exported class kept out of the interface. */
#if !defined(_WIN32) && (defined(__GNUC__) || defined(__clang__))
#define VKFLASH_INTERNAL __attribute__((visibility("hidden")))
#else
#define VKFLASH_INTERNAL
#endif

#endif /* VKFLASH_EXPORT_H_ */
