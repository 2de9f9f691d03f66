// Compile-time check, no code: the C header's public names (VKF_*, Vkf*) do not collide with the
// engine's and the shaders' internal VKF_* macros. A macro named like one of the header's enum
// values or macros would rewrite or redefine it here and fail the build.
#include "common/shader_interface.h"
#include "common/shared_memory_sizes.h"
#include "c_api/c_api_versioned.h"
#include "util/status_macros.h"
#include "util/vk_check.h"

#include <vkflash/vkflash.h>
