// Which keys a query row may see: a band around the bottom-right aligned diagonal (FlashAttention
// >= 2.1; docs/design.md). With shift = kv_len - q_len, row i sees key j < kv_len iff
//   j >= i + shift - window_left    where WINDOW_LEFT (the sliding window's left side)
//   j <= i + shift + window_right   where WINDOW_RIGHT (causal: window_right = 0)
// and a side whose constant is false is unbounded. Both sides move right with the row, so the
// keys that a run of rows sees run from its first row's first key to its last row's last, and the
// rows that see a run of keys likewise. Needs WINDOW_LEFT, WINDOW_RIGHT (spec constants,
// common/attention_preamble.glsl) and the AttentionPush with window_left / window_right,
// VKF_MASK_PUSH (default pc).
#ifndef VKFLASH_ATTENTION_MASK_GLSL
#define VKFLASH_ATTENTION_MASK_GLSL

#ifndef VKF_MASK_PUSH
#define VKF_MASK_PUSH pc
#endif

// Offset of the diagonal: row i's band is centred on key i + diagonal_shift.
int diagonal_shift(uint q_len, uint kv_len) { return int(kv_len) - int(q_len); }

// The keys row q_row sees are [row_keys_begin, row_keys_end) (empty where end <= begin).
uint row_keys_begin(uint q_row, uint q_len, uint kv_len) {
  if (!WINDOW_LEFT) return 0;
  return uint(clamp(int(q_row) + diagonal_shift(q_len, kv_len) - VKF_MASK_PUSH.window_left, 0, int(kv_len)));
}

uint row_keys_end(uint q_row, uint q_len, uint kv_len) {
  if (!WINDOW_RIGHT) return kv_len;
  return uint(clamp(int(q_row) + diagonal_shift(q_len, kv_len) + VKF_MASK_PUSH.window_right + 1, 0, int(kv_len)));
}

bool key_visible(uint q_row, uint key, uint q_len, uint kv_len) {
  if (key >= kv_len) return false;
  const int offset = int(key) - int(q_row) - diagonal_shift(q_len, kv_len);  // keys right of the diagonal
  return (!WINDOW_RIGHT || offset <= VKF_MASK_PUSH.window_right) && (!WINDOW_LEFT || -offset <= VKF_MASK_PUSH.window_left);
}

// The query rows that see `key` are [key_rows_begin, key_rows_end) (none for a key past kv_len).
uint key_rows_begin(uint key, uint q_len, uint kv_len) {
  if (key >= kv_len) return q_len;
  if (!WINDOW_RIGHT) return 0;
  return uint(clamp(int(key) - diagonal_shift(q_len, kv_len) - VKF_MASK_PUSH.window_right, 0, int(q_len)));
}

uint key_rows_end(uint key, uint q_len, uint kv_len) {
  if (key >= kv_len) return q_len;
  if (!WINDOW_LEFT) return q_len;
  return uint(clamp(int(key) - diagonal_shift(q_len, kv_len) + VKF_MASK_PUSH.window_left + 1, 0, int(q_len)));
}

// The first key that any of the rows from q_begin on sees, rounded down to a tile of block_kv
// keys: loops over key tiles start there (tiles before it are wholly masked and never visited).
uint first_visible_kv_tile(uint q_begin, uint block_kv, uint q_len, uint kv_len) {
  return row_keys_begin(q_begin, q_len, kv_len) / block_kv * block_kv;
}

// One past the last key that any of the rows [q_begin, q_end) may see: tiles at or beyond it are
// wholly masked and skipped. q_end is already clamped to q_len.
uint visible_kv_end(uint q_begin, uint q_end, uint q_len, uint kv_len) {
  if (!WINDOW_RIGHT || q_end <= q_begin) return kv_len;
  return row_keys_end(q_end - 1, q_len, kv_len);
}

// The query rows that see any of the keys [kv_begin, kv_begin + block_kv): [visible_q_begin,
// visible_q_end). The dK/dV kernels stream only those rows' tiles.
uint visible_q_begin(uint kv_begin, uint q_len, uint kv_len) { return key_rows_begin(kv_begin, q_len, kv_len); }

uint visible_q_end(uint kv_begin, uint block_kv, uint q_len, uint kv_len) {
  if (kv_begin >= kv_len) return q_len;
  return key_rows_end(min(kv_begin + block_kv, kv_len) - 1, q_len, kv_len);
}

// True if some element of the tile (rows [q_begin, q_begin + block_q) x keys [kv_begin, kv_begin +
// block_kv)) is masked: past kv_len, right of the first row's band or left of the last row's. Only
// such tiles pay for per-element masking.
bool tile_needs_mask(uint q_begin, uint block_q, uint kv_begin, uint block_kv, uint q_len, uint kv_len) {
  if (kv_begin + block_kv > kv_len) return true;
  const int shift = diagonal_shift(q_len, kv_len);
  if (WINDOW_RIGHT && int(kv_begin + block_kv) - 1 > int(q_begin) + shift + VKF_MASK_PUSH.window_right) return true;
  return WINDOW_LEFT && int(kv_begin) < int(q_begin + block_q) - 1 + shift - VKF_MASK_PUSH.window_left;
}

// True if the band's edge cuts the tile (rows [q_begin, q_begin + block_q) x keys [kv_begin,
// kv_begin + block_kv)): some of its keys below kv_len are masked for some of its rows. A tile cut
// by kv_len alone is not: its keys past kv_len are staged as zeros, and their gradients never stored.
bool tile_crosses_band(uint q_begin, uint block_q, uint kv_begin, uint block_kv, uint q_len, uint kv_len) {
  const int shift = diagonal_shift(q_len, kv_len);
  if (WINDOW_RIGHT && int(min(kv_begin + block_kv, kv_len)) - 1 > int(q_begin) + shift + VKF_MASK_PUSH.window_right) return true;
  return WINDOW_LEFT && int(kv_begin) < int(q_begin + block_q) - 1 + shift - VKF_MASK_PUSH.window_left;
}

#endif
