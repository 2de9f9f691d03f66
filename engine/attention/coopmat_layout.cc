#include "attention/coopmat_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <cstring>
#include <map>
#include <set>

#include "attention/kernel_constants.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/memory.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

Status Broken(const std::string& why) {
  return Status::Error(ErrorCode::kUnsupported, "cooperative-matrix layout not usable: " + why);
}

}  // namespace

Result<CoopmatLayout> AnalyzeCoopmatProbe(const std::vector<float>& probe, uint32_t subgroup_size) {
  const uint32_t stride = VKF_PROBE_STRIDE;
  if (subgroup_size == 0 || subgroup_size > 128 || probe.size() < size_t(subgroup_size) * stride) {
    return Broken("probe output too short");
  }
  const float count_value = probe[stride - 1];
  const uint32_t elements = uint32_t(count_value);
  if (count_value != float(elements) || elements == 0 || elements > 16 || elements * subgroup_size != 256) {
    return Broken("lanes hold " + std::to_string(count_value) + " elements each");
  }

  // row(lane, i), column(lane, i); every (row, column) exactly once.
  std::vector<std::array<uint32_t, 16>> row(subgroup_size), col(subgroup_size);
  std::set<uint32_t> seen;
  for (uint32_t lane = 0; lane < subgroup_size; ++lane) {
    if (probe[lane * stride + stride - 1] != count_value) return Broken("lanes hold different element counts");
    for (uint32_t i = 0; i < elements; ++i) {
      const float v = probe[lane * stride + i];
      if (!(v >= 0.0f && v < 256.0f) || v != std::floor(v) || !seen.insert(uint32_t(v)).second) {
        return Broken("an element is missing or held twice");
      }
      row[lane][i] = uint32_t(v) / 16;
      col[lane][i] = uint32_t(v) % 16;
    }
  }

  // Slots: lane 0's rows in order of first appearance; every lane must group its elements alike.
  CoopmatLayout layout;
  layout.subgroup_size = subgroup_size;
  layout.elements_per_lane = elements;
  std::array<uint32_t, 16> slot{};
  std::vector<uint32_t> slot_rows;
  for (uint32_t i = 0; i < elements; ++i) {
    uint32_t s = 0;
    while (s < slot_rows.size() && slot_rows[s] != row[0][i]) ++s;
    if (s == slot_rows.size()) slot_rows.push_back(row[0][i]);
    slot[i] = s;
  }
  layout.rows_per_lane = uint32_t(slot_rows.size());
  for (uint32_t lane = 0; lane < subgroup_size; ++lane) {
    for (uint32_t i = 0; i < elements; ++i) {
      for (uint32_t j = 0; j < elements; ++j) {
        if ((slot[i] == slot[j]) != (row[lane][i] == row[lane][j])) return Broken("lanes group their rows differently");
      }
    }
  }

  // Lanes of one row: those that share lane 0's first row form the mask's coset {m}.
  uint32_t mask = 0;
  for (uint32_t lane = 1; lane < subgroup_size; ++lane)
    if (row[lane][0] == row[0][0]) mask |= lane;
  for (uint32_t lane = 0; lane < subgroup_size; ++lane) {
    for (uint32_t other = 0; other < subgroup_size; ++other) {
      const bool same_group = (lane & ~mask) == (other & ~mask);
      for (uint32_t i = 0; i < elements; ++i) {
        if ((row[lane][i] == row[other][i]) != same_group) return Broken("the lanes of a row are not an xor group");
      }
    }
  }
  // Each row lives in one (lane group, slot) only: then that group holds its 16 columns.
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> home;  // row -> (lane & ~mask, slot)
  for (uint32_t lane = 0; lane < subgroup_size; ++lane) {
    for (uint32_t i = 0; i < elements; ++i) {
      const auto where = std::make_pair(lane & ~mask, slot[i]);
      if (home.emplace(row[lane][i], where).first->second != where) return Broken("a row is split over groups");
    }
  }
  for (uint32_t i = 0; i < elements; ++i) (i < 8 ? layout.slots_lo : layout.slots_hi) |= slot[i] << (4 * (i % 8));
  layout.row_lane_mask = mask;

  // The A operand's block, after the accumulator's: the same count and the same value everywhere.
  const size_t a_first = size_t(subgroup_size) * stride;
  layout.a_like_accumulator = probe.size() >= 2 * a_first;
  for (uint32_t lane = 0; lane < subgroup_size && layout.a_like_accumulator; ++lane) {
    const float* a = probe.data() + a_first + size_t(lane) * stride;
    layout.a_like_accumulator = a[stride - 1] == count_value &&
                                std::equal(a, a + elements, probe.data() + size_t(lane) * stride);
  }
  return layout;
}

Result<CoopmatLayout> ProbeCoopmatLayout(const vk::Device& device, vk::CommandRunner& runner,
                                         vk::PipelineStore& pipelines, CooperativeMatrixApi api,
                                         uint32_t subgroup_size) {
  const char* name = api == CooperativeMatrixApi::kKhr ? "coopmat_probe_khr" : "coopmat_probe_nv";
  const vk::ShaderBlob* shader = vk::FindShader(name);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, std::string("kernel '") + name + "' is not built");

  const VkDeviceSize bytes = 2 * VkDeviceSize(subgroup_size) * VKF_PROBE_STRIDE * sizeof(float);  // accumulator, A
  VKF_ASSIGN_OR_RETURN(vk::ScopedBuffer out,
                       vk::ScopedBuffer::Create(device, bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT));
  std::memset(out.mapped(), 0, bytes);
  VKF_ASSIGN_OR_RETURN(auto layout, vk::KernelLayout::Create(device, 1, 0));
  SpecConstants spec{};
  spec[VKF_SPEC_SUBGROUP_SIZE] = subgroup_size;
  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline, pipelines.Get(*shader, layout->pipeline_layout(), spec));
  const BufferView view{out.buffer(), 0, bytes};
  VKF_RETURN_IF_ERROR(runner.Run([&](VkCommandBuffer cmd) -> Status {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    VKF_RETURN_IF_ERROR(layout->BindBuffers(cmd, std::span<const BufferView>(&view, 1)));
    vkCmdDispatch(cmd, 1, 1, 1);
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                      VK_ACCESS_HOST_READ_BIT);
    return Status::Ok();
  }));
  std::vector<float> probe(bytes / sizeof(float));
  std::memcpy(probe.data(), out.mapped(), bytes);
  return AnalyzeCoopmatProbe(probe, subgroup_size);
}

}  // namespace vkflash::attention
