#!/usr/bin/env bash
# Issue 24's consumer routes, end to end (a CTest test; tests/CMakeLists.txt): installs the build
# of this tree into WORK/prefix, then builds the README's C and C++ examples outside the tree
# (tests/consumers/CMakeLists.txt) against
#   (a) the installed CMake package (find_package(vkflash)), the library as this tree built it
#       (static by default),
#   (b) the installed pkg-config file, with the compilers alone (cc / c++ and pkg-config --static),
#   (c) the sources through add_subdirectory with BUILD_SHARED_LIBS=ON (whose libvkflash.so must
#       export only vkf* and the public vkflash:: API, with a versioned SONAME); one build for both
#       programs, since each add_subdirectory build compiles the whole library again,
# and runs each on the default device (lavapipe in CI) under the validation layer: each checks its
# result and exits non-zero on a wrong one; a validation message fails the run too.
# Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
export VKFLASH_VALIDATION=1

run_example() {  # NAME PROGRAM: runs it, fails on a non-zero exit or a validation message
  local name=$1 program=$2 out
  out=$("$program" 2>&1) || { echo "FAIL $name: exit code $?: $out"; exit 1; }
  if grep -q "validation" <<<"$out"; then echo "FAIL $name: a validation message: $out"; exit 1; fi
  echo "ok   $name: $out"
}

cmake --install "$build" --prefix "$prefix" >/dev/null
echo "ok   cmake --install $build --prefix $prefix"

# (a) find_package, from the install alone.
cmake -S "$src/tests/consumers" -B "$work/package" -DCMAKE_BUILD_TYPE=Release \
      -DVKFLASH_CONSUME=package -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/package" -j"$(nproc)" >/dev/null
for lang in c cpp; do run_example "$lang, find_package(vkflash)" "$work/package/${lang}_consumer"; done

# (b) pkg-config, the compilers alone.
pc=$(find "$prefix" -name vkflash.pc)
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs --static vkflash)
examples=$src/samples/readme_example
cc -std=c99 "$examples/readme_example.c" $flags -o "$work/c_pkgconfig"
run_example "c, cc \$(pkg-config --cflags --libs --static vkflash)" "$work/c_pkgconfig"
c++ -std=c++20 "$examples/readme_example.cc" $flags -o "$work/cpp_pkgconfig"
run_example "cpp, c++ \$(pkg-config --cflags --libs --static vkflash)" "$work/cpp_pkgconfig"

# (c) add_subdirectory, the shared library.
cmake -S "$src/tests/consumers" -B "$work/subdirectory" -DCMAKE_BUILD_TYPE=Release \
      -DVKFLASH_CONSUME=subdirectory -DVKFLASH_SOURCE_DIR="$src" -DBUILD_SHARED_LIBS=ON >/dev/null
cmake --build "$work/subdirectory" -j"$(nproc)" >/dev/null
for lang in c cpp; do run_example "$lang, add_subdirectory (BUILD_SHARED_LIBS=ON)" "$work/subdirectory/${lang}_consumer"; done
# The subproject built the library alone: none of vkflash's tools, samples or tests.
for target in vkflash vkflash_tests vkflash-viewer; do
  if find "$work/subdirectory/vkflash" -name "$target" -type f -perm -u+x | grep -q .; then
    echo "FAIL add_subdirectory built $target"; exit 1
  fi
done
echo "ok   add_subdirectory builds the library alone"

# The shared library's surface.
so=$(find "$work/subdirectory/vkflash" -name "libvkflash.so.*.*.*" -type f)
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
version=$(sed -n 's/^#define VKFLASH_VERSION_\(MAJOR\|MINOR\) \([0-9]*\)/\2/p' "$src/include/vkflash/version.h" | paste -sd.)
[ "$soname" = "libvkflash.so.$version" ] || { echo "FAIL SONAME '$soname', expected libvkflash.so.$version"; exit 1; }
echo "ok   SONAME $soname"
symbols=$(nm -D --defined-only "$so" | awk '{print $3}')
c_count=$(grep -c '^vkf' <<<"$symbols" || true)
others=$(grep -v '^vkf' <<<"$symbols" | c++filt | grep -v '^vkflash::' || true)
internal=$(grep -v '^vkf' <<<"$symbols" | c++filt | grep -E '^vkflash::(attention|vk|gpu|env|util|tools|testing)::|::Impl::' || true)
if [ -n "$others$internal" ] || [ "$c_count" -lt 40 ]; then
  echo "FAIL libvkflash.so exports $c_count vkf* symbols and these others:"; echo "$others$internal"; exit 1
fi
echo "ok   nm -D: $(wc -l <<<"$symbols") symbols, $c_count vkf* C functions, the rest vkflash:: public API"
