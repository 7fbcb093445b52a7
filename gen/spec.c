/* flowgen_spec: defaults, parsing of each field from text, validation. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const solver_names[] = {"euler", "midpoint", "heun", "rk4"};
static const char *const precision_names[] = {"fp32", "tf32", "bf16", "fp16"};
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

int flowgen_spec_hidden(const flowgen_spec *spec) {
  return spec->hidden ? spec->hidden : 4 * spec->dim;
}

void flowgen_spec_symbol(const flowgen_spec *spec, char *buf, size_t size) {
  if (spec->name[0]) {
    snprintf(buf, size, "%s", spec->name);
    return;
  }
  /* Euler is the default and stays out of the name, so the documented
   * flow_d64_h256_s32_fp32 keeps meaning the PyTorch contract. */
  snprintf(buf, size, "flow_d%d_h%d_s%d_%s%s%s", spec->dim,
           flowgen_spec_hidden(spec), spec->steps,
           flowgen_precision_name(spec->precision),
           spec->solver == FLOWGEN_SOLVER_EULER ? "" : "_",
           spec->solver == FLOWGEN_SOLVER_EULER
               ? ""
               : flowgen_solver_name(spec->solver));
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
  return FLOWGEN_OK;
}
