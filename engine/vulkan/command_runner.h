// Synchronous submission for tools and tests: record into a command buffer, submit on the
// context's queue, wait on a fence. Engines record into their own command buffers instead.
#pragma once

#include <vkflash/device_info.hpp>

#include <functional>
#include <memory>
#include <mutex>

#include "vulkan/device.h"

namespace vkflash::vk {

class CommandRunner {
 public:
  static Result<std::unique_ptr<CommandRunner>> Create(const Device& device);
  ~CommandRunner();
  CommandRunner(const CommandRunner&) = delete;
  CommandRunner& operator=(const CommandRunner&) = delete;

  // Begins a one-time command buffer, calls `record`, submits and waits. Calls are serialized.
  Status Run(const std::function<Status(VkCommandBuffer)>& record);

 private:
  explicit CommandRunner(const Device& device) : device_(device) {}

  const Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::mutex mutex_;
};

}  // namespace vkflash::vk
