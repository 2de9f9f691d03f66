#include "attention_scene.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "spirv/viewer_canvas.h"
#include "spirv/viewer_inputs_f16.h"
#include "spirv/viewer_inputs_f32.h"
#include "spirv/viewer_probabilities_f16.h"
#include "spirv/viewer_probabilities_f32.h"

namespace viewer {
namespace {

void Barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
             VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void ImageBarrier(VkCommandBuffer cmd, VkImage image, VkImageLayout from, VkImageLayout to, VkPipelineStageFlags src,
                  VkAccessFlags src_access, VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  VkImageMemoryBarrier barrier{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  barrier.oldLayout = from;
  barrier.newLayout = to;
  barrier.srcQueueFamilyIndex = barrier.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  barrier.image = image;
  barrier.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  vkCmdPipelineBarrier(cmd, src, dst, 0, 0, nullptr, 0, nullptr, 1, &barrier);
}

}  // namespace

std::unique_ptr<AttentionScene> AttentionScene::Create(ViewerDevice& device, std::string* error) {
  auto scene = std::unique_ptr<AttentionScene>(new AttentionScene(device));
  const VkDescriptorType buffers3[] = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  const VkDescriptorType canvas[] = {VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  VkDescriptorPoolSize sizes[] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8}, {VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, 1}};
  VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool.maxSets = 3;
  pool.poolSizeCount = 2;
  pool.pPoolSizes = sizes;
  VkQueryPoolCreateInfo queries{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  queries.queryType = VK_QUERY_TYPE_TIMESTAMP;
  queries.queryCount = 2;
  if (vkCreateDescriptorPool(device.device(), &pool, nullptr, &scene->pool_) != VK_SUCCESS ||
      vkCreateQueryPool(device.device(), &queries, nullptr, &scene->timestamps_) != VK_SUCCESS ||
      !scene->MakePipeline(&scene->inputs_, buffers3, 3, sizeof(InputsPush), viewer_inputs_f32, sizeof(viewer_inputs_f32),
                           viewer_inputs_f16, sizeof(viewer_inputs_f16)) ||
      !scene->MakePipeline(&scene->probabilities_, buffers3, 3, sizeof(ProbabilitiesPush), viewer_probabilities_f32,
                           sizeof(viewer_probabilities_f32), viewer_probabilities_f16, sizeof(viewer_probabilities_f16)) ||
      !scene->MakePipeline(&scene->canvas_, canvas, 3, sizeof(CanvasPush), viewer_canvas, sizeof(viewer_canvas), nullptr, 0)) {
    *error = "cannot create the viewer's pipelines";
    return nullptr;
  }
  return scene;
}

bool AttentionScene::MakePipeline(Pipeline* p, const VkDescriptorType* types, uint32_t count, uint32_t push_bytes,
                                  const uint32_t* spirv_f32, size_t bytes_f32, const uint32_t* spirv_f16, size_t bytes_f16) {
  VkDevice d = device_.device();
  std::vector<VkDescriptorSetLayoutBinding> bindings(count);
  for (uint32_t i = 0; i < count; ++i) bindings[i] = {i, types[i], 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set.bindingCount = count;
  set.pBindings = bindings.data();
  if (vkCreateDescriptorSetLayout(d, &set, nullptr, &p->set_layout) != VK_SUCCESS) return false;
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p->set_layout;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &range;
  if (vkCreatePipelineLayout(d, &layout, nullptr, &p->layout) != VK_SUCCESS) return false;
  const uint32_t* code[2] = {spirv_f32, spirv_f16};
  const size_t bytes[2] = {bytes_f32, bytes_f16};
  for (int i = 0; i < 2; ++i) {
    if (code[i] == nullptr) continue;
    if (i == 1 && !device_.flash().device_info().storage_buffer_16bit) continue;  // no float16 here
    VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module.codeSize = bytes[i];
    module.pCode = code[i];
    VkShaderModule shader;
    if (vkCreateShaderModule(d, &module, nullptr, &shader) != VK_SUCCESS) return false;
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = shader;
    info.stage.pName = "main";
    info.layout = p->layout;
    const VkResult result = vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &info, nullptr, &p->pipeline[i]);
    vkDestroyShaderModule(d, shader, nullptr);
    if (result != VK_SUCCESS) return false;
  }
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorPool = pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &p->set_layout;
  return vkAllocateDescriptorSets(d, &alloc, &p->set) == VK_SUCCESS;
}

AttentionScene::~AttentionScene() {
  VkDevice d = device_.device();
  vkDeviceWaitIdle(d);
  for (Pipeline* p : {&inputs_, &probabilities_, &canvas_}) {
    for (VkPipeline pipeline : p->pipeline)
      if (pipeline) vkDestroyPipeline(d, pipeline, nullptr);
    vkDestroyPipelineLayout(d, p->layout, nullptr);
    vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
  }
  vkDestroyDescriptorPool(d, pool_, nullptr);
  vkDestroyQueryPool(d, timestamps_, nullptr);
  vkDestroyImageView(d, canvas_view_, nullptr);
  vkDestroyImage(d, canvas_image_, nullptr);
  vkFreeMemory(d, canvas_memory_, nullptr);
  for (vkflash::Buffer* b : {&q_, &k_, &v_, &o_, &lse_, &stats_, &p_}) *b = vkflash::Buffer();  // before vkflash goes
}

vkflash::AttentionParams AttentionScene::params() const {
  vkflash::AttentionParams p;
  p.shape = {1, settings_.heads, settings_.heads, settings_.seq_len, settings_.seq_len, settings_.head_dim};
  p.dtype = settings_.dtype;
  p.causal = settings_.causal;
  p.scale = settings_.scale_factor / std::sqrt(float(settings_.head_dim));
  return p;
}

uint32_t AttentionScene::visited_tiles(uint32_t tq) const {
  const uint32_t tiles = (settings_.seq_len + choice_.block_kv - 1) / choice_.block_kv;
  if (!settings_.causal) return tiles;
  const uint32_t last_row = std::min((tq + 1) * choice_.block_q, settings_.seq_len) - 1;  // Nq == Nk here
  return std::min(tiles, (last_row + 1 + choice_.block_kv - 1) / choice_.block_kv);
}

bool AttentionScene::Configure(const SceneSettings& settings, std::string* error) {
  const bool same = configured_ && settings_.SameBuffers(settings);
  settings_ = settings;
  auto choice = vkflash::ChooseInstrumentedForwardKernel(device_.flash(), params());
  if (!choice.ok()) return *error = choice.status().ToString(), false;
  const bool same_tiles = choice->block_kv == choice_.block_kv;
  choice_ = *choice;
  if (same && same_tiles) return true;

  vkDeviceWaitIdle(device_.device());
  vkflash::Context& flash = device_.flash();
  const auto shape = params().shape;
  const uint64_t element = vkflash::DataTypeSize(settings.dtype);
  const uint64_t sizes[] = {shape.q_elements() * element, shape.kv_elements() * element, shape.kv_elements() * element,
                            shape.q_elements() * element, shape.lse_elements() * 4, vkflash::ForwardStatsBytes(shape, choice_),
                            uint64_t(shape.q_len) * shape.kv_len * 4};
  vkflash::Buffer* buffers[] = {&q_, &k_, &v_, &o_, &lse_, &stats_, &p_};
  for (int i = 0; i < 7; ++i) {
    auto made = flash.CreateBuffer(sizes[i]);
    if (!made.ok()) return *error = made.status().ToString(), false;
    *buffers[i] = std::move(made).value();
  }
  // Scratch the forward needs on some drivers (vkflash::ForwardBuffers::workspace); usually none.
  auto workspace_bytes = vkflash::InstrumentedForwardWorkspaceBytes(flash, params());
  if (!workspace_bytes.ok()) return *error = workspace_bytes.status().ToString(), false;
  workspace_ = vkflash::Buffer();
  if (*workspace_bytes > 0) {
    auto made = flash.CreateBuffer(*workspace_bytes);
    if (!made.ok()) return *error = made.status().ToString(), false;
    workspace_ = std::move(made).value();
  }
  configured_ = true;
  UpdateSets();
  return true;
}

bool AttentionScene::ResizeCanvas(VkExtent2D extent, std::string* error) {
  VkDevice d = device_.device();
  vkDeviceWaitIdle(d);
  vkDestroyImageView(d, canvas_view_, nullptr);
  vkDestroyImage(d, canvas_image_, nullptr);
  vkFreeMemory(d, canvas_memory_, nullptr);
  canvas_extent_ = extent;
  VkImageCreateInfo info{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
  info.imageType = VK_IMAGE_TYPE_2D;
  info.format = VK_FORMAT_R8G8B8A8_UNORM;  // storage support is required of every device
  info.extent = {extent.width, extent.height, 1};
  info.mipLevels = info.arrayLayers = 1;
  info.samples = VK_SAMPLE_COUNT_1_BIT;
  info.usage = VK_IMAGE_USAGE_STORAGE_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  if (vkCreateImage(d, &info, nullptr, &canvas_image_) != VK_SUCCESS) return *error = "canvas image", false;
  VkMemoryRequirements req;
  vkGetImageMemoryRequirements(d, canvas_image_, &req);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = device_.MemoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (vkAllocateMemory(d, &alloc, nullptr, &canvas_memory_) != VK_SUCCESS) return *error = "canvas memory", false;
  vkBindImageMemory(d, canvas_image_, canvas_memory_, 0);
  VkImageViewCreateInfo view{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
  view.image = canvas_image_;
  view.viewType = VK_IMAGE_VIEW_TYPE_2D;
  view.format = VK_FORMAT_R8G8B8A8_UNORM;
  view.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  if (vkCreateImageView(d, &view, nullptr, &canvas_view_) != VK_SUCCESS) return *error = "canvas view", false;
  UpdateSets();
  return true;
}

void AttentionScene::UpdateSets() {
  if (!configured_ || canvas_view_ == VK_NULL_HANDLE) return;
  auto info = [](const vkflash::Buffer& b) { return VkDescriptorBufferInfo{b.handle(), 0, b.size()}; };
  const VkDescriptorBufferInfo inputs[] = {info(q_), info(k_), info(v_)};
  const VkDescriptorBufferInfo probabilities[] = {info(q_), info(k_), info(p_)};
  const VkDescriptorBufferInfo canvas[] = {info(p_), info(stats_)};
  const VkDescriptorImageInfo image{VK_NULL_HANDLE, canvas_view_, VK_IMAGE_LAYOUT_GENERAL};
  std::vector<VkWriteDescriptorSet> writes;
  auto write = [&](VkDescriptorSet set, uint32_t binding, VkDescriptorType type, const VkDescriptorBufferInfo* buffer,
                   const VkDescriptorImageInfo* img) {
    VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = binding;
    w.descriptorCount = 1;
    w.descriptorType = type;
    w.pBufferInfo = buffer;
    w.pImageInfo = img;
    writes.push_back(w);
  };
  for (uint32_t i = 0; i < 3; ++i) {
    write(inputs_.set, i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, &inputs[i], nullptr);
    write(probabilities_.set, i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, &probabilities[i], nullptr);
  }
  write(canvas_.set, 0, VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, nullptr, &image);
  write(canvas_.set, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, &canvas[0], nullptr);
  write(canvas_.set, 2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, &canvas[1], nullptr);
  vkUpdateDescriptorSets(device_.device(), uint32_t(writes.size()), writes.data(), 0, nullptr);
}

bool AttentionScene::Record(VkCommandBuffer cmd, float time, CanvasPush layout, std::string* error) {
  const vkflash::AttentionParams p = params();
  const int variant = settings_.dtype == vkflash::DataType::kFloat16 ? 1 : 0;
  const bool timed = device_.flash().device_info().timestamp_period_ns > 0;
  // The previous frame's reads and writes (completed: the caller waited for its fence) come first.
  Barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
          VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);

  // Live inputs.
  InputsPush inputs{uint32_t(p.shape.q_elements()), uint32_t(p.shape.kv_elements()), p.shape.q_heads, p.shape.kv_heads,
                    p.shape.q_len, p.shape.kv_len, p.shape.head_dim, settings_.pattern, time};
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, inputs_.pipeline[variant]);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, inputs_.layout, 0, 1, &inputs_.set, 0, nullptr);
  vkCmdPushConstants(cmd, inputs_.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(inputs), &inputs);
  vkCmdDispatch(cmd, uint32_t((std::max(p.shape.q_elements(), p.shape.kv_elements()) + 255) / 256), 1, 1);
  Barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT);

  // vkflash's forward, instrumented, between timestamps.
  if (timed) {
    vkCmdResetQueryPool(cmd, timestamps_, 0, 2);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps_, 0);
  }
  const vkflash::Status forward = vkflash::RecordInstrumentedForward(
      device_.flash(), cmd, p, {q_.view(), k_.view(), v_.view(), o_.view(), lse_.view(), workspace_.view()}, stats_.view());
  if (!forward.ok()) return *error = forward.ToString(), false;
  if (timed) {
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_, 1);
    timestamps_written_ = true;
  }

  // The attention matrix of the head on display.
  ProbabilitiesPush probabilities{p.shape.q_heads, p.shape.kv_heads, p.shape.q_len, p.shape.kv_len, p.shape.head_dim,
                                  0, std::min(settings_.show_head, p.shape.q_heads - 1), p.causal ? 1u : 0u,
                                  p.effective_scale()};
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, probabilities_.pipeline[variant]);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, probabilities_.layout, 0, 1, &probabilities_.set, 0, nullptr);
  vkCmdPushConstants(cmd, probabilities_.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(probabilities), &probabilities);
  vkCmdDispatch(cmd, (p.shape.q_len + 63) / 64, 1, 1);
  Barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT);

  // The canvas.
  layout.q_len = p.shape.q_len;
  layout.kv_len = p.shape.kv_len;
  layout.block_q = choice_.block_q;
  layout.block_kv = choice_.block_kv;
  layout.causal = p.causal ? 1u : 0u;
  layout.stats_row0 = probabilities.head * p.shape.q_len;
  ImageBarrier(cmd, canvas_image_, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_GENERAL, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, canvas_.pipeline[0]);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, canvas_.layout, 0, 1, &canvas_.set, 0, nullptr);
  vkCmdPushConstants(cmd, canvas_.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(layout), &layout);
  vkCmdDispatch(cmd, (canvas_extent_.width + 15) / 16, (canvas_extent_.height + 15) / 16, 1);
  ImageBarrier(cmd, canvas_image_, VK_IMAGE_LAYOUT_GENERAL, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
               VK_ACCESS_TRANSFER_READ_BIT);
  return true;
}

void AttentionScene::BlitTo(VkCommandBuffer cmd, VkImage target) {
  ImageBarrier(cmd, target, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_PIPELINE_STAGE_TRANSFER_BIT,
               0, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  VkImageBlit blit{};
  blit.srcSubresource = blit.dstSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  blit.srcOffsets[1] = blit.dstOffsets[1] = {int32_t(canvas_extent_.width), int32_t(canvas_extent_.height), 1};
  vkCmdBlitImage(cmd, canvas_image_, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, target, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1,
                 &blit, VK_FILTER_NEAREST);
  ImageBarrier(cmd, target, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
               VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
               VK_ACCESS_COLOR_ATTACHMENT_READ_BIT | VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT);
}

double AttentionScene::ForwardMilliseconds() {
  if (!timestamps_written_) return -1.0;
  uint64_t ticks[2];
  if (vkGetQueryPoolResults(device_.device(), timestamps_, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT) != VK_SUCCESS) {
    return -1.0;
  }
  return double(ticks[1] - ticks[0]) * device_.flash().device_info().timestamp_period_ns * 1e-6;
}

}  // namespace viewer
