/* The model in fp64 on the CPU: the oracle for every test and the `cpu`
 * device of `flowgen sample`.  It computes the family as PyTorch defines
 * it (nn.GELU with erf, approximate='tanh', tau(t) of the formula),
 * only in fp64.  Rows are independent; large batches are split over
 * threads. */
#include "flowrt.h"
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first layer's columns of each input part, and what the parts are. */
typedef struct model {
  int D, H, C, T, L;
  int x_col, t_col, c_col;     /* first column of x, tau(t), c in w[0] */
  int in;                      /* D + T + C */
  flowgen_activation act;
  int features;                /* 0 = raw */
  double scale;
  const double *w[FLOWGEN_LAYERS_MAX];  /* as double, PyTorch layout */
  const float *b[FLOWGEN_LAYERS_MAX];
} model;

typedef struct reference_job {
  const flowgen_spec *spec;
  const model *m;
  const float *x0, *cond;
  const double *null_bias;     /* W1_c null_cond (guided), H values */
  double guidance;
  bool guided;
  double *x;
  int64_t first, count;
} reference_job;

/* ---- activations (as torch.nn defines them) ------------------------------ */

static double activate(flowgen_activation act, double v) {
  switch (act) {
  case FLOWGEN_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
  case FLOWGEN_ACT_GELU_TANH: {
    const double k = sqrt(2.0 / M_PI);
    return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
  }
  case FLOWGEN_ACT_RELU: return v > 0.0 ? v : 0.0;
  case FLOWGEN_ACT_TANH: return tanh(v);
  case FLOWGEN_ACT_SILU:
  default: return v / (1.0 + exp(-v));
  }
}

/* tau(t): raw is t itself; sin:K is half = K/2, f_i = 10000^(-i/half),
 * [sin(scale t f_i) for i < half, cos(scale t f_i) for i < half]. */
static void time_features(const model *m, double t, double *tau) {
  if (!m->features) {
    tau[0] = t;
    return;
  }
  const int half = m->features / 2;
  for (int i = 0; i < half; ++i) {
    double f = pow(10000.0, -(double)i / half);
    tau[i] = sin(m->scale * t * f);
    tau[half + i] = cos(m->scale * t * f);
  }
}

/* ---- the velocity ---------------------------------------------------------- */

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

/* out[j] = bias[j] + sum_i w[j * in_stride + i] * in[i], for j < outputs. */
static void dense(const double *w, const float *bias, const double *in,
                  int inputs, int in_stride, int outputs, double *out) {
  for (int j = 0; j < outputs; ++j) {
    const double *row = w + (size_t)j * in_stride;
    double acc = bias ? bias[j] : 0.0;
    for (int i = 0; i < inputs; ++i) acc += row[i] * in[i];
    out[j] = acc;
  }
}

/* cb[j] = sum_c W1[j][c column] cond[c]: the conditioning's share of the
 * first layer, constant over the integration. */
static void cond_bias(const model *m, const float *cond, double *cb) {
  for (int j = 0; j < m->H; ++j) {
    const double *row = m->w[0] + (size_t)j * m->in + m->c_col;
    double acc = 0.0;
    for (int c = 0; c < m->C; ++c) acc += row[c] * (cond ? cond[c] : 0.0);
    cb[j] = acc;
  }
}

/* Scratch of one thread: the hidden activations and the time features. */
typedef struct scratch {
  double *first;  /* layer 1 before cb and the activation: H */
  double *a, *b;  /* hidden activations: H each */
  double *tau;    /* T */
  double *v_u;    /* the unconditional field under guidance: D */
} scratch;

/* The hidden state entering the last layer, for the first layer's
 * pre-activation `first` plus the conditioning bias cb (NULL: none). */
static const double *hidden_layers(const model *m, const double *first,
                                   const double *cb, scratch *s) {
  double *h = s->a, *next = s->b;
  for (int j = 0; j < m->H; ++j)
    h[j] = activate(m->act, first[j] + (cb ? cb[j] : 0.0));
  for (int l = 1; l < m->L - 1; ++l) {
    dense(m->w[l], m->b[l], h, m->H, m->H, m->H, next);
    for (int j = 0; j < m->H; ++j) next[j] = activate(m->act, next[j]);
    double *swap = h;
    h = next;
    next = swap;
  }
  return h;
}

/* v = velocity(x, t, c), or with guidance v_u + w (v_c - v_u); cb_c and
 * cb_u are the conditioning biases (NULL when C = 0). */
static void velocity(const reference_job *job, const double *x, double t,
                     const double *cb_c, const double *cb_u, scratch *s,
                     double *v) {
  const model *m = job->m;
  /* W1 on x and tau(t), b1: shared by both fields under guidance. */
  time_features(m, t, s->tau);
  for (int j = 0; j < m->H; ++j) {
    const double *row = m->w[0] + (size_t)j * m->in;
    double acc = m->b[0][j];
    for (int i = 0; i < m->D; ++i) acc += row[m->x_col + i] * x[i];
    for (int i = 0; i < m->T; ++i) acc += row[m->t_col + i] * s->tau[i];
    s->first[j] = acc;
  }
  const double *last = m->w[m->L - 1];
  const double *h = hidden_layers(m, s->first, cb_c, s);
  dense(last, m->b[m->L - 1], h, m->H, m->H, m->D, v);
  if (!job->guided) return;
  /* The two fields in full, then combined: the oracle does not lean on
   * the last layer's linearity, which kernels may use. */
  double *v_u = s->v_u;
  h = hidden_layers(m, s->first, cb_u, s);
  dense(last, m->b[m->L - 1], h, m->H, m->H, m->D, v_u);
  for (int d = 0; d < m->D; ++d) v[d] = v_u[d] + job->guidance * (v[d] - v_u[d]);
}

static void *run_rows(void *arg) {
  reference_job *job = arg;
  const model *m = job->m;
  const int D = m->D, H = m->H, S = job->spec->steps;
  const tableau *tb = &tableaus[job->spec->solver];
  /* first, a, b, cb (H each); tau (T); v_u, v, y, sum (D each) */
  size_t doubles = (size_t)H * 4 + (size_t)m->T + (size_t)D * 4;
  double *mem = malloc(sizeof(double) * doubles);
  if (!mem) return (void *)1;
  scratch s = {mem, mem + H, mem + 2 * H, mem + 4 * H, mem + 4 * H + m->T};
  double *cb = mem + 3 * H;
  double *v = s.v_u + D, *y = v + D, *sum = y + D;
  const double dt = 1.0 / S;
  for (int64_t r = job->first; r < job->first + job->count; ++r) {
    double *x = job->x + r * D;
    if (m->C) cond_bias(m, job->cond + r * m->C, cb);
    for (int c = 0; c < D; ++c) x[c] = job->x0[r * D + c];
    for (int k = 0; k < S; ++k) {
      for (int c = 0; c < D; ++c) {
        y[c] = x[c];
        sum[c] = 0.0;
      }
      for (int i = 0; i < tb->stages; ++i) {
        if (i > 0)
          for (int c = 0; c < D; ++c) y[c] = x[c] + dt * tb->a[i] * v[c];
        velocity(job, y, (k + tb->c[i]) / S, m->C ? cb : NULL, job->null_bias, &s, v);
        for (int c = 0; c < D; ++c) sum[c] += tb->b[i] * v[c];
      }
      for (int c = 0; c < D; ++c) x[c] += dt * sum[c];
    }
  }
  free(mem);
  return NULL;
}

/* ---- arguments -------------------------------------------------------------- */

flowgen_status fg_check_cond_finite(const char *what, const float *v, int64_t rows,
                                    int cols, flowgen_error *err) {
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (isfinite(v[i])) continue;
    return fg_fail(err, FLOWGEN_INPUT,
                   "%s: row %lld, column %lld is %s (the conditioning must be finite)",
                   what, (long long)(i / cols), (long long)(i % cols),
                   isnan(v[i]) ? "nan" : v[i] > 0 ? "inf" : "-inf");
  }
  return FLOWGEN_OK;
}

static flowgen_status check_arguments(const flowgen_spec *spec, const flowrt_weights *w,
                                      const float *x0, double *x, const float *cond,
                                      const float *null_cond, float guidance,
                                      int64_t batch, flowgen_error *err) {
  flowgen_status st = flowgen_spec_validate(spec, err);
  if (!st) st = flowrt_weights_check(w, spec, err);
  if (st) return st;
  if (batch < 0) return fg_fail(err, FLOWGEN_INVALID, "batch %lld < 0", (long long)batch);
  if (batch > 0 && (!x0 || !x))
    return fg_fail(err, FLOWGEN_INVALID, "x0 and x are required");
  if (spec->cond && !cond && batch > 0)
    return fg_fail(err, FLOWGEN_INVALID,
                   "the model is conditional (C=%d): give cond, batch x %d values",
                   spec->cond, spec->cond);
  if (!spec->cond && cond)
    return fg_fail(err, FLOWGEN_INVALID,
                   "cond given, but the model has no conditioning (C=0)");
  if (!isfinite(guidance))
    return fg_fail(err, FLOWGEN_INVALID, "guidance %g is not finite", guidance);
  if (!spec->guidance && guidance != 1.0f)
    return fg_fail(err, FLOWGEN_INVALID,
                   "guidance %g, but the spec has no guidance (its field is the "
                   "conditional one, w = 1): set spec.guidance",
                   guidance);
  if (!spec->guidance && null_cond)
    return fg_fail(err, FLOWGEN_INVALID,
                   "null_cond given, but the spec has no guidance");
  if (cond && batch > 0) st = fg_check_cond_finite("cond", cond, batch, spec->cond, err);
  if (!st && null_cond) st = fg_check_cond_finite("null_cond", null_cond, 1, spec->cond, err);
  return st;
}

static double *to_double(const float *src, size_t n) {
  double *d = malloc(n * sizeof *d);
  if (d)
    for (size_t i = 0; i < n; ++i) d[i] = src[i];
  return d;
}

/* The columns of x, tau(t) and c in the first layer, in spec's order. */
static void place_inputs(const flowgen_spec *spec, model *m) {
  const char *order = flowgen_spec_input(spec);
  int col = 0;
  for (int i = 0; i < 3; ++i) {
    int width = order[i] == 'x' ? m->D : order[i] == 't' ? m->T : m->C;
    if (order[i] == 'x') m->x_col = col;
    else if (order[i] == 't') m->t_col = col;
    else m->c_col = col;
    col += width;
  }
}

flowgen_status flowrt_reference_cond_f64(const flowgen_spec *spec,
                                         const flowrt_weights *w, const float *x0,
                                         double *x, const float *cond,
                                         const float *null_cond, float guidance,
                                         int64_t batch, flowgen_error *err) {
  flowgen_status st = check_arguments(spec, w, x0, x, cond, null_cond, guidance, batch, err);
  if (st || batch == 0) return st;
  model m = {.D = w->dim, .H = w->hidden, .C = w->cond, .T = w->time_width,
             .L = w->layers, .act = w->act, .features = w->time.features,
             .scale = flowgen_spec_time_scale(spec)};
  m.in = m.D + m.T + m.C;
  place_inputs(spec, &m);
  bool ok = true;
  double *owned[FLOWGEN_LAYERS_MAX] = {0};
  for (int i = 0; i < m.L; ++i) {
    size_t rows = i == m.L - 1 ? (size_t)m.D : (size_t)m.H;
    size_t cols = i == 0 ? (size_t)m.in : (size_t)m.H;
    ok = ok && (owned[i] = to_double(w->w[i], rows * cols));
    m.w[i] = owned[i];
    m.b[i] = w->b[i];
  }
  double *null_bias = spec->guidance ? malloc((size_t)m.H * sizeof *null_bias) : NULL;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)(cores < 1 ? 1 : cores > 32 ? 32 : cores);
  /* A thread for every 2e7 flop of samples or so (3 samples of the
   * reference shape, 1 of a wide model), each row on its own: a check of
   * a few rows of a wide model spreads over the cores too. */
  double flop = 2.0 * spec->steps * ((double)m.in * m.H + (m.L - 2.0) * m.H * m.H + (double)m.H * m.D);
  int64_t least = flop >= 2e7 ? 1 : (int64_t)(2e7 / (flop > 1 ? flop : 1));
  if (batch < least * threads) threads = (int)((batch + least - 1) / least);
  if (threads < 1) threads = 1;
  reference_job *jobs = calloc((size_t)threads, sizeof *jobs);
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  bool *started = calloc((size_t)threads, sizeof *started);
  if (!ok || (spec->guidance && !null_bias) || !jobs || !tids || !started) {
    st = fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    goto done;
  }
  if (null_bias) cond_bias(&m, null_cond, null_bias);
  int64_t per = (batch + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    int64_t first = i * per;
    jobs[i] = (reference_job){spec, &m, x0, cond, null_bias, guidance, spec->guidance, x,
                              first,
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
  for (int i = 0; i < FLOWGEN_LAYERS_MAX; ++i) free(owned[i]);
  free(null_bias);
  free(jobs);
  free(tids);
  free(started);
  return st;
}

flowgen_status flowrt_reference_cond(const flowgen_spec *spec, const flowrt_weights *w,
                                     const float *x0, float *x, const float *cond,
                                     const float *null_cond, float guidance,
                                     int64_t batch, flowgen_error *err) {
  if (batch <= 0 || !spec || !x)
    return flowrt_reference_cond_f64(spec, w, x0, NULL, cond, null_cond, guidance, batch,
                                     err);
  size_t n = (size_t)batch * (size_t)spec->dim;
  double *out = malloc(n * sizeof *out);
  if (!out) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  flowgen_status st = flowrt_reference_cond_f64(spec, w, x0, out, cond, null_cond,
                                                guidance, batch, err);
  if (!st)
    for (size_t i = 0; i < n; ++i) x[i] = (float)out[i];
  free(out);
  return st;
}

flowgen_status flowrt_reference_f64(const flowgen_spec *spec, const flowrt_weights *w,
                                    const float *x0, double *x, int64_t batch,
                                    flowgen_error *err) {
  return flowrt_reference_cond_f64(spec, w, x0, x, NULL, NULL, 1.0f, batch, err);
}

flowgen_status flowrt_reference(const flowgen_spec *spec, const flowrt_weights *w,
                                const float *x0, float *x, int64_t batch,
                                flowgen_error *err) {
  return flowrt_reference_cond(spec, w, x0, x, NULL, NULL, 1.0f, batch, err);
}
