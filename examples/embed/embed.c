/* embed.c — a host application that embeds libsuiro and re-executes itself as its workers.
 *
 *   build/bin/embed_example [n]
 *
 * The same binary is host and worker: main() first asks suiro_worker_main whether it was started
 * as a worker; the native functions are registered before that, so both sides know them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suiro.h"

/* Sum of square roots over [from, to): a stand-in for real work. */
static int sqrt_sum(const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)ud;
  int64_t r[2];
  if (len != sizeof r) return suiro_out_error(out, "sqrt_sum: expected two int64, got %zu bytes", len);
  memcpy(r, arg, sizeof r);
  double s = 0;
  for (int64_t i = r[0]; i < r[1]; i++) s += sqrt((double)i);
  return suiro_out_write(out, &s, sizeof s);
}

int main(int argc, char **argv) {
  suiro_register("sqrt_sum", sqrt_sum, NULL);
  int rc = suiro_worker_main(argc, argv);
  if (rc >= 0) return rc; /* we were a worker and the pool stopped */

  int64_t n = argc > 1 ? atoll(argv[1]) : 100000;
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 2;
  suiro_pool *pool;
  if (suiro_pool_create(&o, &pool) != SUIRO_OK) {
    fprintf(stderr, "pool: %s\n", suiro_last_error());
    return 1;
  }
  enum { PARTS = 4 };
  suiro_task tasks[PARTS];
  for (int i = 0; i < PARTS; i++) {
    int64_t r[2] = { 1 + n * i / PARTS, 1 + n * (i + 1) / PARTS };
    if (suiro_submit(pool, suiro_fn_id("sqrt_sum"), r, sizeof r, &tasks[i], -1) != SUIRO_OK) {
      fprintf(stderr, "submit: %s\n", suiro_last_error());
      return 1;
    }
  }
  double total = 0;
  for (int i = 0; i < PARTS; i++) {
    suiro_result res;
    if (suiro_collect(pool, tasks[i], &res, -1) != SUIRO_OK || res.kind != SUIRO_RESULT_VALUE) {
      fprintf(stderr, "collect: %s %s\n", suiro_last_error(), res.kind ? (const char *)res.data : "");
      return 1;
    }
    double part;
    memcpy(&part, res.data, sizeof part);
    printf("part %d: %.0f (worker %d)\n", i + 1, part, res.worker_slot);
    total += part;
  }
  printf("sum of sqrt(1..%lld) = %.3f\n", (long long)n, total);
  suiro_pool_stop(pool, 5);
  return 0;
}
