/* Fuzzes the .npy reader (fg_npy_parse).  Invariants: a refusal is
 * FLOWGEN_INPUT with a message and no array; an accepted file holds exactly
 * rows x cols items of 4 or 8 bytes after its header (one row for rank 1),
 * and the floats returned are those items, decoded independently here. */
#include "fuzz.h"

#include "npy.h"

#include <string.h>

static uint64_t load_le(const uint8_t *p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

static void check_values(const uint8_t *data, size_t size, const float *values,
                         int64_t rows, int64_t cols) {
  FUZZ_CHECK(size >= 10 && memcmp(data, "\x93NUMPY", 6) == 0);
  size_t length_bytes = data[6] == 1 ? 2 : 4;
  size_t start = 8 + length_bytes;
  FUZZ_CHECK(size >= start);
  size_t header_len = (size_t)load_le(data + 8, length_bytes);
  FUZZ_CHECK(header_len <= size - start);
  size_t payload = size - start - header_len;
  FUZZ_CHECK(rows == 0 || (uint64_t)cols <= (uint64_t)INT64_MAX / (uint64_t)rows);
  size_t count = (size_t)rows * (size_t)cols;
  size_t item = count ? payload / count : 0;
  FUZZ_CHECK(count ? (item == 4 || item == 8) && payload == count * item
                   : payload == 0);
  const uint8_t *p = data + start + header_len;
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = load_le(p + i * item, item);
    float want;
    if (item == 4) {
      uint32_t b = (uint32_t)bits;
      memcpy(&want, &b, sizeof want);
    } else {
      double d;
      memcpy(&d, &bits, sizeof d);
      want = (float)d;
    }
    FUZZ_CHECK(memcmp(&want, &values[i], sizeof want) == 0 ||
               (want != want && values[i] != values[i]));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  flowgen_error err = {FLOWGEN_OK, ""};
  float *values = NULL;
  int64_t rows = -1, cols = -1;
  flowgen_status s = fg_npy_parse(data, size, "fuzz.npy", &values, &rows,
                                  &cols, &err);
  FUZZ_CHECK(s == err.status);
  if (s != FLOWGEN_OK) {
    FUZZ_CHECK(values == NULL && (s == FLOWGEN_INPUT || s == FLOWGEN_NOMEM));
    FUZZ_CHECK(err.message[0] != '\0');
    return 0;
  }
  FUZZ_CHECK(values != NULL && rows >= 0 && cols >= 0);
  check_values(data, size, values, rows, cols);
  free(values);
  return 0;
}
