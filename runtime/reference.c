/* The model in fp64 on the CPU: the oracle for every test and the `cpu`
 * device of `flowgen sample`.  Rows are independent; large batches are split
 * over threads. */
#include "flowrt.h"
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct reference_job {
  const flowgen_spec *spec;
  const flowrt_weights *w;
  const double *w1, *w2, *w3;  /* weights as double, PyTorch layout */
  const float *x0;
  double *x;
  int64_t first, count;
} reference_job;

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* An explicit Runge-Kutta scheme whose stage i starts from
 * x + dt a[i] k[i-1] (every scheme here has only the subdiagonal) at time
 * (k + c[i]) / S, and whose step is x + dt sum b[i] k[i]. */
typedef struct tableau {
  int stages;
  double c[4], a[4], b[4];
} tableau;

static const tableau tableaus[] = {
    [FLOWGEN_SOLVER_EULER] = {1, {0.5}, {0}, {1}},
    [FLOWGEN_SOLVER_MIDPOINT] = {2, {0, 0.5}, {0, 0.5}, {0, 1}},
    [FLOWGEN_SOLVER_HEUN] = {2, {0, 1}, {0, 1}, {0.5, 0.5}},
    [FLOWGEN_SOLVER_RK4] = {4, {0, 0.5, 0.5, 1}, {0, 0.5, 0.5, 1},
                            {1.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 6}},
};

/* out[j] = b[j] + sum_i w[j * in_stride + i] * in[i], for j < outputs. */
static void dense(const double *w, const float *b, const double *in,
                  int inputs, int in_stride, int outputs, double *out) {
  for (int j = 0; j < outputs; ++j) {
    const double *row = w + (size_t)j * in_stride;
    double acc = b[j];
    for (int i = 0; i < inputs; ++i) acc += row[i] * in[i];
    out[j] = acc;
  }
}

/* v = velocity(x, t) */
static void velocity(const reference_job *job, const double *x, double t,
                     double *h1, double *h2, double *v) {
  const int D = job->w->dim, H = job->w->hidden;
  /* W1 acts on [x, t]: the t column is W1[:, D]. */
  dense(job->w1, job->w->b1, x, D, D + 1, H, h1);
  for (int j = 0; j < H; ++j)
    h1[j] = silu(h1[j] + job->w1[(size_t)j * (D + 1) + D] * t);
  dense(job->w2, job->w->b2, h1, H, H, H, h2);
  for (int j = 0; j < H; ++j) h2[j] = silu(h2[j]);
  dense(job->w3, job->w->b3, h2, H, H, D, v);
}

static void *run_rows(void *arg) {
  reference_job *job = arg;
  const int D = job->w->dim, H = job->w->hidden, S = job->spec->steps;
  const tableau *tb = &tableaus[job->spec->solver];
  /* h1, h2 (H each); v, y, sum (D each) */
  double *h1 = malloc(sizeof(double) * ((size_t)H * 2 + (size_t)D * 3));
  if (!h1) return (void *)1;
  double *h2 = h1 + H, *v = h2 + H, *y = v + D, *sum = y + D;
  const double dt = 1.0 / S;
  for (int64_t r = job->first; r < job->first + job->count; ++r) {
    double *x = job->x + r * D;
    for (int c = 0; c < D; ++c) x[c] = job->x0[r * D + c];
    for (int k = 0; k < S; ++k) {
      for (int c = 0; c < D; ++c) {
        y[c] = x[c];
        sum[c] = 0.0;
      }
      for (int i = 0; i < tb->stages; ++i) {
        if (i > 0)
          for (int c = 0; c < D; ++c) y[c] = x[c] + dt * tb->a[i] * v[c];
        velocity(job, y, (k + tb->c[i]) / S, h1, h2, v);
        for (int c = 0; c < D; ++c) sum[c] += tb->b[i] * v[c];
      }
      for (int c = 0; c < D; ++c) x[c] += dt * sum[c];
    }
  }
  free(h1);
  return NULL;
}

static double *to_double(const float *src, size_t n) {
  double *d = malloc(n * sizeof *d);
  if (d)
    for (size_t i = 0; i < n; ++i) d[i] = src[i];
  return d;
}

flowgen_status flowrt_reference_f64(const flowgen_spec *spec,
                                    const flowrt_weights *w, const float *x0,
                                    double *x, int64_t batch,
                                    flowgen_error *err) {
  flowgen_status st = flowgen_spec_validate(spec, err);
  if (st) return st;
  if (!w || w->dim != spec->dim || w->hidden != flowgen_spec_hidden(spec))
    return fg_fail(err, FLOWGEN_INVALID,
                   "weights of shape D=%d, H=%d do not match the spec (D=%d, H=%d)",
                   w ? w->dim : 0, w ? w->hidden : 0, spec->dim,
                   flowgen_spec_hidden(spec));
  if (batch < 0) return fg_fail(err, FLOWGEN_INVALID, "batch %lld < 0", (long long)batch);
  if (batch == 0) return FLOWGEN_OK;
  const size_t D = (size_t)w->dim, H = (size_t)w->hidden;
  double *w1 = to_double(w->w1, H * (D + 1)), *w2 = to_double(w->w2, H * H),
         *w3 = to_double(w->w3, D * H);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)(cores < 1 ? 1 : cores > 32 ? 32 : cores);
  if (batch < 64 * threads) threads = (int)((batch + 63) / 64);
  reference_job *jobs = calloc((size_t)threads, sizeof *jobs);
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  bool *started = calloc((size_t)threads, sizeof *started);
  if (!w1 || !w2 || !w3 || !jobs || !tids || !started) {
    st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    goto done;
  }
  int64_t per = (batch + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    int64_t first = i * per;
    jobs[i] = (reference_job){spec, w, w1, w2, w3, x0, x, first,
                              first >= batch ? 0 : (batch - first < per ? batch - first : per)};
  }
  for (int i = 1; i < threads; ++i)
    started[i] = pthread_create(&tids[i], NULL, run_rows, &jobs[i]) == 0;
  bool failed = run_rows(&jobs[0]) != NULL;
  for (int i = 1; i < threads; ++i) {
    void *ret = NULL;
    if (started[i]) pthread_join(tids[i], &ret);
    else ret = run_rows(&jobs[i]);
    failed |= ret != NULL;
  }
  if (failed) st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
done:
  free(w1);
  free(w2);
  free(w3);
  free(jobs);
  free(tids);
  free(started);
  return st;
}

flowgen_status flowrt_reference(const flowgen_spec *spec,
                                const flowrt_weights *w, const float *x0,
                                float *x, int64_t batch, flowgen_error *err) {
  if (batch <= 0) return flowrt_reference_f64(spec, w, x0, NULL, batch, err);
  size_t n = (size_t)batch * (size_t)spec->dim;
  double *out = malloc(n * sizeof *out);
  if (!out) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  flowgen_status st = flowrt_reference_f64(spec, w, x0, out, batch, err);
  if (!st)
    for (size_t i = 0; i < n; ++i) x[i] = (float)out[i];
  free(out);
  return st;
}
