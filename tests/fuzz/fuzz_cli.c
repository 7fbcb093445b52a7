/* Fuzzes the spec and command-line parsers.  The input is a list of words
 * separated by NUL or newline bytes.  The words go, as field/value pairs,
 * to flowgen_spec_set, and, as an argument list, to the kernel-option parse
 * of the CLI (fg_cli_parse_generate) and to that of `flowgen sample`
 * (fg_cli_parse_sample).  Invariants: a refused value leaves the spec as it
 * was and says why; an accepted one leaves a valid spec (but for guidance
 * without a conditioning, set in either order); a parse ends in an
 * exit code the CLI documents, with a valid spec and consistent options
 * when it goes on. */
#include "fuzz.h"

#include "cli.h"

#include <string.h>

#define MAX_WORDS 64

static size_t split_words(const uint8_t *data, size_t size, char **words) {
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= size && n < MAX_WORDS; ++i) {
    if (i < size && data[i] != '\0' && data[i] != '\n') continue;
    if (i == size && start == size) break;  /* no empty last word */
    words[n] = malloc(i - start + 1);
    FUZZ_CHECK(words[n] != NULL);
    memcpy(words[n], data + start, i - start);
    words[n][i - start] = '\0';
    ++n;
    start = i + 1;
  }
  return n;
}

static void set_fields(char **words, size_t count) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  for (size_t i = 0; i + 1 < count; i += 2) {
    flowgen_spec before = spec;
    flowgen_error err = {FLOWGEN_OK, ""};
    flowgen_status s = flowgen_spec_set(&spec, words[i], words[i + 1], &err);
    if (s != FLOWGEN_OK) {
      FUZZ_CHECK(s == FLOWGEN_INVALID && err.status == s && err.message[0]);
      FUZZ_CHECK(memcmp(&before, &spec, sizeof spec) == 0);
    }
    /* Guidance needs a conditioning: the one relation between fields,
     * which may be set in either order, so it is checked at the end. */
    s = flowgen_spec_validate(&spec, &err);
    FUZZ_CHECK(s == FLOWGEN_OK || (spec.guidance && spec.cond == 0));
    char symbol[FLOWGEN_NAME_MAX + 64];
    flowgen_spec_symbol(&spec, symbol, sizeof symbol);
    FUZZ_CHECK(symbol[0] != '\0' && strlen(symbol) < sizeof symbol - 1);
  }
}

/* argv for a parse: program, then the words; returns argc. */
static int make_argv(char *program, char **words, size_t count, char **argv) {
  argv[0] = program;
  for (size_t i = 0; i < count; ++i) argv[i + 1] = words[i];
  argv[count + 1] = NULL;
  return (int)count + 1;
}

static void parse_arguments(char **words, size_t count) {
  static char program[] = "flowgen";
  char *argv[MAX_WORDS + 2];
  int argc = make_argv(program, words, count, argv);
  fg_cli_generate_args a;
  memset(&a, 0, sizeof a);
  int code = fg_cli_parse_generate(argc, argv, &a);
  FUZZ_CHECK(code == -1 || code == 0 || code == 2);
  FUZZ_CHECK((code == 0) == (a.help || a.version));
  if (code != -1) return;
  flowgen_error err = {FLOWGEN_OK, ""};
  FUZZ_CHECK(flowgen_spec_validate(&a.spec, &err) == FLOWGEN_OK);
  FUZZ_CHECK(a.output != NULL && a.output[0] != '\0');
  FUZZ_CHECK(a.emit == FG_CLI_EMIT_CU || a.emit == FG_CLI_EMIT_PTX ||
             a.emit == FG_CLI_EMIT_CUBIN);
  FUZZ_CHECK(fg_device_check(&a.opts.device, "device", &err) == FLOWGEN_OK);
}

static void parse_sample_arguments(char **words, size_t count) {
  static char program[] = "sample";
  char *argv[MAX_WORDS + 2];
  int argc = make_argv(program, words, count, argv);
  fg_cli_sample_args a;
  memset(&a, 0, sizeof a);
  int code = fg_cli_parse_sample(argc, argv, &a);
  FUZZ_CHECK(code == -1 || code == 0 || code == 2);
  FUZZ_CHECK((code == 0) == a.help);
  if (code != -1) return;
  flowgen_error err = {FLOWGEN_OK, ""};
  FUZZ_CHECK(flowgen_spec_validate(&a.spec, &err) == FLOWGEN_OK);
  FUZZ_CHECK((a.output && a.output[0]) || (a.png && a.png[0]));
  FUZZ_CHECK(a.batch >= -1 && a.batch <= (1LL << 40));
  FUZZ_CHECK(!(a.x0_path && a.x0_path[0] && a.batch >= 0));
  FUZZ_CHECK(a.png_height >= 0 && a.png_height <= 4096 && a.png_width >= 0 && a.png_width <= 4096);
  FUZZ_CHECK(a.png_columns >= 0 && a.png_columns <= 1000 && a.png_scale >= 0 && a.png_scale <= 64);
  FUZZ_CHECK(a.device == FG_CLI_DEVICE_AUTO || a.device == FG_CLI_DEVICE_GPU ||
             a.device == FG_CLI_DEVICE_CPU);
  FUZZ_CHECK(fg_device_check(&a.opts.device, "device", &err) == FLOWGEN_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *words[MAX_WORDS];
  size_t count = split_words(data, size, words);
  set_fields(words, count);
  parse_arguments(words, count);
  parse_sample_arguments(words, count);
  for (size_t i = 0; i < count; ++i) free(words[i]);
  return 0;
}
