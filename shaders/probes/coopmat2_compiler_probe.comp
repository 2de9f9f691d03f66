// Build-time only (shaders/CMakeLists.txt): does this glslang compile GL_NV_cooperative_matrix2 as
// the coopmat2/ kernels use it (workgroup-scope matrices, tensor layouts, per-element callbacks,
// row reductions)? A probe of its own, not a kernel, so that a mistake in a kernel fails the build
// instead of quietly leaving the family out. Never dispatched.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer data_block { float16_t data[]; };

float add_row(const uint row, const uint col, const float x, const float bias) { return x + bias * float(row); }
float larger(const float a, const float b) { return max(a, b); }

void main() {
  tensorLayoutNV<2> layout_2d = createTensorLayoutNV(2);
  layout_2d = setTensorLayoutDimensionNV(layout_2d, 64, 64);
  coopmat<float16_t, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseB> b;
  coopMatLoadTensorNV(a, data, 0, sliceTensorLayoutNV(layout_2d, 0, 64, 0, 64));
  coopMatLoadTensorNV(b, data, 0, sliceTensorLayoutNV(layout_2d, 0, 64, 0, 64));
  coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator> c =
      coopMatMulAdd(a, b, coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>(0.0));
  coopMatPerElementNV(c, c, add_row, 0.5);
  coopMatReduceNV(c, c, gl_CooperativeMatrixReduceRowNV, larger);
  coopMatStoreTensorNV(coopmat<float16_t, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>(c), data, 0,
                       sliceTensorLayoutNV(layout_2d, 0, 64, 0, 64));
}
