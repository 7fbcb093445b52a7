/* The device as an input of the plan (flowgen_options.device): each field
 * the caller knows reaches the planner as spec.device, and only those; a
 * field out of range is refused naming it; an H200's figures plan as no
 * device at all (the runtime on an H200 builds the kernels that the CLI
 * writes by default). */
#include "support.h"

#include "flowgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what reaches the planner --------------------------------------------- */

/* A template folder whose plan is one kernel and whose source shows
 * spec.device as the planner got it: each field, then the keys of the
 * table and of its clusters_at_once, in the sandbox's sorted order. */
static int echo_setup(void **state) {
  *state = fg_test_echo_templates(
      "| local d = spec.device\n"
      "| local keys, at_once = {}, {}\n"
      "| for k in pairs(d) do keys[#keys + 1] = k end\n"
      "| for k, v in pairs(d.clusters_at_once or {}) do at_once[#at_once + 1] = k .. '=' .. v end\n"
      "sms=$(tostring(d.sms)) shared=$(tostring(d.shared_per_block)) "
      "clusters=$(tostring(d.clusters)) at_once=$(table.concat(at_once, ',')) "
      "keys=$(table.concat(keys, ','))\n");
  return 0;
}

static int echo_teardown(void **state) {
  fg_test_rmtree(*state);
  free(*state);
  return 0;
}

static void expect_echo(const char *dir, const flowgen_device *device, const char *echo) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {.template_dir = dir, .device = *device};
  flowgen_kernel *k = NULL;
  flowgen_error err;
  if (flowgen_generate(&spec, &opts, &k, &err)) fail_msg("%s", err.message);
  assert_string_equal(flowgen_kernel_source(k), echo);
  flowgen_kernel_free(k);
}

static void test_known_fields_reach_the_planner(void **state) {
  const char *dir = *state;
  expect_echo(dir, &(flowgen_device){0},
              "sms=nil shared=nil clusters=nil at_once= keys=\n");
  expect_echo(dir, &(flowgen_device){.sms = 66},
              "sms=66 shared=nil clusters=nil at_once= keys=sms\n");
  expect_echo(dir, &(flowgen_device){.shared_per_block = 101376, .clusters = -1},
              "sms=nil shared=101376 clusters=false at_once= keys=clusters,shared_per_block\n");
  expect_echo(dir,
              &(flowgen_device){.sms = 114, .shared_per_block = 232448, .clusters = 1,
                                .clusters_at_once = {40, 26, 0, 3}},
              "sms=114 shared=232448 clusters=true at_once=2=40,4=26,16=3 "
              "keys=clusters,clusters_at_once,shared_per_block,sms\n");
  /* No options: no device known. */
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_kernel *k = NULL;
  flowgen_options only_dir = {.template_dir = dir};
  assert_int_equal(flowgen_generate(&spec, &only_dir, &k, NULL), FLOWGEN_OK);
  assert_string_equal(flowgen_kernel_source(k),
                      "sms=nil shared=nil clusters=nil at_once= keys=\n");
  flowgen_kernel_free(k);
}

/* ---- refused ---------------------------------------------------------------- */

static void test_out_of_range_refused(void **state) {
  (void)state;
  static const struct {
    flowgen_device device;
    const char *field;
  } bad[] = {
      {{.sms = -1}, "device.sms: -1 is out of range"},
      {{.sms = FLOWGEN_DEVICE_SMS_MAX + 1}, "device.sms: 65537"},
      {{.shared_per_block = -1}, "device.shared_per_block"},
      {{.shared_per_block = FLOWGEN_DEVICE_SHARED_MAX + 1}, "device.shared_per_block"},
      {{.clusters = -2}, "device.clusters: -2"},
      {{.clusters = 2}, "device.clusters: 2"},
      {{.clusters_at_once = {0, 0, 0, -1}}, "device.clusters_at_once[3]"},
      {{.clusters_at_once = {FLOWGEN_DEVICE_CLUSTERS_MAX + 1}}, "device.clusters_at_once[0]"},
  };
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    flowgen_options opts = {.device = bad[i].device};
    flowgen_kernel *k = (flowgen_kernel *)&spec; /* must become NULL */
    flowgen_error err;
    assert_int_equal(flowgen_generate(&spec, &opts, &k, &err), FLOWGEN_INVALID);
    assert_null(k);
    assert_int_equal(err.status, FLOWGEN_INVALID);
    if (!strstr(err.message, bad[i].field))
      fail_msg("expected '%s' in: %s", bad[i].field, err.message);
  }
}

/* ---- the plan follows ------------------------------------------------------- */

/* "strategy min-max ..." of spec's plan on device (the strategies alone
 * without ranges). */
static char *chain(const flowgen_spec *spec, const flowgen_device *device, bool ranges) {
  flowgen_options opts = {.device = *device};
  flowgen_kernel *k = NULL;
  flowgen_error err;
  if (flowgen_generate(spec, &opts, &k, &err)) fail_msg("%s", err.message);
  size_t size = 4096, used = 0;
  char *text = calloc(1, size);
  assert_non_null(text);
  for (int i = 0; i < flowgen_kernel_variant_count(k); ++i) {
    const flowgen_variant *v = flowgen_kernel_variant(k, i);
    int n = ranges ? snprintf(text + used, size - used, "%s%s %lld-%lld", i ? " " : "",
                              v->strategy, (long long)v->min_batch, (long long)v->max_batch)
                   : snprintf(text + used, size - used, "%s%s", i ? " " : "", v->strategy);
    assert_true(n > 0 && (size_t)n < size - used);
    used += (size_t)n;
  }
  flowgen_kernel_free(k);
  return text;
}

/* Fewer SMs move the batch ranges (the grid strategy's neighbours, here;
 * the same strategies); less shared memory per block, or no clusters,
 * change the chain itself. */
static void test_device_changes_the_plan(void **state) {
  (void)state;
  flowgen_spec grid = fg_test_spec(128, 512, 32, 90);
  const flowgen_device none = {0}, fewer_sms = {.sms = 66};
  char *h200 = chain(&grid, &none, true), *fewer = chain(&grid, &fewer_sms, true);
  if (strcmp(h200, fewer) == 0) fail_msg("66 SMs plan as 132: %s", h200);
  free(fewer);
  free(h200);
  h200 = chain(&grid, &none, false);
  fewer = chain(&grid, &fewer_sms, false);
  assert_string_equal(h200, fewer);
  free(fewer);
  free(h200);

  flowgen_spec spec = fg_test_spec(64, 256, 32, 90);
  h200 = chain(&spec, &none, true);
  char *small = chain(&spec, &(flowgen_device){.shared_per_block = 101376}, true);
  char *flat = chain(&spec, &(flowgen_device){.clusters = -1}, true);
  if (strcmp(h200, small) == 0) fail_msg("99 KB of shared memory plans as 227 KB: %s", h200);
  if (!strstr(h200, "cluster4_") || strstr(flat, "cluster4_"))
    fail_msg("no clusters should leave out the cluster kernel: %s / %s", h200, flat);
  free(h200);
  free(small);
  free(flat);
}

/* ---- an H200 ---------------------------------------------------------------- */

/* What the runtime reports on an H200 gives the kernels of no device at
 * all, for every precision, a large shape and the arch-specific target: a
 * module that `flowgen cache warm` compiled without --sms is the one a
 * sampler on an H200 looks up. */
static void test_h200_plans_as_no_device(void **state) {
  (void)state;
  static const struct {
    int dim, hidden;
    flowgen_precision precision;
    bool arch_specific;
  } cases[] = {
      {64, 256, FLOWGEN_PRECISION_FP32, false}, {64, 256, FLOWGEN_PRECISION_FP32, true},
      {64, 256, FLOWGEN_PRECISION_TF32, true},  {64, 256, FLOWGEN_PRECISION_BF16, true},
      {64, 256, FLOWGEN_PRECISION_FP16, false}, {128, 512, FLOWGEN_PRECISION_FP32, false},
  };
  const flowgen_options h200 = {.device = {.sms = 132, .shared_per_block = 232448, .clusters = 1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    flowgen_spec spec = fg_test_spec(cases[i].dim, cases[i].hidden, 4, 90);
    spec.precision = cases[i].precision;
    spec.arch_specific = cases[i].arch_specific;
    flowgen_kernel *none = NULL, *told = NULL;
    flowgen_error err;
    if (flowgen_generate(&spec, NULL, &none, &err) || flowgen_generate(&spec, &h200, &told, &err))
      fail_msg("D=%d H=%d: %s", spec.dim, spec.hidden, err.message);
    /* The same plan and the same bytes: the figures the planner assumes
     * are not named in the header (the disk cache shares the module). */
    char *a = flowgen_kernel_describe(none), *b = flowgen_kernel_describe(told);
    assert_string_equal(a, b);
    assert_string_equal(flowgen_kernel_source(none), flowgen_kernel_source(told));
    free(a);
    free(b);
    flowgen_kernel_free(none);
    flowgen_kernel_free(told);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_known_fields_reach_the_planner, echo_setup,
                                      echo_teardown),
      cmocka_unit_test(test_out_of_range_refused),
      cmocka_unit_test(test_device_changes_the_plan),
      cmocka_unit_test(test_h200_plans_as_no_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
