/* Fuzzes `flowgen sample` end to end on the CPU reference (fg_cli_sample,
 * as the command line calls it).  The input chooses a small safetensors
 * model and a small .npy of starting points, each either well formed from
 * the input's values (with a mutation now and then: a tensor renamed, a
 * shape off by one, a NaN) or the input's bytes as they come, written to a
 * private folder; then a command line of sample's flags with small values,
 * other files' names and hostile words, always ending in --device cpu.
 * Every run stays small: at most 6 x 6 models (or the built-in 64 x 256),
 * a few samples, a few steps.  Invariants: the exit code is one the CLI
 * documents for a CPU run; a success leaves a readable .npy at -o; a
 * failure leaves no -o file; no run leaves a temporary file.  Under libFuzzer's ASan
 * and LeakSanitizer: no crash, no leak. */
#include "fuzz.h"

#include "cli.h"
#include "npy.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define MAX_WORDS 48
#define MAX_DIM 6
#define RAW_MAX 512

static char dir[PATH_MAX - 64];
static char model_path[PATH_MAX], x0_path[PATH_MAX], out_path[PATH_MAX],
    png_path[PATH_MAX], missing_path[PATH_MAX];

static void remove_folder(void) {
  remove(model_path);
  remove(x0_path);
  remove(out_path);
  remove(png_path);
  rmdir(dir);
}

static void make_folder(void) {
  if (dir[0]) return;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/flowgen-fuzz-sample-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  FUZZ_CHECK(mkdtemp(dir) != NULL);
  snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
  snprintf(x0_path, sizeof x0_path, "%s/x0.npy", dir);
  snprintf(out_path, sizeof out_path, "%s/out.npy", dir);
  snprintf(png_path, sizeof png_path, "%s/out.png", dir);
  snprintf(missing_path, sizeof missing_path, "%s/missing/none", dir);
  atexit(remove_folder);
}

static void write_bytes(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f != NULL);
  FUZZ_CHECK(fwrite(data, 1, size, f) == size);
  FUZZ_CHECK(fclose(f) == 0);
}

/* The next n input bytes (fewer where it ends), written as they are. */
static void write_raw(fuzz_input *in, const char *path) {
  size_t n = fuzz_byte(in) * (size_t)2;
  if (n > fuzz_left(in)) n = fuzz_left(in);
  write_bytes(path, in->p, n);
  in->p += n;
}

/* ---- a model -------------------------------------------------------------- */

static const char *const dtypes[3] = {"F32", "F16", "BF16"};
static const char *const suffixes[6] = {"0.weight", "0.bias", "2.weight",
                                        "2.bias", "4.weight", "4.bias"};

/* A value's bytes: small numbers mostly; now and then a special one. */
static void element(fuzz_input *in, int dtype, unsigned char *out) {
  uint8_t kind = fuzz_byte(in), v = fuzz_byte(in);
  float f = ((int)v - 128) / 64.0f;
  if (kind == 0xff) f = NAN;
  else if (kind == 0xfe) f = -INFINITY;
  else if (kind == 0xfd) f = 3e38f;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (dtype == 0) {
    for (int k = 0; k < 4; ++k) out[k] = (unsigned char)(bits >> (8 * k));
  } else if (dtype == 2) {
    out[0] = (unsigned char)(bits >> 16);
    out[1] = (unsigned char)(bits >> 24);
  } else { /* binary16: sign and an exponent up to 15 (|x| < 4), or special */
    uint16_t half = kind == 0xff   ? 0x7e00
                    : kind == 0xfe ? 0xfc00
                                   : (uint16_t)((kind & 0xbf) << 8 | v);
    out[0] = (unsigned char)half;
    out[1] = (unsigned char)(half >> 8);
  }
}

static void write_model(fuzz_input *in) {
  uint8_t how = fuzz_byte(in);
  if (how % 8 == 7) {
    write_raw(in, model_path);
    return;
  }
  int d = fuzz_int(in, 1, MAX_DIM), h = fuzz_int(in, 1, MAX_DIM);
  int dtype = fuzz_byte(in) % 3;
  int broken = how % 8 == 6 ? fuzz_byte(in) % 6 : -1; /* a tensor gets a wrong shape */
  bool renamed = how % 8 == 5;
  const int rows[6] = {h, h, h, h, d, d}, cols[6] = {d + 1, 0, h, 0, h, 0};
  size_t width = dtype == 0 ? 4 : 2, offset = 0;
  char header[2048];
  size_t len = (size_t)snprintf(header, sizeof header, "{");
  static unsigned char data[6 * (MAX_DIM + 2) * (MAX_DIM + 2) * 4];
  for (int t = 0; t < 6; ++t) {
    int r = rows[t] + (t == broken), c = cols[t];
    size_t count = (size_t)r * (size_t)(c ? c : 1);
    char shape[32];
    if (c) snprintf(shape, sizeof shape, "[%d,%d]", r, c);
    else snprintf(shape, sizeof shape, "[%d]", r);
    len += (size_t)snprintf(header + len, sizeof header - len,
                            "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                            t ? "," : "", renamed && t == 3 ? "other." : "velocity.",
                            suffixes[t], dtypes[dtype], shape, offset, offset + count * width);
    for (size_t i = 0; i < count; ++i) element(in, dtype, data + offset + i * width);
    offset += count * width;
  }
  len += (size_t)snprintf(header + len, sizeof header - len, "}");
  FUZZ_CHECK(len < sizeof header);
  unsigned char *image = malloc(8 + len + offset);
  FUZZ_CHECK(image != NULL);
  for (int i = 0; i < 8; ++i) image[i] = (unsigned char)((uint64_t)len >> (8 * i));
  memcpy(image + 8, header, len);
  memcpy(image + 8 + len, data, offset);
  write_bytes(model_path, image, 8 + len + offset);
  free(image);
}

/* ---- starting points ------------------------------------------------------ */

static void write_x0(fuzz_input *in) {
  uint8_t how = fuzz_byte(in);
  if (how % 8 == 7) {
    write_raw(in, x0_path);
    return;
  }
  int rows = fuzz_int(in, 0, 4), cols = fuzz_int(in, 1, MAX_DIM);
  bool f8 = how & 1, vector = how % 8 == 6;
  char dict[128];
  int n = snprintf(dict, sizeof dict,
                   vector ? "{'descr': '<f%d', 'fortran_order': False, 'shape': (%d,), }"
                          : "{'descr': '<f%d', 'fortran_order': False, 'shape': (%d, %d), }",
                   f8 ? 8 : 4, vector ? cols : rows, cols);
  size_t header = 10 + (size_t)n + 1;
  header = (header + 63) / 64 * 64;
  size_t count = vector ? (size_t)cols : (size_t)rows * (size_t)cols, item = f8 ? 8 : 4;
  unsigned char image[64 * 3 + 4 * MAX_DIM * 8];
  FUZZ_CHECK(header + count * item <= sizeof image);
  memcpy(image, "\x93NUMPY\x01\x00", 8);
  image[8] = (unsigned char)(header - 10);
  image[9] = 0;
  memset(image + 10, ' ', header - 10);
  memcpy(image + 10, dict, (size_t)n);
  image[header - 1] = '\n';
  for (size_t i = 0; i < count; ++i) {
    uint8_t kind = fuzz_byte(in), v = fuzz_byte(in);
    double x = ((int)v - 128) / 32.0;
    if (kind == 0xff) x = NAN;
    else if (kind == 0xfe) x = INFINITY;
    else if (kind == 0xfd) x = 1e300; /* beyond float32 */
    if (f8) {
      uint64_t bits;
      memcpy(&bits, &x, sizeof bits);
      for (int k = 0; k < 8; ++k) image[header + 8 * i + k] = (unsigned char)(bits >> (8 * k));
    } else {
      float f = (float)x;
      uint32_t bits;
      memcpy(&bits, &f, sizeof bits);
      for (int k = 0; k < 4; ++k) image[header + 4 * i + k] = (unsigned char)(bits >> (8 * k));
    }
  }
  write_bytes(x0_path, image, header + count * item);
}

/* ---- the command line ----------------------------------------------------- */

typedef enum { V_NONE, V_NUMBER, V_SMALL, V_WEIGHTS, V_X0, V_OUT, V_PNG, V_WORD } value_kind;

static const struct {
  const char *flag;
  value_kind value;
  const char *const words[6]; /* V_WORD: the values to choose from */
} flags[] = {
    {"--weights", V_WEIGHTS, {0}},
    {"--x0", V_X0, {0}},
    {"--batch", V_SMALL, {0}},
    {"--seed", V_NUMBER, {0}},
    {"--steps", V_SMALL, {0}},
    {"--dim", V_SMALL, {0}},
    {"--hidden", V_SMALL, {0}},
    {"--dim", V_WORD, {"64", "6", "1025"}},
    {"--hidden", V_WORD, {"256", "4", "4097"}},
    {"--prefix", V_WORD, {"velocity.", "other.", "", "x"}},
    {"-o", V_OUT, {0}},
    {"--output", V_OUT, {0}},
    {"--png", V_PNG, {0}},
    {"--png-shape", V_WORD, {"8x8", "1x1", "2x3", "8x", "x8", "0x4"}},
    {"--png-columns", V_SMALL, {0}},
    {"--png-scale", V_SMALL, {0}},
    {"--solver", V_WORD, {"euler", "midpoint", "heun", "rk4", "leapfrog"}},
    {"--precision", V_WORD, {"fp32", "bf16", "tf32", "fp16", "fp64"}},
    {"--arch", V_WORD, {"sm_90", "sm_75", "sm_60"}},
    {"--name", V_WORD, {"k", "", "a b"}},
    {"-v", V_NONE, {0}},
    {"--device", V_WORD, {"cpu", "tpu"}},
    {"--frobnicate", V_NONE, {0}},
    {"-", V_NONE, {0}},
    {"", V_NONE, {0}},
    {"--batch=", V_NONE, {0}},
    {"--seed=-1", V_NONE, {0}},
    {"--x0=", V_NONE, {0}},
    {"--weights=", V_NONE, {0}},
};

/* Small enough that the built-in model's reference run takes milliseconds;
 * then words the parse must refuse. */
static const char *const numbers[] = {"0", "1", "2", "3", "5", "-1", "x", "1e3",
                                      "99999999999999999999", ""};

typedef struct command {
  char *argv[MAX_WORDS + 8];
  int argc;
  bool has_x0;
  const char *output; /* the last -o, as the parse takes it */
} command;

static void add(command *c, const char *word) {
  FUZZ_CHECK(c->argc < MAX_WORDS + 6);
  c->argv[c->argc++] = (char *)word;
}

static const char *pick_value(fuzz_input *in, size_t f) {
  uint8_t b = fuzz_byte(in);
  switch (flags[f].value) {
  case V_NUMBER: return numbers[b % (sizeof numbers / sizeof *numbers)];
  case V_SMALL: return numbers[b % 8 < 5 ? b % 5 : 5 + b % 5];
  case V_WEIGHTS: return (const char *[]){model_path, model_path, missing_path, dir, x0_path, ""}[b % 6];
  case V_X0: return (const char *[]){x0_path, x0_path, missing_path, dir, model_path, ""}[b % 6];
  case V_OUT: return (const char *[]){out_path, out_path, out_path, dir, missing_path, ""}[b % 6];
  case V_PNG: return (const char *[]){png_path, png_path, dir, ""}[b % 4];
  case V_WORD: {
    size_t n = 0;
    while (n < 6 && flags[f].words[n]) ++n;
    return flags[f].words[b % n];
  }
  default: return NULL;
  }
}

static void build_command(fuzz_input *in, command *c) {
  static char program[] = "sample";
  add(c, program);
  add(c, "--steps");
  add(c, "2");
  size_t at = (size_t)c->argc;
  add(c, "--batch"); /* replaced below where --x0 is given */
  add(c, "3");
  int words = fuzz_byte(in) % 16;
  for (int w = 0; w < words && c->argc < MAX_WORDS; ++w) {
    size_t f = fuzz_byte(in) % (sizeof flags / sizeof *flags);
    add(c, flags[f].flag);
    if (strcmp(flags[f].flag, "--x0") == 0) c->has_x0 = true;
    const char *value = pick_value(in, f);
    if (value) add(c, value);
    if (value && (strcmp(flags[f].flag, "-o") == 0 || strcmp(flags[f].flag, "--output") == 0))
      c->output = value;
  }
  if (c->has_x0) c->argv[at] = c->argv[at + 1] = "-v"; /* no --batch beside --x0 */
  add(c, "--device");
  add(c, "cpu");
  c->argv[c->argc] = NULL;
}

/* ---- the run -------------------------------------------------------------- */

/* Anything in the folder but the files this target names: a temporary
 * file left behind. */
static bool stray_file(void) {
  static const char *const known[] = {".", "..", "model.safetensors", "x0.npy", "out.npy",
                                      "out.png"};
  DIR *d = opendir(dir);
  FUZZ_CHECK(d != NULL);
  bool found = false;
  for (struct dirent *e; (e = readdir(d));) {
    bool ours = false;
    for (size_t k = 0; k < sizeof known / sizeof *known; ++k)
      ours = ours || strcmp(e->d_name, known[k]) == 0;
    found = found || !ours;
  }
  closedir(d);
  return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  make_folder();
  remove(model_path);
  remove(x0_path);
  remove(out_path);
  remove(png_path);
  fuzz_input in = {data, data + size};
  uint8_t files = fuzz_byte(&in);
  if (files & 1) write_model(&in);
  if (files & 2) write_x0(&in);
  command c = {.argc = 0};
  build_command(&in, &c);
  int code = fg_cli_sample(c.argc, c.argv);
  /* CPU runs: no template, NVRTC or CUDA failures. */
  FUZZ_CHECK(code == 0 || code == 1 || code == 2 || code == 6);
  FUZZ_CHECK(!stray_file());
  if (c.output && strcmp(c.output, out_path) == 0) {
    if (code == 0) {
      float *x = NULL;
      int64_t rows = -1, cols = -1;
      flowgen_error err = {FLOWGEN_OK, ""};
      FUZZ_CHECK(fg_npy_read(out_path, &x, &rows, &cols, &err) == FLOWGEN_OK);
      FUZZ_CHECK(rows >= 0 && rows <= 1000 && cols >= 1 && cols <= 64);
      free(x);
    } else {
      FUZZ_CHECK(access(out_path, F_OK) != 0);
    }
  }
  return 0;
}
