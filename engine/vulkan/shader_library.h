// The SPIR-V of every kernel variant, embedded at build time (shaders/CMakeLists.txt generates
// the table; no shader files ship beside the binary and nothing is compiled at run time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vkflash::vk {

struct ShaderBlob {
  const char* name;  // e.g. "forward_f16_subgroup"
  const uint32_t* words;
  size_t word_count;
};

extern const ShaderBlob kEmbeddedShaders[];
extern const size_t kEmbeddedShaderCount;

// nullptr if no variant has that name.
const ShaderBlob* FindShader(std::string_view name);

}  // namespace vkflash::vk
