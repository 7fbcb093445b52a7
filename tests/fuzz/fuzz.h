/* Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c).
 *
 * Each target defines LLVMFuzzerTestOneInput.  `make fuzz` links it with
 * libFuzzer; the regression test (tests/test_fuzz_regressions.c) compiles
 * the same file with -DLLVMFuzzerTestOneInput=<target>_one_input and replays
 * the saved inputs through it without libFuzzer. */
#ifndef FLOWGEN_FUZZ_H
#define FLOWGEN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant the library must keep: a violation is a finding, reported
 * like a crash (abort) with the condition and where. */
#define FUZZ_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__,   \
              #cond);                                                        \
      abort();                                                               \
    }                                                                        \
  } while (0)

/* Reads the input front to back: bytes, integers in a range, words. */
typedef struct fuzz_input {
  const uint8_t *p, *end;
} fuzz_input;

static inline size_t fuzz_left(const fuzz_input *in) {
  return (size_t)(in->end - in->p);
}

/* The next byte, 0 once the input is used up. */
static inline uint8_t fuzz_byte(fuzz_input *in) {
  return in->p < in->end ? *in->p++ : 0;
}

/* An integer in [lo, hi] from the next two bytes. */
static inline int fuzz_int(fuzz_input *in, int lo, int hi) {
  unsigned v = (unsigned)fuzz_byte(in) << 8;
  v |= fuzz_byte(in);
  return lo + (int)(v % (unsigned)(hi - lo + 1));
}

#endif
