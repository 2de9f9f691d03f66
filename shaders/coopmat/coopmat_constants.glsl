// Specialization constants of the cooperative-matrix kernels and the layout probe (their ids and
// meaning: common/shader_interface.h).
#ifndef VKFLASH_COOPMAT_CONSTANTS_GLSL
#define VKFLASH_COOPMAT_CONSTANTS_GLSL
layout(constant_id = VKF_SPEC_SUBGROUP_SIZE) const uint VKF_CM_SUBGROUP_SIZE = 32;
layout(constant_id = VKF_SPEC_CM_ROWS_PER_LANE) const uint VKF_CM_ROWS_PER_LANE = 2;
layout(constant_id = VKF_SPEC_CM_SLOTS_LO) const uint VKF_CM_SLOTS_LO = 0x11001100u;
layout(constant_id = VKF_SPEC_CM_SLOTS_HI) const uint VKF_CM_SLOTS_HI = 0u;
layout(constant_id = VKF_SPEC_CM_ROW_LANE_MASK) const uint VKF_CM_ROW_LANE_MASK = 3u;
layout(constant_id = VKF_SPEC_CM_A_LIKE_ACC) const bool VKF_CM_A_LIKE_ACC = false;
// Accumulator elements per lane: the probe checks that a 16x16 matrix spreads evenly. A loop over
// them that indexes a matrix needs [[unroll]]: the driver leaves it a loop otherwise (its trip
// count is a specialization constant), and one run-time index puts the whole array of matrices in
// local memory (docs/tuning-log.md).
const uint VKF_CM_ELEMENTS = 256 / VKF_CM_SUBGROUP_SIZE;
#endif
