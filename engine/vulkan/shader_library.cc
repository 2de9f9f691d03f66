#include "vulkan/shader_library.h"

namespace vkflash::vk {

const ShaderBlob* FindShader(std::string_view name) {
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i)
    if (name == kEmbeddedShaders[i].name) return &kEmbeddedShaders[i];
  return nullptr;
}

}  // namespace vkflash::vk
