/* harness.h — a tiny test harness: every test runs in its own process, with a time limit.
 *
 *   TEST(name) { CHECK(cond); CHECK_EQ(a, b); ... }
 *
 * `./test_x` runs every test (each in a child process) and prints a summary line
 * "# test_x: N passed, M failed"; `./test_x name` runs one test in this process;
 * `./test_x --list` lists them. The binary doubles as the native worker of its pools
 * (suiro_worker_main runs first in main). */
#ifndef SUIRO_HARNESS_H
#define SUIRO_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

#include "suiro.h"

typedef void (*test_fn)(void);
void harness_add(const char *name, test_fn fn, double timeout);

#define TEST_T(name, secs)                                                        \
  static void name(void);                                                         \
  __attribute__((constructor)) static void reg_##name(void) { harness_add(#name, name, secs); } \
  static void name(void)
#define TEST(name) TEST_T(name, 60)

/* Registers a native task function in host and workers alike (before main runs). */
#define NATIVE(name)                                                              \
  static int name(const void *arg, size_t len, suiro_out *out, void *ud);         \
  __attribute__((constructor)) static void nreg_##name(void) { suiro_register(#name, name, NULL); } \
  static int name(const void *arg, size_t len, suiro_out *out, void *ud)

#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #c, \
              suiro_last_error());                                                 \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

#define CHECK_EQ(a, b)                                                             \
  do {                                                                             \
    long long va_ = (long long)(a), vb_ = (long long)(b);                          \
    if (va_ != vb_) {                                                              \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld (last error: %s)\n", \
              __FILE__, __LINE__, #a, va_, #b, vb_, suiro_last_error());           \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

#define CHECK_OK(expr) CHECK_EQ((expr), SUIRO_OK)

/* Helpers for pool tests. */
suiro_pool *test_pool(int workers);
suiro_pool *test_pool_opts(suiro_pool_opts *o);
/* tests/vectors of the checkout the test binary was built in (or $SUIRO_VECTORS). */
const char *harness_vectors_dir(void);
/* Number of /dev/shm entries whose name starts with prefix. */
int shm_count(const char *prefix);

#endif
