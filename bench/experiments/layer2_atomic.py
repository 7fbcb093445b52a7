"""Layer 2's partials added by shared-memory atomics (twenty-eighth
session; not kept: 0.49 us a step more at D=64, H=256, B=8).  Timing
only: the adds' order, so the sums' rounding, varies from run to run.

Each lane atomicAdds its two partials into the unit's sum; warps 0-1
read and clear it in place of summing the 8 warps' partials.  On sm_90
an fp32 add on shared memory is a compare-and-swap loop (ATOMS.CAST.SPIN).

  python3 bench/experiments/layer2_atomic.py k.cu k_l2a.cu
"""
from _rewrite import main, rep


def rewrite(k):
    k = rep(k, '__shared__ __align__(16) float h2[kRows * kOwn];        // layer 2, own units',
            '__shared__ __align__(16) float h2[kRows * kOwn];        // layer 2, own units\n'
            '  __shared__ __align__(16) float h2acc[kRows * kOwn];')
    k = rep(k, '  __syncthreads();  // xs\n',
            '  for (int e = tid; e < kRows * kOwn; e += kThreads) h2acc[e] = 0.0f;\n  __syncthreads();  // xs\n')
    k = rep(k, 'p2[(warp * kRows + r) * kOwn + kUnits2 * lane + u] = sum_chains(part[r][u]);',
            'atomicAdd(&h2acc[r * kOwn + kUnits2 * lane + u], sum_chains(part[r][u]));')
    return rep(k, '''      float s[4];  // chains, each started by a warp's partial (not by 0 + it)
#pragma unroll
      for (int w = 0; w < 4; ++w) s[w] = p2[w * kRows * kOwn + e];
#pragma unroll
      for (int w = 4; w < kWarps; ++w) s[w % 4] += p2[w * kRows * kOwn + e];
      const float s2 = (s[0] + s[1]) + (s[2] + s[3]);''', '''      const float s2 = h2acc[e];
      h2acc[e] = 0.0f;''')


if __name__ == '__main__':
    main(rewrite)
