// What the C API's opaque handles (include/vkflash/vkflash.h: VkfContext, VkfBuffer) hold.
#pragma once

#include <vkflash/vkflash.h>
#include <vkflash/vkflash.hpp>

#include <memory>
#include <unordered_set>

struct VkfBuffer_T {
  vkflash::Buffer buffer;
};

struct VkfContext_T {
  std::unique_ptr<vkflash::Context> context;
  // The buffers it made that are still alive: vkfDestroyBuffer checks a handle against them, and
  // vkfDestroyContext frees those left before the device goes (a C caller has no destructors).
  std::unordered_set<VkfBuffer_T*> buffers;
};
