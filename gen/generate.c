/* flowgen_generate: runs the planner and the templates, and keeps the
 * rendered source with the launch configuration of each variant. */
#include "sandbox.h"

#include <ctype.h>
#include <jansson.h>
#include <lauxlib.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct flowgen_kernel {
  flowgen_spec spec;
  char *source;
  size_t source_size;
  int variant_count;
  flowgen_variant *variants;
  flowgen_part part;
  int64_t batch;     /* FLOWGEN_PART_BATCH's */
  bool *rendered;    /* variant_count: whether the source holds its kernel */
};

/* ---- spec -> Lua ----------------------------------------------------------- */

/* The sizes of cluster that flowgen_device.clusters_at_once counts. */
static const int cluster_sizes[4] = {2, 4, 8, 16};

static flowgen_status check_range(const char *name, const char *field, int value,
                                  int max, flowgen_error *err) {
  if (value >= 0 && value <= max) return FLOWGEN_OK;
  return fg_fail(err, FLOWGEN_INVALID,
                 "%s.%s: %d is out of range (0 = unknown, 1 to %d)", name, field,
                 value, max);
}

flowgen_status fg_device_check(const flowgen_device *d, const char *name,
                               flowgen_error *err) {
  flowgen_status st = check_range(name, "sms", d->sms, FLOWGEN_DEVICE_SMS_MAX, err);
  if (!st)
    st = check_range(name, "shared_per_block", d->shared_per_block,
                     FLOWGEN_DEVICE_SHARED_MAX, err);
  if (!st && (d->clusters < -1 || d->clusters > 1))
    st = fg_fail(err, FLOWGEN_INVALID,
                 "%s.clusters: %d is none of 1 (yes), -1 (no), 0 (as the arch "
                 "allows)", name, d->clusters);
  for (int i = 0; i < 4 && !st; ++i) {
    char field[32];
    snprintf(field, sizeof field, "clusters_at_once[%d]", i);
    st = check_range(name, field, d->clusters_at_once[i], FLOWGEN_DEVICE_CLUSTERS_MAX, err);
  }
  return st;
}

/* spec.device: the known fields only (device.lua takes an H200's figure,
 * or the arch's, for the others). */
static void push_device(lua_State *L, const flowgen_device *d) {
  lua_createtable(L, 0, 4);
  if (d->sms) {
    lua_pushinteger(L, d->sms);
    lua_setfield(L, -2, "sms");
  }
  if (d->shared_per_block) {
    lua_pushinteger(L, d->shared_per_block);
    lua_setfield(L, -2, "shared_per_block");
  }
  if (d->clusters) {
    lua_pushboolean(L, d->clusters > 0);
    lua_setfield(L, -2, "clusters");
  }
  bool any = false;
  for (int i = 0; i < 4; ++i) any = any || d->clusters_at_once[i];
  if (any) {
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; ++i) {
      if (!d->clusters_at_once[i]) continue;
      lua_pushinteger(L, d->clusters_at_once[i]);
      lua_rawseti(L, -2, cluster_sizes[i]);
    }
    lua_setfield(L, -2, "clusters_at_once");
  }
  lua_setfield(L, -2, "device");
}

/* flowgen_part's names, as the engine and the description spell them. */
static const char *const part_names[] = {"all", "pack", "variant", "batch", "plan"};

void fg_push_spec(lua_State *L, const flowgen_spec *spec, const flowgen_options *opts) {
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(spec, symbol, sizeof symbol);
  lua_createtable(L, 0, 20);
  lua_pushinteger(L, spec->dim);
  lua_setfield(L, -2, "dim");
  lua_pushinteger(L, flowgen_spec_hidden(spec));
  lua_setfield(L, -2, "hidden");
  lua_pushinteger(L, spec->steps);
  lua_setfield(L, -2, "steps");
  lua_pushstring(L, flowgen_solver_name(spec->solver));
  lua_setfield(L, -2, "solver");
  lua_pushstring(L, flowgen_precision_name(spec->precision));
  lua_setfield(L, -2, "precision");
  lua_pushinteger(L, spec->arch);
  lua_setfield(L, -2, "arch");
  lua_pushboolean(L, spec->arch_specific);
  lua_setfield(L, -2, "arch_specific");
  lua_pushstring(L, symbol);
  lua_setfield(L, -2, "symbol");
  lua_pushboolean(L, spec->name[0] != '\0');
  lua_setfield(L, -2, "custom_name");
  lua_pushboolean(L, opts && opts->host_launcher);
  lua_setfield(L, -2, "host_launcher");
  lua_pushstring(L, FLOWGEN_VERSION);
  lua_setfield(L, -2, "version");
  /* The model family, resolved: the templates see no zero defaults. */
  lua_pushinteger(L, spec->cond);
  lua_setfield(L, -2, "cond");
  lua_pushinteger(L, flowgen_spec_layers(spec));
  lua_setfield(L, -2, "layers");
  lua_pushstring(L, flowgen_activation_name(spec->act));
  lua_setfield(L, -2, "act");
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, spec->time.features);
  lua_setfield(L, -2, "features");
  lua_pushnumber(L, flowgen_spec_time_scale(spec));
  lua_setfield(L, -2, "scale");
  lua_setfield(L, -2, "time");
  lua_pushstring(L, flowgen_spec_input(spec));
  lua_setfield(L, -2, "input");
  lua_pushboolean(L, spec->guidance);
  lua_setfield(L, -2, "guidance");
  lua_pushinteger(L, flowgen_spec_time_width(spec));
  lua_setfield(L, -2, "time_width");
  lua_pushinteger(L, flowgen_spec_in_width(spec));
  lua_setfield(L, -2, "in_width");
  /* An empty tune is no tune: left out, so that both key alike. */
  if (opts && opts->tune && opts->tune[0]) {
    lua_pushstring(L, opts->tune);
    lua_setfield(L, -2, "tune");
  }
  static const flowgen_device unknown;
  push_device(L, opts ? &opts->device : &unknown);
  /* The part to render (templates/file.cut; the engine's select_part). */
  lua_pushstring(L, part_names[opts ? opts->part : FLOWGEN_PART_ALL]);
  lua_setfield(L, -2, "part");
  if (opts && opts->part == FLOWGEN_PART_VARIANT) {
    lua_pushinteger(L, (lua_Integer)opts->variant + 1);
    lua_setfield(L, -2, "part_variant");
  }
  if (opts && opts->part == FLOWGEN_PART_BATCH) {
    lua_pushinteger(L, (lua_Integer)opts->batch);
    lua_setfield(L, -2, "part_batch");
  }
}

/* ---- variants (plain tables, checked by the engine) -------------------- */

/* An integer field of the variant on top, checked against [lo, hi] before
 * it is narrowed to its C type: out of range, *ok becomes false. */
static lua_Integer raw_int(lua_State *L, const char *field, lua_Integer lo,
                           lua_Integer hi, bool *ok) {
  lua_pushstring(L, field);
  lua_rawget(L, -2);
  lua_Integer v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (v < lo || v > hi) {
    *ok = false;
    return lo;
  }
  return v;
}

static const char *raw_strdup(lua_State *L, const char *field) {
  lua_pushstring(L, field);
  lua_rawget(L, -2);
  const char *s = lua_tostring(L, -1);
  char *copy = s ? strdup(s) : NULL;
  lua_pop(L, 1);
  return copy;
}

static bool raw_bool(lua_State *L, const char *field) {
  lua_pushstring(L, field);
  lua_rawget(L, -2);
  bool b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

/* The launch description (templates/launch.lua) holds together: a
 * persistent grid is launched cooperatively, a cooperative variant has a
 * fallback that is not one, a cluster of more than 8 blocks has the
 * non-portable opt-in.  Else the launch would fail on the device. */
static bool launch_holds(const flowgen_kernel *k, const flowgen_variant *v) {
  if (v->grid_blocks_per_sm > 0 && !v->cooperative) return false;
  if (v->cooperative != (v->fallback >= 0)) return false;
  if (v->cooperative && k->variants[v->fallback].cooperative) return false;
  return v->cluster_blocks <= 8 || v->nonportable_cluster;
}

static flowgen_status read_variants(lua_State *L, flowgen_kernel *k,
                                    flowgen_error *err) {
  int count = (int)lua_rawlen(L, -1);
  if (count <= 0)
    return fg_fail(err, FLOWGEN_TEMPLATE, "plan.lua: no variants");
  if (!(k->variants = calloc((size_t)count, sizeof *k->variants)))
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  k->variant_count = count;
  for (int i = 0; i < count; ++i) {
    flowgen_variant *v = &k->variants[i];
    lua_rawgeti(L, -1, i + 1);
    v->strategy = raw_strdup(L, "strategy");
    v->symbol = raw_strdup(L, "symbol");
    v->pack_symbol = raw_strdup(L, "pack_symbol");
    bool ok = true;
    v->min_batch = raw_int(L, "min_batch", 0, LUA_MAXINTEGER, &ok);
    v->max_batch = raw_int(L, "max_batch", -1, LUA_MAXINTEGER, &ok);
    v->block_threads = (int)raw_int(L, "block_threads", 1, 1024, &ok);
    v->rows_per_block = (int)raw_int(L, "rows_per_block", 1, INT_MAX, &ok);
    v->cluster_blocks = (int)raw_int(L, "cluster_blocks", 1, INT_MAX, &ok);
    v->shared_bytes = (size_t)raw_int(L, "shared_bytes", 0, INT_MAX, &ok);
    v->params_bytes = (size_t)raw_int(L, "params_bytes", 0, LUA_MAXINTEGER, &ok);
    v->pack_threads = (int)raw_int(L, "pack_threads", 1, 1024, &ok);
    v->cond_threads = (int)raw_int(L, "cond_threads", 0, 1024, &ok);
    v->cond_blocks_per_sm = (int)raw_int(L, "cond_blocks_per_sm", 0, 32, &ok);
    v->grid_blocks_per_sm = (int)raw_int(L, "grid_blocks_per_sm", 0, 32, &ok);
    v->cooperative = raw_bool(L, "cooperative");
    v->fallback = (int)raw_int(L, "fallback", 0, count, &ok) - 1; /* 1-based there */
    v->nonportable_cluster = raw_bool(L, "nonportable_cluster");
    lua_pop(L, 1);
    if (!v->strategy || !v->symbol || !v->pack_symbol)
      return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
    if (!ok)
      return fg_fail(err, FLOWGEN_TEMPLATE,
                     "plan.lua: variants[%d] has an impossible launch "
                     "configuration",
                     i + 1);
  }
  for (int i = 0; i < count; ++i)
    if (!launch_holds(k, &k->variants[i]))
      return fg_fail(err, FLOWGEN_TEMPLATE,
                     "plan.lua: variants[%d]'s launch description does not hold "
                     "(cooperative, fallback, nonportable_cluster)",
                     i + 1);
  return FLOWGEN_OK;
}

/* ---- the rendered source --------------------------------------------------- */

/* Joins the pieces the engine rendered (a list of strings, on top). */
static flowgen_status join_source(lua_State *L, flowgen_kernel *k,
                                  flowgen_error *err) {
  size_t count = lua_rawlen(L, -1), size = 0;
  for (size_t i = 1; i <= count; ++i) {
    bool text = lua_rawgeti(L, -1, (lua_Integer)i) == LUA_TSTRING;
    size_t n = text ? lua_rawlen(L, -1) : 0;
    lua_pop(L, 1);
    if (!text || n > SIZE_MAX - 1 - size)
      return fg_fail(err, FLOWGEN_INTERNAL, "template engine returned no source");
    size += n;
  }
  if (!(k->source = malloc(size + 1)))
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  char *at = k->source;
  for (size_t i = 1; i <= count; ++i) {
    lua_rawgeti(L, -1, (lua_Integer)i);
    size_t n = 0;
    const char *piece = lua_tolstring(L, -1, &n);
    memcpy(at, piece, n);
    at += n;
    lua_pop(L, 1);
  }
  *at = '\0';
  k->source_size = size;
  return FLOWGEN_OK;
}

/* NVRTC opens any file an #include names, as a compiler would, and shows
 * what it read in its log: the generated source may include only these
 * headers of the CUDA toolkit, by name between <>. */
static const char *const allowed_headers[] = {
    "cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h",
    "mma.h",          "cstdint",     NULL,
};
#define ALLOWED_HEADERS_TEXT                                                 \
  "only #include <cuda_runtime.h>, <cuda_fp16.h>, <cuda_bf16.h>, "          \
  "<cooperative_groups.h>, <mma.h> and <cstdint> are allowed"

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r' ||
         c == '\n';
}

/* Past blanks and comments.  Newlines count as blanks: a directive cannot
 * go on past one, so the scan can only refuse more than the compiler
 * would include. */
static const char *skip_space(const char *p, const char *end) {
  for (;;) {
    while (p < end && is_space(*p)) ++p;
    if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      for (p += 2; end - p >= 2 && !(p[0] == '*' && p[1] == '/');) ++p;
      p = end - p >= 2 ? p + 2 : end;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '/') {
      while (p < end && *p != '\n') ++p;
    } else {
      return p;
    }
  }
}

/* The length of the line splice at src[i]: a backslash (or the trigraph
 * for one), blanks, a newline; 0 if there is none. */
static size_t splice_at(const char *src, size_t i, size_t n) {
  size_t j = i;
  if (src[j] == '\\')
    j += 1;
  else if (n - i >= 3 && src[i] == '?' && src[i + 1] == '?' && src[i + 2] == '/')
    j += 3;
  else
    return 0;
  while (j < n && src[j] != '\n' && is_space(src[j])) ++j;
  return j < n && src[j] == '\n' ? j + 1 - i : 0;
}

/* The source without its line splices (a directive's name can be spread
 * over lines).  NUL-terminated, malloc()ed; *size its length. */
static char *splice_lines(const char *src, size_t n, size_t *size) {
  char *out = malloc(n + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t splice = splice_at(src, i, n);
    if (splice)
      i += splice;
    else
      out[o++] = src[i++];
  }
  out[o] = '\0';
  *size = o;
  return out;
}

/* The length of the directive's introducer at p: #, the digraph %: or the
 * trigraph ??=; 0 if there is none. */
static size_t introducer(const char *p, const char *end) {
  if (*p == '#') return 1;
  if (end - p >= 2 && p[0] == '%' && p[1] == ':') return 2;
  if (end - p >= 3 && p[0] == '?' && p[1] == '?' && p[2] == '=') return 3;
  return 0;
}

static bool is_word(const char *p, size_t len, const char *word) {
  return strlen(word) == len && memcmp(p, word, len) == 0;
}

/* The text from p to the end of its line, at most 80 bytes, printable. */
static void quote_line(const char *p, const char *end, char *buf, size_t size) {
  size_t o = 0;
  for (; p < end && *p != '\n' && o + 1 < size && o < 80; ++p)
    buf[o++] = isprint((unsigned char)*p) ? *p : '?';
  while (o > 0 && buf[o - 1] == ' ') --o;
  buf[o] = '\0';
}

static bool allowed_include(const char *p, const char *end) {
  if (p == end || *p != '<') return false;
  const char *close = p + 1;
  while (close < end && *close != '>' && *close != '\n') ++close;
  if (close == end || *close != '>') return false;
  size_t len = (size_t)(close - p - 1);
  for (const char *const *h = allowed_headers; *h; ++h)
    if (is_word(p + 1, len, *h)) return true;
  return false;
}

/* Refuses a source that includes anything but the allowed headers, however
 * the directive is spelled: #, %: or ??=, then blanks, comments and line
 * splices, then include (include_next, import or embed: never), and
 * __has_include, which probes the host's files. */
static flowgen_status check_includes(const char *src, size_t n,
                                     flowgen_error *err) {
  size_t size = 0;
  char *text = splice_lines(src, n, &size);
  if (!text) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  const char *end = text + size;
  flowgen_status st = FLOWGEN_OK;
  char quoted[96];
  for (const char *p = text; p < end && !st; ++p) {
    size_t intro = introducer(p, end);
    if (intro) {
      const char *name = skip_space(p + intro, end), *q = name;
      while (q < end && (isalnum((unsigned char)*q) || *q == '_')) ++q;
      size_t len = (size_t)(q - name);
      bool include = is_word(name, len, "include");
      if (include || is_word(name, len, "include_next") ||
          is_word(name, len, "import") || is_word(name, len, "embed")) {
        const char *operand = skip_space(q, end);
        if (!include || !allowed_include(operand, end)) {
          quote_line(operand, end, quoted, sizeof quoted);
          st = fg_fail(err, FLOWGEN_TEMPLATE,
                       "the generated source has #%.*s %s: " ALLOWED_HEADERS_TEXT,
                       (int)len, name, quoted);
        }
      }
    } else if (*p == '_' && end - p >= 13 && memcmp(p, "__has_include", 13) == 0) {
      st = fg_fail(err, FLOWGEN_TEMPLATE,
                   "the generated source has __has_include: " ALLOWED_HEADERS_TEXT);
    }
  }
  free(text);
  return st;
}

/* ---- generate -------------------------------------------------------------- */

typedef struct engine_call {
  fg_sandbox *sb;
  const flowgen_spec *spec;
  const flowgen_options *opts;
} engine_call;

/* engine.generate(spec) -> ok, source pieces or message, variants or
 * refused, the rendered variants' indices.
 * Called through lua_pcall: building the spec table allocates, and an
 * allocation failure outside protected mode would be a panic. */
static int call_engine(lua_State *L) {
  const engine_call *c = lua_touserdata(L, 1);
  fg_sandbox_push_engine(c->sb);
  lua_getfield(L, -1, "generate");
  fg_push_spec(L, c->spec, c->opts);
  lua_call(L, 1, 4);
  return 4;
}

/* Which variants the source holds: every one for the whole file, else the
 * engine's list of indices (on top, 1-based). */
static flowgen_status read_rendered(lua_State *L, flowgen_kernel *k,
                                    flowgen_error *err) {
  if (!(k->rendered = calloc((size_t)k->variant_count, sizeof *k->rendered)))
    return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  if (k->part == FLOWGEN_PART_ALL) {
    for (int i = 0; i < k->variant_count; ++i) k->rendered[i] = true;
    return FLOWGEN_OK;
  }
  if (lua_type(L, -1) != LUA_TTABLE)
    return fg_fail(err, FLOWGEN_INTERNAL, "template engine returned no part");
  size_t n = lua_rawlen(L, -1);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, -1, (lua_Integer)i);
    lua_Integer index = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (index < 1 || index > k->variant_count)
      return fg_fail(err, FLOWGEN_INTERNAL, "template engine returned a bad part");
    k->rendered[index - 1] = true;
  }
  return FLOWGEN_OK;
}

static flowgen_status run_engine(fg_sandbox *sb, const flowgen_spec *spec,
                                 const flowgen_options *opts,
                                 flowgen_kernel *k, flowgen_error *err) {
  lua_State *L = fg_sandbox_state(sb);
  engine_call call = {sb, spec, opts};
  lua_pushcfunction(L, call_engine);
  lua_pushlightuserdata(L, &call);
  if (lua_pcall(L, 1, 4, 0) != LUA_OK)
    return fg_sandbox_failure(sb, lua_tostring(L, -1), err);
  if (!lua_toboolean(L, -4)) {
    const char *msg = lua_tostring(L, -3);
    if (!msg) msg = "unknown template error";
    if (lua_toboolean(L, -2))
      return fg_fail(err, FLOWGEN_UNSUPPORTED, "%s", msg);
    return fg_sandbox_failure(sb, msg, err);
  }
  if (lua_type(L, -3) != LUA_TTABLE || lua_type(L, -2) != LUA_TTABLE)
    return fg_fail(err, FLOWGEN_INTERNAL, "template engine returned no source");
  lua_pushvalue(L, -3);
  flowgen_status st = join_source(L, k, err);
  lua_pop(L, 1);
  if (!st) st = check_includes(k->source, k->source_size, err);
  if (!st) {
    lua_pushvalue(L, -2);
    st = read_variants(L, k, err);
    lua_pop(L, 1);
  }
  return st ? st : read_rendered(L, k, err);
}

flowgen_status fg_options_check(const flowgen_options *opts, flowgen_error *err) {
  flowgen_status st = fg_device_check(&opts->device, "device", err);
  if (st) return st;
  if (opts->part < FLOWGEN_PART_ALL || opts->part > FLOWGEN_PART_PLAN)
    return fg_fail(err, FLOWGEN_INVALID, "options.part: %d is not a flowgen_part",
                   (int)opts->part);
  if (opts->part == FLOWGEN_PART_VARIANT && opts->variant < 0)
    return fg_fail(err, FLOWGEN_INVALID, "options.variant: %d is negative", opts->variant);
  if (opts->part == FLOWGEN_PART_BATCH && opts->batch < 0)
    return fg_fail(err, FLOWGEN_INVALID, "options.batch: %lld is negative",
                   (long long)opts->batch);
  return FLOWGEN_OK;
}

flowgen_status flowgen_generate(const flowgen_spec *spec,
                                const flowgen_options *opts,
                                flowgen_kernel **out, flowgen_error *err) {
  if (!out) return fg_fail(err, FLOWGEN_INVALID, "out is NULL");
  *out = NULL;
  flowgen_status st = flowgen_spec_validate(spec, err);
  if (!st && opts) st = fg_options_check(opts, err);
  if (st) return st;
  flowgen_kernel *k = calloc(1, sizeof *k);
  if (!k) return fg_fail(err, FLOWGEN_NOMEM, "out of memory");
  k->spec = *spec;
  k->part = opts ? opts->part : FLOWGEN_PART_ALL;
  k->batch = k->part == FLOWGEN_PART_BATCH ? opts->batch : -1;
  /* Lua formats numbers with the C library: pin this thread to the "C"
   * locale so a caller's decimal comma never reaches the CUDA source. */
  locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
  fg_sandbox *sb = NULL;
  fg_sandbox_limits limits = {0, 0, 0};
  if (opts) {
    limits.instructions = opts->instruction_limit;
    limits.memory = opts->memory_limit;
    limits.time_ms = opts->time_limit_ms;
  }
  st = fg_sandbox_open(opts ? opts->template_dir : NULL, &limits, &sb, err);
  if (!st) st = run_engine(sb, spec, opts, k, err);
  fg_sandbox_close(sb);
  if (c_locale) {
    uselocale(previous);
    freelocale(c_locale);
  }
  if (st) {
    flowgen_kernel_free(k);
    return st;
  }
  *out = k;
  return FLOWGEN_OK;
}

void flowgen_kernel_free(flowgen_kernel *k) {
  if (!k) return;
  for (int i = 0; i < k->variant_count; ++i) {
    free((char *)k->variants[i].strategy);
    free((char *)k->variants[i].symbol);
    free((char *)k->variants[i].pack_symbol);
  }
  free(k->variants);
  free(k->rendered);
  free(k->source);
  free(k);
}

const char *flowgen_kernel_source(const flowgen_kernel *k) { return k->source; }
size_t flowgen_kernel_source_size(const flowgen_kernel *k) {
  return k->source_size;
}
const flowgen_spec *flowgen_kernel_spec(const flowgen_kernel *k) {
  return &k->spec;
}
int flowgen_kernel_variant_count(const flowgen_kernel *k) {
  return k->variant_count;
}

const flowgen_variant *flowgen_kernel_variant(const flowgen_kernel *k,
                                              int index) {
  return index >= 0 && index < k->variant_count ? &k->variants[index] : NULL;
}

const flowgen_variant *flowgen_kernel_pick(const flowgen_kernel *k,
                                           int64_t batch) {
  for (int i = 0; i < k->variant_count; ++i) {
    const flowgen_variant *v = &k->variants[i];
    if (batch >= v->min_batch && (v->max_batch < 0 || batch <= v->max_batch))
      return v;
  }
  return NULL;
}

flowgen_part flowgen_kernel_part(const flowgen_kernel *k) { return k->part; }

bool flowgen_kernel_has_variant(const flowgen_kernel *k, int index) {
  return index >= 0 && index < k->variant_count && k->rendered[index];
}

bool flowgen_kernel_has_pack(const flowgen_kernel *k) {
  return k->part != FLOWGEN_PART_VARIANT && k->part != FLOWGEN_PART_PLAN;
}

/* ---- describe -------------------------------------------------------------- */

/* fallback: an index into "variants", or -1. */
static json_t *variant_json(const flowgen_variant *v, int fallback) {
  return json_pack(
      "{s:s, s:s, s:s, s:I, s:I, s:{s:i, s:i, s:i}, s:i, s:i, s:i, s:I, s:I, s:s, s:b, s:i, s:b}",
      "strategy", v->strategy, "symbol", v->symbol, "pack_symbol",
      v->pack_symbol, "min_batch", (json_int_t)v->min_batch, "max_batch",
      (json_int_t)v->max_batch, "block", "x", v->block_threads, "y", 1, "z", 1,
      "rows_per_block", v->rows_per_block, "cluster_blocks", v->cluster_blocks,
      "grid_blocks_per_sm", v->grid_blocks_per_sm,
      "shared_bytes", (json_int_t)v->shared_bytes, "params_bytes",
      (json_int_t)v->params_bytes, "grid",
      v->grid_blocks_per_sm > 0
          ? "x = SMs * grid_blocks_per_sm"
          : "x = ceil(batch / rows_per_block) * cluster_blocks",
      "cooperative", v->cooperative, "fallback", fallback,
      "nonportable_cluster", v->nonportable_cluster);
}

char *flowgen_kernel_describe(const flowgen_kernel *k) {
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(&k->spec, symbol, sizeof symbol);
  /* The variants the source holds; a fallback as an index among them. */
  json_t *variants = json_array();
  int first = -1;
  for (int i = 0; i < k->variant_count; ++i) {
    const flowgen_variant *v = &k->variants[i];
    if (!k->rendered[i]) continue;
    if (first < 0) first = i;
    int fallback = -1;
    if (v->fallback >= 0 && k->rendered[v->fallback]) {
      fallback = 0;
      for (int j = 0; j < v->fallback; ++j) fallback += k->rendered[j];
    }
    json_array_append_new(variants, variant_json(v, fallback));
  }
  char arch[16];
  flowgen_spec_arch_name(&k->spec, arch, sizeof arch);
  json_t *root = json_pack(
      "{s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:o, s:I}", "generator",
      "flowgen " FLOWGEN_VERSION, "name", symbol, "dim", k->spec.dim,
      "hidden", flowgen_spec_hidden(&k->spec), "steps", k->spec.steps,
      "solver", flowgen_solver_name(k->spec.solver), "precision",
      flowgen_precision_name(k->spec.precision), "arch", arch, "strategy",
      first >= 0 ? k->variants[first].strategy : "", "variants", variants,
      "source_bytes", (json_int_t)k->source_size);
  if (!root) return NULL;
  /* The model family, as the flags take it. */
  char time[64], input[8];
  flowgen_time_name(&k->spec.time, time, sizeof time);
  flowgen_spec_input_name(&k->spec, input, sizeof input);
  json_t *family = json_pack(
      "{s:i, s:i, s:s, s:s, s:s, s:b, s:i, s:i}", "cond", k->spec.cond,
      "layers", flowgen_spec_layers(&k->spec), "act",
      flowgen_activation_name(k->spec.act), "time", time, "input", input,
      "guidance", k->spec.guidance, "time_width",
      flowgen_spec_time_width(&k->spec), "in_width",
      flowgen_spec_in_width(&k->spec));
  if (!family || json_object_update(root, family) != 0) {
    json_decref(family);
    json_decref(root);
    return NULL;
  }
  json_decref(family);
  if (k->part != FLOWGEN_PART_ALL) {
    json_object_set_new(root, "part", json_string(part_names[k->part]));
    if (k->part == FLOWGEN_PART_BATCH)
      json_object_set_new(root, "batch", json_integer((json_int_t)k->batch));
  }
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(root);
  if (!text) return NULL;
  size_t n = strlen(text);
  char *with_newline = realloc(text, n + 2);
  if (!with_newline) {
    free(text);
    return NULL;
  }
  memcpy(with_newline + n, "\n", 2);
  return with_newline;
}
