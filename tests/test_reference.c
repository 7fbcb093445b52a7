/* The fp64 reference: the solvers converge at their orders; every member of
 * the model family (activations, time features, input order, conditioning,
 * depth, guidance) against values computed by hand and against a naive
 * evaluation written here, which concatenates [x, tau(t), c] as PyTorch
 * does. */
#include "support.h"

#include "flowrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIM = 4, HIDDEN = 16, BATCH = 3 };

static flowrt_weights *weights(void) {
  flowrt_weights *w = NULL;
  flowgen_spec model = fg_test_spec(DIM, HIDDEN, 1, 90);
  assert_int_equal(flowrt_weights_alloc(&model, &w, NULL), FLOWGEN_OK);
  fg_test_fill_uniform(w->w[0], HIDDEN * (DIM + 1), 11, 0.8f);
  fg_test_fill_uniform(w->b[0], HIDDEN, 12, 0.5f);
  fg_test_fill_uniform(w->w[1], HIDDEN * HIDDEN, 13, 0.5f);
  fg_test_fill_uniform(w->b[1], HIDDEN, 14, 0.5f);
  fg_test_fill_uniform(w->w[2], DIM * HIDDEN, 15, 0.8f);
  fg_test_fill_uniform(w->b[2], DIM, 16, 0.5f);
  return w;
}

static void solve(const flowrt_weights *w, flowgen_solver solver, int steps,
                  const float *x0, double *x) {
  flowgen_spec spec = fg_test_spec(DIM, HIDDEN, steps, 90);
  spec.solver = solver;
  flowgen_error err;
  if (flowrt_reference_f64(&spec, w, x0, x, BATCH, &err)) fail_msg("%s", err.message);
}

static double distance(const double *a, const double *b) {
  double d = 0;
  for (int i = 0; i < BATCH * DIM; ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return sqrt(d);
}

/* Halving dt divides the error by about 2^order. */
static void test_orders_of_convergence(void **state) {
  (void)state;
  flowrt_weights *w = weights();
  float x0[BATCH * DIM];
  fg_test_fill_uniform(x0, BATCH * DIM, 17, 1.5f);
  double exact[BATCH * DIM], coarse[BATCH * DIM], fine[BATCH * DIM];
  solve(w, FLOWGEN_SOLVER_RK4, 2048, x0, exact);
  static const struct {
    flowgen_solver solver;
    double min_ratio, max_ratio;
  } cases[] = {
      {FLOWGEN_SOLVER_EULER, 1.6, 2.6},    /* first order */
      {FLOWGEN_SOLVER_MIDPOINT, 3.2, 5.0}, /* second order */
      {FLOWGEN_SOLVER_HEUN, 3.2, 5.0},
      {FLOWGEN_SOLVER_RK4, 11.0, 22.0},    /* fourth order */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    solve(w, cases[i].solver, 16, x0, coarse);
    solve(w, cases[i].solver, 32, x0, fine);
    double ratio = distance(coarse, exact) / distance(fine, exact);
    printf("# %s: error ratio %.2f for dt / 2\n", flowgen_solver_name(cases[i].solver), ratio);
    if (ratio < cases[i].min_ratio || ratio > cases[i].max_ratio)
      fail_msg("%s: error ratio %.2f outside [%.1f, %.1f]",
               flowgen_solver_name(cases[i].solver), ratio, cases[i].min_ratio,
               cases[i].max_ratio);
  }
  flowrt_weights_free(w);
}

/* Euler is the PyTorch contract: x += dt v(x, (k + 0.5) / S), by hand. */
static void test_euler_is_the_contract(void **state) {
  (void)state;
  flowrt_weights *w = weights();
  float x0[BATCH * DIM];
  fg_test_fill_uniform(x0, BATCH * DIM, 18, 1.0f);
  double got[BATCH * DIM];
  solve(w, FLOWGEN_SOLVER_EULER, 3, x0, got);
  for (int r = 0; r < BATCH; ++r) {
    double x[DIM], h1[HIDDEN], h2[HIDDEN];
    for (int d = 0; d < DIM; ++d) x[d] = x0[r * DIM + d];
    for (int k = 0; k < 3; ++k) {
      double t = (k + 0.5) / 3, v[DIM];
      for (int j = 0; j < HIDDEN; ++j) {
        double a = w->b[0][j] + w->w[0][j * (DIM + 1) + DIM] * t;
        for (int d = 0; d < DIM; ++d) a += w->w[0][j * (DIM + 1) + d] * x[d];
        h1[j] = a / (1 + exp(-a));
      }
      for (int j = 0; j < HIDDEN; ++j) {
        double a = w->b[1][j];
        for (int i = 0; i < HIDDEN; ++i) a += w->w[1][j * HIDDEN + i] * h1[i];
        h2[j] = a / (1 + exp(-a));
      }
      for (int d = 0; d < DIM; ++d) {
        double a = w->b[2][d];
        for (int i = 0; i < HIDDEN; ++i) a += w->w[2][d * HIDDEN + i] * h2[i];
        v[d] = a;
      }
      for (int d = 0; d < DIM; ++d) x[d] += v[d] / 3;
    }
    for (int d = 0; d < DIM; ++d) assert_true(fabs(got[r * DIM + d] - x[d]) < 1e-12);
  }
  flowrt_weights_free(w);
}

/* ---- the family, by hand ----------------------------------------------------- */

/* D = H = 1, two layers: one Euler step at t = 1/2 from x0 = 1 moves x by
 * act(w x0) for the first layer's weight w on x (0 on t, no bias) and the
 * last layer the identity. */
static double one_step(flowgen_activation act, double w_x, double x0) {
  flowgen_spec spec = fg_test_spec(1, 1, 1, 90);
  spec.layers = 2;
  spec.act = act;
  flowrt_weights *w = NULL;
  assert_int_equal(flowrt_weights_alloc(&spec, &w, NULL), FLOWGEN_OK);
  w->w[0][0] = (float)w_x;
  w->w[1][0] = 1.0f;
  float x0f = (float)x0;
  double x = 0;
  flowgen_error err;
  if (flowrt_reference_f64(&spec, w, &x0f, &x, 1, &err)) fail_msg("%s", err.message);
  flowrt_weights_free(w);
  return x - x0;
}

static void assert_close(double got, double want, double tolerance, const char *what) {
  if (!(fabs(got - want) <= tolerance))
    fail_msg("%s: got %.17g, want %.17g (difference %.3g)", what, got, want, got - want);
}

/* Each activation as torch.nn computes it (values from Python's math in
 * double): SiLU, GELU with erf, GELU(approximate='tanh'), ReLU, Tanh. */
static void test_activations_by_hand(void **state) {
  (void)state;
  static const struct {
    flowgen_activation act;
    double at_1, at_minus_2, at_half;
  } cases[] = {
      {FLOWGEN_ACT_SILU, 0.7310585786300049, -0.2384058440442351, 0.3112296656009273},
      {FLOWGEN_ACT_GELU, 0.8413447460685429, -0.04550026389635842, 0.34573123063700656},
      {FLOWGEN_ACT_GELU_TANH, 0.8411919906082768, -0.04540230591222494, 0.34571400982514394},
      {FLOWGEN_ACT_RELU, 1.0, 0.0, 0.5},
      {FLOWGEN_ACT_TANH, 0.7615941559557649, -0.9640275800758169, 0.46211715726000974},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    const char *name = flowgen_activation_name(cases[i].act);
    assert_close(one_step(cases[i].act, 1.0, 1.0), cases[i].at_1, 1e-15, name);
    assert_close(one_step(cases[i].act, -2.0, 1.0), cases[i].at_minus_2, 1e-15, name);
    assert_close(one_step(cases[i].act, 0.5, 1.0), cases[i].at_half, 1e-15, name);
  }
}

/* tau(t) of sin:8 at t = 1/2: each feature alone, through a model whose
 * velocity is that feature (relu(tau + 10) - 10, |tau| <= 1). */
static void test_time_features_by_hand(void **state) {
  (void)state;
  static const struct {
    const char *time;
    double tau[8]; /* Python: sin/cos(scale * 0.5 * 10000 ** (-i / 4)) */
  } cases[] = {
      {"sin:8",
       {-0.46777180532247614, -0.26237485370392877, -0.9589242746631385, 0.479425538604203,
        -0.883849273431478, 0.9649660284921133, 0.28366218546322625, 0.8775825618903728}},
      {"sin:8:2.5",
       {0.9489846193555862, 0.12467473338522769, 0.012499674481709789, 0.001249999674479192,
        0.3153223623952687, 0.992197667229329, 0.9999218760172474, 0.9999992187501017}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c) {
    for (int feature = 0; feature < 8; ++feature) {
      flowgen_spec spec = fg_test_spec(1, 1, 1, 90);
      spec.layers = 2;
      spec.act = FLOWGEN_ACT_RELU;
      assert_int_equal(flowgen_spec_set(&spec, "time", cases[c].time, NULL), FLOWGEN_OK);
      flowrt_weights *w = NULL;
      assert_int_equal(flowrt_weights_alloc(&spec, &w, NULL), FLOWGEN_OK);
      w->w[0][1 + feature] = 1.0f; /* [x, tau_0 .. tau_7] */
      w->b[0][0] = 10.0f;
      w->w[1][0] = 1.0f;
      w->b[1][0] = -10.0f;
      float x0 = 0.0f;
      double x = 0;
      flowgen_error err;
      if (flowrt_reference_f64(&spec, w, &x0, &x, 1, &err)) fail_msg("%s", err.message);
      char what[64];
      snprintf(what, sizeof what, "%s feature %d", cases[c].time, feature);
      assert_close(x, cases[c].tau[feature], 1e-13, what);
      flowrt_weights_free(w);
    }
  }
}

/* ---- the family, against a naive evaluation ----------------------------------- */

static double naive_act(flowgen_activation act, double v) {
  switch (act) {
  case FLOWGEN_ACT_SILU: return v * (1.0 / (1.0 + exp(-v)));
  case FLOWGEN_ACT_GELU: return v * 0.5 * erfc(-v / sqrt(2.0));
  case FLOWGEN_ACT_GELU_TANH:
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * pow(v, 3))));
  case FLOWGEN_ACT_RELU: return fmax(v, 0.0);
  case FLOWGEN_ACT_TANH: return tanh(v);
  }
  return NAN;
}

enum { NAIVE_MAX = 64 };

/* velocity(cat([x, tau(t), c] in spec's order)), the Sequential layer by
 * layer; c NULL = zeros. */
static void naive_velocity(const flowgen_spec *spec, const flowrt_weights *w, const double *x,
                           double t, const float *c, double *v) {
  double in[NAIVE_MAX * 3], h[NAIVE_MAX], next[NAIVE_MAX], tau[NAIVE_MAX];
  const int D = w->dim, H = w->hidden, C = w->cond, T = w->time_width;
  if (spec->time.features) {
    int half = T / 2;
    double scale = spec->time.scale ? spec->time.scale : 1000.0;
    for (int i = 0; i < half; ++i) {
      tau[i] = sin(scale * t * pow(10000.0, -(double)i / half));
      tau[half + i] = cos(scale * t * pow(10000.0, -(double)i / half));
    }
  } else {
    tau[0] = t;
  }
  int n = 0;
  for (const char *p = flowgen_spec_input(spec); *p; ++p) {
    if (*p == 'x') for (int i = 0; i < D; ++i) in[n++] = x[i];
    if (*p == 't') for (int i = 0; i < T; ++i) in[n++] = tau[i];
    if (*p == 'c') for (int i = 0; i < C; ++i) in[n++] = c ? c[i] : 0.0;
  }
  const double *layer_in = in;
  int width = n;
  for (int l = 0; l < w->layers; ++l) {
    int rows = l == w->layers - 1 ? D : H;
    double *out = l == w->layers - 1 ? v : (l % 2 ? next : h);
    for (int j = 0; j < rows; ++j) {
      double acc = w->b[l][j];
      for (int i = 0; i < width; ++i) acc += (double)w->w[l][j * width + i] * layer_in[i];
      out[j] = l == w->layers - 1 ? acc : naive_act(spec->act, acc);
    }
    layer_in = out;
    width = rows;
  }
}

/* Euler, midpoint, heun, rk4 as the contract defines them, with guidance
 * v_u + g (v_c - v_u) when the spec asks. */
static void naive_solve(const flowgen_spec *spec, const flowrt_weights *w, const float *x0,
                        const float *cond, const float *null_cond, double guidance,
                        int64_t batch, double *out) {
  static const double c_[4][4] = {{0.5}, {0, 0.5}, {0, 1}, {0, 0.5, 0.5, 1}};
  static const double a_[4][4] = {{0}, {0, 0.5}, {0, 1}, {0, 0.5, 0.5, 1}};
  static const double b_[4][4] = {{1}, {0, 1}, {0.5, 0.5}, {1.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 6}};
  static const int stages[4] = {1, 2, 2, 4};
  const int D = w->dim, S = spec->steps, k = spec->solver;
  for (int64_t r = 0; r < batch; ++r) {
    double x[NAIVE_MAX], y[NAIVE_MAX], v[NAIVE_MAX], vu[NAIVE_MAX], sum[NAIVE_MAX];
    for (int d = 0; d < D; ++d) x[d] = x0[r * D + d];
    const float *c = cond ? cond + r * w->cond : NULL;
    for (int step = 0; step < S; ++step) {
      for (int d = 0; d < D; ++d) sum[d] = 0, y[d] = x[d];
      for (int i = 0; i < stages[k]; ++i) {
        if (i > 0)
          for (int d = 0; d < D; ++d) y[d] = x[d] + a_[k][i] * v[d] / S;
        double t = (step + c_[k][i]) / S;
        naive_velocity(spec, w, y, t, c, v);
        if (spec->guidance) {
          naive_velocity(spec, w, y, t, null_cond, vu);
          for (int d = 0; d < D; ++d) v[d] = vu[d] + guidance * (v[d] - vu[d]);
        }
        for (int d = 0; d < D; ++d) sum[d] += b_[k][i] * v[d];
      }
      for (int d = 0; d < D; ++d) x[d] += sum[d] / S;
    }
    for (int d = 0; d < D; ++d) out[r * D + d] = x[d];
  }
}

typedef struct member {
  const char *fields[8][2];
} member;

/* Members of the family, each field somewhere off its default, with every
 * solver; the reference and the naive evaluation agree to rounding. */
static void test_family_against_naive(void **state) {
  (void)state;
  static const member members[] = {
      {{{"cond", "0"}}},
      {{{"cond", "3"}}},
      {{{"layers", "2"}, {"act", "gelu"}}},
      {{{"layers", "5"}, {"act", "gelu_tanh"}, {"cond", "2"}}},
      {{{"layers", "8"}, {"act", "relu"}, {"time", "sin:6"}}},
      {{{"act", "tanh"}, {"time", "sin:4:3.5"}, {"cond", "4"}, {"input", "c,t,x"}}},
      {{{"input", "t,x,c"}, {"cond", "1"}, {"time", "sin:2"}}},
      {{{"input", "x,c,t"}, {"cond", "5"}, {"guidance", "1"}, {"act", "gelu"}}},
      {{{"input", "c,x,t"}, {"cond", "2"}, {"guidance", "1"}, {"layers", "4"}, {"time", "sin:8"}}},
  };
  enum { D = 3, H = 6, B = 5 };
  for (size_t m = 0; m < sizeof members / sizeof *members; ++m) {
    for (int solver = 0; solver < 4; ++solver) {
      flowgen_spec spec = fg_test_spec(D, H, 3, 90);
      spec.solver = (flowgen_solver)solver;
      char what[256] = "";
      for (int f = 0; f < 8 && members[m].fields[f][0]; ++f) {
        assert_int_equal(flowgen_spec_set(&spec, members[m].fields[f][0],
                                          members[m].fields[f][1], NULL),
                         FLOWGEN_OK);
        snprintf(what + strlen(what), sizeof what - strlen(what), " --%s %s",
                 members[m].fields[f][0], members[m].fields[f][1]);
      }
      snprintf(what + strlen(what), sizeof what - strlen(what), " --solver %s",
               flowgen_solver_name(spec.solver));
      flowrt_weights *w = fg_test_random_model(&spec, 100 + m, 1.5f);
      float x0[B * D], cond[B * 8], null_cond[8];
      fg_test_fill_uniform(x0, B * D, 7 + m, 1.5f);
      fg_test_fill_uniform(cond, B * 8, 8 + m, 1.0f);
      fg_test_fill_uniform(null_cond, 8, 9 + m, 1.0f);
      const float *c = spec.cond ? cond : NULL;
      double got[B * D], want[B * D];
      flowgen_error err;
      /* Guided: once with zeros as the null conditioning, once with one given. */
      for (int with_null = 0; with_null <= (spec.guidance ? 1 : 0); ++with_null) {
        const float *n = with_null ? null_cond : NULL;
        float g = spec.guidance ? 2.5f : 1.0f;
        if (flowrt_reference_cond_f64(&spec, w, x0, got, c, n, g, B, &err))
          fail_msg("%s: %s", what, err.message);
        naive_solve(&spec, w, x0, c, n, g, B, want);
        for (int i = 0; i < B * D; ++i) {
          char at[320];
          snprintf(at, sizeof at, "%s%s [%d]", what, with_null ? " (null_cond)" : "", i);
          assert_close(got[i], want[i], 1e-12 * (1 + fabs(want[i])), at);
        }
      }
      flowrt_weights_free(w);
    }
  }
}

/* The concatenation's order only moves the first layer's columns: the same
 * model with its columns permuted samples the same, in every order. */
static void test_input_order_moves_columns(void **state) {
  (void)state;
  enum { D = 2, H = 5, C = 3, B = 4 };
  static const char *const orders[] = {"x,t,c", "x,c,t", "t,x,c", "t,c,x", "c,x,t", "c,t,x"};
  flowgen_spec base = fg_test_spec(D, H, 4, 90);
  base.cond = C;
  base.time.features = 4;
  flowrt_weights *w = fg_test_random_model(&base, 3, 1.5f);
  const int in = D + 4 + C;
  float x0[B * D], cond[B * C];
  fg_test_fill_uniform(x0, B * D, 1, 1.0f);
  fg_test_fill_uniform(cond, B * C, 2, 1.0f);
  double first[B * D], got[B * D];
  float *xtc = malloc(sizeof(float) * H * in);
  memcpy(xtc, w->w[0], sizeof(float) * H * in);
  for (size_t o = 0; o < sizeof orders / sizeof *orders; ++o) {
    flowgen_spec spec = base;
    assert_int_equal(flowgen_spec_set(&spec, "input", orders[o], NULL), FLOWGEN_OK);
    memcpy(w->input, flowgen_spec_input(&spec), 4);
    /* Columns of x (0..D-1), t (D..D+3), c (D+4..) of the x,t,c layout, moved. */
    for (int j = 0; j < H; ++j) {
      int col = 0;
      for (const char *p = spec.input; *p; ++p) {
        int from = *p == 'x' ? 0 : *p == 't' ? D : D + 4;
        int width = *p == 'x' ? D : *p == 't' ? 4 : C;
        for (int i = 0; i < width; ++i) w->w[0][j * in + col++] = xtc[j * in + from + i];
      }
    }
    flowgen_error err;
    if (flowrt_reference_cond_f64(&spec, w, x0, o ? got : first, cond, NULL, 1.0f, B, &err))
      fail_msg("%s", err.message);
    for (int i = 0; o && i < B * D; ++i) assert_close(got[i], first[i], 1e-14, orders[o]);
  }
  free(xtc);
  flowrt_weights_free(w);
}

/* Guidance: w = 1 is the conditional field; w = 0 the field on the null
 * conditioning; the reference is linear in w. */
static void test_guidance_weights(void **state) {
  (void)state;
  enum { D = 3, H = 8, C = 4, B = 3 };
  flowgen_spec plain = fg_test_spec(D, H, 1, 90);
  plain.cond = C;
  plain.act = FLOWGEN_ACT_GELU;
  flowgen_spec guided = plain;
  guided.guidance = true;
  flowrt_weights *w = fg_test_random_model(&plain, 5, 1.5f);
  float x0[B * D], cond[B * C], null_cond[C], null_rows[B * C];
  fg_test_fill_uniform(x0, B * D, 1, 1.0f);
  fg_test_fill_uniform(cond, B * C, 2, 1.0f);
  fg_test_fill_uniform(null_cond, C, 3, 1.0f);
  for (int r = 0; r < B; ++r) memcpy(null_rows + r * C, null_cond, sizeof null_cond);
  double conditional[B * D], unconditional[B * D], g1[B * D], g0[B * D], g3[B * D];
  flowgen_error err;
  assert_int_equal(flowrt_reference_cond_f64(&plain, w, x0, conditional, cond, NULL, 1.0f, B, &err),
                   FLOWGEN_OK);
  assert_int_equal(flowrt_reference_cond_f64(&plain, w, x0, unconditional, null_rows, NULL,
                                             1.0f, B, &err),
                   FLOWGEN_OK);
  assert_int_equal(flowrt_reference_cond_f64(&guided, w, x0, g1, cond, null_cond, 1.0f, B, &err),
                   FLOWGEN_OK);
  assert_int_equal(flowrt_reference_cond_f64(&guided, w, x0, g0, cond, null_cond, 0.0f, B, &err),
                   FLOWGEN_OK);
  assert_int_equal(flowrt_reference_cond_f64(&guided, w, x0, g3, cond, null_cond, 3.0f, B, &err),
                   FLOWGEN_OK);
  for (int i = 0; i < B * D; ++i) {
    assert_close(g1[i], conditional[i], 1e-14, "w = 1");
    assert_close(g0[i], unconditional[i], 1e-14, "w = 0");
    /* One Euler step: x0 + v, v linear in w. */
    double v1 = g1[i] - x0[i], v0 = g0[i] - x0[i];
    assert_close(g3[i] - x0[i], v0 + 3.0 * (v1 - v0), 1e-13, "w = 3");
  }
  flowrt_weights_free(w);
}

/* Arguments that do not fit the model or the spec are refused, naming
 * what is wrong; x is not written. */
static void test_reference_refusals(void **state) {
  (void)state;
  enum { D = 2, H = 3, C = 2 };
  flowgen_spec spec = fg_test_spec(D, H, 1, 90);
  spec.cond = C;
  flowrt_weights *w = fg_test_random_model(&spec, 1, 1.5f);
  float x0[2 * D] = {0}, x[2 * D], cond[2 * C] = {0}, null_cond[C] = {0};
  flowgen_spec guided = spec, seed = fg_test_spec(D, H, 1, 90);
  guided.guidance = true;
  flowrt_weights *w_seed = fg_test_random_model(&seed, 2, 1.5f);
  static const float nan_row[C] = {0.0f, NAN};
  float nan_cond[2 * C] = {0, 0, 1, INFINITY};
  static const struct {
    int which;
    flowgen_status status;
    const char *needle;
  } cases[] = {
      {0, FLOWGEN_INVALID, "the model is conditional (C=2): give cond, batch x 2 values"},
      {1, FLOWGEN_INVALID, "cond given, but the model has no conditioning (C=0)"},
      {2, FLOWGEN_INVALID, "guidance nan is not finite"},
      {3, FLOWGEN_INVALID, "guidance 2, but the spec has no guidance"},
      {4, FLOWGEN_INVALID, "null_cond given, but the spec has no guidance"},
      {5, FLOWGEN_INPUT, "cond: row 1, column 1 is inf (the conditioning must be finite)"},
      {6, FLOWGEN_INPUT, "null_cond: row 0, column 1 is nan"},
      {7, FLOWGEN_INVALID, "activation silu but the spec asks for relu (act)"},
      {8, FLOWGEN_INVALID, "guidance inf is not finite"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_spec relu = spec;
    relu.act = FLOWGEN_ACT_RELU;
    for (int k = 0; k < 2 * D; ++k) x[k] = 42.0f;
    flowgen_error err = {0};
    flowgen_status st = FLOWGEN_OK;
    switch (cases[i].which) {
    case 0: st = flowrt_reference_cond(&spec, w, x0, x, NULL, NULL, 1.0f, 2, &err); break;
    case 1: st = flowrt_reference_cond(&seed, w_seed, x0, x, cond, NULL, 1.0f, 2, &err); break;
    case 2: st = flowrt_reference_cond(&guided, w, x0, x, cond, NULL, NAN, 2, &err); break;
    case 3: st = flowrt_reference_cond(&spec, w, x0, x, cond, NULL, 2.0f, 2, &err); break;
    case 4: st = flowrt_reference_cond(&spec, w, x0, x, cond, null_cond, 1.0f, 2, &err); break;
    case 5: st = flowrt_reference_cond(&spec, w, x0, x, nan_cond, NULL, 1.0f, 2, &err); break;
    case 6: st = flowrt_reference_cond(&guided, w, x0, x, cond, nan_row, 2.0f, 2, &err); break;
    case 7: st = flowrt_reference_cond(&relu, w, x0, x, cond, NULL, 1.0f, 2, &err); break;
    case 8: st = flowrt_reference_cond(&guided, w, x0, x, cond, NULL, INFINITY, 2, &err); break;
    }
    if (st != cases[i].status || !strstr(err.message, cases[i].needle))
      fail_msg("case %zu: %s '%s', want %s '%s'", i, flowgen_status_name(st), err.message,
               flowgen_status_name(cases[i].status), cases[i].needle);
    for (int k = 0; k < 2 * D; ++k) assert_true(x[k] == 42.0f);
  }
  /* flowrt_reference is for unconditional models. */
  flowgen_error err = {0};
  assert_int_equal(flowrt_reference(&spec, w, x0, x, 2, &err), FLOWGEN_INVALID);
  assert_non_null(strstr(err.message, "the model is conditional"));
  /* batch 0 needs no arrays. */
  assert_int_equal(flowrt_reference_cond(&spec, w, NULL, NULL, NULL, NULL, 1.0f, 0, &err),
                   FLOWGEN_OK);
  flowrt_weights_free(w);
  flowrt_weights_free(w_seed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_orders_of_convergence),
      cmocka_unit_test(test_euler_is_the_contract),
      cmocka_unit_test(test_activations_by_hand),
      cmocka_unit_test(test_time_features_by_hand),
      cmocka_unit_test(test_family_against_naive),
      cmocka_unit_test(test_input_order_moves_columns),
      cmocka_unit_test(test_guidance_weights),
      cmocka_unit_test(test_reference_refusals),
  };
  return cmocka_run_group_tests_name("reference", tests, NULL, NULL);
}
