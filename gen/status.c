/* Status codes: names, descriptions, exit codes, and the error record. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  int exit_code;
  const char *text;
} status_table[] = {
#define FLOWGEN_X_ROW(name, code, text) {#name, code, text},
    FLOWGEN_STATUS_MAP(FLOWGEN_X_ROW)
#undef FLOWGEN_X_ROW
};

static bool status_known(flowgen_status status) {
  return (unsigned)status < (unsigned)FLOWGEN_STATUS_COUNT;
}

const char *flowgen_strerror(flowgen_status status) {
  return status_known(status) ? status_table[status].text : "unknown status";
}

const char *flowgen_status_name(flowgen_status status) {
  return status_known(status) ? status_table[status].name : "UNKNOWN";
}

int flowgen_exit_code(flowgen_status status) {
  return status_known(status) ? status_table[status].exit_code : 1;
}

flowgen_status fg_vfail(flowgen_error *err, flowgen_status status,
                        const char *fmt, va_list ap) {
  if (err) {
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
  }
  return status;
}

flowgen_status fg_fail(flowgen_error *err, flowgen_status status,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fg_vfail(err, status, fmt, ap);
  va_end(ap);
  return status;
}

void fg_error_prefix(flowgen_error *err, const char *fmt, ...) {
  if (!err) return;
  char prefix[512], rest[FLOWGEN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(rest, err->message, sizeof rest);
  size_t n = strlen(prefix);
  if (n + 2 >= sizeof err->message) return;
  memcpy(err->message, prefix, n);
  memcpy(err->message + n, ": ", 2);
  size_t room = sizeof err->message - n - 2;
  strncpy(err->message + n + 2, rest, room - 1);
  err->message[sizeof err->message - 1] = '\0';
}

void fg_error_clear(flowgen_error *err) {
  if (err) {
    err->status = FLOWGEN_OK;
    err->message[0] = '\0';
  }
}

fg_parse_result fg_parse_int(const char *text, long long min, long long max,
                             long long *out) {
  if (!text || !*text) return FG_PARSE_NOT_A_NUMBER;
  for (const char *p = text; *p; ++p)
    if (*p < '0' || *p > '9') return FG_PARSE_NOT_A_NUMBER;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || *end != '\0' || v < min || v > max)
    return FG_PARSE_OUT_OF_RANGE;
  *out = v;
  return FG_PARSE_OK;
}
