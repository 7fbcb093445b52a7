/* Random inputs for the benchmark programs (bench.c, sanitize.c): uniform
 * values from a fixed xorshift sequence, and weights initialised as
 * PyTorch does, U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
#ifndef FLOWGEN_BENCH_RANDOM_H
#define FLOWGEN_BENCH_RANDOM_H

#include "flowrt.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static uint64_t bench_rng = 0x853c49e6748fea9bull;

/* n values uniform in [-scale, scale). */
static inline void bench_fill(float *p, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) {
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    double u = (double)(bench_rng >> 11) / 9007199254740992.0;
    p[i] = (float)((2 * u - 1) * scale);
  }
}

static inline void bench_fill_weights(flowrt_weights *w) {
  const size_t D = (size_t)w->dim, H = (size_t)w->hidden;
  const float s1 = 1 / sqrtf(D + 1.0f), s2 = 1 / sqrtf((float)H);
  bench_fill(w->w1, H * (D + 1), s1);
  bench_fill(w->b1, H, s1);
  bench_fill(w->w2, H * H, s2);
  bench_fill(w->b2, H, s2);
  bench_fill(w->w3, D * H, s2);
  bench_fill(w->b3, D, s2);
}

#endif
