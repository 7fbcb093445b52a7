/* The velocity MLP's weights: allocation, and loading from safetensors
 * (F32, F16, BF16 converted to fp32, PyTorch's state_dict layout): the
 * Linear layers of an nn.Sequential, their count and widths read from the
 * shapes, the rest from the file's metadata or the caller. */
#include "flowrt.h"
#include "internal.h"
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PREFIX "velocity."
#define TENSOR_NAME_MAX 512
#define SHAPE_TEXT_MAX 128
#define PREFIXES_SHOWN 8

/* ---- allocation --------------------------------------------------------- */

/* The model fields of spec (dim, hidden, cond, layers, act, time, input)
 * hold, the others replaced by valid defaults.  Zero fields are allowed
 * where zero_ok (an expected spec: zero = infer); what checks them is
 * flowgen_spec_validate, so the ranges and messages are the spec's. */
static flowgen_status check_model(const flowgen_spec *model, bool zero_ok,
                                  const char *what, flowgen_error *err) {
  flowgen_spec probe;
  flowgen_spec_default(&probe);
  probe.dim = zero_ok && model->dim == 0 ? 1 : model->dim;
  probe.hidden = zero_ok && model->hidden == 0 ? 1 : model->hidden;
  probe.cond = model->cond;
  probe.layers = model->layers;
  probe.act = model->act;
  probe.time = model->time;
  memcpy(probe.input, model->input, sizeof probe.input);
  if (!zero_ok && model->hidden == 0)
    return fg_fail(err, FLOWGEN_INVALID, "%s: hidden is 0 (give H)", what);
  flowgen_status st = flowgen_spec_validate(&probe, err);
  if (st) fg_error_prefix(err, "%s", what);
  return st;
}

/* Rows and columns of layer i's weight. */
static void layer_shape(const flowrt_weights *w, int i, size_t *rows,
                        size_t *cols) {
  const size_t D = (size_t)w->dim, H = (size_t)w->hidden;
  *rows = i == w->layers - 1 ? D : H;
  *cols = i == 0 ? D + (size_t)w->time_width + (size_t)w->cond : H;
}

static flowgen_status alloc_layers(flowrt_weights *w, flowgen_error *err) {
  for (int i = 0; i < w->layers; ++i) {
    size_t rows, cols;
    layer_shape(w, i, &rows, &cols);
    w->w[i] = calloc(rows * cols, sizeof(float));
    w->b[i] = calloc(rows, sizeof(float));
    if (!w->w[i] || !w->b[i])
      return fg_fail(err, FLOWGEN_NOMEM,
                     "out of memory for weights (D=%d, H=%d, C=%d, L=%d)",
                     w->dim, w->hidden, w->cond, w->layers);
  }
  return FLOWGEN_OK;
}

/* Zeroed weights of the shape and kind in *shape (a flowrt_weights whose
 * arrays are not used). */
static flowgen_status alloc_like(const flowrt_weights *shape,
                                 flowrt_weights **out, flowgen_error *err) {
  flowrt_weights *w = calloc(1, sizeof *w);
  if (!w) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for weights");
  *w = *shape;
  memset(w->w, 0, sizeof w->w);
  memset(w->b, 0, sizeof w->b);
  flowgen_status st = alloc_layers(w, err);
  if (st) {
    flowrt_weights_free(w);
    return st;
  }
  *out = w;
  return FLOWGEN_OK;
}

flowgen_status flowrt_weights_alloc(const flowgen_spec *model,
                                    flowrt_weights **out, flowgen_error *err) {
  *out = NULL;
  if (!model) return fg_fail(err, FLOWGEN_INVALID, "weights: the model spec is NULL");
  flowgen_spec m = *model;
  m.hidden = flowgen_spec_hidden(model);
  flowgen_status st = check_model(&m, false, "weights", err);
  if (st) return st;
  flowrt_weights shape = {.dim = m.dim, .hidden = m.hidden, .cond = m.cond,
                          .layers = flowgen_spec_layers(&m),
                          .time_width = flowgen_spec_time_width(&m),
                          .act = m.act, .time = m.time};
  memcpy(shape.input, flowgen_spec_input(&m), sizeof shape.input);
  return alloc_like(&shape, out, err);
}

void flowrt_weights_free(flowrt_weights *weights) {
  if (!weights) return;
  for (int i = 0; i < FLOWGEN_LAYERS_MAX; ++i) {
    free(weights->w[i]);
    free(weights->b[i]);
  }
  free(weights);
}

void flowrt_weights_model(const flowrt_weights *w, flowgen_spec *spec) {
  spec->dim = w->dim;
  spec->hidden = w->hidden;
  spec->cond = w->cond;
  spec->layers = w->layers;
  spec->act = w->act;
  spec->time = w->time;
  memcpy(spec->input, w->input, sizeof spec->input);
}

static bool same_time(const flowgen_time *a, const flowgen_time *b) {
  if (a->features != b->features) return false;
  if (!a->features) return true;
  double sa = a->scale != 0.0 ? a->scale : FLOWGEN_TIME_SCALE_DEFAULT;
  double sb = b->scale != 0.0 ? b->scale : FLOWGEN_TIME_SCALE_DEFAULT;
  return sa == sb;
}

flowgen_status flowrt_weights_check(const flowrt_weights *w,
                                    const flowgen_spec *spec,
                                    flowgen_error *err) {
  if (!w || !spec)
    return fg_fail(err, FLOWGEN_INVALID, "weights and spec are required");
  char a[64], b[64];
#define DIFFERS(field, have, want)                                         \
  fg_fail(err, FLOWGEN_INVALID,                                            \
          "the weights are of a model with %s %s but the spec asks for %s", \
          field, have, want)
  if (w->dim != spec->dim || w->hidden != flowgen_spec_hidden(spec))
    return fg_fail(err, FLOWGEN_INVALID,
                   "the weights are D=%d, H=%d but the spec asks for D=%d, H=%d",
                   w->dim, w->hidden, spec->dim, flowgen_spec_hidden(spec));
  if (w->cond != spec->cond) {
    snprintf(a, sizeof a, "C=%d", w->cond);
    snprintf(b, sizeof b, "C=%d (cond)", spec->cond);
    return DIFFERS("conditioning", a, b);
  }
  if (w->layers != flowgen_spec_layers(spec)) {
    snprintf(a, sizeof a, "L=%d", w->layers);
    snprintf(b, sizeof b, "L=%d (layers)", flowgen_spec_layers(spec));
    return DIFFERS("Linear layers", a, b);
  }
  if (w->act != spec->act) {
    snprintf(a, sizeof a, "%s", flowgen_activation_name(w->act));
    snprintf(b, sizeof b, "%s (act)", flowgen_activation_name(spec->act));
    return DIFFERS("activation", a, b);
  }
  if (!same_time(&w->time, &spec->time)) {
    flowgen_time_name(&w->time, a, sizeof a);
    flowgen_time_name(&spec->time, b, sizeof b);
    strncat(b, " (time)", sizeof b - strlen(b) - 1);
    return DIFFERS("time", a, b);
  }
  if (strcmp(w->input, flowgen_spec_input(spec)) != 0) {
    snprintf(a, sizeof a, "%c,%c,%c", w->input[0], w->input[1], w->input[2]);
    flowgen_spec_input_name(spec, b, sizeof b);
    strncat(b, " (input)", sizeof b - strlen(b) - 1);
    return DIFFERS("input order", a, b);
  }
#undef DIFFERS
  return FLOWGEN_OK;
}

/* ---- element conversion ------------------------------------------------- */

static float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* IEEE binary16: subnormals are mant * 2^-24 (exact in fp32); inf and nan
 * keep their sign and payload. */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f)
    return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = ldexpf((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  }
  return float_from_bits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

static uint16_t load_u16_le(const unsigned char *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t load_u32_le(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

/* The file's bytes may sit at any alignment; they are read byte by byte. */
static void convert_to_f32(fg_st_dtype dtype, const unsigned char *p, size_t count,
                           float *out) {
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
    case FG_ST_F16: out[i] = half_to_float(load_u16_le(p + 2 * i)); break;
    case FG_ST_BF16: out[i] = float_from_bits((uint32_t)load_u16_le(p + 2 * i) << 16); break;
    default: out[i] = float_from_bits(load_u32_le(p + 4 * i)); break;
    }
  }
}

/* ---- finding the tensors ------------------------------------------------ */

typedef struct loader {
  const fg_st_file *file;
  const char *name;     /* the file, for messages */
  const char *prefix;
  const flowgen_spec *expect;  /* never NULL: zeroed = infer everything */
  flowgen_error *err;
} loader;

/* Appends the distinct prefixes P for which the file holds P0.weight. */
static void describe_prefixes(const fg_st_file *file, char *buf, size_t size) {
  static const char suffix[] = "0.weight";
  const size_t suffix_len = sizeof suffix - 1;
  size_t len = 0, shown = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < file->tensor_count && shown < PREFIXES_SHOWN; ++i) {
    const char *n = file->tensors[i].name;
    size_t n_len = strlen(n);
    if (n_len < suffix_len || strcmp(n + n_len - suffix_len, suffix) != 0) continue;
    size_t prefix_len = n_len - suffix_len;
    if (prefix_len > 0 && n[prefix_len - 1] != '.') continue;  /* x.10.weight */
    if (len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s'%.*s'", shown ? ", " : "",
                              (int)prefix_len, n);
    ++shown;
  }
}

static flowgen_status missing_tensor(const loader *l, const char *tensor) {
  char prefixes[512];
  describe_prefixes(l->file, prefixes, sizeof prefixes);
  if (prefixes[0])
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: no tensor '%s' (prefix '%s'; the file has *0.weight "
                   "under the prefixes %s)",
                   l->name, tensor, l->prefix, prefixes);
  return fg_fail(l->err, FLOWGEN_WEIGHTS,
                 "%s: no tensor '%s' (prefix '%s'; the file holds %zu tensors, "
                 "none named *0.weight)",
                 l->name, tensor, l->prefix, l->file->tensor_count);
}

/* The tensor PREFIX<index>.<kind>, or NULL. */
static const fg_st_tensor *module_tensor(const loader *l, int index,
                                         const char *kind) {
  char tensor[TENSOR_NAME_MAX];
  snprintf(tensor, sizeof tensor, "%s%d.%s", l->prefix, index, kind);
  return fg_st_find(l->file, tensor);
}

/* Layer i's weight or bias (Sequential index 2 i), of a dtype we read. */
static flowgen_status find_tensor(const loader *l, int layer, const char *kind,
                                  const fg_st_tensor **out) {
  char tensor[TENSOR_NAME_MAX];
  snprintf(tensor, sizeof tensor, "%s%d.%s", l->prefix, 2 * layer, kind);
  *out = fg_st_find(l->file, tensor);
  if (!*out) return missing_tensor(l, tensor);
  if ((*out)->dtype != FG_ST_F32 && (*out)->dtype != FG_ST_F16 &&
      (*out)->dtype != FG_ST_BF16)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: tensor '%s' has dtype %s (accepted: F32, F16, BF16)",
                   l->name, tensor, fg_st_dtype_name((*out)->dtype));
  return FLOWGEN_OK;
}

/* " need [5, 4]" with what fixes it: D=3, H=5 (and C, T where they are
 * not the seed's). */
static flowgen_status shape_mismatch(const loader *l, const fg_st_tensor *t,
                                     const uint64_t *expected, size_t ndim,
                                     const flowrt_weights *w) {
  char have[SHAPE_TEXT_MAX], want[SHAPE_TEXT_MAX], extra[64] = "";
  fg_st_format_shape(t->shape, t->ndim, have, sizeof have);
  fg_st_format_shape(expected, ndim, want, sizeof want);
  if (w->cond)
    snprintf(extra, sizeof extra, ", C=%d", w->cond);
  if (w->time_width != 1)
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", T=%d",
             w->time_width);
  return fg_fail(l->err, FLOWGEN_WEIGHTS,
                 "%s: tensor '%s' has shape %s but D=%d, H=%d%s need %s", l->name,
                 t->name, have, w->dim, w->hidden, extra, want);
}

static bool shape_equals(const fg_st_tensor *t, const uint64_t *expected,
                         size_t ndim) {
  if (t->ndim != ndim) return false;
  for (size_t i = 0; i < ndim; ++i)
    if (t->shape[i] != expected[i]) return false;
  return true;
}

/* ---- what the metadata says ---------------------------------------------- */

/* The file's value of a flowgen.* key through flowgen_spec_set (the flag's
 * own parser), into *model; FLOWGEN_WEIGHTS naming the key if it does not
 * parse.  *found says whether the key is there. */
static flowgen_status read_metadata(const loader *l, const char *field,
                                    flowgen_spec *model, bool *found) {
  char key[32];
  snprintf(key, sizeof key, "flowgen.%s", field);
  const char *value = fg_st_metadata_get(l->file, key);
  *found = value != NULL;
  if (!value) return FLOWGEN_OK;
  flowgen_error why = {FLOWGEN_OK, ""};
  if (flowgen_spec_set(model, field, value, &why) == FLOWGEN_OK) return FLOWGEN_OK;
  /* "--act: unknown value 'x' (...)": the part after the flag's name. */
  const char *detail = strchr(why.message, ' ');
  return fg_fail(l->err, FLOWGEN_WEIGHTS, "%s: __metadata__ '%s': %s", l->name,
                 key, detail ? detail + 1 : why.message);
}

static flowgen_status contradiction(const loader *l, const char *field,
                                    const char *in_file, const char *asked) {
  return fg_fail(l->err, FLOWGEN_WEIGHTS,
                 "%s: the file's __metadata__ says flowgen.%s = %s but %s was "
                 "asked for (--%s %s)",
                 l->name, field, in_file, asked, field, asked);
}

/* act, time and input: the file's, checked against the expected spec's
 * where both say; else the expected's; else the seed's. */
static flowgen_status resolve_kind(const loader *l, flowrt_weights *w) {
  const flowgen_spec *e = l->expect;
  flowgen_spec file;
  flowgen_spec_default(&file);
  bool act = false, time = false, input = false;
  flowgen_status st = read_metadata(l, "act", &file, &act);
  if (!st) st = read_metadata(l, "time", &file, &time);
  if (!st) st = read_metadata(l, "input", &file, &input);
  if (st) return st;
  char a[64], b[64];
  if (act && e->act != FLOWGEN_ACT_SILU && e->act != file.act)
    return contradiction(l, "act", flowgen_activation_name(file.act),
                         flowgen_activation_name(e->act));
  if (time && e->time.features && !same_time(&file.time, &e->time)) {
    flowgen_time_name(&file.time, a, sizeof a);
    flowgen_time_name(&e->time, b, sizeof b);
    return contradiction(l, "time", a, b);
  }
  if (input && e->input[0] && strcmp(file.input, e->input) != 0) {
    flowgen_spec_input_name(&file, a, sizeof a);
    flowgen_spec_input_name(e, b, sizeof b);
    return contradiction(l, "input", a, b);
  }
  w->act = act ? file.act : e->act;
  w->time = time ? file.time : e->time;
  memcpy(w->input, input ? file.input : flowgen_spec_input(e), sizeof w->input);
  w->time_width = w->time.features ? w->time.features : 1;
  return FLOWGEN_OK;
}

/* ---- the shape ------------------------------------------------------------- */

static flowgen_status require_matrix(const loader *l, const fg_st_tensor *t,
                                     const char *layout) {
  if (t->ndim == 2) return FLOWGEN_OK;
  char have[SHAPE_TEXT_MAX];
  fg_st_format_shape(t->shape, t->ndim, have, sizeof have);
  return fg_fail(l->err, FLOWGEN_WEIGHTS,
                 "%s: tensor '%s' has shape %s, expected a matrix %s", l->name,
                 t->name, have, layout);
}

static flowgen_status infer_size(const loader *l, const fg_st_tensor *t,
                                 const char *what, long long min, long long max,
                                 int *out) {
  uint64_t value = t->shape[0];
  if (value < (uint64_t)min || value > (uint64_t)max)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: %s = %llu (rows of tensor '%s') is out of range "
                   "(accepted: %lld to %lld)",
                   l->name, what, (unsigned long long)value, t->name, min, max);
  *out = (int)value;
  return FLOWGEN_OK;
}

/* L: the Linear layers at Sequential indices 0, 2, 4, ... with nothing
 * between them (an activation has no parameters) and no gap. */
static flowgen_status count_layers(const loader *l, int *layers) {
  int n = 0;
  while (n <= FLOWGEN_LAYERS_MAX && module_tensor(l, 2 * n, "weight")) ++n;
  if (n == 0) {
    const fg_st_tensor *t;
    return find_tensor(l, 0, "weight", &t); /* names what is missing */
  }
  if (n > FLOWGEN_LAYERS_MAX)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: more than %d Linear layers ('%s%d.weight' is there; "
                   "accepted: %d to %d)",
                   l->name, FLOWGEN_LAYERS_MAX, l->prefix, 2 * FLOWGEN_LAYERS_MAX,
                   FLOWGEN_LAYERS_MIN, FLOWGEN_LAYERS_MAX);
  for (int gap = n + 1; gap <= FLOWGEN_LAYERS_MAX; ++gap)
    if (module_tensor(l, 2 * gap, "weight"))
      return fg_fail(l->err, FLOWGEN_WEIGHTS,
                     "%s: there is '%s%d.weight' but no '%s%d.weight': the "
                     "Linear layers must be at indices 0, 2, 4, ... of the "
                     "Sequential, with no gap",
                     l->name, l->prefix, 2 * gap, l->prefix, 2 * n);
  for (int i = 1; i < 2 * n - 1; i += 2) {
    const fg_st_tensor *t = module_tensor(l, i, "weight");
    if (!t) t = module_tensor(l, i, "bias");
    if (t)
      return fg_fail(l->err, FLOWGEN_WEIGHTS,
                     "%s: tensor '%s': module %d of the Sequential has "
                     "parameters, but between two Linear layers there must be "
                     "an activation",
                     l->name, t->name, i);
  }
  if (n < FLOWGEN_LAYERS_MIN)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: one Linear layer ('%s0.weight'); the model needs %d to %d",
                   l->name, l->prefix, FLOWGEN_LAYERS_MIN, FLOWGEN_LAYERS_MAX);
  if (l->expect->layers && l->expect->layers != n)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: the file has %d Linear layers ('%s0' to '%s%d') but %d "
                   "were asked for (--layers %d)",
                   l->name, n, l->prefix, l->prefix, 2 * (n - 1), l->expect->layers,
                   l->expect->layers);
  *layers = n;
  return FLOWGEN_OK;
}

/* D from the last layer's rows, H from the first's, C from the first's
 * columns (where the expected spec does not give them), then the
 * metadata's flowgen.cond checked. */
static flowgen_status resolve_shape(const loader *l, flowrt_weights *w) {
  const flowgen_spec *e = l->expect;
  const fg_st_tensor *first, *last;
  flowgen_status s = count_layers(l, &w->layers);
  if (!s) s = resolve_kind(l, w);
  if (!s) s = find_tensor(l, 0, "weight", &first);
  if (!s) s = find_tensor(l, w->layers - 1, "weight", &last);
  if (s) return s;
  w->hidden = e->hidden;
  w->dim = e->dim;
  if (!w->hidden) s = require_matrix(l, first, "[H, D+T+C]");
  if (!s && !w->hidden)
    s = infer_size(l, first, "H", FLOWGEN_HIDDEN_MIN, FLOWGEN_HIDDEN_MAX, &w->hidden);
  if (!s && !w->dim) s = require_matrix(l, last, "[D, H]");
  if (!s && !w->dim) s = infer_size(l, last, "D", FLOWGEN_DIM_MIN, FLOWGEN_DIM_MAX, &w->dim);
  if (s) return s;
  /* A D or H given that the rows contradict: said before C is inferred
   * from the columns, which depend on D. */
  const uint64_t first_rows[2] = {(uint64_t)w->hidden, first->ndim == 2 ? first->shape[1] : 0};
  const uint64_t last_rows[2] = {(uint64_t)w->dim, last->ndim == 2 ? last->shape[1] : 0};
  if (e->hidden && first->ndim == 2 && first->shape[0] != (uint64_t)w->hidden)
    return shape_mismatch(l, first, first_rows, 2, w);
  if (e->dim && last->ndim == 2 && last->shape[0] != (uint64_t)w->dim)
    return shape_mismatch(l, last, last_rows, 2, w);
  w->cond = e->cond;
  if (!w->cond && first->ndim == 2) {
    uint64_t in = first->shape[1], fixed = (uint64_t)w->dim + (uint64_t)w->time_width;
    char time[64];
    flowgen_time_name(&w->time, time, sizeof time);
    if (in < fixed)
      return fg_fail(l->err, FLOWGEN_WEIGHTS,
                     "%s: tensor '%s' has %llu columns but D + T = %d + %d "
                     "(x and the %s time) need at least %llu",
                     l->name, first->name, (unsigned long long)in, w->dim,
                     w->time_width, time, (unsigned long long)fixed);
    if (in - fixed > FLOWGEN_COND_MAX)
      return fg_fail(l->err, FLOWGEN_WEIGHTS,
                     "%s: tensor '%s' has %llu columns: C = %llu - D - T = %llu "
                     "is out of range (accepted: 0 to %d)",
                     l->name, first->name, (unsigned long long)in,
                     (unsigned long long)in, (unsigned long long)(in - fixed),
                     FLOWGEN_COND_MAX);
    w->cond = (int)(in - fixed);
  }
  const char *said = fg_st_metadata_get(l->file, "flowgen.cond");
  long long c = 0;
  if (said && fg_parse_int(said, 0, FLOWGEN_COND_MAX, &c) != FG_PARSE_OK)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: __metadata__ 'flowgen.cond': '%s' is not a width 0 to %d",
                   l->name, said, FLOWGEN_COND_MAX);
  if (said && c != w->cond)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: the file's __metadata__ says flowgen.cond = %lld but "
                   "its tensor '%s' has C = %d conditioning columns",
                   l->name, c, first->name, w->cond);
  return FLOWGEN_OK;
}

/* ---- loading ------------------------------------------------------------ */

/* A NaN or an infinity would only come out as NaN samples: refused, with
 * the element named as [row, column] of a matrix or [index] of a vector. */
static flowgen_status check_finite(const loader *l, const fg_st_tensor *t,
                                   uint64_t cols, const float *values) {
  for (uint64_t i = 0; i < t->count; ++i) {
    if (isfinite(values[i])) continue;
    const char *what = isnan(values[i]) ? "nan" : values[i] > 0 ? "inf" : "-inf";
    if (t->ndim == 2)
      return fg_fail(l->err, FLOWGEN_WEIGHTS,
                     "%s: tensor '%s' holds %s at [%llu, %llu] (the weights must be finite)",
                     l->name, t->name, what, (unsigned long long)(i / cols),
                     (unsigned long long)(i % cols));
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: tensor '%s' holds %s at [%llu] (the weights must be finite)",
                   l->name, t->name, what, (unsigned long long)i);
  }
  return FLOWGEN_OK;
}

/* From a file, the bytes come a chunk at a time (whole elements), so the
 * raw tensor is never held whole beside its fp32 copy. */
#define CHUNK_BYTES 16384

static flowgen_status convert_tensor(const loader *l, const fg_st_tensor *t, float *out) {
  if (t->data) {
    convert_to_f32(t->dtype, t->data, (size_t)t->count, out);
    return FLOWGEN_OK;
  }
  unsigned char chunk[CHUNK_BYTES];
  size_t width = fg_st_dtype_size(t->dtype), done = 0;
  while (done < t->size) {
    size_t n = t->size - done < CHUNK_BYTES ? t->size - done : CHUNK_BYTES;
    flowgen_status s = fg_st_read_data(l->file, t, done, chunk, n, l->err);
    if (s) return s;
    convert_to_f32(t->dtype, chunk, n / width, out + done / width);
    done += n;
  }
  return FLOWGEN_OK;
}

static flowgen_status load_tensor(const loader *l, int layer, const char *kind,
                                  uint64_t rows, uint64_t cols, size_t ndim,
                                  const flowrt_weights *w, float *out) {
  const fg_st_tensor *t;
  flowgen_status s = find_tensor(l, layer, kind, &t);
  if (s) return s;
  const uint64_t expected[2] = {rows, cols};
  if (!shape_equals(t, expected, ndim))
    return shape_mismatch(l, t, expected, ndim, w);
  s = convert_tensor(l, t, out);
  return s ? s : check_finite(l, t, cols, out);
}

static flowgen_status load_all(const loader *l, flowrt_weights *w) {
  flowgen_status s = FLOWGEN_OK;
  for (int i = 0; i < w->layers && !s; ++i) {
    size_t rows, cols;
    layer_shape(w, i, &rows, &cols);
    s = load_tensor(l, i, "weight", rows, cols, 2, w, w->w[i]);
    if (!s) s = load_tensor(l, i, "bias", rows, 0, 1, w, w->b[i]);
  }
  return s;
}

static flowgen_status check_arguments(const char *prefix, const flowgen_spec *expect,
                                      flowgen_error *err) {
  if (strlen(prefix) > TENSOR_NAME_MAX - 16)
    return fg_fail(err, FLOWGEN_INVALID, "tensor prefix is too long (%zu bytes)",
                   strlen(prefix));
  return expect ? check_model(expect, true, "expected spec", err) : FLOWGEN_OK;
}

/* The layers of a parsed (or opened) file, which it frees. */
static flowgen_status load_from(fg_st_file *file, const char *name, const char *prefix,
                                const flowgen_spec *expect, flowrt_weights **out,
                                flowgen_error *err) {
  flowgen_spec infer;
  memset(&infer, 0, sizeof infer);
  loader l = {file, name, prefix, expect ? expect : &infer, err};
  flowrt_weights shape = {0}, *w = NULL;
  flowgen_status s = resolve_shape(&l, &shape);
  if (!s) s = alloc_like(&shape, &w, err);
  if (!s) s = load_all(&l, w);
  fg_st_free(file);
  if (s) {
    flowrt_weights_free(w);
    return s;
  }
  *out = w;
  return FLOWGEN_OK;
}

flowgen_status flowrt_weights_parse(const void *data, size_t size,
                                    const char *name, const char *prefix,
                                    const flowgen_spec *expect,
                                    flowrt_weights **out, flowgen_error *err) {
  *out = NULL;
  if (!name) name = "<memory>";
  if (!prefix) prefix = DEFAULT_PREFIX;
  flowgen_status s = check_arguments(prefix, expect, err);
  if (s) return s;
  fg_st_file *file;
  s = fg_st_parse(data, size, name, &file, err);
  if (s) return s;
  return load_from(file, name, prefix, expect, out, err);
}

/* ---- from a file -------------------------------------------------------- */

/* The header and the file's size are checked before any data is read, and
 * only the model's tensors are read: a huge or hostile file costs neither
 * time nor memory before it is refused, and other tensors in a checkpoint
 * are not read at all. */
flowgen_status flowrt_weights_load(const char *path, const char *prefix,
                                   const flowgen_spec *expect,
                                   flowrt_weights **out, flowgen_error *err) {
  *out = NULL;
  if (!prefix) prefix = DEFAULT_PREFIX;
  flowgen_status s = check_arguments(prefix, expect, err);
  if (s) return s;
  fg_st_file *file;
  s = fg_st_open(path, &file, err);
  if (s) return s;
  return load_from(file, path, prefix, expect, out, err);
}

/* The built-in models are the files NAME_d<D>_h<H>.safetensors embedded at
 * build time; a conditional one is read as any file is (its metadata). */
flowgen_status flowrt_weights_builtin(const char *name, flowrt_weights **out,
                                      flowgen_error *err) {
  *out = NULL;
  char names[256] = "";
  size_t len = name ? strlen(name) : 0;
  for (const fg_embedded_file *f = fg_builtin_models; f->name; ++f) {
    /* The name ends at the last "_d<digit>". */
    const char *shape = NULL;
    for (const char *p = f->name; (p = strstr(p, "_d")); ++p)
      if (p[2] >= '0' && p[2] <= '9') shape = p;
    if (!shape) continue;
    if (len && (size_t)(shape - f->name) == len && strncmp(f->name, name, len) == 0)
      return flowrt_weights_parse(f->data, f->size, f->name, NULL, NULL, out, err);
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%.*s",
             names[0] ? ", " : "", (int)(shape - f->name), f->name);
  }
  return fg_fail(err, FLOWGEN_INVALID, "no built-in model '%s' (there is: %s)",
                 name ? name : "", names);
}
