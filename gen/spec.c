/* flowgen_spec: defaults, parsing of each field from text, validation. */
#include "internal.h"

#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const solver_names[] = {"euler", "midpoint", "heun", "rk4"};
static const char *const precision_names[] = {"fp32", "tf32", "bf16", "fp16"};
static const char *const activation_names[] = {"silu", "gelu", "gelu_tanh",
                                               "relu", "tanh"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The default hidden width 4 * dim is always in range. */
_Static_assert(4 * FLOWGEN_DIM_MAX <= FLOWGEN_HIDDEN_MAX, "4 * dim may exceed hidden");

void flowgen_spec_default(flowgen_spec *spec) {
  memset(spec, 0, sizeof *spec);
  spec->dim = 64;
  spec->hidden = 0;
  spec->steps = 32;
  spec->solver = FLOWGEN_SOLVER_EULER;
  spec->precision = FLOWGEN_PRECISION_FP32;
  spec->arch = 90;
}

const char *flowgen_solver_name(flowgen_solver solver) {
  return (int)solver >= 0 && (int)solver < COUNT(solver_names)
             ? solver_names[solver]
             : "unknown";
}

const char *flowgen_precision_name(flowgen_precision precision) {
  return (int)precision >= 0 && (int)precision < COUNT(precision_names)
             ? precision_names[precision]
             : "unknown";
}

const char *flowgen_activation_name(flowgen_activation act) {
  return (int)act >= 0 && (int)act < COUNT(activation_names)
             ? activation_names[act]
             : "unknown";
}

int flowgen_spec_hidden(const flowgen_spec *spec) {
  return spec->hidden ? spec->hidden : 4 * spec->dim;
}

int flowgen_spec_layers(const flowgen_spec *spec) {
  return spec->layers ? spec->layers : FLOWGEN_LAYERS_DEFAULT;
}

int flowgen_spec_time_width(const flowgen_spec *spec) {
  return spec->time.features ? spec->time.features : 1;
}

int flowgen_spec_in_width(const flowgen_spec *spec) {
  return spec->dim + flowgen_spec_time_width(spec) + spec->cond;
}

const char *flowgen_spec_input(const flowgen_spec *spec) {
  return spec->input[0] ? spec->input : "xtc";
}

double flowgen_spec_time_scale(const flowgen_spec *spec) {
  if (!spec->time.features) return 0.0;
  return spec->time.scale != 0.0 ? spec->time.scale
                                 : FLOWGEN_TIME_SCALE_DEFAULT;
}

/* Numbers in text always use '.', whatever the caller's locale. */
static void format_double(char *buf, size_t size, double value) {
  locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
  snprintf(buf, size, "%.17g", value);
  if (c_locale) {
    uselocale(previous);
    freelocale(c_locale);
  }
}

void flowgen_time_name(const flowgen_time *time, char *buf, size_t size) {
  if (!time->features) {
    snprintf(buf, size, "raw");
    return;
  }
  if (time->scale == 0.0 || time->scale == FLOWGEN_TIME_SCALE_DEFAULT) {
    snprintf(buf, size, "sin:%d", time->features);
    return;
  }
  char scale[32];
  format_double(scale, sizeof scale, time->scale);
  snprintf(buf, size, "sin:%d:%s", time->features, scale);
}

void flowgen_spec_input_name(const flowgen_spec *spec, char *buf,
                             size_t size) {
  const char *in = flowgen_spec_input(spec);
  snprintf(buf, size, "%c,%c,%c", in[0], in[1], in[2]);
}

void flowgen_spec_symbol(const flowgen_spec *spec, char *buf, size_t size) {
  if (spec->name[0]) {
    snprintf(buf, size, "%s", spec->name);
    return;
  }
  /* Euler and the seed model are the defaults and stay out of the name,
   * so the documented flow_d64_h256_s32_fp32 keeps meaning the PyTorch
   * contract. */
  char family[96] = "", *at = family;
  size_t left = sizeof family;
#define FAMILY(...)                                                        \
  do {                                                                     \
    int n_ = snprintf(at, left, __VA_ARGS__);                              \
    if (n_ > 0 && (size_t)n_ < left) at += n_, left -= (size_t)n_;          \
  } while (0)
  if (spec->cond) FAMILY("_c%d", spec->cond);
  if (flowgen_spec_layers(spec) != FLOWGEN_LAYERS_DEFAULT)
    FAMILY("_l%d", flowgen_spec_layers(spec));
  if (spec->act != FLOWGEN_ACT_SILU)
    FAMILY("_%s", flowgen_activation_name(spec->act));
  if (spec->time.features) FAMILY("_sin%d", spec->time.features);
  if (strcmp(flowgen_spec_input(spec), "xtc") != 0)
    FAMILY("_%.3s", flowgen_spec_input(spec));
  if (spec->guidance) FAMILY("_cfg");
#undef FAMILY
  snprintf(buf, size, "flow_d%d_h%d_s%d_%s%s%s%s", spec->dim,
           flowgen_spec_hidden(spec), spec->steps,
           flowgen_precision_name(spec->precision),
           spec->solver == FLOWGEN_SOLVER_EULER ? "" : "_",
           spec->solver == FLOWGEN_SOLVER_EULER
               ? ""
               : flowgen_solver_name(spec->solver),
           family);
}

static flowgen_status set_int(int *field, const char *flag, const char *value,
                              long long min, long long max,
                              flowgen_error *err) {
  long long v = 0;
  switch (fg_parse_int(value, min, max, &v)) {
  case FG_PARSE_OK:
    *field = (int)v;
    return FLOWGEN_OK;
  case FG_PARSE_NOT_A_NUMBER:
    return fg_fail(err, FLOWGEN_INVALID,
                   "--%s: '%s' is not a positive decimal integer", flag,
                   value);
  case FG_PARSE_OUT_OF_RANGE:
  default:
    return fg_fail(err, FLOWGEN_INVALID,
                   "--%s: %s is out of range (accepted: %lld to %lld)", flag,
                   value, min, max);
  }
}

/* "0" or "1". */
static flowgen_status set_bool(bool *field, const char *flag,
                               const char *value, flowgen_error *err) {
  if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--%s: '%s' is neither 0 nor 1", flag, value);
  *field = value[0] == '1';
  return FLOWGEN_OK;
}

static flowgen_status set_choice(int *field, const char *flag,
                                 const char *value, const char *const *names,
                                 int count, flowgen_error *err) {
  char accepted[256] = "";
  for (int i = 0; i < count; ++i) {
    if (strcmp(value, names[i]) == 0) {
      *field = i;
      return FLOWGEN_OK;
    }
    snprintf(accepted + strlen(accepted), sizeof accepted - strlen(accepted),
             "%s%s", i ? ", " : "", names[i]);
  }
  return fg_fail(err, FLOWGEN_INVALID, "--%s: unknown value '%s' (accepted: %s)",
                 flag, value, accepted);
}

/* sm_XY, or sm_90a (the arch-specific target: sm_90 with wgmma). */
static flowgen_status set_arch(flowgen_spec *spec, const char *value,
                               flowgen_error *err) {
  long long v = 0;
  char digits[8];
  size_t n = strncmp(value, "sm_", 3) == 0 ? strlen(value + 3) : 0;
  bool specific = n > 1 && value[3 + n - 1] == 'a';
  if (specific) --n;
  if (n > 0 && n < sizeof digits) {
    memcpy(digits, value + 3, n);
    digits[n] = '\0';
  }
  if (n == 0 || n >= sizeof digits || fg_parse_int(digits, 0, 1000, &v) != FG_PARSE_OK)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--arch: '%s' is not of the form sm_XY (e.g. sm_90)", value);
  if (v < FLOWGEN_ARCH_MIN)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--arch: %s is not supported (sm_%d or newer)", value,
                   FLOWGEN_ARCH_MIN);
  if (specific && v != 90)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--arch: %s is not supported (the one arch-specific target "
                   "is sm_90a)", value);
  spec->arch = (int)v;
  spec->arch_specific = specific;
  return FLOWGEN_OK;
}

/* A positive finite decimal: digits, an optional fraction, an optional
 * exponent (1000, 2.5, 1e3); no sign, no spaces, no hex, inf or nan. */
static bool parse_scale(const char *text, double *out) {
  const char *p = text;
  size_t digits = 0;
  for (; isdigit((unsigned char)*p); ++p) ++digits;
  if (*p == '.')
    for (++p; isdigit((unsigned char)*p); ++p) ++digits;
  if (digits == 0) return false;
  if (*p == 'e' || *p == 'E') {
    ++p;
    if (*p == '+' || *p == '-') ++p;
    if (!isdigit((unsigned char)*p)) return false;
    while (isdigit((unsigned char)*p)) ++p;
  }
  if (*p) return false;
  locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!c_locale) return false;
  locale_t previous = uselocale(c_locale);
  double v = strtod(text, NULL);
  uselocale(previous);
  freelocale(c_locale);
  if (!isfinite(v) || !(v > 0.0)) return false;
  *out = v;
  return true;
}

/* raw, sin:K or sin:K:SCALE. */
static flowgen_status set_time(flowgen_time *time, const char *value,
                               flowgen_error *err) {
  if (strcmp(value, "raw") == 0) {
    time->features = 0;
    time->scale = 0.0;
    return FLOWGEN_OK;
  }
  if (strncmp(value, "sin:", 4) != 0)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: unknown value '%s' (accepted: raw, sin:K, "
                   "sin:K:SCALE)", value);
  char k_text[16];
  const char *colon = strchr(value + 4, ':');
  size_t n = colon ? (size_t)(colon - value - 4) : strlen(value + 4);
  long long k = 0;
  if (n == 0 || n >= sizeof k_text)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: '%s': K is not a positive decimal integer", value);
  memcpy(k_text, value + 4, n);
  k_text[n] = '\0';
  switch (fg_parse_int(k_text, 2, FLOWGEN_TIME_FEATURES_MAX, &k)) {
  case FG_PARSE_OK:
    break;
  case FG_PARSE_NOT_A_NUMBER:
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: '%s': K is not a positive decimal integer", value);
  default:
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: '%s': K = %s is out of range (accepted: 2 to %d)",
                   value, k_text, FLOWGEN_TIME_FEATURES_MAX);
  }
  if (k % 2)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: '%s': K = %lld is odd (sin and cos halves)", value,
                   k);
  double scale = 0.0;
  if (colon && !parse_scale(colon + 1, &scale))
    return fg_fail(err, FLOWGEN_INVALID,
                   "--time: '%s': SCALE '%s' is not a positive finite decimal",
                   value, colon + 1);
  time->features = (int)k;
  time->scale = scale;
  return FLOWGEN_OK;
}

static bool is_input_order(const char *in) {
  return strlen(in) == 3 && strchr(in, 'x') && strchr(in, 't') &&
         strchr(in, 'c');
}

/* x,t,c in any order. */
static flowgen_status set_input(char *field, const char *value,
                                flowgen_error *err) {
  char order[4] = "";
  if (strlen(value) == 5 && value[1] == ',' && value[3] == ',') {
    order[0] = value[0];
    order[1] = value[2];
    order[2] = value[4];
    order[3] = '\0';
  }
  if (!is_input_order(order))
    return fg_fail(err, FLOWGEN_INVALID,
                   "--input: '%s' is not an order of x, t and c (e.g. x,t,c)",
                   value);
  memcpy(field, order, 4);
  return FLOWGEN_OK;
}

void flowgen_spec_arch_name(const flowgen_spec *spec, char *buf, size_t size) {
  snprintf(buf, size, "sm_%d%s", spec->arch, spec->arch_specific ? "a" : "");
}

static bool is_cxx_keyword(const char *name) {
  static const char *const keywords[] = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
      "bool", "break", "case", "catch", "char", "char8_t", "char16_t",
      "char32_t", "class", "compl", "concept", "const", "consteval",
      "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long",
      "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr",
      "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof",
      "static", "static_assert", "static_cast", "struct", "switch", "template",
      "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
      "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq"};
  for (size_t i = 0; i < sizeof keywords / sizeof *keywords; ++i)
    if (strcmp(name, keywords[i]) == 0) return true;
  return false;
}

static bool is_identifier(const char *name) {
  if (!(isalpha((unsigned char)name[0]) || name[0] == '_')) return false;
  for (const char *p = name; *p; ++p)
    if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
  return true;
}

/* The name becomes symbols and a namespace: no C++ keyword, nothing the
 * compiler reserves ("__" anywhere, "_" + capital). */
static bool is_reserved(const char *name) {
  return is_cxx_keyword(name) || strstr(name, "__") ||
         (name[0] == '_' && isupper((unsigned char)name[1]));
}

static bool valid_name(const char *name) {
  return is_identifier(name) && !is_reserved(name);
}

static flowgen_status set_name(char *field, const char *value,
                               flowgen_error *err) {
  if (strlen(value) >= FLOWGEN_NAME_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "--name: '%s' is longer than %d characters", value,
                   FLOWGEN_NAME_MAX - 1);
  if (!is_identifier(value))
    return fg_fail(err, FLOWGEN_INVALID,
                   "--name: '%s' is not a C identifier (letters, digits, '_'; "
                   "not starting with a digit)",
                   value);
  if (is_reserved(value))
    return fg_fail(err, FLOWGEN_INVALID,
                   "--name: '%s' is a C++ keyword or a reserved identifier",
                   value);
  strcpy(field, value);
  return FLOWGEN_OK;
}

flowgen_status flowgen_spec_set(flowgen_spec *spec, const char *field,
                                const char *value, flowgen_error *err) {
  if (!field || !value)
    return fg_fail(err, FLOWGEN_INVALID, "missing field or value");
  if (strcmp(field, "dim") == 0)
    return set_int(&spec->dim, field, value, FLOWGEN_DIM_MIN, FLOWGEN_DIM_MAX,
                   err);
  if (strcmp(field, "hidden") == 0)
    return set_int(&spec->hidden, field, value, FLOWGEN_HIDDEN_MIN,
                   FLOWGEN_HIDDEN_MAX, err);
  if (strcmp(field, "steps") == 0)
    return set_int(&spec->steps, field, value, FLOWGEN_STEPS_MIN,
                   FLOWGEN_STEPS_MAX, err);
  if (strcmp(field, "solver") == 0)
    return set_choice((int *)&spec->solver, field, value, solver_names,
                      COUNT(solver_names), err);
  if (strcmp(field, "precision") == 0)
    return set_choice((int *)&spec->precision, field, value, precision_names,
                      COUNT(precision_names), err);
  if (strcmp(field, "arch") == 0) return set_arch(spec, value, err);
  if (strcmp(field, "name") == 0) return set_name(spec->name, value, err);
  if (strcmp(field, "cond") == 0)
    return set_int(&spec->cond, field, value, 0, FLOWGEN_COND_MAX, err);
  if (strcmp(field, "layers") == 0)
    return set_int(&spec->layers, field, value, FLOWGEN_LAYERS_MIN,
                   FLOWGEN_LAYERS_MAX, err);
  if (strcmp(field, "act") == 0)
    return set_choice((int *)&spec->act, field, value, activation_names,
                      COUNT(activation_names), err);
  if (strcmp(field, "time") == 0) return set_time(&spec->time, value, err);
  if (strcmp(field, "input") == 0) return set_input(spec->input, value, err);
  if (strcmp(field, "guidance") == 0)
    return set_bool(&spec->guidance, field, value, err);
  return fg_fail(err, FLOWGEN_INVALID, "unknown spec field '%s'", field);
}

flowgen_status flowgen_spec_validate(const flowgen_spec *spec,
                                     flowgen_error *err) {
  if (!spec) return fg_fail(err, FLOWGEN_INVALID, "spec is NULL");
  if (spec->dim < FLOWGEN_DIM_MIN || spec->dim > FLOWGEN_DIM_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "dim: %d is out of range (accepted: %d to %d)", spec->dim,
                   FLOWGEN_DIM_MIN, FLOWGEN_DIM_MAX);
  if (spec->hidden != 0 &&
      (spec->hidden < FLOWGEN_HIDDEN_MIN || spec->hidden > FLOWGEN_HIDDEN_MAX))
    return fg_fail(err, FLOWGEN_INVALID,
                   "hidden: %d is out of range (accepted: %d to %d)",
                   spec->hidden, FLOWGEN_HIDDEN_MIN, FLOWGEN_HIDDEN_MAX);
  if (spec->steps < FLOWGEN_STEPS_MIN || spec->steps > FLOWGEN_STEPS_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "steps: %d is out of range (accepted: %d to %d)",
                   spec->steps, FLOWGEN_STEPS_MIN, FLOWGEN_STEPS_MAX);
  if ((int)spec->solver < 0 || (int)spec->solver >= COUNT(solver_names))
    return fg_fail(err, FLOWGEN_INVALID, "solver: unknown value %d",
                   (int)spec->solver);
  if ((int)spec->precision < 0 ||
      (int)spec->precision >= COUNT(precision_names))
    return fg_fail(err, FLOWGEN_INVALID, "precision: unknown value %d",
                   (int)spec->precision);
  if (spec->arch < FLOWGEN_ARCH_MIN || spec->arch > 1000)
    return fg_fail(err, FLOWGEN_INVALID,
                   "arch: sm_%d is not supported (sm_%d or newer)", spec->arch,
                   FLOWGEN_ARCH_MIN);
  if (spec->arch_specific && spec->arch != 90)
    return fg_fail(err, FLOWGEN_INVALID,
                   "arch: sm_%da is not supported (the one arch-specific target "
                   "is sm_90a)", spec->arch);
  if (memchr(spec->name, '\0', sizeof spec->name) == NULL)
    return fg_fail(err, FLOWGEN_INVALID, "name: not NUL-terminated");
  if (spec->name[0] && !valid_name(spec->name))
    return fg_fail(err, FLOWGEN_INVALID, "name: '%s' is not a C identifier",
                   spec->name);
  if (spec->cond < 0 || spec->cond > FLOWGEN_COND_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "cond: %d is out of range (accepted: 0 to %d)", spec->cond,
                   FLOWGEN_COND_MAX);
  if (spec->layers != 0 && (spec->layers < FLOWGEN_LAYERS_MIN ||
                            spec->layers > FLOWGEN_LAYERS_MAX))
    return fg_fail(err, FLOWGEN_INVALID,
                   "layers: %d is out of range (accepted: %d to %d)",
                   spec->layers, FLOWGEN_LAYERS_MIN, FLOWGEN_LAYERS_MAX);
  if ((int)spec->act < 0 || (int)spec->act >= COUNT(activation_names))
    return fg_fail(err, FLOWGEN_INVALID, "act: unknown value %d",
                   (int)spec->act);
  const flowgen_time *t = &spec->time;
  if (t->features != 0 &&
      (t->features < 2 || t->features > FLOWGEN_TIME_FEATURES_MAX ||
       t->features % 2))
    return fg_fail(err, FLOWGEN_INVALID,
                   "time.features: %d is neither 0 (raw) nor even in 2 to %d",
                   t->features, FLOWGEN_TIME_FEATURES_MAX);
  if (t->features && !(t->scale == 0.0 || (isfinite(t->scale) && t->scale > 0)))
    return fg_fail(err, FLOWGEN_INVALID,
                   "time.scale: %g is not positive and finite (0 = 1000)",
                   t->scale);
  if (memchr(spec->input, '\0', sizeof spec->input) == NULL ||
      (spec->input[0] && !is_input_order(spec->input)))
    return fg_fail(err, FLOWGEN_INVALID,
                   "input: '%.4s' is not an order of the letters x, t and c",
                   spec->input);
  if (spec->guidance && spec->cond == 0)
    return fg_fail(err, FLOWGEN_INVALID,
                   "guidance: needs a conditioning (cond is 0)");
  return FLOWGEN_OK;
}
