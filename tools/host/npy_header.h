// The header of a NumPy .npy file: a Python dict literal, parsed as NumPy parses it (its
// format.py evaluates the literal, then insists on exactly the keys 'descr', 'fortran_order' and
// 'shape'). Text inside a string never counts as a key, and anything NumPy would refuse is
// refused with the reason: a syntax error, text after the dict, a duplicate, missing or unknown
// key, a shape that is not a tuple of non-negative ints, a fortran_order that is not a bool.
#pragma once

#include <vkflash/result.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vkflash::tools {

struct NpyHeader {
  std::string descr;  // the dtype string, e.g. "<f4"
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// `text` is the header's bytes (latin-1 for format versions 1 and 2, UTF-8 for version 3, which
// must then be valid UTF-8). Versions 1 and 2 may carry Python 2's long suffix (3L), which NumPy
// strips. kInvalidArgument with the reason when NumPy would not load it, or when the dtype is not
// a plain string (structured dtypes are lists).
Result<NpyHeader> ParseNpyHeader(const std::string& text, int format_version);

}  // namespace vkflash::tools
