

/* bench_core.c — the engine's core figures, measured side by side in one run.
 *
 *   build/bin/bench_core [--rounds N] [--quick]
 *
 * floor_rt_ns            two processes ping-ponging on two shared cache lines, pure spin: the
 *                        physical floor of a cross-process hand-off on this machine
 * pool_rt_ns             submit + collect of a trivial native task, one worker
 * pipelined_tasks_per_s  one worker, a window of tasks in flight (submit i, collect i - W)
 * batched_tasks_per_s    submit_batch + collect_all in batches of 256, one worker
 * wake_rt_ns             round trip when the worker had parked (the host idled past its spin)
 *
 * Every figure is the median over rounds; ratios are to the floor measured in the same run.
 * The last line of output is one JSON object. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "suiro.h"

static int echo8(const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)ud;
  return suiro_out_write(out, arg, len);
}

static double now(void) { return suiro_now(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the floor ------------------------------------------------------------------------------ */

static double floor_round(int iters) {
  char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  _Atomic uint64_t *ping = (_Atomic uint64_t *)m, *pong = (_Atomic uint64_t *)(m + 128);
  pid_t child = fork();
  if (child == 0) {
    for (uint64_t i = 1; i <= (uint64_t)iters + 1000; i++) {
      while (atomic_load_explicit(ping, memory_order_acquire) != i) __builtin_ia32_pause();
      atomic_store_explicit(pong, i, memory_order_release);
    }
    _exit(0);
  }
  double t0 = 0;
  for (uint64_t i = 1; i <= (uint64_t)iters + 1000; i++) {
    if (i == 1001) t0 = now(); /* the first 1000 warm up */
    atomic_store_explicit(ping, i, memory_order_release);
    while (atomic_load_explicit(pong, memory_order_acquire) != i) __builtin_ia32_pause();
  }
  double dt = now() - t0;
  waitpid(child, NULL, 0);
  munmap(m, 4096);
  return dt / iters * 1e9;
}

/* ---- pool figures --------------------------------------------------------------------------- */

static suiro_pool *pool;
static uint64_t fn;

static void die(const char *what) {
  fprintf(stderr, "bench_core: %s: %s\n", what, suiro_last_error());
  exit(1);
}

static double rt_round(int iters) {
  int64_t x = 42;
  suiro_task t;
  suiro_result r;
  for (int i = 0; i < 1000; i++) {
    if (suiro_submit(pool, fn, &x, 8, &t, -1) != SUIRO_OK || suiro_collect(pool, t, &r, -1) != SUIRO_OK) die("rt");
  }
  double t0 = now();
  for (int i = 0; i < iters; i++) {
    suiro_submit(pool, fn, &x, 8, &t, -1);
    suiro_collect(pool, t, &r, -1);
  }
  return (now() - t0) / iters * 1e9;
}

static double pipelined_round(int n, int window) {
  static suiro_task ring[1024];
  int64_t x = 7;
  suiro_result r;
  double t0 = now();
  for (int i = 0; i < n + window; i++) {
    if (i >= window && suiro_collect(pool, ring[(i - window) & 1023], &r, -1) != SUIRO_OK) die("collect");
    if (i < n && suiro_submit(pool, fn, &x, 8, &ring[i & 1023], -1) != SUIRO_OK) die("submit");
  }
  return n / (now() - t0);
}

static double batched_round(int n, int batch) {
  suiro_task_spec *specs = malloc(sizeof *specs * (size_t)batch);
  suiro_task *tasks = malloc(sizeof *tasks * (size_t)batch);
  int64_t x = 9;
  for (int i = 0; i < batch; i++) specs[i] = (suiro_task_spec){ fn, &x, 8 };
  double t0 = now();
  for (int done = 0; done < n; done += batch) {
    size_t acc;
    if (suiro_submit_batch(pool, specs, (size_t)batch, tasks, &acc, -1) != SUIRO_OK) die("submit_batch");
    if (suiro_collect_all(pool, tasks, (size_t)batch, NULL, NULL, -1) != SUIRO_OK) die("collect_all");
  }
  double rate = n / (now() - t0);
  free(specs);
  free(tasks);
  return rate;
}

static double wake_round(int iters) {
  int64_t x = 1;
  suiro_task t;
  suiro_result r;
  double sum = 0;
  for (int i = 0; i < iters; i++) {
    struct timespec ts = { 0, 3000000 }; /* 3 ms idle: past any spin budget, the worker parks */
    nanosleep(&ts, NULL);
    double t0 = now();
    suiro_submit(pool, fn, &x, 8, &t, -1);
    suiro_collect(pool, t, &r, -1);
    sum += now() - t0;
  }
  return sum / iters * 1e9;
}

int main(int argc, char **argv) {
  suiro_register("echo8", echo8, NULL);
  int rc = suiro_worker_main(argc, argv);
  if (rc >= 0) return rc;
  int rounds = 9, quick = 0, floor_only = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--floor")) floor_only = 1;
  }
  if (floor_only) { /* just the floor, for other benchmarks that compare against it */
    double v[64];
    if (rounds > 64) rounds = 64;
    for (int k = 0; k < rounds; k++) v[k] = floor_round(100000);
    printf("%.1f\n", median(v, rounds));
    return 0;
  }
  if (rounds < 1) rounds = 1;
  int scale = quick ? 10 : 1;
  fn = suiro_fn_id("echo8");

  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  if (suiro_pool_create(&o, &pool) != SUIRO_OK) die("pool_create");

  double fl[64], rt[64], pip[64], bat[64], wk[64];
  if (rounds > 64) rounds = 64;
  /* Interleave the figures round by round, so drift on this VM hits all of them alike. */
  for (int k = 0; k < rounds; k++) {
    fl[k] = floor_round(200000 / scale);
    rt[k] = rt_round(200000 / scale);
    pip[k] = pipelined_round(1000000 / scale, 256);
    bat[k] = batched_round(2000000 / scale, 256);
    wk[k] = wake_round(40 / (quick ? 4 : 1));
  }
  double floor_ns = median(fl, rounds), rt_ns = median(rt, rounds), pip_s = median(pip, rounds),
         bat_s = median(bat, rounds), wake_ns = median(wk, rounds);
  suiro_pool_stats st;
  suiro_pool_status(pool, &st, NULL, 0);
  suiro_pool_stop(pool, 5);

  printf("suiro core benchmark (%d rounds, medians; %s)\n", rounds, suiro_version());
  printf("  %-24s %12.1f ns\n", "floor round trip", floor_ns);
  printf("  %-24s %12.1f ns   (%.2f x floor)\n", "pool round trip", rt_ns, rt_ns / floor_ns);
  printf("  %-24s %12.2f M/s\n", "pipelined tasks", pip_s / 1e6);
  printf("  %-24s %12.2f M/s\n", "batched tasks", bat_s / 1e6);
  printf("  %-24s %12.1f ns   (%.1f x floor)\n", "wake round trip", wake_ns, wake_ns / floor_ns);
  printf("{\"bench\":\"core\",\"rounds\":%d,\"floor_rt_ns\":%.1f,\"pool_rt_ns\":%.1f,\"pool_rt_vs_floor\":%.3f,"
         "\"pipelined_tasks_per_s\":%.0f,\"batched_tasks_per_s\":%.0f,\"wake_rt_ns\":%.1f,\"worker_parks\":%llu}\n",
         rounds, floor_ns, rt_ns, rt_ns / floor_ns, pip_s, bat_s, wake_ns, (unsigned long long)st.parks);
  return 0;
}
