#!/usr/bin/env python3
"""The gradient-kernel variants of tools/lab/runs/2026-11-29-scalar-backward-time.sh, written from
ce6015b's shaders (run it from the project's root with those shaders checked out) into OUT_DIR:

    python3 tools/lab/runs/2026-11-29-scalar-backward-variants.py /tmp/var

then, for each build NAME of the script's header, e.g.
    python3 tools/lab/build_variant.py comboC shaders/scalar/attention_backward_dkdv_tiled.comp @FILE \\
        /tmp/var/dkdv_sum4_tscore.comp shaders/scalar/attention_backward_dq_tiled.comp @FILE /tmp/var/dq_w2_tscore.comp
(dkdv_sum4, dq_sum4, dq_w2, dq_w4, dkdv_tscore, dq_tscore: one file each; comboA dkdv_sum4 + dq_w2;
comboB dkdv_sum4_tscore + dq_w2; comboC dkdv_sum4_tscore + dq_w2_tscore). The first run's dq_w2 and
dkdv_w2 ended the loop with `if (w < ROW_WORDS)` instead of a loop; the ablations were one-line
replacements (the script's header). Timing builds, not kept: the kept code is scalar/score_tile.glsl.
"""
import sys


def rep(s,old,new):
    assert s.count(old)==1,(old,s.count(old)); return s.replace(old,new)
def dedent(body): return '\n'.join(l[2:] if l.startswith('  ') else l for l in body.split('\n'))
def sum4(src, kind):
    if kind=='dkdv':
        start=src.index('void add_gradients('); fname='add_gradient_row'
        params='inout vec4 dk[ROWS_PER_THREAD][VEC4_PER_THREAD], inout vec4 dv[ROWS_PER_THREAD][VEC4_PER_THREAD],\n                      uint c, uint key0, uint lane, bool masked, uint first_query[ROWS_PER_THREAD], uint query_stop[ROWS_PER_THREAD]'
        first='  const uint key0'; call='dk, dv, C, key0, lane, masked, first_query, query_stop'
        head='  const uint key0 = group_first_key(), lane = lane_id();\n'
    else:
        start=src.index('void add_dq('); fname='add_dq_row'
        params='inout vec4 dq[ROWS_PER_THREAD][VEC4_PER_THREAD], uint c, uint row0, uint lane, bool masked,\n                uint visible_first[ROWS_PER_THREAD], uint visible_end[ROWS_PER_THREAD]'
        first='  const uint row0'; call='dq, C, row0, lane, masked, visible_first, visible_end'
        head='  const uint row0 = row_group_first_row(), lane = lane_id();\n'
    end=src.index('void main()')
    fn=src[start:end]
    hdr='  for (uint c = 0; c < c_end; ++c) {\n'
    body=fn[fn.index(hdr)+len(hdr):fn.rindex('  }\n}\n')]
    row_fn=f'void {fname}({params}) {{\n'+dedent(body)+'}\n\n'
    new_fn=fn[:fn.index(first)]+head+f'''  uint c = 0;
  for (; c + 4 <= c_end; c += 4) {{
    [[unroll]] for (uint cc = 0; cc < 4; ++cc) {fname}({call.replace('C','c + cc')});
  }}
  for (; c < c_end; ++c) {fname}({call.replace('C','c')});
}}

'''
    return src[:start]+row_fn+new_fn+src[end:]
def wn(src, kind, n):
    if kind=='dkdv': ctxp,ctxa,sd='uint key0, uint lane','key0, lane','ROWS_PER_THREAD][QUERIES_PER_THREAD'
    else: ctxp,ctxa,sd='uint row0, uint lane','row0, lane','ROWS_PER_THREAD][KEYS_PER_THREAD'
    hdr='  for (uint w = 0; w < ROW_WORDS; ++w) {\n'
    i=src.index(hdr); j=src.index('\n  }\n', i)+len('\n  }\n')
    body=src[i+len(hdr):j-len('  }\n')]
    fstart=src.rindex('\nvoid ', 0, i)+1
    word_fn=f'void score_word(inout float s[{sd}], inout float dp[{sd}], uint w, {ctxp}) {{\n'+dedent(body)+'}\n\n'
    loop=f'''  uint w = 0;
  for (; w + {n} <= ROW_WORDS; w += {n}) {{
    [[unroll]] for (uint ww = 0; ww < {n}; ++ww) score_word(s, dp, w + ww, {ctxa});
  }}
  for (; w < ROW_WORDS; ++w) score_word(s, dp, w, {ctxa});
'''
    return src[:fstart]+word_fn+src[fstart:i]+loop+src[j:]
def tscore(src, kind):
    if kind=='dkdv':
        src=rep(src,'''shared float pt_tile[VKF_SMEM_TILED_SCORE_FLOATS(BLOCK_KV, SCORE_STRIDE)];   // P^T of the step
shared float dst_tile[VKF_SMEM_TILED_SCORE_FLOATS(BLOCK_KV, SCORE_STRIDE)];  // dS^T of the step''',
'''// P^T and dS^T of the step, a row per query, 4 keys per vec4 (one padding vec4 a row)
const uint SCORE_VEC4S = BLOCK_KV / 4 + 1;
shared vec4 pt4[BLOCK_Q * SCORE_VEC4S];
shared vec4 dst4[BLOCK_Q * SCORE_VEC4S];
void store_scores(uint c, uint key0, float pv[ROWS_PER_THREAD], float dsv[ROWS_PER_THREAD]) {
  if (ROWS_PER_THREAD == 4) {
    pt4[c * SCORE_VEC4S + key0 / 4] = vec4(pv[0], pv[min(1u, ROWS_PER_THREAD - 1)], pv[min(2u, ROWS_PER_THREAD - 1)], pv[min(3u, ROWS_PER_THREAD - 1)]);
    dst4[c * SCORE_VEC4S + key0 / 4] = vec4(dsv[0], dsv[min(1u, ROWS_PER_THREAD - 1)], dsv[min(2u, ROWS_PER_THREAD - 1)], dsv[min(3u, ROWS_PER_THREAD - 1)]);
  } else {
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      pt4[c * SCORE_VEC4S + (key0 + r) / 4][(key0 + r) % 4] = pv[r];
      dst4[c * SCORE_VEC4S + (key0 + r) / 4][(key0 + r) % 4] = dsv[r];
    }
  }
}''')
        src=rep(src,'''  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    [[unroll]] for (uint j = 0; j < QUERIES_PER_THREAD; ++j) {
      const uint c = lane + j * THREADS_PER_ROW;''','''  [[unroll]] for (uint j = 0; j < QUERIES_PER_THREAD; ++j) {
    float pv[ROWS_PER_THREAD], dsv[ROWS_PER_THREAD];
    const uint c = lane + j * THREADS_PER_ROW;
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {''')
        src=rep(src,'''      pt_tile[(key0 + r) * SCORE_STRIDE + c] = p;
      dst_tile[(key0 + r) * SCORE_STRIDE + c] = visible ? p * (dp[r][j] - delta_tile[c]) * score_mod_derivative(t) : 0.0;
    }
  }''','''      pv[r] = p;
      dsv[r] = visible ? p * (dp[r][j] - delta_tile[c]) * score_mod_derivative(t) : 0.0;
    }
    store_scores(c, key0, pv, dsv);
  }''')
        old='''  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    p[r] = pt_tile[(key0 + r) * SCORE_STRIDE + c];
    ds[r] = dst_tile[(key0 + r) * SCORE_STRIDE + c];
  }'''
        ind='  ' if src.count(old)==1 else '    '
        if ind=='    ': old='\n'.join('  '+l for l in old.split('\n'))
        new='''if (ROWS_PER_THREAD == 4) {
  const vec4 p4 = pt4[c * SCORE_VEC4S + key0 / 4], ds4 = dst4[c * SCORE_VEC4S + key0 / 4];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    p[r] = p4[min(r, 3u)];
    ds[r] = ds4[min(r, 3u)];
  }
} else {
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    p[r] = pt4[c * SCORE_VEC4S + (key0 + r) / 4][(key0 + r) % 4];
    ds[r] = dst4[c * SCORE_VEC4S + (key0 + r) / 4][(key0 + r) % 4];
  }
}'''
        src=rep(src,old,'\n'.join(ind+l for l in new.split('\n')))
    else:
        src=rep(src,'''shared float ds_tile[VKF_SMEM_TILED_SCORE_FLOATS(BLOCK_Q, SCORE_STRIDE)];  // dS of the step''','''// dS of the step, a row per key, 4 query rows per vec4 (one padding vec4 a row)
const uint SCORE_VEC4S = BLOCK_Q / 4 + 1;
shared vec4 ds4_tile[BLOCK_KV * SCORE_VEC4S];''')
        old=src[src.index('  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {\n    [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {\n      const uint c = lane'):]
        old=old[:old.index('\n}\n')+1]
        src=rep(src,old,'''  [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {
    const uint c = lane + j * THREADS_PER_ROW;
    float dsv[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      const bool visible = !masked_tile || key_visible(q_begin + row0 + r, kv_begin + c, q_len, kv_len);
      const float t = s[r][j] * pc.scale_log2;
      dsv[r] = visible ? pair_p(t, lse[r], modifiers, q_begin + row0 + r, kv_begin + c, q_len, kv_len) * (dp[r][j] - delta[r]) *
                             score_mod_derivative(t)
                       : 0.0;
    }
    if (ROWS_PER_THREAD == 4) {
      ds4_tile[c * SCORE_VEC4S + row0 / 4] = vec4(dsv[0], dsv[min(1u, ROWS_PER_THREAD - 1)], dsv[min(2u, ROWS_PER_THREAD - 1)], dsv[min(3u, ROWS_PER_THREAD - 1)]);
    } else {
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) ds4_tile[c * SCORE_VEC4S + (row0 + r) / 4][(row0 + r) % 4] = dsv[r];
    }
  }
''')
        old='[[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) ds[r] = ds_tile[(row0 + r) * SCORE_STRIDE + c];'
        line=[l for l in src.split('\n') if old in l][0]; ind=line[:len(line)-len(line.lstrip())]
        new='''if (ROWS_PER_THREAD == 4) {
  const vec4 ds4 = ds4_tile[c * SCORE_VEC4S + row0 / 4];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) ds[r] = ds4[min(r, 3u)];
} else {
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) ds[r] = ds4_tile[c * SCORE_VEC4S + (row0 + r) / 4][(row0 + r) % 4];
}'''
        src=rep(src,line,'\n'.join(ind+l for l in new.split('\n')))
    return src
D='shaders/scalar/attention_backward_dkdv_tiled.comp'; Q='shaders/scalar/attention_backward_dq_tiled.comp'
d0=open(D).read(); q0=open(Q).read()
outs={
 'dq_w4': wn(q0,'dq',4),
 'dq_w2': wn(q0,'dq',2),
 'dkdv_sum4': sum4(d0,'dkdv'),
 'dkdv_tscore': tscore(d0,'dkdv'),
 'dq_tscore': tscore(q0,'dq'),
 'dkdv_sum4_tscore': tscore(sum4(d0,'dkdv'),'dkdv'),
 'dq_w2_tscore': tscore(wn(q0,'dq',2),'dq'),
}
out_dir = sys.argv[1]
for k, v in outs.items(): open(out_dir + "/" + k + ".comp", "w").write(v)  # OUT_DIR/NAME.comp
print('ok')
