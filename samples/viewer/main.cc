// vkflash-viewer: FlashAttention's tiles at work, live. Every frame runs vkflash's real forward
// kernel (instrumented variant) on inputs generated on the GPU, and draws the attention matrix,
// the tile grid, the tiles the causal mask skips, the online softmax of one Q tile key tile by key
// tile, and per-tile statistics, all from GPU buffers.
//   vkflash-viewer [--width W --height H] [--frames N --screenshot FILE.png] [--headless] [--validation]
#include <CLI/CLI.hpp>
#define GLFW_INCLUDE_VULKAN
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_vulkan.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "attention_scene.h"
#include "render_target.h"
#include "viewer_device.h"

namespace {

using namespace viewer;

constexpr int kExitBadInput = 2;   // bad options, as the vkflash CLI
constexpr int kExitNoDevice = 2;   // no display or no Vulkan device
constexpr int kPanelWidth = 340;

struct Options {
  int width = 1280, height = 800, frames = 0, resize_at = -1;
  std::string screenshot;
  bool headless = false, validation = false, seq_given = false;
  SceneSettings scene;
};

// Where the canvas panels go for a target of `extent` (the ImGui controls take the right side).
CanvasPush Layout(VkExtent2D extent) {
  const int w = int(extent.width), h = int(extent.height), margin = 14, title = 22;
  const int avail = std::max(w - kPanelWidth - 3 * margin, 120);
  const int side = std::max(std::min(avail * 6 / 10, h - 2 * margin - title), 60);
  const int right_x = margin + side + 2 * margin, right_w = std::max(avail - side - margin, 60);
  CanvasPush c{};
  const int heat[4] = {margin, margin + title, side, side};
  const int softmax[4] = {right_x, margin + title, right_w, side / 2};
  const int tiles_y = softmax[1] + softmax[3] + 2 * title + 8, tiles_h = std::max(side + margin + title - tiles_y, 20);
  const int tile_max[4] = {right_x, tiles_y, (right_w - 12) / 2, tiles_h};
  const int tile_sum[4] = {right_x + (right_w - 12) / 2 + 12, tiles_y, (right_w - 12) / 2, tiles_h};
  std::copy(heat, heat + 4, c.heat);
  std::copy(softmax, softmax + 4, c.softmax);
  std::copy(tile_max, tile_max + 4, c.tile_max);
  std::copy(tile_sum, tile_sum + 4, c.tile_sum);
  return c;
}

void Label(const int rect[4], const std::string& text, float x_fraction = 0.0f) {
  const float x = float(rect[0]) + x_fraction * float(rect[2]);
  ImGui::GetForegroundDrawList()->AddText(ImVec2(x, float(rect[1] - 19)), IM_COL32(225, 228, 235, 255), text.c_str());
}

struct Animation {
  int q_tile = 0, step = 0;
  bool animate = true, paused = false;
  float seconds_per_step = 0.4f, since_step = 0.0f, input_time = 0.0f;

  void Advance(float dt, const AttentionScene& scene) {
    const int tiles = int(scene.visited_tiles(uint32_t(q_tile)));
    if (paused) return;
    input_time += dt;
    if (!animate) return;
    since_step += dt;
    if (since_step < seconds_per_step) return;
    since_step = 0.0f;
    if (++step >= tiles) {  // next Q tile once this one has seen all its key tiles
      step = 0;
      q_tile = (q_tile + 1) % int(scene.q_tiles());
    }
  }
};

// The controls; returns the settings the user asks for.
SceneSettings Controls(const AttentionScene& scene, const vkflash::DeviceInfo& device, Animation* anim, double frame_ms,
                       double forward_ms, VkExtent2D extent) {
  SceneSettings s = scene.settings();
  const vkflash::KernelChoice& k = scene.choice();
  ImGui::SetNextWindowPos(ImVec2(float(extent.width) - kPanelWidth, 0.0f));
  ImGui::SetNextWindowSize(ImVec2(float(kPanelWidth), float(extent.height)));
  ImGui::Begin("vkflash tile viewer", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);
  ImGui::TextWrapped("%s", device.name.c_str());
  ImGui::Text("kernel  %s", k.kernel.c_str());
  ImGui::Text("tiles   Br %u x Bc %u, %u threads/row", k.block_q, k.block_kv, k.threads_per_row);
  ImGui::Text("        workgroup %u, %u B shared", k.workgroup_size, k.shared_memory_bytes);
  ImGui::Text("        %s reductions", k.subgroup_reductions ? "subgroup" : "shared-memory");
  ImGui::Separator();
  int seq = int(s.seq_len), heads = int(s.heads), head = int(s.show_head), pattern = int(s.pattern);
  ImGui::SliderInt("sequence", &seq, 16, 1024);
  static const int kDims[] = {16, 32, 64, 80, 128, 256};
  int dim_index = int(std::find(std::begin(kDims), std::end(kDims), int(s.head_dim)) - std::begin(kDims)) % 6;
  ImGui::Combo("head dim", &dim_index, "16\0" "32\0" "64\0" "80\0" "128\0" "256\0");
  int dtype = s.dtype == vkflash::DataType::kFloat16 ? 1 : 0;
  ImGui::Combo("dtype", &dtype, device.storage_buffer_16bit ? "float32\0float16\0" : "float32\0");
  ImGui::Checkbox("causal", &s.causal);
  ImGui::SliderFloat("scale x 1/sqrt(D)", &s.scale_factor, 0.1f, 4.0f);
  ImGui::Combo("inputs", &pattern, "random\0local (diagonal)\0sink (token 0)\0heads differ\0");
  ImGui::SliderInt("heads", &heads, 1, 8);
  ImGui::SliderInt("head shown", &head, 0, heads - 1);
  ImGui::Separator();
  ImGui::Checkbox("animate key tiles", &anim->animate);
  ImGui::SameLine();
  ImGui::Checkbox("pause", &anim->paused);
  ImGui::SliderInt("Q tile", &anim->q_tile, 0, int(scene.q_tiles()) - 1);
  ImGui::SliderInt("key tile", &anim->step, 0, std::max(int(scene.visited_tiles(uint32_t(anim->q_tile))) - 1, 0));
  if (ImGui::Button("step")) anim->step = (anim->step + 1) % std::max(int(scene.visited_tiles(uint32_t(anim->q_tile))), 1);
  ImGui::SliderFloat("s / step", &anim->seconds_per_step, 0.05f, 2.0f);
  ImGui::Separator();
  ImGui::Text("frame    %.2f ms", frame_ms);
  if (forward_ms >= 0) ImGui::Text("forward  %.3f ms GPU (timestamps)", forward_ms);
  ImGui::TextWrapped("Heat map: P = softmax(scale Q K^T) per row (1 = the row's strongest key). Hatched tiles are "
                     "never computed. Yellow: the key tile being added; cyan: the Q tile.");
  ImGui::End();
  s.seq_len = uint32_t(seq);
  s.head_dim = uint32_t(kDims[dim_index]);
  s.dtype = dtype == 1 ? vkflash::DataType::kFloat16 : vkflash::DataType::kFloat32;
  s.heads = uint32_t(heads);
  s.show_head = uint32_t(std::min(head, heads - 1));
  s.pattern = uint32_t(pattern);
  return s;
}

int Run(const Options& options) {
  GLFWwindow* window = nullptr;
  if (!options.headless) {
    if (!glfwInit()) {
      std::fprintf(stderr, "vkflash-viewer: error: no display (GLFW cannot initialize; is DISPLAY set? try xvfb-run or --headless)\n");
      return kExitNoDevice;
    }
    glfwWindowHint(GLFW_CLIENT_API, GLFW_NO_API);
    window = glfwCreateWindow(options.width, options.height, "vkflash tile viewer", nullptr, nullptr);
    if (!window) {
      std::fprintf(stderr, "vkflash-viewer: error: no display (cannot open a window; try xvfb-run or --headless)\n");
      glfwTerminate();
      return kExitNoDevice;
    }
  }
  int exit_code = 0;
  {
    SetupError setup;
    std::unique_ptr<ViewerDevice> device = ViewerDevice::Create(window, options.validation, &setup);
    if (!device) {
      std::fprintf(stderr, "vkflash-viewer: error: %s\n", setup.message.c_str());
      if (window) glfwDestroyWindow(window), glfwTerminate();
      return kExitNoDevice;
    }
    std::string error;
    SceneSettings settings = options.scene;
    if (!options.seq_given) {  // sensible on a CPU driver (lavapipe) and on a GPU alike
      settings.seq_len = device->flash().device_info().type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 128 : 512;
    }
    auto target = RenderTarget::Create(*device, window != nullptr, {uint32_t(options.width), uint32_t(options.height)}, &error);
    auto scene = target ? AttentionScene::Create(*device, &error) : nullptr;
    if (!scene || !scene->Configure(settings, &error) || !scene->ResizeCanvas(target->extent(), &error)) {
      std::fprintf(stderr, "vkflash-viewer: error: %s\n", error.c_str());
      return 1;
    }

    // Dear ImGui on the render target's pass.
    ImGui::CreateContext();
    ImGui::StyleColorsDark();
    ImGui::GetIO().IniFilename = nullptr;
    if (window) ImGui_ImplGlfw_InitForVulkan(window, true);
    VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 8};
    VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
    pool_info.maxSets = 8;
    pool_info.poolSizeCount = 1;
    pool_info.pPoolSizes = &pool_size;
    VkDescriptorPool imgui_pool;
    vkCreateDescriptorPool(device->device(), &pool_info, nullptr, &imgui_pool);
    ImGui_ImplVulkan_InitInfo init{};
    init.Instance = device->instance();
    init.PhysicalDevice = device->physical();
    init.Device = device->device();
    init.QueueFamily = device->queue_family();
    init.Queue = device->queue();
    init.DescriptorPool = imgui_pool;
    init.MinImageCount = 2;
    init.ImageCount = std::max(target->image_count(), 2u);
    init.MSAASamples = VK_SAMPLE_COUNT_1_BIT;
    ImGui_ImplVulkan_Init(&init, target->render_pass());

    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = device->command_pool();
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd;
    vkAllocateCommandBuffers(device->device(), &alloc, &cmd);
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    vkCreateFence(device->device(), &fence_info, nullptr, &fence);
    VkSemaphoreCreateInfo semaphore_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VkSemaphore acquired;
    vkCreateSemaphore(device->device(), &semaphore_info, nullptr, &acquired);
    std::vector<VkSemaphore> rendered(8);  // one per swapchain image (the presentation engine holds it)
    for (VkSemaphore& s : rendered) vkCreateSemaphore(device->device(), &semaphore_info, nullptr, &s);
    auto submit_and_wait = [&](VkSemaphore wait, VkSemaphore signal) {
      VkPipelineStageFlags stage = VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
      VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
      submit.waitSemaphoreCount = wait ? 1 : 0;
      submit.pWaitSemaphores = &wait;
      submit.pWaitDstStageMask = &stage;
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &cmd;
      submit.signalSemaphoreCount = signal ? 1 : 0;
      submit.pSignalSemaphores = &signal;
      vkQueueSubmit(device->queue(), 1, &submit, fence);
      vkWaitForFences(device->device(), 1, &fence, VK_TRUE, UINT64_MAX);
      vkResetFences(device->device(), 1, &fence);
    };
    {  // fonts
      VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      vkBeginCommandBuffer(cmd, &begin);
      ImGui_ImplVulkan_CreateFontsTexture(cmd);
      vkEndCommandBuffer(cmd);
      submit_and_wait(VK_NULL_HANDLE, VK_NULL_HANDLE);
      ImGui_ImplVulkan_DestroyFontUploadObjects();
    }

    Animation anim;
    std::vector<double> frame_ms, forward_ms;
    auto last = std::chrono::steady_clock::now();
    const bool fixed_clock = options.frames > 0;  // --frames: time advances 1/30 s a frame (reproducible)
    for (int frame = 0; options.frames == 0 || frame < options.frames; ++frame) {
      if (window) {
        glfwPollEvents();
        if (glfwWindowShouldClose(window)) break;
        if (frame == options.resize_at) glfwSetWindowSize(window, options.width * 3 / 4, options.height * 3 / 4);
        int w = 0, h = 0;
        glfwGetFramebufferSize(window, &w, &h);
        if (w == 0 || h == 0) continue;  // minimized
        if (uint32_t(w) != target->extent().width || uint32_t(h) != target->extent().height) {
          if (!target->Resize({uint32_t(w), uint32_t(h)}, &error) || !scene->ResizeCanvas(target->extent(), &error)) break;
        }
      }
      const auto now = std::chrono::steady_clock::now();
      const double dt_ms = std::chrono::duration<double, std::milli>(now - last).count();
      last = now;
      if (frame > 0) frame_ms.push_back(dt_ms);
      const double gpu_ms = scene->ForwardMilliseconds();
      if (gpu_ms >= 0) forward_ms.push_back(gpu_ms);

      uint32_t index = 0;
      if (window) {
        const VkResult acquire = target->Acquire(acquired, &index);
        if (acquire == VK_ERROR_OUT_OF_DATE_KHR) {
          int w = 0, h = 0;
          glfwGetFramebufferSize(window, &w, &h);
          target->Resize({uint32_t(w), uint32_t(h)}, &error);
          scene->ResizeCanvas(target->extent(), &error);
          continue;
        }
      }
      const VkExtent2D extent = target->extent();
      ImGui_ImplVulkan_NewFrame();
      if (window) {
        ImGui_ImplGlfw_NewFrame();
      } else {
        ImGui::GetIO().DisplaySize = ImVec2(float(extent.width), float(extent.height));
        ImGui::GetIO().DeltaTime = 1.0f / 30.0f;
      }
      ImGui::NewFrame();
      const SceneSettings wanted = Controls(*scene, device->flash().device_info(), &anim,
                                            frame_ms.empty() ? 0.0 : frame_ms.back(), gpu_ms, extent);
      CanvasPush layout = Layout(extent);
      anim.q_tile = std::min(anim.q_tile, int(scene->q_tiles()) - 1);
      anim.step = std::min(anim.step, std::max(int(scene->visited_tiles(uint32_t(anim.q_tile))) - 1, 0));
      layout.q_tile = uint32_t(anim.q_tile);
      layout.step = uint32_t(anim.step);
      const auto& st = scene->settings();
      Label(layout.heat, "P, head " + std::to_string(st.show_head) + ": " + std::to_string(st.seq_len) + " queries x " +
                             std::to_string(st.seq_len) + " keys, tiles " + std::to_string(scene->choice().block_q) + " x " +
                             std::to_string(scene->choice().block_kv));
      Label(layout.softmax, "online softmax of Q tile " + std::to_string(anim.q_tile) + ", key tile " +
                                std::to_string(anim.step + 1) + "/" + std::to_string(scene->visited_tiles(uint32_t(anim.q_tile))));
      const int columns[4] = {layout.softmax[0], layout.softmax[1] + layout.softmax[3] + 19, layout.softmax[2], 0};
      Label(columns, "max m", 0.0f);
      Label(columns, "sum l", 1.0f / 3.0f);
      Label(columns, "rescale", 2.0f / 3.0f);
      Label(layout.tile_max, "tile max");
      Label(layout.tile_sum, "tile sum");
      ImGui::Render();

      VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      vkBeginCommandBuffer(cmd, &begin);
      if (!scene->Record(cmd, anim.input_time, layout, &error)) {
        std::fprintf(stderr, "vkflash-viewer: error: %s\n", error.c_str());
        exit_code = 1;
        vkEndCommandBuffer(cmd);
        break;
      }
      scene->BlitTo(cmd, target->image(index));
      VkRenderPassBeginInfo pass{VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO};
      pass.renderPass = target->render_pass();
      pass.framebuffer = target->framebuffer(index);
      pass.renderArea.extent = extent;
      vkCmdBeginRenderPass(cmd, &pass, VK_SUBPASS_CONTENTS_INLINE);
      ImGui_ImplVulkan_RenderDrawData(ImGui::GetDrawData(), cmd);
      vkCmdEndRenderPass(cmd);
      const bool last_frame = options.frames > 0 && frame == options.frames - 1;
      if (last_frame && !options.screenshot.empty()) target->RecordScreenshot(cmd, index);
      vkEndCommandBuffer(cmd);
      submit_and_wait(window ? acquired : VK_NULL_HANDLE, window ? rendered[index % rendered.size()] : VK_NULL_HANDLE);
      if (window) {
        const VkResult present = target->Present(index, rendered[index % rendered.size()]);
        if (present == VK_ERROR_OUT_OF_DATE_KHR || present == VK_SUBOPTIMAL_KHR) {
          int w = 0, h = 0;
          glfwGetFramebufferSize(window, &w, &h);
          target->Resize({uint32_t(w), uint32_t(h)}, &error);
          scene->ResizeCanvas(target->extent(), &error);
        }
      }
      if (!(wanted.SameBuffers(scene->settings()) && wanted.causal == st.causal && wanted.scale_factor == st.scale_factor &&
            wanted.pattern == st.pattern && wanted.show_head == st.show_head) &&
          !scene->Configure(wanted, &error)) {
        std::fprintf(stderr, "vkflash-viewer: error: %s\n", error.c_str());
      }
      anim.Advance(fixed_clock ? 1.0f / 30.0f : float(dt_ms * 1e-3), *scene);
      if (last_frame && !options.screenshot.empty()) {
        if (!target->WritePng(options.screenshot)) {
          std::fprintf(stderr, "vkflash-viewer: error: cannot write %s\n", options.screenshot.c_str());
          exit_code = 1;
        } else {
          std::printf("screenshot: %s (%ux%u)\n", options.screenshot.c_str(), extent.width, extent.height);
        }
      }
    }
    vkDeviceWaitIdle(device->device());
    if (frame_ms.size() > 10) {
      std::vector<double> sorted(frame_ms.begin() + 5, frame_ms.end());
      std::sort(sorted.begin(), sorted.end());
      std::printf("frames: %zu, median frame time %.2f ms", frame_ms.size() + 1, sorted[sorted.size() / 2]);
      if (!forward_ms.empty()) {
        std::sort(forward_ms.begin(), forward_ms.end());
        std::printf(", median forward %.3f ms GPU", forward_ms[forward_ms.size() / 2]);
      }
      std::printf(" (%s)\n", device->flash().device_info().name.c_str());
    }
    ImGui_ImplVulkan_Shutdown();
    if (window) ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    vkDestroyDescriptorPool(device->device(), imgui_pool, nullptr);
    for (VkSemaphore s : rendered) vkDestroySemaphore(device->device(), s, nullptr);
    vkDestroySemaphore(device->device(), acquired, nullptr);
    vkDestroyFence(device->device(), fence, nullptr);
    vkFreeCommandBuffers(device->device(), device->command_pool(), 1, &cmd);
    scene.reset();
    target.reset();
    if (device->validation_messages() > 0) {
      std::fprintf(stderr, "vkflash-viewer: error: the validation layer reported %d message(s)\n", device->validation_messages());
      exit_code = 1;
    }
  }
  if (window) glfwDestroyWindow(window), glfwTerminate();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"vkflash-viewer: FlashAttention's tiles at work, live"};
  app.add_option("--width", o.width, "Window width")->check(CLI::Range(640, 8192))->capture_default_str();
  app.add_option("--height", o.height, "Window height")->check(CLI::Range(400, 8192))->capture_default_str();
  app.add_option("--frames", o.frames, "Render this many frames, then exit (0: until the window closes)");
  app.add_option("--screenshot", o.screenshot, "With --frames: write the last frame to this PNG");
  app.add_option("--resize-at", o.resize_at, "Shrink the window at this frame (tests swapchain re-creation)");
  app.add_flag("--headless", o.headless, "Render offscreen (no window, no display needed)");
  app.add_flag("--validation", o.validation, "Khronos validation layer on; any message fails the run");
  CLI::Option* seq = app.add_option("--seq", o.scene.seq_len, "Sequence length (default: 128 on a CPU device, else 512)")
                         ->check(CLI::Range(1, 1024));
  app.add_option("--d", o.scene.head_dim, "Head dim")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--heads", o.scene.heads, "Heads")->check(CLI::Range(1, 8))->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "vkflash-viewer: error: %s\n", e.what());
    return kExitBadInput;
  }
  o.seq_given = seq->count() > 0;
  if (!o.screenshot.empty() && o.frames <= 0) {
    std::fprintf(stderr, "vkflash-viewer: error: --screenshot needs --frames N\n");
    return kExitBadInput;
  }
  // Checked before any frame is rendered, so that a bad path costs nothing.
  if (!o.screenshot.empty()) {
    std::error_code error;
    const std::filesystem::path folder = std::filesystem::path(o.screenshot).parent_path();
    if (std::filesystem::is_directory(o.screenshot, error)) {
      std::fprintf(stderr, "vkflash-viewer: error: --screenshot '%s' is a directory\n", o.screenshot.c_str());
      return kExitBadInput;
    }
    if (!folder.empty() && !std::filesystem::is_directory(folder, error)) {
      std::fprintf(stderr, "vkflash-viewer: error: --screenshot '%s': the folder '%s' does not exist\n",
                   o.screenshot.c_str(), folder.string().c_str());
      return kExitBadInput;
    }
  }
  return Run(o);
}
