/* flowgen_spec: defaults, parsing each field from text, validation, the
 * kernel symbol. */
#include "support.h"

#include "flowgen.h"

#include <stdio.h>
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
         strcmp(a->name, b->name) == 0;
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
