/* The fp64 reference: the solvers converge at their orders. */
#include "support.h"

#include "flowrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_orders_of_convergence),
      cmocka_unit_test(test_euler_is_the_contract),
  };
  return cmocka_run_group_tests_name("reference", tests, NULL, NULL);
}
