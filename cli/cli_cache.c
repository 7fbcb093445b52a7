/* flowgen cache dir|list|clear|warm: the compiled-module cache on disk. */
#include "cli.h"

#include <string.h>

static const char cache_usage[] =
    "usage: flowgen cache dir           print the cache folder in effect\n"
    "       flowgen cache list          list the entries (file, size, target, state,\n"
    "                                   the kernel part each holds)\n"
    "       flowgen cache clear         remove every entry (files with flowgen's header)\n"
    "       flowgen cache warm [--arch sm_XY] [--batch N] [kernel options]\n"
    "                                   compile a kernel's pack part and every variant\n"
    "                                   (--batch N: the one serving batch N) into the\n"
    "                                   cache, in parallel (no GPU needed);\n"
    "                                   --template-dir, --tune, --sms and\n"
    "                                   --shared-per-block as the sampler's\n"
    "\n"
    "The folder is $FLOWGEN_CACHE_DIR, else $XDG_CACHE_HOME/flowgen, else\n"
    "~/.cache/flowgen; --dir DIR overrides it for one command.  A folder that\n"
    "another user owns or can write is refused unless FLOWGEN_CACHE_TRUST=any.\n";

/* A "field=..." line of a key, for the listing. */
static void key_field(const char *key, const char *field, char *buf, size_t size) {
  const char *p = key ? strstr(key, field) : NULL;
  if (!p) {
    snprintf(buf, size, "?");
    return;
  }
  p += strlen(field);
  size_t n = strcspn(p, "\n");
  snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), p);
}

/* One row per entry under a header; an invalid entry's row ends with why.
 * FILE fits an entry's name (32 hex digits and ".fgc"), TARGET
 * "compute_120". */
#define LIST_ROW "%-36s  %10s  %-11s  %-7s  %s"

static void print_entry(void *ctx, const flowrt_cache_entry *e) {
  char target[32], kernel[FLOWGEN_NAME_MAX + 160], bytes[24];
  if (++*(int *)ctx == 1)
    printf(LIST_ROW "\n", "FILE", "BYTES", "TARGET", "STATE", "KERNEL");
  key_field(e->key, "target=", target, sizeof target);
  /* A part names itself (its NVRTC file name, less ".cu"); an entry of an
   * older flowgen may not: its source's hash then. */
  if (e->key && strstr(e->key, "\npart=")) {
    key_field(e->key, "\npart=", kernel, sizeof kernel);
    size_t n = strlen(kernel);
    if (n > 3 && strcmp(kernel + n - 3, ".cu") == 0) kernel[n - 3] = '\0';
  } else {
    char source[48];
    key_field(e->key, "source-xxh3-128=", source, sizeof source);
    snprintf(kernel, sizeof kernel, "source:%s", source);
  }
  snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)e->payload_size);
  printf(LIST_ROW, e->file, bytes, target, e->valid ? "valid" : "INVALID", kernel);
  if (!e->valid) printf("  (%s)", e->problem ? e->problem : "invalid");
  putchar('\n');
}

static int cache_warm(int argc, char **argv, const char *dir) {
  flowgen_spec spec;
  flowgen_spec_default(&spec);
  flowgen_options opts = {0};
  flowgen_error err = {FLOWGEN_OK, ""};
  for (int i = 1; i < argc; ++i) {
    const char *value = NULL;
    int taken = fg_cli_spec_option(argc, argv, &i, &spec, &err);
    if (taken < 0) return err.status ? flowgen_exit_code(err.status) : 2;
    if (taken) continue;
    if ((taken = fg_cli_generate_option(argc, argv, &i, &opts)) ||
        (taken = fg_cli_batch_option(argc, argv, &i, &opts))) {
      if (taken < 0) return 2;
    } else if ((taken = fg_cli_take(argc, argv, &i, "--dir", &value))) {
      /* handled by the caller */
    } else {
      return fg_cli_usage_error("cache warm: unknown argument '%s'", argv[i]);
    }
  }
  bool was_cached = false;
  if (flowrt_cache_warm(dir, &spec, &opts, &was_cached, &err))
    return fg_cli_fail(&err);
  char symbol[FLOWGEN_NAME_MAX + 64];
  flowgen_spec_symbol(&spec, symbol, sizeof symbol);
  char arch[16], batch[48] = "";
  flowgen_spec_arch_name(&spec, arch, sizeof arch);
  if (opts.part == FLOWGEN_PART_BATCH)
    snprintf(batch, sizeof batch, ", batch %lld", (long long)opts.batch);
  printf("%s for %s%s: %s\n", symbol, arch, batch, was_cached ? "already cached" : "compiled and cached");
  return 0;
}

int fg_cli_cache(int argc, char **argv) {
  fg_cli_usage_command("flowgen cache");
  if (argc < 2) {
    fputs(cache_usage, stderr);
    return 2;
  }
  const char *command = argv[1], *dir = NULL;
  if (strcmp(command, "-h") == 0 || strcmp(command, "--help") == 0) {
    fputs(cache_usage, stdout);
    return 0;
  }
  for (int i = 2; i < argc; ++i) {
    const char *value = NULL;
    int taken = fg_cli_take(argc, argv, &i, "--dir", &value);
    if (taken < 0) return fg_cli_usage_error("%s needs a folder", "--dir");
    if (taken) dir = value;
    else if (strcmp(command, "warm") != 0)
      return fg_cli_usage_error("cache: unexpected argument '%s'", argv[i]);
  }
  flowgen_error err = {FLOWGEN_OK, ""};
  if (strcmp(command, "dir") == 0) {
    char path[4096];
    if (dir) snprintf(path, sizeof path, "%s", dir);
    else if (flowrt_cache_dir(path, sizeof path, &err)) return fg_cli_fail(&err);
    printf("%s\n", path);
    return 0;
  }
  if (strcmp(command, "list") == 0) {
    int count = 0;
    if (flowrt_cache_list(dir, print_entry, &count, &err)) return fg_cli_fail(&err);
    if (count == 0) fprintf(stderr, "flowgen: the cache is empty\n");
    return 0;
  }
  if (strcmp(command, "clear") == 0) {
    size_t removed = 0;
    if (flowrt_cache_clear(dir, &removed, &err)) return fg_cli_fail(&err);
    printf("removed %zu file%s\n", removed, removed == 1 ? "" : "s");
    return 0;
  }
  if (strcmp(command, "warm") == 0) return cache_warm(argc - 1, argv + 1, dir);
  return fg_cli_usage_error("cache: unknown command '%s' (dir, list, clear, warm)", command);
}
