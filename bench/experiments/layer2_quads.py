"""Layer 2 by whole units a warp, 8 lanes a pair of units (twenty-ninth
session): the twenty-eighth session's layer2_whole.py with its loads of h1
laid out as the by-warp layer 2's are.

After a block barrier (h1, every unit), warp w computes 8 of the block's
64 own units over all 256 inputs: lane 8 g + j takes units 8 w + 2 g and
+ 1 over inputs 4 (j + 8 c) to + 3, c = 0..7 (8 float4 loads of h1; a
quarter-warp's 8 loads are 128 contiguous bytes and the four
quarter-warps read the same ones, as the by-warp layer 2's broadcasts
cost), then the 8 lanes of a pair sum it by three shuffles (the first
swaps the unit a lane does not keep), and lanes j = 0 and 1 apply the
SiLU and store h2: no partials in shared memory, no sum by warps 0-1, no
block barrier between them.  Works on the plan's kernel and on the fold's
(`--tune rows=1,fold=1`).  Its weights are loaded a float at a time from
the transposed W2 (read its step, not its fixed cost).

  python3 bench/experiments/layer2_quads.py k.cu k_l2q.cu
"""
import re
import sys

from _rewrite import main, rep, splice


def rewrite(k):
    fold = 'Layer 3 folded into the next step' in k
    k, n = re.subn(r'  float w2\[kUnits2\]\[32\];\n  load_thread<\d+, 64>\(w2, wc\);',
                   '''  const int g2 = lane / 8, j2 = lane % 8;
  const int o2 = static_cast<int>(rank) * kOwn + warp * 8 + 2 * g2;  // units o2 and o2 + 1
  float w2e[2][32];
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) w2e[u][4 * c + i] = params[k_w2t + (4 * (j2 + 8 * c) + i) * kHidden + o2 + u];''', k)
    if n != 1:
        sys.exit('no load of w2 by warp found')
    k = rep(k, '  const float b2 = params[k_b2 + static_cast<int>(rank) * kOwn + tid % kOwn];  // kThreads % kOwn == 0\n'
               '  const float nb2 = kNegLog2e * b2;  // for silu_u\n',
            '  const float b2 = params[k_b2 + o2 + (j2 & 1)], nb2 = kNegLog2e * b2;\n')
    k = splice(k, '    __syncwarp();  // layer 2 reads only this warp',
               '    // Layer 3 folded' if fold else '    // Layer 3 partial, then sent', '''    __syncthreads();  // h1, every unit
    {
      float part[2][2] = {};
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float4 a = *reinterpret_cast<const float4*>(&h1[4 * (j2 + 8 * c)]);
#pragma unroll
        for (int u = 0; u < 2; ++u) fma4(part[u], a, w2e[u], 4 * c);
      }
      const float s0 = sum_chains(part[0]), s1 = sum_chains(part[1]);
      const int odd = j2 & 1;
      float s = (odd ? s1 : s0) + __shfl_xor_sync(0xffffffffu, odd ? s0 : s1, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      const float h = silu_u(s + b2, fmaf(s, kNegLog2e, nb2));
      if (j2 < 2) {
        h2[warp * 8 + 2 * g2 + j2] = h;''' + ('''
        sum2[0] += h;''' if fold else '') + '''
      }
    }
    __syncthreads();

''')
    if fold:
        # x at the end: the own units' sums of h2 from the lanes that hold them
        k = splice(k, '#pragma unroll\n  for (int e0 = 0; e0 < kRows * kOwn; e0 += kThreads) {  // a constant trip count',
                   '  __syncthreads();\n  {\n    float acc[kRows];',
                   '  if (j2 < 2) h2[warp * 8 + 2 * g2 + j2] = sum2[0];\n')
    return k


if __name__ == '__main__':
    main(rewrite)
