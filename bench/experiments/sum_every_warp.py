"""Layer 2's sum of partials by every warp (twenty-eighth session; not
kept: 0.06 us a step more at D=64, H=256, B=8).

After the block barrier that ends layer 2's partials, every warp (not
warps 0-1 alone) sums the 8 warps' partials of all 64 own units (2 a
lane), applies the SiLU and keeps h2 in its own slice of shared memory;
its layer 3 reads that slice after a __syncwarp, so the block barrier
before layer 3 goes.

  python3 bench/experiments/sum_every_warp.py k.cu k_sew.cu
"""
from _rewrite import main, rep, splice


def rewrite(k):
    k = rep(k, '__shared__ __align__(16) float h2[kRows * kOwn];        // layer 2, own units',
            '__shared__ __align__(16) float h2w[kWarps][kOwn];      // layer 2, own units, a copy a warp')
    k = rep(k, '  const float b2 = params[k_b2 + static_cast<int>(rank) * kOwn + tid % kOwn];  // kThreads % kOwn == 0\n'
               '  const float nb2 = kNegLog2e * b2;  // for silu_u\n',
            '  const float2 b2 = *reinterpret_cast<const float2*>(&params[k_b2 + static_cast<int>(rank) * kOwn + 2 * lane]);\n'
            '  const float nb2x = kNegLog2e * b2.x, nb2y = kNegLog2e * b2.y;  // for silu_u\n')
    k = splice(k, '#pragma unroll\n    for (int e0 = 0; e0 < kRows * kOwn; e0 += kThreads) {  // a constant trip count',
               '    // Layer 3 partial, then sent', '''    {
      float2 s[4], hv;  // units 2 lane and 2 lane + 1, chains started by a warp's partials
#pragma unroll
      for (int w = 0; w < 4; ++w) s[w] = *reinterpret_cast<const float2*>(&p2[w * kOwn + 2 * lane]);
#pragma unroll
      for (int w = 4; w < kWarps; ++w) {
        const float2 p = *reinterpret_cast<const float2*>(&p2[w * kOwn + 2 * lane]);
        s[w % 4].x += p.x;
        s[w % 4].y += p.y;
      }
      const float sx = (s[0].x + s[1].x) + (s[2].x + s[3].x), sy = (s[0].y + s[1].y) + (s[2].y + s[3].y);
      hv.x = silu_u(sx + b2.x, fmaf(sx, kNegLog2e, nb2x));
      hv.y = silu_u(sy + b2.y, fmaf(sy, kNegLog2e, nb2y));
      *reinterpret_cast<float2*>(&h2w[warp][2 * lane]) = hv;
    }
    __syncwarp();  // layer 3 reads this warp's copy of h2

''')
    return rep(k, 'partial_dot<kOwn, kLanes3, kOwn>(w3, h2, lane3, acc);',
               'partial_dot<kOwn, kLanes3, kOwn>(w3, h2w[warp], lane3, acc);')


if __name__ == '__main__':
    main(rewrite)
