// Which keys a query row may see. Causal masking is bottom-right aligned (FlashAttention >= 2.1):
// query row i sees key j iff j <= i + kv_len - q_len. Needs CAUSAL (spec constant) in scope.
#ifndef VKFLASH_ATTENTION_MASK_GLSL
#define VKFLASH_ATTENTION_MASK_GLSL

// Offset of the causal diagonal: row i sees keys j <= i + causal_shift.
int causal_shift(uint q_len, uint kv_len) { return int(kv_len) - int(q_len); }

// One past the last key that any of the rows [q_begin, q_end) may see: tiles at or beyond it are
// wholly masked and skipped. q_end is already clamped to q_len.
uint visible_kv_end(uint q_begin, uint q_end, uint q_len, uint kv_len) {
  if (!CAUSAL) return kv_len;
  const int last_key = int(q_end) - 1 + causal_shift(q_len, kv_len);
  return uint(clamp(last_key + 1, 0, int(kv_len)));
}

// True if some element of the tile (rows [q_begin, q_end) x keys [kv_begin, kv_begin + block))
// is masked: past kv_len, or above the diagonal for the tile's first row. Only such tiles pay for
// per-element masking.
bool tile_needs_mask(uint q_begin, uint kv_begin, uint block_kv, uint q_len, uint kv_len) {
  if (kv_begin + block_kv > kv_len) return true;
  if (!CAUSAL) return false;
  return int(kv_begin + block_kv) - 1 > int(q_begin) + causal_shift(q_len, kv_len);
}

// True if the causal diagonal cuts the tile (rows from q_begin on x keys [kv_begin, kv_begin +
// block_kv)): some of its keys below kv_len are masked for some of its rows. A tile cut by kv_len
// alone is not: its keys past kv_len are staged as zeros, and their gradients never stored.
bool tile_crosses_diagonal(uint q_begin, uint kv_begin, uint block_kv, uint q_len, uint kv_len) {
  if (!CAUSAL) return false;
  return int(min(kv_begin + block_kv, kv_len)) - 1 > int(q_begin) + causal_shift(q_len, kv_len);
}

bool key_visible(uint q_row, uint key, uint q_len, uint kv_len) {
  if (key >= kv_len) return false;
  return !CAUSAL || int(key) <= int(q_row) + causal_shift(q_len, kv_len);
}

// The keys a row sees are [0, row_keys_end): one past the last.
uint row_keys_end(uint q_row, uint q_len, uint kv_len) {
  if (!CAUSAL) return kv_len;
  return uint(clamp(int(q_row) + causal_shift(q_len, kv_len) + 1, 0, int(kv_len)));
}

// The query rows that see `key` are [key_rows_begin, q_len) (none for a key past kv_len).
uint key_rows_begin(uint key, uint q_len, uint kv_len) {
  if (key >= kv_len) return q_len;
  if (!CAUSAL) return 0;
  return uint(clamp(int(key) - causal_shift(q_len, kv_len), 0, int(q_len)));
}

#endif
