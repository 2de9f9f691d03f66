# Sourced on the GPU machine, from the project's root: the Vulkan loader and NVIDIA driver
# (.gpu/env.sh, from the GPU recipe's prepare.sh), libglvnd (.gl/: the driver fails to create an
# instance without it), bookworm's validation layer (VK_LAYER_PATH; vulkan-validationlayers in
# .gpu/extra) and, where tools/lab/fetch-trixie-layer.sh filled .gpu/trixie, `trixie_run CMD...`:
# CMD under trixie's loader and validation layer 1.4.309, which know VK_KHR_cooperative_matrix and
# VK_NV_cooperative_matrix2 (bookworm's 1.3.239 rejects their feature structs at vkCreateDevice).
# Fetching them on the dev machine:
#   apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2   (into .gl/)
#   apt-get download vulkan-validationlayers libglfw3                                   (into .gpu/extra/)
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
source .gpu/env.sh  # unpacks .gpu/extra into /tmp/vkt
# Point the layer's manifest at the unpacked library (LD_LIBRARY_PATH=/tmp/vkt instead would put
# Debian's X11 libraries in front of the driver's).
layer_dir=/tmp/vkt/usr/share/vulkan/explicit_layer.d
sed -i 's#"library_path": "libVkLayer#"library_path": "/tmp/vkt/usr/lib/x86_64-linux-gnu/libVkLayer#' \
  "$layer_dir/VkLayer_khronos_validation.json"
export VK_LAYER_PATH=$layer_dir
build=${VKFLASH_BUILD_DIR:-build-gpu}
# CTest files name absolute paths of the machine that built them: give it the same root here.
built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$built_root" ] && [ "$built_root" != "$PWD" ]; then mkdir -p "$(dirname "$built_root")" && ln -sfn "$PWD" "$built_root"; fi

if ls .gpu/trixie/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/trixie-root && for f in .gpu/trixie/*.deb; do dpkg -x "$f" /tmp/trixie-root; done
  trixie_layers=/tmp/trixie-root/usr/share/vulkan/explicit_layer.d
  sed -i 's#"library_path": "libVkLayer#"library_path": "/tmp/trixie-root/usr/lib/x86_64-linux-gnu/libVkLayer#' \
    "$trixie_layers/VkLayer_khronos_validation.json"
  # trixie's dynamic loader and library path, which run a program under trixie's Vulkan loader
  # (trixie_run here; run_env.sh's link_cli writes them into the CLI's wrapper).
  trixie_ld=/tmp/trixie-root/usr/lib64/ld-linux-x86-64.so.2
  trixie_library_path=/tmp/trixie-root/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
  trixie_run() { VK_LAYER_PATH=$trixie_layers "$trixie_ld" --library-path "$trixie_library_path" "$@"; }
  export trixie_layers trixie_ld trixie_library_path
  export -f trixie_run  # for `timeout N bash -c 'trixie_run ...'`
fi
