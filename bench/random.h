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

/* Each layer as nn.Linear initialises it: U(-1/sqrt(fan_in), ..). */
static inline void bench_fill_weights(flowrt_weights *w) {
  for (int i = 0; i < w->layers; ++i) {
    size_t rows = i == w->layers - 1 ? (size_t)w->dim : (size_t)w->hidden;
    size_t cols = i == 0 ? (size_t)(w->dim + w->time_width + w->cond) : (size_t)w->hidden;
    const float scale = 1 / sqrtf((float)cols);
    bench_fill(w->w[i], rows * cols, scale);
    bench_fill(w->b[i], rows, scale);
  }
}

#endif
