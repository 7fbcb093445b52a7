"""Layer 2 by whole units a warp (twenty-eighth session; not kept: 0.185
us a step more at D=64, H=256, B=8).

A block barrier after layer 1 in place of the __syncwarp; each warp then
computes 8 of the block's 64 units over all 256 inputs (4 lanes a unit,
64 inputs a lane, 16 float4 loads of h1), sums them by two shuffles and
applies the SiLU itself: no partials in shared memory, no sum by warps
0-1, one block barrier fewer.  Its weights are loaded a float at a time
from the transposed W2 (read its step, not its fixed cost).

  python3 bench/experiments/layer2_whole.py k.cu k_l2w.cu
"""
from _rewrite import main, rep, splice


def rewrite(k):
    k = rep(k, '''  float w2[kUnits2][32];
  load_thread<64, 64>(w2, wc);''', '''  const int o2 = static_cast<int>(rank) * kOwn + warp * 8 + lane / 4, j2 = lane % 4;
  float w2v[64];
#pragma unroll
  for (int c = 0; c < 16; ++c)
#pragma unroll
    for (int q = 0; q < 4; ++q) w2v[4 * c + q] = params[k_w2t + (4 * (j2 + 4 * c) + q) * kHidden + o2];
  const float b2v = params[k_b2 + o2], nb2v = kNegLog2e * b2v;''')
    k = splice(k, '    __syncwarp();  // layer 2 reads only this warp', '    // Layer 3 partial, then sent', '''    __syncthreads();  // h1, every unit
    {
      float part[2] = {};
#pragma unroll
      for (int c = 0; c < 16; ++c)
        fma4(part, *reinterpret_cast<const float4*>(&h1[4 * (j2 + 4 * c)]), w2v, 4 * c);
      float s2 = sum_chains(part);
      s2 += __shfl_xor_sync(0xffffffffu, s2, 1);
      s2 += __shfl_xor_sync(0xffffffffu, s2, 2);
      if (j2 == 0) h2[warp * 8 + lane / 4] = silu_u(s2 + b2v, fmaf(s2, kNegLog2e, nb2v));
    }
    __syncthreads();

''')
    return rep(k, '  const float b2 = params[k_b2 + static_cast<int>(rank) * kOwn + tid % kOwn];  // kThreads % kOwn == 0\n'
               '  const float nb2 = kNegLog2e * b2;  // for silu_u\n', '')


if __name__ == '__main__':
    main(rewrite)
