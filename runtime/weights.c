/* The velocity MLP's weights: allocation, and loading from safetensors
 * (F32, F16, BF16 converted to fp32, PyTorch's state_dict layout). */
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

static flowgen_status check_shape_argument(int dim, int hidden,
                                           flowgen_error *err) {
  if (dim < FLOWGEN_DIM_MIN || dim > FLOWGEN_DIM_MAX)
    return fg_fail(err, FLOWGEN_INVALID, "dim %d is out of range (accepted: %d to %d)",
                   dim, FLOWGEN_DIM_MIN, FLOWGEN_DIM_MAX);
  if (hidden < FLOWGEN_HIDDEN_MIN || hidden > FLOWGEN_HIDDEN_MAX)
    return fg_fail(err, FLOWGEN_INVALID,
                   "hidden %d is out of range (accepted: %d to %d)", hidden,
                   FLOWGEN_HIDDEN_MIN, FLOWGEN_HIDDEN_MAX);
  return FLOWGEN_OK;
}

flowgen_status flowrt_weights_alloc(int dim, int hidden, flowrt_weights **out,
                                    flowgen_error *err) {
  *out = NULL;
  flowgen_status s = check_shape_argument(dim, hidden, err);
  if (s) return s;
  flowrt_weights *w = calloc(1, sizeof *w);
  if (!w) return fg_fail(err, FLOWGEN_NOMEM, "out of memory for weights");
  size_t d = (size_t)dim, h = (size_t)hidden;
  w->dim = dim;
  w->hidden = hidden;
  w->w1 = calloc(h * (d + 1), sizeof(float));
  w->b1 = calloc(h, sizeof(float));
  w->w2 = calloc(h * h, sizeof(float));
  w->b2 = calloc(h, sizeof(float));
  w->w3 = calloc(d * h, sizeof(float));
  w->b3 = calloc(d, sizeof(float));
  if (!w->w1 || !w->b1 || !w->w2 || !w->b2 || !w->w3 || !w->b3) {
    flowrt_weights_free(w);
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory for weights (D=%d, H=%d)",
                   dim, hidden);
  }
  *out = w;
  return FLOWGEN_OK;
}

void flowrt_weights_free(flowrt_weights *weights) {
  if (!weights) return;
  free(weights->w1);
  free(weights->b1);
  free(weights->w2);
  free(weights->b2);
  free(weights->w3);
  free(weights->b3);
  free(weights);
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

/* ---- finding the six tensors -------------------------------------------- */

typedef struct loader {
  const fg_st_file *file;
  const char *name;     /* the file, for messages */
  const char *prefix;
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

static flowgen_status find_tensor(const loader *l, const char *suffix,
                                  const fg_st_tensor **out) {
  char tensor[TENSOR_NAME_MAX];
  snprintf(tensor, sizeof tensor, "%s%s", l->prefix, suffix);
  *out = fg_st_find(l->file, tensor);
  if (!*out) return missing_tensor(l, tensor);
  if ((*out)->dtype != FG_ST_F32 && (*out)->dtype != FG_ST_F16 &&
      (*out)->dtype != FG_ST_BF16)
    return fg_fail(l->err, FLOWGEN_WEIGHTS,
                   "%s: tensor '%s' has dtype %s (accepted: F32, F16, BF16)",
                   l->name, tensor, fg_st_dtype_name((*out)->dtype));
  return FLOWGEN_OK;
}

static flowgen_status shape_mismatch(const loader *l, const fg_st_tensor *t,
                                     const uint64_t *expected, size_t ndim,
                                     int dim, int hidden) {
  char have[SHAPE_TEXT_MAX], want[SHAPE_TEXT_MAX];
  fg_st_format_shape(t->shape, t->ndim, have, sizeof have);
  fg_st_format_shape(expected, ndim, want, sizeof want);
  return fg_fail(l->err, FLOWGEN_WEIGHTS,
                 "%s: tensor '%s' has shape %s but D=%d, H=%d need %s", l->name,
                 t->name, have, dim, hidden, want);
}

static bool shape_equals(const fg_st_tensor *t, const uint64_t *expected,
                         size_t ndim) {
  if (t->ndim != ndim) return false;
  for (size_t i = 0; i < ndim; ++i)
    if (t->shape[i] != expected[i]) return false;
  return true;
}

/* ---- D and H ------------------------------------------------------------ */

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

/* D from 4.weight (D x H), H from 0.weight (H x D+1), where not given. */
static flowgen_status resolve_shape(const loader *l, int *dim, int *hidden) {
  const fg_st_tensor *w1, *w3;
  flowgen_status s = find_tensor(l, "0.weight", &w1);
  if (!s) s = find_tensor(l, "4.weight", &w3);
  if (!s && *hidden == 0) s = require_matrix(l, w1, "[H, D+1]");
  if (!s && *hidden == 0)
    s = infer_size(l, w1, "H", FLOWGEN_HIDDEN_MIN, FLOWGEN_HIDDEN_MAX, hidden);
  if (!s && *dim == 0) s = require_matrix(l, w3, "[D, H]");
  if (!s && *dim == 0)
    s = infer_size(l, w3, "D", FLOWGEN_DIM_MIN, FLOWGEN_DIM_MAX, dim);
  return s;
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

static flowgen_status load_tensor(const loader *l, const char *suffix,
                                  uint64_t rows, uint64_t cols, size_t ndim,
                                  const flowrt_weights *w, float *out) {
  const fg_st_tensor *t;
  flowgen_status s = find_tensor(l, suffix, &t);
  if (s) return s;
  const uint64_t expected[2] = {rows, cols};
  if (!shape_equals(t, expected, ndim))
    return shape_mismatch(l, t, expected, ndim, w->dim, w->hidden);
  s = convert_tensor(l, t, out);
  return s ? s : check_finite(l, t, cols, out);
}

static flowgen_status load_all(const loader *l, flowrt_weights *w) {
  uint64_t d = (uint64_t)w->dim, h = (uint64_t)w->hidden;
  flowgen_status s = load_tensor(l, "0.weight", h, d + 1, 2, w, w->w1);
  if (!s) s = load_tensor(l, "0.bias", h, 0, 1, w, w->b1);
  if (!s) s = load_tensor(l, "2.weight", h, h, 2, w, w->w2);
  if (!s) s = load_tensor(l, "2.bias", h, 0, 1, w, w->b2);
  if (!s) s = load_tensor(l, "4.weight", d, h, 2, w, w->w3);
  if (!s) s = load_tensor(l, "4.bias", d, 0, 1, w, w->b3);
  return s;
}

static flowgen_status check_expected(int dim, int hidden, flowgen_error *err) {
  if (dim < 0 || hidden < 0)
    return fg_fail(err, FLOWGEN_INVALID,
                   "expected dim %d / hidden %d: negative (0 = infer from the file)",
                   dim, hidden);
  return check_shape_argument(dim ? dim : FLOWGEN_DIM_MIN,
                              hidden ? hidden : FLOWGEN_HIDDEN_MIN, err);
}

static flowgen_status check_arguments(const char *prefix, int dim, int hidden,
                                      flowgen_error *err) {
  if (strlen(prefix) > TENSOR_NAME_MAX - 16)
    return fg_fail(err, FLOWGEN_INVALID, "tensor prefix is too long (%zu bytes)",
                   strlen(prefix));
  return check_expected(dim, hidden, err);
}

/* The six tensors of a parsed (or opened) file, which it frees. */
static flowgen_status load_from(fg_st_file *file, const char *name, const char *prefix,
                                int dim, int hidden, flowrt_weights **out,
                                flowgen_error *err) {
  loader l = {file, name, prefix, err};
  flowrt_weights *w = NULL;
  flowgen_status s = resolve_shape(&l, &dim, &hidden);
  if (!s) s = flowrt_weights_alloc(dim, hidden, &w, err);
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
                                    int dim, int hidden, flowrt_weights **out,
                                    flowgen_error *err) {
  *out = NULL;
  if (!name) name = "<memory>";
  if (!prefix) prefix = DEFAULT_PREFIX;
  flowgen_status s = check_arguments(prefix, dim, hidden, err);
  if (s) return s;
  fg_st_file *file;
  s = fg_st_parse(data, size, name, &file, err);
  if (s) return s;
  return load_from(file, name, prefix, dim, hidden, out, err);
}

/* ---- from a file -------------------------------------------------------- */

/* The header and the file's size are checked before any data is read, and
 * only the six tensors are read: a huge or hostile file costs neither time
 * nor memory before it is refused, and other tensors in a checkpoint are
 * not read at all. */
flowgen_status flowrt_weights_load(const char *path, const char *prefix,
                                   int dim, int hidden, flowrt_weights **out,
                                   flowgen_error *err) {
  *out = NULL;
  if (!prefix) prefix = DEFAULT_PREFIX;
  flowgen_status s = check_arguments(prefix, dim, hidden, err);
  if (s) return s;
  fg_st_file *file;
  s = fg_st_open(path, &file, err);
  if (s) return s;
  return load_from(file, path, prefix, dim, hidden, out, err);
}

flowgen_status flowrt_weights_builtin(const char *name, flowrt_weights **out,
                                      flowgen_error *err) {
  *out = NULL;
  char file[64];
  snprintf(file, sizeof file, "%s_d64_h256.safetensors", name ? name : "");
  for (const fg_embedded_file *f = fg_builtin_models; f->name; ++f)
    if (strcmp(f->name, file) == 0)
      return flowrt_weights_parse(f->data, f->size, f->name, NULL, 0, 0, out, err);
  return fg_fail(err, FLOWGEN_INVALID, "no built-in model '%s' (there is: digits)",
                 name ? name : "");
}
