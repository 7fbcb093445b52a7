/* flowgen_spec: defaults, parsing each field from text, validation, the
 * kernel symbol. */
#include "support.h"

#include "flowgen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

static void assert_contains(const char *text, const char *needle) {
  if (!strstr(text, needle))
    fail_msg("expected \"%s\" in \"%s\"", needle, text);
}

/* A failure's message is one or more lines without a trailing newline. */
static void assert_clean_message(const flowgen_error *err) {
  size_t n = strlen(err->message);
  assert_true(n > 0);
  assert_true(err->message[n - 1] != '\n');
}

static bool spec_equal(const flowgen_spec *a, const flowgen_spec *b) {
  return a->dim == b->dim && a->hidden == b->hidden && a->steps == b->steps &&
         a->solver == b->solver && a->precision == b->precision &&
         a->arch == b->arch && a->arch_specific == b->arch_specific &&
         strcmp(a->name, b->name) == 0 && a->cond == b->cond &&
         a->layers == b->layers && a->act == b->act &&
         a->time.features == b->time.features &&
         a->time.scale == b->time.scale &&
         memcmp(a->input, b->input, sizeof a->input) == 0 &&
         a->guidance == b->guidance;
}

/* ---- defaults ----------------------------------------------------------- */

static void test_defaults(void **state) {
  (void)state;
  flowgen_spec spec;
  memset(&spec, 0x5a, sizeof spec); /* defaults must overwrite everything */
  flowgen_spec_default(&spec);
  assert_int_equal(spec.dim, 64);
  assert_int_equal(spec.hidden, 0);
  assert_int_equal(spec.steps, 32);
  assert_int_equal(spec.solver, FLOWGEN_SOLVER_EULER);
  assert_int_equal(spec.precision, FLOWGEN_PRECISION_FP32);
  assert_int_equal(spec.arch, 90);
  assert_string_equal(spec.name, "");
  /* The seed model: every family field zero. */
  assert_int_equal(spec.cond, 0);
  assert_int_equal(spec.layers, 0);
  assert_int_equal(spec.act, FLOWGEN_ACT_SILU);
  assert_int_equal(spec.time.features, 0);
  assert_true(spec.time.scale == 0.0);
  assert_memory_equal(spec.input, "\0\0\0\0", 4);
  assert_false(spec.guidance);
  assert_int_equal(flowgen_spec_layers(&spec), 3);
  assert_int_equal(flowgen_spec_time_width(&spec), 1);
  assert_int_equal(flowgen_spec_in_width(&spec), 65);
  assert_string_equal(flowgen_spec_input(&spec), "xtc");
  assert_true(flowgen_spec_time_scale(&spec) == 0.0);
  assert_int_equal(flowgen_spec_hidden(&spec), 256);
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_spec_validate(&spec, &err), FLOWGEN_OK);

  char symbol[128];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol);
  assert_string_equal(symbol, "flow_d64_h256_s32_fp32");
  assert_string_equal(flowgen_solver_name(spec.solver), "euler");
  assert_string_equal(flowgen_precision_name(spec.precision), "fp32");
  assert_string_equal(flowgen_solver_name((flowgen_solver)7), "unknown");
  assert_string_equal(flowgen_precision_name((flowgen_precision)-1),
                      "unknown");
}

static void test_hidden_defaults_to_four_dim(void **state) {
  (void)state;
  static const int dims[] = {1, 3, 64, 1023, 1024};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    spec.dim = dims[i];
    assert_int_equal(flowgen_spec_hidden(&spec), 4 * dims[i]);
    /* 4 * 1024 = 4096 is the top of the hidden range: still valid. */
    assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
    spec.hidden = 7;
    assert_int_equal(flowgen_spec_hidden(&spec), 7);
  }
}

/* ---- flowgen_spec_set: one table of text inputs -------------------------- */

typedef struct set_case {
  const char *field, *value;
  flowgen_status status;
  const char *message;  /* substring of the message (failures) */
  int expect;           /* the field's value afterwards (successes; ints) */
} set_case;

static const set_case set_cases[] = {
    /* dim: 1 .. 1024 inclusive */
    {"dim", "1", FLOWGEN_OK, NULL, 1},
    {"dim", "64", FLOWGEN_OK, NULL, 64},
    {"dim", "1024", FLOWGEN_OK, NULL, 1024},
    {"dim", "0", FLOWGEN_INVALID, "--dim: 0 is out of range (accepted: 1 to 1024)", 0},
    {"dim", "1025", FLOWGEN_INVALID, "1 to 1024", 0},
    {"dim", "-1", FLOWGEN_INVALID, "--dim: '-1' is not a positive decimal integer", 0},
    {"dim", "abc", FLOWGEN_INVALID, "--dim: 'abc' is not", 0},
    {"dim", "64x", FLOWGEN_INVALID, "'64x' is not", 0},
    {"dim", " 64", FLOWGEN_INVALID, "' 64' is not", 0},
    {"dim", "64 ", FLOWGEN_INVALID, "'64 ' is not", 0},
    {"dim", "+64", FLOWGEN_INVALID, "'+64' is not", 0},
    {"dim", "0x40", FLOWGEN_INVALID, "'0x40' is not", 0},
    {"dim", "6.4e1", FLOWGEN_INVALID, "is not", 0},
    {"dim", "", FLOWGEN_INVALID, "--dim: '' is not", 0},
    {"dim", "99999999999999999999", FLOWGEN_INVALID,
     "--dim: 99999999999999999999 is out of range", 0},
    {"dim", "4294967360", FLOWGEN_INVALID, "out of range", 0}, /* 2^32 + 64 */
    /* hidden: 1 .. 4096 */
    {"hidden", "1", FLOWGEN_OK, NULL, 1},
    {"hidden", "4095", FLOWGEN_OK, NULL, 4095},
    {"hidden", "4096", FLOWGEN_OK, NULL, 4096},
    {"hidden", "0", FLOWGEN_INVALID, "--hidden: 0 is out of range (accepted: 1 to 4096)", 0},
    {"hidden", "4097", FLOWGEN_INVALID, "1 to 4096", 0},
    {"hidden", "5000", FLOWGEN_INVALID, "--hidden: 5000", 0},
    {"hidden", "-256", FLOWGEN_INVALID, "--hidden: '-256' is not", 0},
    /* steps: 1 .. 10000 */
    {"steps", "1", FLOWGEN_OK, NULL, 1},
    {"steps", "10000", FLOWGEN_OK, NULL, 10000},
    {"steps", "0", FLOWGEN_INVALID, "--steps: 0 is out of range (accepted: 1 to 10000)", 0},
    {"steps", "10001", FLOWGEN_INVALID, "1 to 10000", 0},
    {"steps", "32steps", FLOWGEN_INVALID, "--steps: '32steps' is not", 0},
    /* choices */
    {"solver", "euler", FLOWGEN_OK, NULL, FLOWGEN_SOLVER_EULER},
    {"solver", "midpoint", FLOWGEN_OK, NULL, FLOWGEN_SOLVER_MIDPOINT},
    {"solver", "heun", FLOWGEN_OK, NULL, FLOWGEN_SOLVER_HEUN},
    {"solver", "rk4", FLOWGEN_OK, NULL, FLOWGEN_SOLVER_RK4},
    {"solver", "rk9", FLOWGEN_INVALID,
     "--solver: unknown value 'rk9' (accepted: euler, midpoint, heun, rk4)", 0},
    {"solver", "Euler", FLOWGEN_INVALID, "--solver: unknown value 'Euler'", 0},
    {"solver", "", FLOWGEN_INVALID, "--solver", 0},
    {"precision", "fp32", FLOWGEN_OK, NULL, FLOWGEN_PRECISION_FP32},
    {"precision", "tf32", FLOWGEN_OK, NULL, FLOWGEN_PRECISION_TF32},
    {"precision", "bf16", FLOWGEN_OK, NULL, FLOWGEN_PRECISION_BF16},
    {"precision", "fp16", FLOWGEN_OK, NULL, FLOWGEN_PRECISION_FP16},
    {"precision", "fp8", FLOWGEN_INVALID, "--precision: unknown value 'fp8' (accepted: fp32, tf32, bf16, fp16)", 0},
    {"precision", "fp32 ", FLOWGEN_INVALID, "--precision", 0},
    /* arch: sm_XY, 75 or newer */
    {"arch", "sm_90", FLOWGEN_OK, NULL, 90},
    {"arch", "sm_75", FLOWGEN_OK, NULL, 75},
    {"arch", "sm_80", FLOWGEN_OK, NULL, 80},
    {"arch", "sm_120", FLOWGEN_OK, NULL, 120},
    /* and sm_90a, the one arch-specific target (wgmma) */
    {"arch", "sm_90a", FLOWGEN_OK, NULL, 90},
    {"arch", "sm_80a", FLOWGEN_INVALID, "--arch: sm_80a is not supported (the one arch-specific target is sm_90a)", 0},
    {"arch", "sm_100a", FLOWGEN_INVALID, "the one arch-specific target is sm_90a", 0},
    {"arch", "sm_a", FLOWGEN_INVALID, "--arch: 'sm_a' is not of the form", 0},
    {"arch", "sm_90aa", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_9a0", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_90A", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "90", FLOWGEN_INVALID, "--arch: '90' is not of the form sm_XY", 0},
    {"arch", "sm_", FLOWGEN_INVALID, "--arch: 'sm_' is not of the form", 0},
    {"arch", "sm_9x", FLOWGEN_INVALID, "--arch: 'sm_9x' is not of the form", 0},
    {"arch", "SM_90", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "compute_90", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_-90", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_+90", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_90 ", FLOWGEN_INVALID, "is not of the form", 0},
    {"arch", "sm_99999999999999999999", FLOWGEN_INVALID, "--arch", 0},
    {"arch", "sm_70", FLOWGEN_INVALID, "--arch: sm_70 is not supported (sm_75 or newer)", 0},
    {"arch", "sm_74", FLOWGEN_INVALID, "sm_74 is not supported", 0},
    {"arch", "sm_60", FLOWGEN_INVALID, "sm_60 is not supported", 0},
    /* cond: 0 .. 4096 */
    {"cond", "0", FLOWGEN_OK, NULL, 0},
    {"cond", "10", FLOWGEN_OK, NULL, 10},
    {"cond", "4096", FLOWGEN_OK, NULL, 4096},
    {"cond", "4097", FLOWGEN_INVALID, "--cond: 4097 is out of range (accepted: 0 to 4096)", 0},
    {"cond", "-1", FLOWGEN_INVALID, "--cond: '-1' is not a positive decimal integer", 0},
    {"cond", "ten", FLOWGEN_INVALID, "--cond: 'ten' is not", 0},
    /* layers: 2 .. 8 */
    {"layers", "2", FLOWGEN_OK, NULL, 2},
    {"layers", "3", FLOWGEN_OK, NULL, 3},
    {"layers", "8", FLOWGEN_OK, NULL, 8},
    {"layers", "1", FLOWGEN_INVALID, "--layers: 1 is out of range (accepted: 2 to 8)", 0},
    {"layers", "0", FLOWGEN_INVALID, "--layers: 0 is out of range", 0},
    {"layers", "9", FLOWGEN_INVALID, "--layers: 9 is out of range", 0},
    {"layers", "3 ", FLOWGEN_INVALID, "--layers: '3 ' is not", 0},
    /* act */
    {"act", "silu", FLOWGEN_OK, NULL, FLOWGEN_ACT_SILU},
    {"act", "gelu", FLOWGEN_OK, NULL, FLOWGEN_ACT_GELU},
    {"act", "gelu_tanh", FLOWGEN_OK, NULL, FLOWGEN_ACT_GELU_TANH},
    {"act", "relu", FLOWGEN_OK, NULL, FLOWGEN_ACT_RELU},
    {"act", "tanh", FLOWGEN_OK, NULL, FLOWGEN_ACT_TANH},
    {"act", "swish", FLOWGEN_INVALID,
     "--act: unknown value 'swish' (accepted: silu, gelu, gelu_tanh, relu, tanh)", 0},
    {"act", "GELU", FLOWGEN_INVALID, "--act: unknown value 'GELU'", 0},
    {"act", "", FLOWGEN_INVALID, "--act: unknown value ''", 0},
    /* unknown fields */
    {"depth", "3", FLOWGEN_INVALID, "unknown spec field 'depth'", 0},
    {"Dim", "3", FLOWGEN_INVALID, "unknown spec field 'Dim'", 0},
};

static int *int_field(flowgen_spec *spec, const char *field) {
  if (strcmp(field, "dim") == 0) return &spec->dim;
  if (strcmp(field, "hidden") == 0) return &spec->hidden;
  if (strcmp(field, "steps") == 0) return &spec->steps;
  if (strcmp(field, "solver") == 0) return (int *)&spec->solver;
  if (strcmp(field, "precision") == 0) return (int *)&spec->precision;
  if (strcmp(field, "arch") == 0) return &spec->arch;
  if (strcmp(field, "cond") == 0) return &spec->cond;
  if (strcmp(field, "layers") == 0) return &spec->layers;
  if (strcmp(field, "act") == 0) return (int *)&spec->act;
  return NULL;
}

static void test_set_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof set_cases / sizeof set_cases[0]; ++i) {
    const set_case *c = &set_cases[i];
    flowgen_spec spec, before;
    flowgen_spec_default(&spec);
    /* Odd starting values so that a failed set visibly leaves them alone. */
    spec.dim = 5;
    spec.hidden = 6;
    spec.steps = 7;
    spec.arch = 86;
    before = spec;
    flowgen_error err = {FLOWGEN_OK, ""};
    flowgen_status st = flowgen_spec_set(&spec, c->field, c->value, &err);
    if (st != c->status)
      fail_msg("set %s '%s': status %s, expected %s (%s)", c->field, c->value,
               flowgen_status_name(st), flowgen_status_name(c->status),
               err.message);
    if (c->status == FLOWGEN_OK) {
      int *field = int_field(&spec, c->field);
      assert_non_null(field);
      if (*field != c->expect)
        fail_msg("set %s '%s': got %d, expected %d", c->field, c->value,
                 *field, c->expect);
      if (strcmp(c->field, "arch") == 0 &&
          spec.arch_specific != (strchr(c->value, 'a') != NULL))
        fail_msg("set arch '%s': arch_specific %d", c->value, spec.arch_specific);
      assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
    } else {
      assert_int_equal(err.status, c->status);
      assert_contains(err.message, c->message);
      assert_clean_message(&err);
      if (!spec_equal(&spec, &before))
        fail_msg("set %s '%s' failed but changed the spec", c->field,
                 c->value);
      /* err may be NULL. */
      assert_int_equal(flowgen_spec_set(&spec, c->field, c->value, NULL),
                       c->status);
    }
  }
}

static void test_set_missing_arguments(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_spec_set(&spec, "dim", NULL, &err),
                   FLOWGEN_INVALID);
  assert_true(err.message[0] != '\0');
  assert_int_equal(flowgen_spec_set(&spec, NULL, "3", &err), FLOWGEN_INVALID);
  assert_int_equal(spec.dim, 64);
}

/* ---- the model family's text fields --------------------------------------- */

static void test_set_time(void **state) {
  (void)state;
  static const struct {
    const char *value;
    int features;
    double scale;       /* as stored: 0 = the default 1000 */
    double in_effect;   /* flowgen_spec_time_scale */
    const char *name;   /* flowgen_time_name */
  } good[] = {
      {"raw", 0, 0.0, 0.0, "raw"},
      {"sin:2", 2, 0.0, 1000.0, "sin:2"},
      {"sin:16", 16, 0.0, 1000.0, "sin:16"},
      {"sin:1024", 1024, 0.0, 1000.0, "sin:1024"},
      {"sin:32:1", 32, 1.0, 1.0, "sin:32:1"},
      {"sin:32:2.5", 32, 2.5, 2.5, "sin:32:2.5"},
      {"sin:32:0.001", 32, 0.001, 0.001, "sin:32:0.001"},
      {"sin:8:1e3", 8, 1000.0, 1000.0, "sin:8"},
      {"sin:8:1000", 8, 1000.0, 1000.0, "sin:8"},
      {"sin:8:.5", 8, 0.5, 0.5, "sin:8:0.5"},
      {"sin:8:5.", 8, 5.0, 5.0, "sin:8:5"},
      {"sin:8:2E-1", 8, 0.2, 0.2, "sin:8:0.20000000000000001"},
  };
  static const struct {
    const char *value, *message;
  } bad[] = {
      {"sin", "--time: unknown value 'sin' (accepted: raw, sin:K, sin:K:SCALE)"},
      {"Raw", "--time: unknown value 'Raw'"},
      {"", "--time: unknown value ''"},
      {"raw:1", "--time: unknown value 'raw:1'"},
      {"sin:", "--time: 'sin:': K is not a positive decimal integer"},
      {"sin::5", "K is not a positive decimal integer"},
      {"sin:x", "--time: 'sin:x': K is not"},
      {"sin:-4", "K is not"},
      {"sin:+4", "K is not"},
      {"sin:0", "--time: 'sin:0': K = 0 is out of range (accepted: 2 to 1024)"},
      {"sin:1026", "K = 1026 is out of range"},
      {"sin:99999999999999999999", "K is not"},
      {"sin:3", "--time: 'sin:3': K = 3 is odd"},
      {"sin:16:", "--time: 'sin:16:': SCALE '' is not a positive finite decimal"},
      {"sin:16:0", "SCALE '0' is not a positive finite decimal"},
      {"sin:16:0.0", "SCALE '0.0' is not"},
      {"sin:16:-1", "SCALE '-1' is not"},
      {"sin:16:+1", "SCALE '+1' is not"},
      {"sin:16:inf", "SCALE 'inf' is not"},
      {"sin:16:nan", "SCALE 'nan' is not"},
      {"sin:16:1e999", "SCALE '1e999' is not"},
      {"sin:16:1e-999", "SCALE '1e-999' is not"},
      {"sin:16:0x10", "SCALE '0x10' is not"},
      {"sin:16:1,5", "SCALE '1,5' is not"},
      {"sin:16:1e", "SCALE '1e' is not"},
      {"sin:16: 1", "SCALE ' 1' is not"},
      {"sin:16:1 ", "SCALE '1 ' is not"},
      {"sin:16:1:2", "SCALE '1:2' is not"},
      {"sin:16:.", "SCALE '.' is not"},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    spec.time.scale = 77.0; /* set overwrites both fields */
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "time", good[i].value, &err) != FLOWGEN_OK)
      fail_msg("time '%s' refused: %s", good[i].value, err.message);
    assert_int_equal(spec.time.features, good[i].features);
    if (spec.time.scale != good[i].scale)
      fail_msg("time '%s': scale %.17g, expected %.17g", good[i].value,
               spec.time.scale, good[i].scale);
    assert_true(flowgen_spec_time_scale(&spec) == good[i].in_effect);
    assert_int_equal(flowgen_spec_time_width(&spec),
                     good[i].features ? good[i].features : 1);
    assert_int_equal(flowgen_spec_in_width(&spec),
                     64 + (good[i].features ? good[i].features : 1));
    assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
    char name[64];
    flowgen_time_name(&spec.time, name, sizeof name);
    assert_string_equal(name, good[i].name);
    /* The name reads back as the same time spec. */
    flowgen_spec again;
    flowgen_spec_default(&again);
    assert_int_equal(flowgen_spec_set(&again, "time", name, NULL), FLOWGEN_OK);
    assert_int_equal(again.time.features, spec.time.features);
    assert_true(flowgen_spec_time_scale(&again) ==
                flowgen_spec_time_scale(&spec));
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    flowgen_spec spec, before;
    flowgen_spec_default(&spec);
    spec.time.features = 4;
    spec.time.scale = 3.0;
    before = spec;
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "time", bad[i].value, &err) != FLOWGEN_INVALID)
      fail_msg("time '%s' accepted", bad[i].value);
    assert_int_equal(err.status, FLOWGEN_INVALID);
    assert_contains(err.message, bad[i].message);
    assert_clean_message(&err);
    if (!spec_equal(&spec, &before))
      fail_msg("time '%s' failed but changed the spec", bad[i].value);
  }
}

static void test_set_input_and_guidance(void **state) {
  (void)state;
  static const struct {
    const char *value, *stored, *name, *symbol_part;
  } orders[] = {
      {"x,t,c", "xtc", "x,t,c", ""},      {"x,c,t", "xct", "x,c,t", "_xct"},
      {"t,x,c", "txc", "t,x,c", "_txc"},  {"t,c,x", "tcx", "t,c,x", "_tcx"},
      {"c,x,t", "cxt", "c,x,t", "_cxt"},  {"c,t,x", "ctx", "c,t,x", "_ctx"},
  };
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "input", orders[i].value, &err) != FLOWGEN_OK)
      fail_msg("input '%s' refused: %s", orders[i].value, err.message);
    assert_string_equal(spec.input, orders[i].stored);
    assert_string_equal(flowgen_spec_input(&spec), orders[i].stored);
    char name[8];
    flowgen_spec_input_name(&spec, name, sizeof name);
    assert_string_equal(name, orders[i].name);
    assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
    char symbol[128], expected[128];
    flowgen_spec_symbol(&spec, symbol, sizeof symbol);
    snprintf(expected, sizeof expected, "flow_d64_h256_s32_fp32%s",
             orders[i].symbol_part);
    assert_string_equal(symbol, expected);
  }
  static const char *const bad_orders[] = {
      "xtc", "x,t", "x,t,c,", "x,x,c", "x,t,t", "x,t,z", "X,T,C", "x;t;c",
      " x,t,c", "", "x,,t,c", "x, t, c"};
  for (size_t i = 0; i < sizeof bad_orders / sizeof bad_orders[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    strcpy(spec.input, "cxt");
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "input", bad_orders[i], &err) != FLOWGEN_INVALID)
      fail_msg("input '%s' accepted", bad_orders[i]);
    assert_contains(err.message, "--input: '");
    assert_contains(err.message, bad_orders[i]);
    assert_contains(err.message, "is not an order of x, t and c");
    assert_string_equal(spec.input, "cxt");
  }

  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_spec_set(&spec, "guidance", "1", &err), FLOWGEN_OK);
  assert_true(spec.guidance);
  assert_int_equal(flowgen_spec_set(&spec, "guidance", "0", &err), FLOWGEN_OK);
  assert_false(spec.guidance);
  static const char *const bad_bools[] = {"yes", "true", "2", "", "01", "1 "};
  for (size_t i = 0; i < sizeof bad_bools / sizeof bad_bools[0]; ++i) {
    spec.guidance = true;
    assert_int_equal(flowgen_spec_set(&spec, "guidance", bad_bools[i], &err),
                     FLOWGEN_INVALID);
    assert_contains(err.message, "--guidance: '");
    assert_contains(err.message, "is neither 0 nor 1");
    assert_true(spec.guidance);
  }
}

/* The templates see the family resolved (no zero defaults): a plan.lua
 * that reports the fields it got, as its error, shows what they read. */
static const char report_plan[] =
    "return function(spec)\n"
    "  error(string.format('cond=%d layers=%d act=%s features=%d scale=%.17g '\n"
    "    .. 'input=%s guidance=%s time_width=%d in_width=%d',\n"
    "    spec.cond, spec.layers, spec.act, spec.time.features, spec.time.scale,\n"
    "    spec.input, tostring(spec.guidance), spec.time_width, spec.in_width), 0)\n"
    "end\n";

static void expect_lua_fields(const char *dir, const char *const fields[][2],
                              const char *expected) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  for (int i = 0; fields[i][0]; ++i)
    assert_int_equal(flowgen_spec_set(&spec, fields[i][0], fields[i][1], NULL),
                     FLOWGEN_OK);
  flowgen_options opts = {.template_dir = dir};
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  assert_int_equal(flowgen_generate(&spec, &opts, &k, &err), FLOWGEN_TEMPLATE);
  assert_null(k);
  assert_contains(err.message, expected);
}

static void test_spec_in_lua(void **state) {
  (void)state;
  char *dir = fg_test_mkdtemp();
  fg_test_copy_templates(dir);
  fg_test_write_template(dir, "plan.lua", report_plan);
  static const char *const seed[][2] = {{NULL, NULL}};
  expect_lua_fields(dir, seed,
                    "cond=0 layers=3 act=silu features=0 scale=0 input=xtc "
                    "guidance=false time_width=1 in_width=65");
  static const char *const family[][2] = {
      {"cond", "10"},     {"layers", "5"},        {"act", "gelu_tanh"},
      {"time", "sin:16"}, {"input", "c,x,t"},     {"guidance", "1"},
      {"dim", "8"},       {NULL, NULL}};
  expect_lua_fields(dir, family,
                    "cond=10 layers=5 act=gelu_tanh features=16 scale=1000 "
                    "input=cxt guidance=true time_width=16 in_width=34");
  static const char *const scaled[][2] = {{"time", "sin:4:2.5"},
                                          {"act", "relu"},
                                          {NULL, NULL}};
  expect_lua_fields(dir, scaled,
                    "cond=0 layers=3 act=relu features=4 scale=2.5 input=xtc "
                    "guidance=false time_width=4 in_width=68");
  fg_test_rmtree(dir);
  free(dir);

  /* --describe (flowgen_kernel_describe) names the family as the flags
   * take it. */
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.dim = 4;
  spec.hidden = 8;
  spec.steps = 2;
  spec.cond = 3;
  spec.layers = 2;
  spec.act = FLOWGEN_ACT_GELU;
  spec.time.features = 6;
  spec.time.scale = 0.5;
  strcpy(spec.input, "txc");
  spec.guidance = true;
  flowgen_kernel *k = NULL;
  flowgen_error err = {FLOWGEN_OK, ""};
  if (flowgen_generate(&spec, NULL, &k, &err) != FLOWGEN_OK)
    fail_msg("generate: %s", err.message);
  char *json = flowgen_kernel_describe(k);
  assert_non_null(json);
  assert_contains(json, "\"cond\": 3,");
  assert_contains(json, "\"layers\": 2,");
  assert_contains(json, "\"act\": \"gelu\",");
  assert_contains(json, "\"time\": \"sin:6:0.5\",");
  assert_contains(json, "\"input\": \"t,x,c\",");
  assert_contains(json, "\"guidance\": true,");
  assert_contains(json, "\"time_width\": 6,");
  assert_contains(json, "\"in_width\": 13,");
  assert_contains(json, "\"name\": \"flow_d4_h8_s2_fp32_c3_l2_gelu_sin6_txc_cfg\"");
  free(json);
  flowgen_kernel_free(k);
}

/* ---- names -------------------------------------------------------------- */

static void test_set_name(void **state) {
  (void)state;
  static const char *const good[] = {"a", "_x", "my_flow", "Flow2", "k_64"};
  static const struct {
    const char *value, *message;
  } bad[] = {
      {"1abc", "is not a C identifier"},
      {"my-flow", "'my-flow' is not a C identifier"},
      {"my flow", "is not a C identifier"},
      {"a.b", "is not a C identifier"},
      {"", "--name"},
      {"flow\xc3\xa9", "is not a C identifier"},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "name", good[i], &err) != FLOWGEN_OK)
      fail_msg("name '%s' refused: %s", good[i], err.message);
    assert_string_equal(spec.name, good[i]);
    assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
    char symbol[128];
    flowgen_spec_symbol(&spec, symbol, sizeof symbol);
    assert_string_equal(symbol, good[i]);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowgen_error err = {FLOWGEN_OK, ""};
    if (flowgen_spec_set(&spec, "name", bad[i].value, &err) != FLOWGEN_INVALID)
      fail_msg("name '%s' accepted", bad[i].value);
    assert_int_equal(err.status, FLOWGEN_INVALID);
    assert_contains(err.message, "--name");
    assert_contains(err.message, bad[i].message);
    assert_clean_message(&err);
    assert_string_equal(spec.name, "");
  }
}

static void test_name_length_limit(void **state) {
  (void)state;
  char name[FLOWGEN_NAME_MAX + 2];
  flowgen_spec spec;
  flowgen_error err = {FLOWGEN_OK, ""};

  /* 63 characters fit (the 64th byte is the NUL). */
  memset(name, 'n', FLOWGEN_NAME_MAX - 1);
  name[FLOWGEN_NAME_MAX - 1] = '\0';
  flowgen_spec_default(&spec);
  assert_int_equal(flowgen_spec_set(&spec, "name", name, &err), FLOWGEN_OK);
  assert_int_equal(strlen(spec.name), FLOWGEN_NAME_MAX - 1);

  /* 64 and 65 do not, and the message says so. */
  for (int len = FLOWGEN_NAME_MAX; len <= FLOWGEN_NAME_MAX + 1; ++len) {
    memset(name, 'n', (size_t)len);
    name[len] = '\0';
    flowgen_spec_default(&spec);
    assert_int_equal(flowgen_spec_set(&spec, "name", name, &err),
                     FLOWGEN_INVALID);
    assert_contains(err.message, "--name");
    assert_contains(err.message, "longer than 63 characters");
    assert_string_equal(spec.name, "");
  }
}

/* ---- flowgen_spec_validate ----------------------------------------------- */

typedef struct validate_case {
  const char *what;
  void (*mutate)(flowgen_spec *);
  flowgen_status status;
  const char *message;
} validate_case;

static void dim_0(flowgen_spec *s) { s->dim = 0; }
static void dim_neg(flowgen_spec *s) { s->dim = -1; }
static void dim_1025(flowgen_spec *s) { s->dim = 1025; }
static void dim_1024(flowgen_spec *s) { s->dim = 1024; }
static void dim_1(flowgen_spec *s) { s->dim = 1; s->hidden = 1; s->steps = 1; }
static void hidden_neg(flowgen_spec *s) { s->hidden = -4; }
static void hidden_4096(flowgen_spec *s) { s->hidden = 4096; }
static void hidden_4097(flowgen_spec *s) { s->hidden = 4097; }
static void steps_0(flowgen_spec *s) { s->steps = 0; }
static void steps_10000(flowgen_spec *s) { s->steps = 10000; }
static void steps_10001(flowgen_spec *s) { s->steps = 10001; }
static void solver_bad(flowgen_spec *s) { s->solver = (flowgen_solver)4; }
static void solver_neg(flowgen_spec *s) { s->solver = (flowgen_solver)-1; }
static void precision_bad(flowgen_spec *s) { s->precision = (flowgen_precision)9; }
static void arch_70(flowgen_spec *s) { s->arch = 70; }
static void arch_75(flowgen_spec *s) { s->arch = 75; }
static void arch_0(flowgen_spec *s) { s->arch = 0; }
static void arch_huge(flowgen_spec *s) { s->arch = 100000; }
static void arch_90a(flowgen_spec *s) { s->arch_specific = true; }
static void arch_80a(flowgen_spec *s) { s->arch = 80; s->arch_specific = true; }
static void name_digit(flowgen_spec *s) { strcpy(s->name, "9lives"); }
static void name_dash(flowgen_spec *s) { strcpy(s->name, "a-b"); }
static void name_unterminated(flowgen_spec *s) {
  memset(s->name, 'a', sizeof s->name);
}
static void name_ok(flowgen_spec *s) { strcpy(s->name, "my_flow"); }
static void cond_neg(flowgen_spec *s) { s->cond = -1; }
static void cond_4096(flowgen_spec *s) { s->cond = 4096; }
static void cond_4097(flowgen_spec *s) { s->cond = 4097; }
static void layers_1(flowgen_spec *s) { s->layers = 1; }
static void layers_2(flowgen_spec *s) { s->layers = 2; }
static void layers_8(flowgen_spec *s) { s->layers = 8; }
static void layers_9(flowgen_spec *s) { s->layers = 9; }
static void layers_neg(flowgen_spec *s) { s->layers = -3; }
static void act_tanh(flowgen_spec *s) { s->act = FLOWGEN_ACT_TANH; }
static void act_bad(flowgen_spec *s) { s->act = (flowgen_activation)5; }
static void act_neg(flowgen_spec *s) { s->act = (flowgen_activation)-1; }
static void time_sin2(flowgen_spec *s) { s->time.features = 2; }
static void time_sin1024(flowgen_spec *s) { s->time.features = 1024; }
static void time_odd(flowgen_spec *s) { s->time.features = 7; }
static void time_1026(flowgen_spec *s) { s->time.features = 1026; }
static void time_neg(flowgen_spec *s) { s->time.features = -2; }
static void time_scale_neg(flowgen_spec *s) {
  s->time.features = 8;
  s->time.scale = -1.0;
}
static void time_scale_nan(flowgen_spec *s) {
  s->time.features = 8;
  s->time.scale = NAN;
}
static void time_scale_inf(flowgen_spec *s) {
  s->time.features = 8;
  s->time.scale = INFINITY;
}
/* raw ignores the scale. */
static void time_raw_scale(flowgen_spec *s) { s->time.scale = -5.0; }
static void input_ctx(flowgen_spec *s) { strcpy(s->input, "ctx"); }
static void input_xxc(flowgen_spec *s) { strcpy(s->input, "xxc"); }
static void input_xt(flowgen_spec *s) { strcpy(s->input, "xt"); }
static void input_unterminated(flowgen_spec *s) {
  memcpy(s->input, "xtcx", 4);
}
static void guidance_alone(flowgen_spec *s) { s->guidance = true; }
static void guidance_cond(flowgen_spec *s) {
  s->guidance = true;
  s->cond = 10;
}

static const validate_case validate_cases[] = {
    {"dim 0", dim_0, FLOWGEN_INVALID, "dim: 0 is out of range (accepted: 1 to 1024)"},
    {"dim -1", dim_neg, FLOWGEN_INVALID, "dim: -1 is out of range"},
    {"dim 1025", dim_1025, FLOWGEN_INVALID, "dim: 1025 is out of range"},
    {"dim 1024", dim_1024, FLOWGEN_OK, NULL},
    {"1,1,1", dim_1, FLOWGEN_OK, NULL},
    {"hidden -4", hidden_neg, FLOWGEN_INVALID, "hidden: -4 is out of range (accepted: 1 to 4096)"},
    {"hidden 4096", hidden_4096, FLOWGEN_OK, NULL},
    {"hidden 4097", hidden_4097, FLOWGEN_INVALID, "hidden: 4097 is out of range"},
    {"steps 0", steps_0, FLOWGEN_INVALID, "steps: 0 is out of range (accepted: 1 to 10000)"},
    {"steps 10000", steps_10000, FLOWGEN_OK, NULL},
    {"steps 10001", steps_10001, FLOWGEN_INVALID, "steps: 10001"},
    {"solver 3", solver_bad, FLOWGEN_INVALID, "solver: unknown value 4"},
    {"solver -1", solver_neg, FLOWGEN_INVALID, "solver"},
    {"precision 9", precision_bad, FLOWGEN_INVALID, "precision: unknown value 9"},
    {"arch 70", arch_70, FLOWGEN_INVALID, "arch: sm_70 is not supported"},
    {"arch 75", arch_75, FLOWGEN_OK, NULL},
    {"arch 0", arch_0, FLOWGEN_INVALID, "arch"},
    {"arch 100000", arch_huge, FLOWGEN_INVALID, "arch"},
    {"arch 90a", arch_90a, FLOWGEN_OK, NULL},
    {"arch 80a", arch_80a, FLOWGEN_INVALID, "arch: sm_80a is not supported (the one arch-specific target is sm_90a)"},
    {"name 9lives", name_digit, FLOWGEN_INVALID, "name: '9lives' is not a C identifier"},
    {"name a-b", name_dash, FLOWGEN_INVALID, "name: 'a-b'"},
    {"name unterminated", name_unterminated, FLOWGEN_INVALID, "name: not NUL-terminated"},
    {"name my_flow", name_ok, FLOWGEN_OK, NULL},
    {"cond -1", cond_neg, FLOWGEN_INVALID, "cond: -1 is out of range (accepted: 0 to 4096)"},
    {"cond 4096", cond_4096, FLOWGEN_OK, NULL},
    {"cond 4097", cond_4097, FLOWGEN_INVALID, "cond: 4097 is out of range"},
    {"layers 1", layers_1, FLOWGEN_INVALID, "layers: 1 is out of range (accepted: 2 to 8)"},
    {"layers 2", layers_2, FLOWGEN_OK, NULL},
    {"layers 8", layers_8, FLOWGEN_OK, NULL},
    {"layers 9", layers_9, FLOWGEN_INVALID, "layers: 9 is out of range"},
    {"layers -3", layers_neg, FLOWGEN_INVALID, "layers: -3"},
    {"act tanh", act_tanh, FLOWGEN_OK, NULL},
    {"act 5", act_bad, FLOWGEN_INVALID, "act: unknown value 5"},
    {"act -1", act_neg, FLOWGEN_INVALID, "act: unknown value -1"},
    {"time sin:2", time_sin2, FLOWGEN_OK, NULL},
    {"time sin:1024", time_sin1024, FLOWGEN_OK, NULL},
    {"time 7", time_odd, FLOWGEN_INVALID, "time.features: 7 is neither 0 (raw) nor even in 2 to 1024"},
    {"time 1026", time_1026, FLOWGEN_INVALID, "time.features: 1026"},
    {"time -2", time_neg, FLOWGEN_INVALID, "time.features: -2"},
    {"time scale -1", time_scale_neg, FLOWGEN_INVALID, "time.scale: -1 is not positive and finite"},
    {"time scale nan", time_scale_nan, FLOWGEN_INVALID, "time.scale: "},
    {"time scale inf", time_scale_inf, FLOWGEN_INVALID, "time.scale: inf"},
    {"time raw scale", time_raw_scale, FLOWGEN_OK, NULL},
    {"input ctx", input_ctx, FLOWGEN_OK, NULL},
    {"input xxc", input_xxc, FLOWGEN_INVALID, "input: 'xxc' is not an order of the letters x, t and c"},
    {"input xt", input_xt, FLOWGEN_INVALID, "input: 'xt'"},
    {"input unterminated", input_unterminated, FLOWGEN_INVALID, "input: 'xtcx'"},
    {"guidance alone", guidance_alone, FLOWGEN_INVALID, "guidance: needs a conditioning (cond is 0)"},
    {"guidance cond", guidance_cond, FLOWGEN_OK, NULL},
};

static void test_validate_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof validate_cases / sizeof validate_cases[0];
       ++i) {
    const validate_case *c = &validate_cases[i];
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    c->mutate(&spec);
    flowgen_error err = {FLOWGEN_OK, ""};
    flowgen_status st = flowgen_spec_validate(&spec, &err);
    if (st != c->status)
      fail_msg("%s: status %s, expected %s (%s)", c->what,
               flowgen_status_name(st), flowgen_status_name(c->status),
               err.message);
    if (c->status != FLOWGEN_OK) {
      assert_int_equal(err.status, c->status);
      assert_contains(err.message, c->message);
      assert_clean_message(&err);
      assert_int_equal(flowgen_spec_validate(&spec, NULL), c->status);
    }
  }
  assert_int_equal(flowgen_spec_validate(NULL, NULL), FLOWGEN_INVALID);
}

/* The message names the first bad field, in declaration order. */
static void test_validate_reports_first_bad_field(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  spec.steps = 0;
  spec.arch = 10;
  flowgen_error err;
  assert_int_equal(flowgen_spec_validate(&spec, &err), FLOWGEN_INVALID);
  assert_contains(err.message, "steps");
  assert_null(strstr(err.message, "arch"));
}

/* dim is capped at 1024, so 4 * dim never passes 4096: the "give --hidden"
 * check can only trip if the ranges change.  Pin the boundary. */
static void test_default_hidden_at_the_limit(void **state) {
  (void)state;
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  assert_int_equal(flowgen_spec_set(&spec, "dim", "1024", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_hidden(&spec), FLOWGEN_HIDDEN_MAX);
  assert_int_equal(flowgen_spec_validate(&spec, NULL), FLOWGEN_OK);
  assert_true(4 * FLOWGEN_DIM_MAX <= FLOWGEN_HIDDEN_MAX);
  /* Past the dim range, the dim check speaks first. */
  spec.dim = 1025;
  flowgen_error err;
  assert_int_equal(flowgen_spec_validate(&spec, &err), FLOWGEN_INVALID);
  assert_contains(err.message, "dim: 1025");
}

/* ---- symbol --------------------------------------------------------------- */

static void test_symbol(void **state) {
  (void)state;
  static const struct {
    int dim, hidden, steps;
    const char *symbol;
  } cases[] = {
      {64, 0, 32, "flow_d64_h256_s32_fp32"},
      {64, 256, 32, "flow_d64_h256_s32_fp32"},
      {1, 1, 1, "flow_d1_h1_s1_fp32"},
      {3, 0, 5, "flow_d3_h12_s5_fp32"},
      {1024, 4096, 10000, "flow_d1024_h4096_s10000_fp32"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    spec.dim = cases[i].dim;
    spec.hidden = cases[i].hidden;
    spec.steps = cases[i].steps;
    char symbol[128];
    memset(symbol, 'x', sizeof symbol);
    flowgen_spec_symbol(&spec, symbol, sizeof symbol);
    assert_string_equal(symbol, cases[i].symbol);
  }

  /* A short buffer truncates and stays NUL-terminated. */
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  char small[8];
  memset(small, 'x', sizeof small);
  flowgen_spec_symbol(&spec, small, sizeof small);
  assert_string_equal(small, "flow_d6");

  /* The model family: each field that is not the seed's, in a fixed order;
   * the seed's own values (layers 3 given, x,t,c given) add nothing. */
  static const struct {
    const char *fields[6][2];
    const char *symbol;
  } family[] = {
      {{{"layers", "3"}, {"input", "x,t,c"}, {"act", "silu"}, {"time", "raw"},
        {"cond", "0"}, {"guidance", "0"}},
       "flow_d64_h256_s32_fp32"},
      {{{"cond", "10"}}, "flow_d64_h256_s32_fp32_c10"},
      {{{"layers", "2"}}, "flow_d64_h256_s32_fp32_l2"},
      {{{"act", "gelu_tanh"}}, "flow_d64_h256_s32_fp32_gelu_tanh"},
      {{{"time", "sin:32"}}, "flow_d64_h256_s32_fp32_sin32"},
      {{{"time", "sin:32:2"}}, "flow_d64_h256_s32_fp32_sin32"},
      {{{"input", "c,x,t"}}, "flow_d64_h256_s32_fp32_cxt"},
      {{{"guidance", "1"}, {"cond", "4096"}, {"input", "t,c,x"},
        {"time", "sin:1024"}, {"act", "relu"}, {"layers", "8"}},
       "flow_d64_h256_s32_fp32_c4096_l8_relu_sin1024_tcx_cfg"},
      {{{"solver", "rk4"}, {"cond", "3"}, {"act", "gelu"}},
       "flow_d64_h256_s32_fp32_rk4_c3_gelu"},
  };
  for (size_t i = 0; i < sizeof family / sizeof family[0]; ++i) {
    flowgen_spec f;
    flowgen_spec_default(&f);
    for (int j = 0; j < 6 && family[i].fields[j][0]; ++j)
      assert_int_equal(flowgen_spec_set(&f, family[i].fields[j][0],
                                        family[i].fields[j][1], NULL),
                       FLOWGEN_OK);
    assert_int_equal(flowgen_spec_validate(&f, NULL), FLOWGEN_OK);
    char symbol[128];
    flowgen_spec_symbol(&f, symbol, sizeof symbol);
    assert_string_equal(symbol, family[i].symbol);
  }
  /* The longest derived symbol fits the 128 bytes callers give it. */
  flowgen_spec longest;
  flowgen_spec_default(&longest);
  longest.dim = 1024;
  longest.hidden = 4096;
  longest.steps = 10000;
  longest.solver = FLOWGEN_SOLVER_MIDPOINT;
  longest.cond = 4096;
  longest.layers = 8;
  longest.act = FLOWGEN_ACT_GELU_TANH;
  longest.time.features = 1024;
  strcpy(longest.input, "ctx");
  longest.guidance = true;
  char long_symbol[128];
  flowgen_spec_symbol(&longest, long_symbol, sizeof long_symbol);
  assert_string_equal(long_symbol, "flow_d1024_h4096_s10000_fp32_midpoint_"
                                   "c4096_l8_gelu_tanh_sin1024_ctx_cfg");

  /* A custom name replaces the derived one entirely. */
  assert_int_equal(flowgen_spec_set(&spec, "name", "policy", NULL),
                   FLOWGEN_OK);
  char symbol[128];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol);
  assert_string_equal(symbol, "policy");
}

/* Setting fields in any order gives the same spec as the defaults plus
 * those fields; sets do not touch other fields. */
static void test_set_touches_one_field(void **state) {
  (void)state;
  flowgen_spec spec, expected;
  flowgen_spec_default(&spec);
  flowgen_spec_default(&expected);
  assert_int_equal(flowgen_spec_set(&spec, "steps", "8", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&spec, "arch", "sm_80", NULL), FLOWGEN_OK);
  assert_int_equal(flowgen_spec_set(&spec, "dim", "3", NULL), FLOWGEN_OK);
  expected.steps = 8;
  expected.arch = 80;
  expected.dim = 3;
  assert_true(spec_equal(&spec, &expected));
  assert_int_equal(flowgen_spec_hidden(&spec), 12);
  char symbol[128];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol);
  assert_string_equal(symbol, "flow_d3_h12_s8_fp32");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_hidden_defaults_to_four_dim),
      cmocka_unit_test(test_set_table),
      cmocka_unit_test(test_set_missing_arguments),
      cmocka_unit_test(test_set_time),
      cmocka_unit_test(test_set_input_and_guidance),
      cmocka_unit_test(test_spec_in_lua),
      cmocka_unit_test(test_set_name),
      cmocka_unit_test(test_name_length_limit),
      cmocka_unit_test(test_validate_table),
      cmocka_unit_test(test_validate_reports_first_bad_field),
      cmocka_unit_test(test_default_hidden_at_the_limit),
      cmocka_unit_test(test_symbol),
      cmocka_unit_test(test_set_touches_one_field),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
