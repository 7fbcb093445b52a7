/* Allocation fault injection for the tests: the Nth allocation made inside
 * one armed call fails, every allocation of the call is tracked until it is
 * freed, and a sweep runs the call once per N.
 *
 * Include this header in exactly one file of a test program linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=free
 * (list those five in tests/<name>.wrap).  The wraps reach every object of
 * the link: the library, and the static Lua, jansson, libpng and zlib; not
 * the shared libraries (libc's own allocations, NVRTC, cmocka).
 *
 * Code of the test program that must never fail (a fake driver, say) calls
 * __real_malloc and friends directly.
 */
#ifndef FLOWGEN_TEST_ALLOC_FAULTS_H
#define FLOWGEN_TEST_ALLOC_FAULTS_H

#include "support.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *ptr, size_t size);
char *__real_strdup(const char *s);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
char *__wrap_strdup(const char *s);
void __wrap_free(void *ptr);

/* ---- the books: live allocations of the armed window --------------------- */

/* Open addressing; a slot is in use only if its generation is the current
 * one, so a new window starts empty without clearing the table. */
#define AF_SLOTS ((size_t)1 << 19)
enum { AF_EMPTY, AF_LIVE, AF_GONE };

static struct {
  pthread_mutex_t lock;
  int tracking;        /* read without the lock on the fast path */
  long fail_at;        /* 1-based allocation number that fails; 0 = none */
  long count;          /* allocations asked for in this window */
  int fired;           /* injected failures in this window */
  int persistent;      /* every allocation from fail_at on fails */
  size_t live, used;   /* live entries; live + tombstones */
  unsigned generation;
  struct af_slot {
    void *ptr;
    unsigned generation;
    unsigned char state;
  } slots[AF_SLOTS];
} af = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t af_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (AF_SLOTS - 1);
}

static unsigned char af_state(const struct af_slot *s) {
  return s->generation == af.generation ? s->state : AF_EMPTY;
}

/* Called with the lock held. */
static void af_add(void *p) {
  if (!p) return;
  if (af.used >= AF_SLOTS / 4 * 3) {
    fprintf(stderr, "alloc_faults.h: more than %zu allocations tracked\n", af.used);
    abort();
  }
  for (size_t i = af_hash(p);; i = (i + 1) & (AF_SLOTS - 1)) {
    struct af_slot *s = &af.slots[i];
    if (af_state(s) == AF_EMPTY) {
      *s = (struct af_slot){p, af.generation, AF_LIVE};
      af.live++;
      af.used++;
      return;
    }
  }
}

static void af_remove(void *p) {
  if (!p) return;
  for (size_t i = af_hash(p);; i = (i + 1) & (AF_SLOTS - 1)) {
    struct af_slot *s = &af.slots[i];
    unsigned char state = af_state(s);
    if (state == AF_EMPTY) return; /* allocated before the window */
    if (state == AF_LIVE && s->ptr == p) {
      s->state = AF_GONE;
      af.live--;
      return;
    }
  }
}

/* Counts one allocation; false if it is the one to fail. */
static int af_admit(void) {
  af.count++;
  if (af.fail_at && (af.count == af.fail_at || (af.persistent && af.count > af.fail_at))) {
    af.fired++;
    return 0;
  }
  return 1;
}

static int af_on(void) { return __atomic_load_n(&af.tracking, __ATOMIC_ACQUIRE); }

void *__wrap_malloc(size_t size) {
  if (!af_on()) return __real_malloc(size);
  pthread_mutex_lock(&af.lock);
  void *p = af_admit() ? __real_malloc(size) : NULL;
  af_add(p);
  pthread_mutex_unlock(&af.lock);
  return p;
}

void *__wrap_calloc(size_t count, size_t size) {
  if (!af_on()) return __real_calloc(count, size);
  pthread_mutex_lock(&af.lock);
  void *p = af_admit() ? __real_calloc(count, size) : NULL;
  af_add(p);
  pthread_mutex_unlock(&af.lock);
  return p;
}

void *__wrap_realloc(void *ptr, size_t size) {
  if (!af_on()) return __real_realloc(ptr, size);
  pthread_mutex_lock(&af.lock);
  void *p = NULL;
  if (ptr && size == 0) { /* glibc frees ptr */
    af_remove(ptr);
    p = __real_realloc(ptr, size);
  } else if (af_admit()) {
    p = __real_realloc(ptr, size);
    if (p) {
      af_remove(ptr);
      af_add(p);
    }
  }
  pthread_mutex_unlock(&af.lock);
  return p;
}

char *__wrap_strdup(const char *s) {
  if (!af_on()) return __real_strdup(s);
  pthread_mutex_lock(&af.lock);
  char *p = af_admit() ? __real_strdup(s) : NULL;
  af_add(p);
  pthread_mutex_unlock(&af.lock);
  return p;
}

void __wrap_free(void *ptr) {
  if (ptr && af_on()) {
    pthread_mutex_lock(&af.lock);
    af_remove(ptr);
    pthread_mutex_unlock(&af.lock);
  }
  __real_free(ptr);
}

/* ---- windows -------------------------------------------------------------- */

/* Starts tracking; allocation number fail_at (1-based, 0 = none) fails,
 * and with persistent every one after it too. */
static void af_begin(long fail_at, bool persistent) {
  pthread_mutex_lock(&af.lock);
  af.generation++;
  af.live = af.used = 0;
  af.count = 0;
  af.fired = 0;
  af.fail_at = fail_at;
  af.persistent = persistent;
  __atomic_store_n(&af.tracking, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&af.lock);
}

/* Stops failing; allocations and frees are still tracked. */
static void af_stop_failing(void) {
  pthread_mutex_lock(&af.lock);
  af.fail_at = 0;
  pthread_mutex_unlock(&af.lock);
}

/* Ends the window; returns how many of its allocations are still live. */
static size_t af_end(void) {
  pthread_mutex_lock(&af.lock);
  __atomic_store_n(&af.tracking, 0, __ATOMIC_RELEASE);
  size_t live = af.live;
  pthread_mutex_unlock(&af.lock);
  return live;
}

/* ---- sweeps --------------------------------------------------------------- */

/* The call under test, including the freeing of what it returns: every
 * allocation it makes must be freed by the time it returns. */
typedef flowgen_status (*af_call_fn)(void *ctx, flowgen_error *err);
/* Run before each call, outside the window (may be NULL). */
typedef void (*af_prepare_fn)(void *ctx);
/* Run after a failed call, outside the window: checks that nothing was
 * left half done (may be NULL).  Returns a problem, or NULL. */
typedef const char *(*af_check_fn)(void *ctx, flowgen_status status);

typedef struct af_sweep_spec {
  const char *what;            /* "flowrt_weights_parse", for messages */
  af_call_fn call;
  af_prepare_fn prepare;
  af_check_fn check_failed;
  void *ctx;
  flowgen_status allowed[4];   /* what a failed allocation may give, besides
                                  NOMEM (FLOWGEN_OK ends the list) */
  bool may_absorb;             /* the call may retry and still succeed (Lua
                                  collects garbage and tries again) */
  long max_runs;               /* 0: every N; else about this many N */
  long max_runs_valgrind;      /* the same under valgrind (0: max_runs / 8 + 8) */
  long edge;                   /* with max_runs: the first and last this many
                                  N are always run (0: max_runs / 4) */
} af_sweep_spec;

static char af_problems[1 << 14];
static size_t af_problems_used;
static int af_problem_count;

static void af_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void af_problem(const char *fmt, ...) {
  af_problem_count++;
  if (af_problems_used + 2 >= sizeof af_problems) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(af_problems + af_problems_used,
                    sizeof af_problems - af_problems_used, fmt, ap);
  va_end(ap);
  if (n > 0) af_problems_used += (size_t)n;
  if (af_problems_used + 2 < sizeof af_problems) {
    af_problems[af_problems_used++] = '\n';
    af_problems[af_problems_used] = '\0';
  } else {
    af_problems_used = sizeof af_problems - 1;
  }
}

static bool af_allowed(const af_sweep_spec *spec, flowgen_status st) {
  if (st == FLOWGEN_NOMEM) return true;
  for (int i = 0; i < 4 && spec->allowed[i] != FLOWGEN_OK; ++i)
    if (spec->allowed[i] == st) return true;
  return false;
}

/* One run with allocation n failing (0: none), and with persistent every
 * one after it; returns the call's status and sets *fired and *count. */
static flowgen_status af_run(const af_sweep_spec *spec, long n, bool persistent,
                             int *fired, long *count, size_t *leaked,
                             flowgen_error *err) {
  if (spec->prepare) spec->prepare(spec->ctx);
  memset(err, 0, sizeof *err);
  af_begin(n, persistent);
  flowgen_status st = spec->call(spec->ctx, err);
  af_stop_failing();
  *fired = af.fired;
  *count = af.count;
  *leaked = af_end();
  return st;
}

/* Whether allocation n is one of the sampled ones: all of the first and last
 * `edge`, and an evenly strided selection (offset by the seed) between. */
static bool af_sampled(long n, long total, long edge, long stride, long offset) {
  if (n <= edge || n > total - edge) return true;
  return (n + offset) % stride == 0;
}

/* Checks one run with allocation n failing; returns whether a fault fired. */
static bool af_check_run(const af_sweep_spec *spec, long n, bool persistent,
                         long *failed_runs, long *absorbed) {
  const char *mode = persistent ? " and every later one" : "";
  flowgen_error err;
  int fired;
  long count;
  size_t leaked;
  flowgen_status st = af_run(spec, n, persistent, &fired, &count, &leaked, &err);
  if (leaked)
    af_problem("%s, allocation #%ld%s failing: %zu allocations left live (%s)",
               spec->what, n, mode, leaked, flowgen_status_name(st));
  if (!fired) {
    if (st)
      af_problem("%s, no fault (#%ld of %ld): %s: %s", spec->what, n, count,
                 flowgen_status_name(st), err.message);
    return false;
  }
  if (st == FLOWGEN_OK) {
    if (spec->may_absorb) ++*absorbed;
    else af_problem("%s, allocation #%ld%s failing: returned OK", spec->what, n, mode);
    return true;
  }
  ++*failed_runs;
  if (!af_allowed(spec, st))
    af_problem("%s, allocation #%ld%s failing: %s (%s)", spec->what, n, mode,
               flowgen_status_name(st), err.message);
  else if (err.status != st || !err.message[0])
    af_problem("%s, allocation #%ld%s failing: err is %s '%s'", spec->what, n, mode,
               flowgen_status_name(err.status), err.message);
  if (spec->check_failed) {
    const char *why = spec->check_failed(spec->ctx, st);
    if (why) af_problem("%s, allocation #%ld%s failing: %s", spec->what, n, mode, why);
  }
  /* The fault is over: the same call now works. */
  st = af_run(spec, 0, false, &fired, &count, &leaked, &err);
  if (st || leaked)
    af_problem("%s after allocation #%ld%s failed: %s: %s (%zu left live)", spec->what,
               n, mode, flowgen_status_name(st), err.message, leaked);
  return true;
}

/* Makes allocation N of the call fail, for every N (or a sample of them,
 * spec->max_runs): first that one alone (a passing shortage: Lua collects
 * garbage and tries again), then it and every later one (memory gone).
 * Each run must give NOMEM or an allowed status with its message (or OK
 * where the call may absorb a passing shortage), leave none of the call's
 * allocations live, and the same call without a fault must then work. */
static void af_sweep(const af_sweep_spec *spec) {
  double t0 = fg_test_now_seconds();
  af_problems_used = 0;
  af_problems[0] = '\0';
  af_problem_count = 0;
  flowgen_error err;
  int fired;
  long total;
  size_t leaked;
  flowgen_status st = af_run(spec, 0, false, &fired, &total, &leaked, &err);
  if (st) fail_msg("%s without a fault: %s: %s", spec->what, flowgen_status_name(st),
                   err.message);
  if (leaked) fail_msg("%s without a fault leaves %zu allocations live", spec->what, leaked);
  if (total == 0) fail_msg("%s makes no allocation", spec->what);
  long max_runs = spec->max_runs;
  if (max_runs && fg_test_under_valgrind())
    max_runs = spec->max_runs_valgrind ? spec->max_runs_valgrind : max_runs / 8 + 8;
  long edge = total, stride = 1, offset = 0;
  if (max_runs && total > max_runs) {
    edge = spec->edge && spec->edge <= max_runs / 2 ? spec->edge : max_runs / 4;
    stride = (total - 2 * edge) / (max_runs / 2) + 1;
    offset = (long)(fg_test_seed() % (uint64_t)stride);
  }
  long runs = 0, failed_runs = 0, absorbed = 0;
  /* Until N passes the allocations of a clean run (their number may vary
   * with threads: on while faults still fire). */
  bool fired_last = true;
  for (long n = 1; n <= total + 1 || fired_last; ++n) {
    if (n <= total && !af_sampled(n, total, edge, stride, offset)) continue;
    runs += 2;
    fired_last = af_check_run(spec, n, false, &failed_runs, &absorbed);
    fired_last |= af_check_run(spec, n, true, &failed_runs, &absorbed);
  }
  fprintf(stderr,
          "# %s: %ld allocations; %ld runs with faults: %ld failed cleanly, "
          "%ld absorbed a passing shortage (%.1f s)\n",
          spec->what, total, runs, failed_runs, absorbed, fg_test_now_seconds() - t0);
  if (af_problem_count)
    fail_msg("%d problems:\n%s", af_problem_count, af_problems);
}

#endif
