// Stored dS, shared by the dK/dV kernel's VKF_STORE_DS build, which writes it, and
// attention_backward_dq_from_ds_coopmat2.comp, which reads it back. The workspace holds, for each
// (batch, query head) of a chunk, a slot of dS^T in float16: one row per key, of stored_ds_stride()
// queries, with the call's longest lengths (pc.q_len, pc.kv_len) padded as
// common/shader_interface.h's VKF_STORED_DS_PAD says. Needs pc (AttentionPush).
#ifndef VKFLASH_STORED_DS_GLSL
#define VKFLASH_STORED_DS_GLSL

uint stored_ds_stride() { return VKF_STORED_DS_PADDED(pc.q_len); }
// Element offset of slot `slot`'s row 0.
uint stored_ds_slot(const uint slot) { return slot * stored_ds_stride() * VKF_STORED_DS_PADDED(pc.kv_len); }

#endif
