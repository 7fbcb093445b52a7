/* Fuzzes the safetensors parser (fg_st_parse) and, on what it accepts, the
 * weights loader (flowrt_weights_parse) with D and H inferred.  Invariants:
 * an accepted file's tensors tile its data area and point inside the input;
 * a refusal is FLOWGEN_WEIGHTS with a message; loading twice (inferred, then
 * explicit shape) gives the same weights. */
#include "fuzz.h"

#include "flowrt.h"
#include "safetensors.h"

#include <string.h>

static void check_file(const fg_st_file *f, const uint8_t *data, size_t size) {
  FUZZ_CHECK(8 + f->header_size + f->data_size == size);
  const uint8_t *area = data + 8 + f->header_size;
  size_t covered = 0;
  for (size_t i = 0; i < f->tensor_count; ++i) {
    const fg_st_tensor *t = &f->tensors[i];
    FUZZ_CHECK(t->name != NULL);
    FUZZ_CHECK((unsigned)t->dtype < FG_ST_DTYPE_COUNT);
    FUZZ_CHECK(t->ndim == 0 || t->shape != NULL);
    uint64_t count = 1;
    for (size_t d = 0; d < t->ndim; ++d) count *= t->shape[d];
    FUZZ_CHECK(count == t->count);
    FUZZ_CHECK(t->size == t->count * fg_st_dtype_size(t->dtype));
    FUZZ_CHECK(t->offset == covered);
    FUZZ_CHECK(t->data == area + t->offset);
    covered += t->size;
    FUZZ_CHECK(covered <= f->data_size);
    FUZZ_CHECK(fg_st_find(f, t->name) == t);
    /* Every buffer size, so an off-by-one in the truncation shows. */
    for (size_t n = 1; n <= 24; n += 5) {
      char *text = malloc(n);
      FUZZ_CHECK(text != NULL);
      fg_st_format_shape(t->shape, t->ndim, text, n);
      FUZZ_CHECK(memchr(text, '\0', n) != NULL);
      free(text);
    }
  }
  FUZZ_CHECK(covered == f->data_size);
  for (size_t i = 0; i < f->metadata_count; ++i) {
    FUZZ_CHECK(f->metadata[i].key && f->metadata[i].value);
    FUZZ_CHECK(fg_st_metadata_get(f, f->metadata[i].key) == f->metadata[i].value);
  }
}

static bool same_weights(const flowrt_weights *a, const flowrt_weights *b) {
  if (a->dim != b->dim || a->hidden != b->hidden || a->cond != b->cond ||
      a->layers != b->layers || a->time_width != b->time_width || a->act != b->act ||
      strcmp(a->input, b->input) != 0)
    return false;
  for (int i = 0; i < a->layers; ++i) {
    size_t rows = i == a->layers - 1 ? (size_t)a->dim : (size_t)a->hidden;
    size_t cols = i == 0 ? (size_t)(a->dim + a->time_width + a->cond) : (size_t)a->hidden;
    if (memcmp(a->w[i], b->w[i], rows * cols * sizeof(float)) ||
        memcmp(a->b[i], b->b[i], rows * sizeof(float)))
      return false;
  }
  return true;
}

/* The prefix P of the first tensor named P0.weight (NULL if none). */
static char *guess_prefix(const fg_st_file *f) {
  for (size_t i = 0; i < f->tensor_count; ++i) {
    const char *n = f->tensors[i].name;
    size_t len = strlen(n);
    if (len >= 8 && strcmp(n + len - 8, "0.weight") == 0 && len - 8 < 400)
      return strndup(n, len - 8);
  }
  return NULL;
}

static void load_weights(const uint8_t *data, size_t size, const char *prefix) {
  flowgen_error err = {FLOWGEN_OK, ""};
  flowrt_weights *w = NULL;
  flowgen_status s = flowrt_weights_parse(data, size, "fuzz.safetensors",
                                          prefix, NULL, &w, &err);
  FUZZ_CHECK(s == err.status);
  if (s != FLOWGEN_OK) {
    FUZZ_CHECK(s == FLOWGEN_WEIGHTS && w == NULL && err.message[0]);
    return;
  }
  FUZZ_CHECK(w != NULL);
  FUZZ_CHECK(w->dim >= FLOWGEN_DIM_MIN && w->dim <= FLOWGEN_DIM_MAX);
  FUZZ_CHECK(w->hidden >= FLOWGEN_HIDDEN_MIN && w->hidden <= FLOWGEN_HIDDEN_MAX);
  FUZZ_CHECK(w->cond >= 0 && w->cond <= FLOWGEN_COND_MAX);
  FUZZ_CHECK(w->layers >= FLOWGEN_LAYERS_MIN && w->layers <= FLOWGEN_LAYERS_MAX);
  /* What was inferred, given back as the expected model, loads the same. */
  flowgen_spec expect;
  memset(&expect, 0, sizeof expect);
  flowrt_weights_model(w, &expect);
  flowrt_weights *again = NULL;
  s = flowrt_weights_parse(data, size, "fuzz.safetensors", prefix, &expect, &again, &err);
  FUZZ_CHECK(s == FLOWGEN_OK && same_weights(w, again));
  flowrt_weights_free(again);
  /* Small models also go through the fp64 reference (any float values). */
  if (w->dim <= 32 && w->hidden <= 32 && w->cond <= 32) {
    flowgen_spec spec;
    flowgen_spec_default(&spec);
    flowrt_weights_model(w, &spec);
    spec.steps = 2;
    float x[2 * 32] = {0}, c[2 * 32] = {0};
    for (int i = 0; i < 2 * w->dim; ++i) x[i] = (float)(i % 5) - 2.0f;
    FUZZ_CHECK(flowrt_reference_cond(&spec, w, x, x, w->cond ? c : NULL, NULL, 1.0f, 2,
                                     &err) == FLOWGEN_OK);
  }
  flowrt_weights_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  flowgen_error err = {FLOWGEN_OK, ""};
  fg_st_file *f = NULL;
  flowgen_status s = fg_st_parse(data, size, "fuzz.safetensors", &f, &err);
  FUZZ_CHECK(s == err.status);
  if (s != FLOWGEN_OK) {
    FUZZ_CHECK(f == NULL && (s == FLOWGEN_WEIGHTS || s == FLOWGEN_NOMEM));
    FUZZ_CHECK(err.message[0] != '\0');
    return 0;
  }
  check_file(f, data, size);
  char *prefix = guess_prefix(f);
  fg_st_free(f);
  load_weights(data, size, NULL);
  if (prefix && strcmp(prefix, "velocity.") != 0) load_weights(data, size, prefix);
  free(prefix);
  return 0;
}
