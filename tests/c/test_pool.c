/* test_pool.c — pool behaviour through the public API, with native task functions. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

NATIVE(echo) {
  return suiro_out_write(out, arg, len);
}

NATIVE(add) {
  int64_t v[2];
  if (len != sizeof v) return suiro_out_error(out, "add: want 16 bytes, got %zu", len);
  memcpy(v, arg, sizeof v);
  int64_t s = v[0] + v[1];
  return suiro_out_write(out, &s, sizeof s);
}

NATIVE(sleep_ms) {
  int64_t ms;
  memcpy(&ms, arg, sizeof ms);
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  nanosleep(&ts, NULL);
  return suiro_out_write(out, &ms, sizeof ms);
}

NATIVE(fail) {
  return suiro_out_error(out, "failing on purpose with %d", 42);
}

NATIVE(suicide) {
  raise(SIGKILL);
  return 0;
}

NATIVE(whoami) {
  int slot = suiro_worker_slot();
  int pid = getpid();
  int v[2] = { slot, pid };
  return suiro_out_write(out, v, sizeof v);
}

NATIVE(big) { /* returns len-of-arg-specified bytes of pattern */
  int64_t n;
  memcpy(&n, arg, sizeof n);
  unsigned char *b = suiro_out_reserve(out, (size_t)n);
  if (!b) return suiro_out_error(out, "no memory");
  for (int64_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7);
  suiro_out_commit(out, (size_t)n);
  return 0;
}

NATIVE(checksum) { /* sums the bytes of its argument */
  const unsigned char *b = arg;
  uint64_t s = 0;
  for (size_t i = 0; i < len; i++) s += b[i];
  return suiro_out_write(out, &s, sizeof s);
}

NATIVE(origin) { /* who submitted this task, and where it runs */
  int v[2] = { suiro_task_origin(), suiro_worker_slot() };
  return suiro_out_write(out, v, sizeof v);
}

NATIVE(nested_origin) { /* the origin a nested task sees, and this worker's slot */
  suiro_pool *p = suiro_current_pool();
  suiro_task t;
  suiro_result r;
  if (!p || suiro_submit(p, suiro_fn_id("origin"), NULL, 0, &t, -1) != SUIRO_OK ||
      suiro_collect(p, t, &r, -1) != SUIRO_OK || r.kind != SUIRO_RESULT_VALUE || r.len != 2 * sizeof(int))
    return suiro_out_error(out, "nested origin failed");
  int inner[2], v[3];
  memcpy(inner, r.data, sizeof inner);
  v[0] = inner[0];
  v[1] = suiro_worker_slot();
  v[2] = suiro_task_origin(); /* restored after the nested task */
  return suiro_out_write(out, v, sizeof v);
}

/* Submits n nested `add` tasks to its own pool, collects them all, returns the sum. */
NATIVE(nested_sum) {
  int64_t n;
  memcpy(&n, arg, sizeof n);
  suiro_pool *p = suiro_current_pool();
  if (!p) return suiro_out_error(out, "no current pool");
  suiro_task *t = malloc(sizeof *t * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    int64_t v[2] = { i, 1 };
    if (suiro_submit(p, suiro_fn_id("add"), v, sizeof v, &t[i], -1) != SUIRO_OK)
      return suiro_out_error(out, "nested submit: %s", suiro_last_error());
  }
  int64_t sum = 0;
  for (int64_t i = 0; i < n; i++) {
    suiro_result r;
    if (suiro_collect(p, t[i], &r, -1) != SUIRO_OK) return suiro_out_error(out, "nested collect: %s", suiro_last_error());
    int64_t x;
    memcpy(&x, r.data, sizeof x);
    sum += x;
  }
  free(t);
  return suiro_out_write(out, &sum, sizeof sum);
}

/* Depth-d recursion: each level submits two children and adds their results (2^d leaves). */
NATIVE(tree) {
  int64_t d;
  memcpy(&d, arg, sizeof d);
  int64_t r = 1;
  if (d > 0) {
    suiro_pool *p = suiro_current_pool();
    int64_t c = d - 1;
    suiro_task a, b;
    if (suiro_submit(p, suiro_fn_id("tree"), &c, sizeof c, &a, -1) != SUIRO_OK ||
        suiro_submit(p, suiro_fn_id("tree"), &c, sizeof c, &b, -1) != SUIRO_OK)
      return suiro_out_error(out, "submit: %s", suiro_last_error());
    suiro_result ra, rb;
    int64_t x, y;
    if (suiro_collect(p, a, &ra, -1) != SUIRO_OK || ra.kind != SUIRO_RESULT_VALUE) return suiro_out_error(out, "collect a");
    memcpy(&x, ra.data, 8);
    if (suiro_collect(p, b, &rb, -1) != SUIRO_OK || rb.kind != SUIRO_RESULT_VALUE) return suiro_out_error(out, "collect b");
    memcpy(&y, rb.data, 8);
    r = x + y;
  }
  return suiro_out_write(out, &r, sizeof r);
}

static int64_t collect_i64(suiro_pool *p, suiro_task t) {
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 30));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  CHECK_EQ(r.len, 8);
  int64_t v;
  memcpy(&v, r.data, 8);
  return v;
}

static suiro_task submit_i64(suiro_pool *p, const char *fn, int64_t a, int64_t b) {
  int64_t v[2] = { a, b };
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id(fn), v, strcmp(fn, "add") == 0 ? 16 : 8, &t, 10));
  return t;
}

TEST(round_trip) {
  suiro_pool *p = test_pool(1);
  for (int i = 0; i < 1000; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 2 * i)), 3 * i);
  suiro_pool_stats s;
  suiro_worker_info w[4];
  int n = suiro_pool_status(p, &s, w, 4);
  CHECK_EQ(n, 1);
  CHECK_EQ(s.tasks, 1000);
  CHECK_EQ(w[0].tasks, 1000);
  CHECK(w[0].pid > 0);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(echo_sizes_inline_and_spilled) {
  suiro_pool *p = test_pool(2);
  size_t sizes[] = { 0, 1, 95, 96, 97, 1000, 100000, 3 << 20 };
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    unsigned char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 31 + k);
    suiro_task t;
    CHECK_OK(suiro_submit(p, suiro_fn_id("echo"), b, n, &t, 10));
    suiro_result r;
    CHECK_OK(suiro_collect(p, t, &r, 30));
    CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
    CHECK_EQ(r.len, n);
    CHECK(n == 0 || memcmp(r.data, b, n) == 0);
    free(b);
  }
  char name[128];
  snprintf(name, sizeof name, "%s", suiro_pool_name(p) + 1);
  CHECK_OK(suiro_pool_stop(p, 5));
  CHECK_EQ(shm_count(name), 0);
}

TEST(task_error_and_unknown_function) {
  suiro_pool *p = test_pool(1);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("fail"), NULL, 0, &t, 10));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 30));
  CHECK_EQ(r.kind, SUIRO_RESULT_ERROR);
  CHECK(strstr(r.data, "failing on purpose with 42") != NULL);
  CHECK_OK(suiro_submit(p, suiro_fn_id("no_such_fn"), NULL, 0, &t, 10));
  CHECK_OK(suiro_collect(p, t, &r, 30));
  CHECK_EQ(r.kind, SUIRO_RESULT_ERROR);
  CHECK(strstr(r.data, "no task function") != NULL);
  /* the pool is still fine */
  CHECK_EQ(collect_i64(p, submit_i64(p, "add", 1, 2)), 3);
  /* a consumed handle is refused, naming the problem */
  CHECK_EQ(suiro_collect(p, t, &r, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "not outstanding") != NULL);
  suiro_pool_stop(p, 5);
}

static int sink_sum(void *ctx, size_t i, const suiro_result *r) {
  int64_t v;
  memcpy(&v, r->data, 8);
  ((int64_t *)ctx)[i] = v;
  return 0;
}

TEST(batch_submit_and_collect_all) {
  suiro_pool *p = test_pool(2);
  enum { N = 20000 };
  static int64_t args[N][2];
  static suiro_task_spec specs[N];
  static suiro_task tasks[N];
  static int64_t got[N];
  for (int i = 0; i < N; i++) {
    args[i][0] = i;
    args[i][1] = 1;
    specs[i] = (suiro_task_spec){ suiro_fn_id("add"), args[i], 16 };
  }
  size_t acc = 0;
  CHECK_OK(suiro_submit_batch(p, specs, N, tasks, &acc, 30));
  CHECK_EQ(acc, N);
  CHECK_OK(suiro_collect_all(p, tasks, N, sink_sum, got, 30));
  for (int i = 0; i < N; i++) CHECK_EQ(got[i], i + 1);
  suiro_pool_stop(p, 5);
}

TEST(collect_any_returns_first_finished) {
  suiro_pool *p = test_pool(2);
  suiro_task t[2];
  t[0] = submit_i64(p, "sleep_ms", 300, 0);
  t[1] = submit_i64(p, "sleep_ms", 1, 0);
  size_t idx = 9;
  suiro_result r;
  CHECK_OK(suiro_collect_any(p, t, 2, &idx, &r, 10));
  CHECK_EQ(idx, 1);
  CHECK_OK(suiro_collect_any(p, t, 1, &idx, &r, 10));
  CHECK_EQ(idx, 0);
  suiro_pool_stop(p, 5);
}

TEST(timeouts_poll_finite_forever) {
  suiro_pool *p = test_pool(1);
  suiro_task t = submit_i64(p, "sleep_ms", 200, 0);
  suiro_result r;
  CHECK_EQ(suiro_collect(p, t, &r, 0), SUIRO_TIMEOUT);
  double t0 = suiro_now();
  CHECK_EQ(suiro_collect(p, t, &r, 0.05), SUIRO_TIMEOUT);
  double waited = suiro_now() - t0;
  CHECK(waited >= 0.045 && waited < 0.15);
  CHECK_OK(suiro_collect(p, t, &r, -1)); /* forever, with a task that completes */
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  /* collect_all timing out consumes nothing */
  suiro_task ts[2] = { submit_i64(p, "sleep_ms", 100, 0), submit_i64(p, "sleep_ms", 1, 0) };
  CHECK_EQ(suiro_collect_all(p, ts, 2, NULL, NULL, 0.01), SUIRO_TIMEOUT);
  int64_t got[2];
  CHECK_OK(suiro_collect_all(p, ts, 2, sink_sum, got, 10));
  CHECK_EQ(got[0], 100);
  CHECK_EQ(got[1], 1);
  suiro_pool_stop(p, 5);
}

TEST(full_ring_reports_full_then_recovers) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.ring_cap = 8;
  suiro_pool *p = test_pool_opts(&o);
  suiro_task block = submit_i64(p, "sleep_ms", 300, 0);
  /* wait until the worker holds the blocking task, then fill the ring */
  double t0 = suiro_now();
  suiro_worker_info w;
  while (suiro_now() - t0 < 5) {
    suiro_pool_status(p, NULL, &w, 1);
    if (w.state == SUIRO_WORKER_BUSY) break;
  }
  CHECK_EQ(w.state, SUIRO_WORKER_BUSY);
  suiro_task t[8];
  for (int i = 0; i < 8; i++) {
    int64_t v[2] = { i, i };
    CHECK_OK(suiro_submit(p, suiro_fn_id("add"), v, 16, &t[i], 0));
  }
  int64_t v[2] = { 1, 1 };
  suiro_task extra;
  CHECK_EQ(suiro_submit(p, suiro_fn_id("add"), v, 16, &extra, 0), SUIRO_FULL);
  CHECK(strstr(suiro_last_error(), "full") != NULL);
  /* with a timeout it waits for room */
  CHECK_OK(suiro_submit(p, suiro_fn_id("add"), v, 16, &extra, 10));
  CHECK_EQ(collect_i64(p, block), 300);
  for (int i = 0; i < 8; i++) CHECK_EQ(collect_i64(p, t[i]), 2 * i);
  CHECK_EQ(collect_i64(p, extra), 2);
  suiro_pool_stop(p, 5);
}

TEST(result_slots_exhausted_is_full) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.result_slots = 4;
  suiro_pool *p = test_pool_opts(&o);
  suiro_task t[4];
  for (int i = 0; i < 4; i++) t[i] = submit_i64(p, "add", i, 0);
  int64_t v[2] = { 0, 0 };
  suiro_task x;
  CHECK_EQ(suiro_submit(p, suiro_fn_id("add"), v, 16, &x, 1), SUIRO_FULL);
  CHECK(strstr(suiro_last_error(), "result slots") != NULL);
  CHECK_EQ(collect_i64(p, t[0]), 0);
  x = submit_i64(p, "add", 5, 5);
  CHECK_EQ(collect_i64(p, x), 10);
  /* released handles recycle their slots */
  suiro_task_release(p, t[1]);
  suiro_task_release(p, t[2]);
  suiro_task_release(p, t[3]);
  for (int i = 0; i < 100; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 1)), i + 1);
  suiro_pool_stop(p, 5);
}

TEST(full_slots_of_released_running_tasks_are_waited_for) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.result_slots = 4;
  o.workers = 4;
  suiro_pool *p = test_pool_opts(&o);
  uint32_t total = 0;
  CHECK_EQ(suiro_free_slots(p, &total), 4);
  CHECK_EQ(total, 4);
  /* four tasks running (released tasks that have not started are cancelled, freeing at once) */
  suiro_task t[4];
  int64_t ms = 150;
  for (int i = 0; i < 4; i++) CHECK_OK(suiro_submit(p, suiro_fn_id("sleep_ms"), &ms, 8, &t[i], 5));
  CHECK_EQ(suiro_free_slots(p, NULL), 0);
  double t0 = suiro_now();
  for (int busy = 0; busy < 4 && suiro_now() - t0 < 5;) {
    suiro_worker_info w[4];
    int n = suiro_pool_status(p, NULL, w, 4);
    busy = 0;
    for (int i = 0; i < n; i++) busy += w[i].state == SUIRO_WORKER_BUSY;
  }
  for (int i = 0; i < 4; i++) suiro_task_release(p, t[i]);
  int64_t v[2] = { 2, 3 };
  suiro_task x;
  /* no wait allowed: full at once */
  CHECK_EQ(suiro_submit(p, suiro_fn_id("add"), v, 16, &x, 0), SUIRO_FULL);
  /* with a timeout the submit waits for the first released task to finish and takes its slot */
  t0 = suiro_now();
  CHECK_OK(suiro_submit(p, suiro_fn_id("add"), v, 16, &x, 5));
  double waited = suiro_now() - t0;
  CHECK(waited < 4);
  CHECK_EQ(collect_i64(p, x), 5);
  /* slots held by tasks nobody released are not waited for */
  suiro_task held[4];
  for (int i = 0; i < 4; i++) held[i] = submit_i64(p, "add", i, 0);
  t0 = suiro_now();
  CHECK_EQ(suiro_submit(p, suiro_fn_id("add"), v, 16, &x, 5), SUIRO_FULL);
  CHECK(suiro_now() - t0 < 1);
  for (int i = 0; i < 4; i++) CHECK_EQ(collect_i64(p, held[i]), i);
  suiro_pool_stop(p, 5);
}

TEST(cancel_before_start) {
  suiro_pool *p = test_pool(1);
  suiro_task block = submit_i64(p, "sleep_ms", 200, 0);
  suiro_task victim = submit_i64(p, "add", 1, 1);
  CHECK_EQ(suiro_cancel(p, victim), 1);
  suiro_result r;
  CHECK_OK(suiro_collect(p, victim, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_CANCELLED);
  CHECK_EQ(collect_i64(p, block), 200);
  suiro_pool_stop(p, 5);
}

static void killed_mid_task(void) {
  suiro_pool *p = test_pool(2);
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s", suiro_pool_name(p) + 1);
  enum { N = 1000 };
  suiro_task before[N / 2], after[N / 2];
  for (int i = 0; i < N / 2; i++) before[i] = submit_i64(p, "add", i, 0);
  suiro_task victim;
  int64_t ms = 10000;
  CHECK_OK(suiro_submit(p, suiro_fn_id("sleep_ms"), &ms, 8, &victim, 10));
  for (int i = 0; i < N / 2; i++) after[i] = submit_i64(p, "add", i, 1);
  /* Find the worker running the long task: once every short task is done, a status taken
   * after that shows exactly one busy worker, the sleeper's. */
  int pid = 0;
  double t0 = suiro_now();
  while (!pid && suiro_now() - t0 < 10) {
    int done = 1;
    for (int i = 0; i < N / 2 && done; i++) done = suiro_task_ready(p, before[i]) && suiro_task_ready(p, after[i]);
    if (!done) continue;
    suiro_worker_info w[2];
    int n = suiro_pool_status(p, NULL, w, 2), busy = 0;
    for (int i = 0; i < n; i++)
      if (w[i].state == SUIRO_WORKER_BUSY) busy++, pid = w[i].pid;
    if (busy != 1) pid = 0;
  }
  CHECK(pid > 0);
  double k = suiro_now();
  kill(pid, SIGKILL);
  suiro_result r;
  CHECK_OK(suiro_collect(p, victim, &r, 5));
  double dt = suiro_now() - k;
  CHECK_EQ(r.kind, SUIRO_RESULT_DIED);
  CHECK_EQ(r.worker_pid, pid);
  CHECK(strstr(r.data, "was killed") && strstr(r.data, "signal 9"));
  fprintf(stderr, "worker-died reported after %.2f ms: %s\n", dt * 1e3, (const char *)r.data);
  /* reported by the death watch, not found by the 5 s collect timeout running out (a bound in
   * milliseconds failed on a loaded machine; the figure is printed above) */
  CHECK(dt < 1.0);
  for (int i = 0; i < N / 2; i++) CHECK_EQ(collect_i64(p, before[i]), i);
  for (int i = 0; i < N / 2; i++) CHECK_EQ(collect_i64(p, after[i]), i + 1);
  /* the pool keeps serving with the survivor */
  for (int i = 0; i < 100; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, i)), 2 * i);
  suiro_pool_stats s;
  suiro_pool_status(p, &s, NULL, 0);
  CHECK_EQ(s.deaths, 1);
  CHECK_OK(suiro_pool_stop(p, 5));
  CHECK_EQ(shm_count(prefix), 0);
}

TEST(worker_killed_mid_task) { killed_mid_task(); }

/* Without pidfds (Linux < 5.3, valgrind, filtered sandboxes) deaths are watched through a pipe
 * each worker holds; SUIRO_WATCH=pipe chooses that path here. */
static void watch_by_pipe(void) {
  CHECK(setenv("SUIRO_WATCH", "pipe", 1) == 0);
}

/* The worker's token carries its death pipe (name:slot:inc:fd) and that fd is a pipe. */
static void check_pipe_watched(suiro_pool *p) {
  suiro_worker_info w[8];
  int n = suiro_pool_status(p, NULL, w, 8);
  CHECK(n > 0);
  for (int i = 0; i < n; i++) {
    char path[64], cmd[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", w[i].pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t len = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[len] = 0;
    const char *tok = NULL; /* the last argument */
    for (size_t k = 0; k < len; k += strlen(cmd + k) + 1) tok = cmd + k;
    int slot, fd;
    unsigned inc;
    const char *c = tok ? strchr(tok, ':') : NULL;
    CHECK(c && sscanf(c + 1, "%d:%u:%d", &slot, &inc, &fd) == 3);
    char link[64], target[128] = "";
    snprintf(link, sizeof link, "/proc/%d/fd/%d", w[i].pid, fd);
    CHECK(readlink(link, target, sizeof target - 1) > 0 && strncmp(target, "pipe:", 5) == 0);
  }
}

TEST(worker_killed_mid_task_watched_by_pipe) {
  watch_by_pipe();
  suiro_pool *p = test_pool(2);
  check_pipe_watched(p);
  CHECK_OK(suiro_pool_stop(p, 5));
  killed_mid_task();
}

static void suicide_fails_only_its_task(void) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.respawn = 1;
  suiro_pool *p = test_pool_opts(&o);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("suicide"), NULL, 0, &t, 10));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 5));
  CHECK_EQ(r.kind, SUIRO_RESULT_DIED);
  CHECK_EQ(r.worker_slot, 0);
  for (int i = 0; i < 100; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 1)), i + 1);
  suiro_pool_stats s;
  suiro_pool_status(p, &s, NULL, 0);
  CHECK_EQ(s.respawns, 1);
  suiro_pool_stop(p, 5);
}

TEST(worker_suicide_fails_only_its_task_and_respawns) { suicide_fails_only_its_task(); }
TEST(worker_suicide_watched_by_pipe) { watch_by_pipe(); suicide_fails_only_its_task(); }

/* Waits (bounded) until every live worker of p is asleep. */
static void wait_all_parked(suiro_pool *p) {
  double t0 = suiro_now();
  for (;;) {
    suiro_worker_info w[64];
    int k = suiro_pool_status(p, NULL, w, 64), parked = 0, live = 0;
    for (int i = 0; i < k; i++) {
      if (w[i].state != SUIRO_WORKER_IDLE) continue;
      live++;
      parked += w[i].parked;
    }
    if (live > 0 && parked == live) return;
    CHECK(suiro_now() - t0 < 10);
    usleep(1000);
  }
}

/* Deaths must not leave the wake policy believing dead workers are awake: after more deaths than
 * CPUs, parked workers are still woken for new tasks (it once counted them awake forever). */
static void deaths_then_serve(int workers, int deaths) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = workers;
  o.respawn = 1;
  suiro_pool *p = test_pool_opts(&o);
  for (int d = 0; d < deaths; d++) {
    suiro_task t;
    CHECK_OK(suiro_submit(p, suiro_fn_id("suicide"), NULL, 0, &t, 10));
    suiro_result r;
    CHECK_OK(suiro_collect(p, t, &r, 10));
    CHECK_EQ(r.kind, SUIRO_RESULT_DIED);
    CHECK(r.worker_slot >= 0 && r.worker_pid > 0);
  }
  /* every worker idle and asleep: only a wake-up can start the next task */
  double t0 = suiro_now();
  for (;;) { /* respawned workers attached */
    suiro_pool_stats st;
    suiro_worker_info w[64];
    int k = suiro_pool_status(p, &st, w, 64), idle = 0;
    for (int i = 0; i < k; i++) idle += w[i].state == SUIRO_WORKER_IDLE;
    if (idle == workers && st.respawns == (uint64_t)deaths) break;
    CHECK(suiro_now() - t0 < 10);
    usleep(1000);
  }
  wait_all_parked(p);
  for (int i = 0; i < 20; i++) {
    suiro_task t = submit_i64(p, "add", i, 1);
    suiro_result r;
    CHECK_OK(suiro_collect(p, t, &r, 5)); /* a timeout here is the bug */
    int64_t v;
    memcpy(&v, r.data, 8);
    CHECK_EQ(v, i + 1);
  }
  suiro_pool_stop(p, 5);
}

TEST(pool_serves_after_more_deaths_than_cpus) { deaths_then_serve(2, 6); }

TEST(pool_serves_after_a_death_on_one_cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t all;
  CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  CHECK(sched_setaffinity(0, sizeof one, &one) == 0); /* workers inherit it */
  deaths_then_serve(1, 2);
}

NATIVE(spin_forever) {
  (void)arg; (void)len; (void)out; (void)ud;
  for (volatile unsigned long i = 0;; i++) {
  }
  return 0;
}

/* Waits (bounded) until some worker is busy. */
static void wait_busy(suiro_pool *p) {
  double t0 = suiro_now();
  for (;;) {
    suiro_worker_info w[64];
    int k = suiro_pool_status(p, NULL, w, 64);
    for (int i = 0; i < k; i++)
      if (w[i].state == SUIRO_WORKER_BUSY) return;
    CHECK(suiro_now() - t0 < 10);
    usleep(1000);
  }
}

TEST(kill_stops_a_runaway_task_and_replaces_its_worker) {
  suiro_pool *p = test_pool(1); /* respawn off: a kill replaces the worker anyway */
  suiro_task queued, t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("spin_forever"), NULL, 0, &t, 10));
  wait_busy(p);
  CHECK_OK(suiro_submit(p, suiro_fn_id("spin_forever"), NULL, 0, &queued, 10));
  CHECK_OK(suiro_task_kill(p, queued)); /* not started: cancelled, nothing killed */
  suiro_result r;
  CHECK_OK(suiro_collect(p, queued, &r, 5));
  CHECK_EQ(r.kind, SUIRO_RESULT_CANCELLED);
  CHECK_OK(suiro_task_kill(p, t));
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_CANCELLED);
  CHECK(r.len > 0 && memmem(r.data, r.len, "killed", 6) != NULL);
  for (int i = 0; i < 20; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 1)), i + 1);
  suiro_pool_stats st;
  suiro_pool_status(p, &st, NULL, 0);
  CHECK_EQ(st.respawns, 1);
  /* a finished task keeps its value */
  suiro_task done = submit_i64(p, "add", 2, 3);
  while (!suiro_task_ready(p, done)) usleep(100);
  CHECK_OK(suiro_task_kill(p, done));
  CHECK_EQ(collect_i64(p, done), 5);
  suiro_pool_stop(p, 5);
}

TEST(no_workers_left_is_peer_gone) {
  suiro_pool *p = test_pool(1);
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("suicide"), NULL, 0, &t, 10));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 5));
  CHECK_EQ(r.kind, SUIRO_RESULT_DIED);
  suiro_task u = submit_i64(p, "add", 1, 2);
  CHECK_EQ(suiro_collect(p, u, &r, 5), SUIRO_PEER_GONE);
  /* spawning a worker brings the pending task back to life */
  CHECK_OK(suiro_pool_spawn_workers(p, 1));
  CHECK_EQ(collect_i64(p, u), 3);
  suiro_pool_stop(p, 5);
}

TEST(retire_and_respawn) {
  suiro_pool *p = test_pool(2);
  CHECK_OK(suiro_pool_retire(p, 1, 5));
  suiro_pool_stats s;
  suiro_worker_info w[4];
  int n = suiro_pool_status(p, &s, w, 4);
  CHECK_EQ(s.workers, 1);
  CHECK_EQ(n, 2);
  CHECK_EQ(w[1].state, SUIRO_WORKER_EXITED);
  for (int i = 0; i < 200; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 1)), i + 1);
  CHECK_OK(suiro_pool_spawn_workers(p, 1));
  suiro_pool_status(p, &s, w, 4);
  CHECK_EQ(s.workers, 2);
  CHECK_EQ(s.deaths, 0);
  suiro_pool_stop(p, 5);
}

TEST(nested_submit_with_one_worker) {
  suiro_pool *p = test_pool(1);
  suiro_task t;
  int64_t n = 1000;
  CHECK_OK(suiro_submit(p, suiro_fn_id("nested_sum"), &n, 8, &t, 10));
  CHECK_EQ(collect_i64(p, t), 999 * 1000 / 2 + 1000);
  int64_t d = 6;
  CHECK_OK(suiro_submit(p, suiro_fn_id("tree"), &d, 8, &t, 10));
  CHECK_EQ(collect_i64(p, t), 64);
  suiro_pool_stop(p, 5);
}

TEST(task_origin_names_the_submitter) {
  CHECK_EQ(suiro_task_origin(), -2); /* a host, outside any task */
  suiro_pool *p = test_pool(2);
  suiro_task t;
  suiro_result r;
  CHECK_OK(suiro_submit(p, suiro_fn_id("origin"), NULL, 0, &t, 10));
  CHECK_OK(suiro_collect(p, t, &r, 30));
  int v[3];
  memcpy(v, r.data, 2 * sizeof(int));
  CHECK_EQ(v[0], -1); /* the host submitted it */
  CHECK_OK(suiro_submit(p, suiro_fn_id("nested_origin"), NULL, 0, &t, 10));
  CHECK_OK(suiro_collect(p, t, &r, 30));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  memcpy(v, r.data, sizeof v);
  CHECK_EQ(v[0], v[1]); /* the nested task names the worker that submitted it */
  CHECK_EQ(v[2], -1);   /* and the outer task's origin is back */
  suiro_pool_stop(p, 5);
}

TEST(nested_fan_out_many_workers) {
  suiro_pool *p = test_pool(3);
  suiro_task t[6];
  int64_t d = 8;
  for (int i = 0; i < 6; i++) CHECK_OK(suiro_submit(p, suiro_fn_id("tree"), &d, 8, &t[i], 10));
  for (int i = 0; i < 6; i++) CHECK_EQ(collect_i64(p, t[i]), 256);
  suiro_pool_stats s;
  suiro_pool_status(p, &s, NULL, 0);
  CHECK(s.tasks >= 6 * 511);
  suiro_pool_stop(p, 5);
}

static double run_trivial(int workers, int n) {
  suiro_pool *p = test_pool(workers);
  static suiro_task tasks[1 << 17];
  static int64_t args[2] = { 1, 2 };
  suiro_task_spec spec = { suiro_fn_id("add"), args, 16 };
  double t0 = suiro_now();
  for (int i = 0; i < n;) {
    int chunk = n - i < 4096 ? n - i : 4096;
    for (int k = 0; k < chunk; k++) CHECK_OK(suiro_submit(p, spec.fn, args, 16, &tasks[i + k], 30));
    CHECK_OK(suiro_collect_all(p, tasks + i, (size_t)chunk, NULL, NULL, 60));
    i += chunk;
  }
  double dt = suiro_now() - t0;
  suiro_pool_stats s;
  suiro_pool_status(p, &s, NULL, 0);
  fprintf(stderr, "%d workers: %.3f s, %llu wakes, %llu worker parks, %llu host parks, %llu steals\n", workers, dt,
          (unsigned long long)s.wakes, (unsigned long long)s.parks, (unsigned long long)s.host_parks,
          (unsigned long long)s.steals);
  suiro_pool_stop(p, 5);
  return dt;
}

static double median3(double *v) {
  double a = v[0], b = v[1], c = v[2];
  if (a > b) { double t = a; a = b; b = t; }
  if (b > c) { double t = b; b = c; c = t; }
  if (a > b) { double t = a; a = b; b = t; }
  return b;
}

TEST_T(eight_workers_on_few_cpus, 120) {
  /* medians of three runs each, interleaved, so a noisy moment hits both sides alike */
  int n = 100000;
  double a[3], b[3];
  for (int i = 0; i < 3; i++) {
    a[i] = run_trivial(2, n);
    b[i] = run_trivial(8, n);
  }
  double t2 = median3(a), t8 = median3(b);
  fprintf(stderr, "100k trivial tasks (median of 3): 2 workers %.3f s, 8 workers %.3f s (ratio %.2f)\n", t2, t8,
          t8 / t2);
  /* oversubscribed spinning collapses to millisecond stalls (10x and worse); 3x leaves room for a
   * noisy machine without letting that through */
  CHECK(t8 <= 3 * t2);
}

static double cpu_seconds_of(int pid) {
  suiro_proc_info pi;
  if (suiro_proc_stat(pid, &pi) != 0) return -1;
  return (double)(pi.utime + pi.stime) / (double)sysconf(_SC_CLK_TCK);
}

TEST(idle_workers_park) {
  suiro_pool *p = test_pool(2);
  for (int i = 0; i < 100; i++) CHECK_EQ(collect_i64(p, submit_i64(p, "add", i, 1)), i + 1);
  suiro_worker_info w[2];
  CHECK_EQ(suiro_pool_status(p, NULL, w, 2), 2);
  struct timespec settle = { 0, 100000000 };
  nanosleep(&settle, NULL); /* let the adaptive spin run out */
  double c0 = cpu_seconds_of(w[0].pid) + cpu_seconds_of(w[1].pid);
  double t0 = suiro_now();
  struct timespec one = { 1, 0 };
  nanosleep(&one, NULL);
  double c1 = cpu_seconds_of(w[0].pid) + cpu_seconds_of(w[1].pid);
  double wall = suiro_now() - t0;
  fprintf(stderr, "idle CPU: %.4f s over %.3f s wall\n", c1 - c0, wall);
  CHECK((c1 - c0) < 0.02 * wall);
  suiro_pool_stats s;
  suiro_pool_status(p, &s, NULL, 0);
  CHECK(s.parks >= 2);
  suiro_pool_stop(p, 5);
}

TEST(eventfd_fires_once_per_burst) {
  suiro_pool *p = test_pool(1);
  int fd = suiro_pool_eventfd(p);
  CHECK(fd >= 0);
  suiro_task t[50];
  for (int i = 0; i < 50; i++) t[i] = submit_i64(p, "add", i, 0);
  /* wait for all to finish without consuming */
  double t0 = suiro_now();
  for (int i = 0; i < 50; i++) while (!suiro_task_ready(p, t[i]) && suiro_now() - t0 < 10) {}
  uint64_t v = 0;
  CHECK_EQ(read(fd, &v, 8), 8);
  CHECK_EQ(v, 1); /* one wake-up for the burst */
  CHECK_EQ(read(fd, &v, 8), -1); /* nothing more until re-armed */
  suiro_pool_event_ack(p);
  for (int i = 0; i < 50; i++) CHECK_EQ(collect_i64(p, t[i]), i);
  suiro_task u = submit_i64(p, "add", 2, 2);
  struct timespec ts = { 0, 1000000 };
  for (int i = 0; i < 5000 && read(fd, &v, 8) != 8; i++) nanosleep(&ts, NULL);
  CHECK_EQ(v, 1);
  CHECK_EQ(collect_i64(p, u), 4);
  suiro_pool_stop(p, 5);
}

static int alive(int pid) {
  suiro_proc_info pi;
  return suiro_proc_stat(pid, &pi) == 0 && pi.state != 'Z' && pi.state != 'X';
}

static void host_killed_workers_exit(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t child = fork();
  if (child == 0) {
    /* the doomed host: create a pool, report names and pids, then wait to be killed */
    close(fds[0]);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n] = 0;
    suiro_pool_opts o;
    suiro_pool_opts_init(&o);
    o.workers = 2;
    o.exe = self;
    suiro_pool *p = test_pool_opts(&o);
    suiro_worker_info w[2];
    suiro_pool_status(p, NULL, w, 2);
    char line[256];
    int len = snprintf(line, sizeof line, "%s %d %d\n", suiro_pool_name(p) + 1, w[0].pid, w[1].pid);
    CHECK(write(fds[1], line, (size_t)len) == len);
    for (;;) pause();
  }
  close(fds[1]);
  char line[256] = "";
  FILE *f = fdopen(fds[0], "r");
  CHECK(fgets(line, sizeof line, f) != NULL);
  char name[128];
  int w0, w1;
  CHECK_EQ(sscanf(line, "%127s %d %d", name, &w0, &w1), 3);
  CHECK_EQ(shm_count(name), 1);
  double k = suiro_now();
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  /* workers notice (pidfd) and exit within a second */
  /* (a dead worker may linger as a zombie until init reaps it: read its state, not kill(0)) */
  while ((alive(w0) || alive(w1)) && suiro_now() - k < 2) {
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
  }
  double gone = suiro_now() - k;
  fprintf(stderr, "workers gone %.1f ms after the host was killed\n", gone * 1e3);
  CHECK(gone < 1.0);
  /* its workers removed what the dead host left (its anchor's lock is free: it is really gone) */
  char owner[128];
  snprintf(owner, sizeof owner, "%.*s", (int)(strrchr(name, '_') - name + 1), name); /* suiro_<pid>_<start>_ */
  while (shm_count(owner) > 0 && suiro_now() - k < 2) {
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
  }
  CHECK_EQ(shm_count(owner), 0);
}

TEST(host_killed_workers_exit_and_next_start_reaps) { host_killed_workers_exit(); }
TEST(host_killed_workers_exit_watched_by_pipe) { watch_by_pipe(); host_killed_workers_exit(); }

/* Liveness is its anchor's lock, not its pid: a segment of a live owner whose pid means nothing
 * here (another PID namespace sharing /dev/shm) stays; one without a held anchor goes. */
TEST(reaping_asks_the_anchor_lock_not_the_pid) {
  /* a name as a live process in another PID namespace would make it: a pid and start time that
   * match nothing here, and an anchor held by a process that is alive (our child) */
  int fds[2], back[2];
  CHECK(pipe(fds) == 0 && pipe(back) == 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    close(back[1]);
    int fd = open("/dev/shm/suiro_7ffffffe_1_o", O_RDWR | O_CREAT, 0600);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0) _exit(1);
    int seg = open("/dev/shm/suiro_7ffffffe_1_5", O_RDWR | O_CREAT, 0600);
    if (seg < 0) _exit(1);
    close(seg);
    if (write(fds[1], "k", 1) != 1) _exit(1);
    char c;
    if (read(back[0], &c, 1) < 0) _exit(1); /* until the parent lets go */
    _exit(0);
  }
  close(fds[1]);
  close(back[0]);
  char c;
  CHECK(read(fds[0], &c, 1) == 1);
  CHECK_EQ(shm_count("suiro_7ffffffe_1_"), 2);
  suiro_reap();
  CHECK_EQ(shm_count("suiro_7ffffffe_1_"), 2); /* alive: nothing reaped, whatever its pid says */
  CHECK(write(back[1], "x", 1) == 1);
  waitpid(child, NULL, 0); /* dead: its lock is gone with it */
  suiro_reap();
  CHECK_EQ(shm_count("suiro_7ffffffe_1_"), 0);
  /* and a live pid without an anchor counts as gone: owners make their anchor first */
  int seg = open("/dev/shm/suiro_1_1_5", O_RDWR | O_CREAT, 0600);
  CHECK(seg >= 0);
  close(seg);
  suiro_reap();
  CHECK_EQ(shm_count("suiro_1_1_"), 0);
}

TEST(stop_leaves_nothing_in_dev_shm) {
  suiro_pool *p = test_pool(2);
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s", suiro_pool_name(p) + 1);
  CHECK(shm_count(prefix) >= 1);
  /* leave spilled results uncollected on purpose */
  for (int i = 0; i < 5; i++) {
    int64_t n = 200000;
    suiro_task t;
    CHECK_OK(suiro_submit(p, suiro_fn_id("big"), &n, 8, &t, 10));
  }
  struct timespec ts = { 0, 200000000 };
  nanosleep(&ts, NULL);
  CHECK_OK(suiro_pool_stop(p, 5));
  CHECK_EQ(shm_count(prefix), 0);
}

TEST(bad_options_are_refused_with_a_message) {
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.ring_cap = 1000;
  suiro_pool *p = NULL;
  CHECK_EQ(suiro_pool_create(&o, &p), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "ring_cap") != NULL);
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.exe = "/nonexistent/worker";
  CHECK(suiro_pool_create(&o, &p) != SUIRO_OK);
  CHECK(strstr(suiro_last_error(), "/nonexistent/worker") != NULL);
  suiro_pool_opts_init(&o);
  o.workers = 1;
  o.exe = "/bin/false"; /* starts, exits before attaching */
  CHECK_EQ(suiro_pool_create(&o, &p), SUIRO_PEER_GONE);
  CHECK(strstr(suiro_last_error(), "failed to start") != NULL);
}

NATIVE(blob_len) { /* reads the blob named by its argument from the worker side */
  uint64_t key;
  memcpy(&key, arg, 8);
  void *d;
  size_t n;
  if (suiro_blob_get(suiro_current_pool(), key, &d, &n) != SUIRO_OK) return suiro_out_error(out, "%s", suiro_last_error());
  uint64_t sum = n;
  for (size_t i = 0; i < n; i++) sum += ((unsigned char *)d)[i];
  free(d);
  return suiro_out_write(out, &sum, 8);
}

TEST(blobs_are_shared_and_removed_at_stop) {
  suiro_pool *p = test_pool(1);
  char data[5000];
  uint64_t sum = sizeof data;
  for (size_t i = 0; i < sizeof data; i++) { data[i] = (char)(i % 100); sum += (unsigned char)data[i]; }
  uint64_t key = 0x1234abcdull;
  CHECK_OK(suiro_blob_put(p, key, data, sizeof data));
  CHECK_OK(suiro_blob_put(p, key, data, sizeof data)); /* idempotent */
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("blob_len"), &key, 8, &t, 10));
  CHECK_EQ((uint64_t)collect_i64(p, t), sum);
  uint64_t missing = 99;
  CHECK_OK(suiro_submit(p, suiro_fn_id("blob_len"), &missing, 8, &t, 10));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_ERROR);
  CHECK(strstr(r.data, "not stored") != NULL);
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s", suiro_pool_name(p) + 1);
  CHECK_EQ(shm_count(prefix), 2);
  suiro_pool_stop(p, 5);
  CHECK_EQ(shm_count(prefix), 0);
}

/* The engine's diagnostics go to the suiro_set_diag hook, one line without its newline; the
 * default hook (fn NULL) writes the line and a newline to fd 2 with nothing buffered. */
static char diag_seen[512];
static int diag_calls;
static void diag_catch(void *ud, const char *msg, size_t len) {
  CHECK(ud == &diag_calls);
  CHECK_EQ(msg[len], 0);
  snprintf(diag_seen, sizeof diag_seen, "%.*s", (int)len, msg);
  diag_calls++;
}

TEST(diagnostics_go_to_the_hook_or_fd_2) {
  suiro_set_diag(diag_catch, &diag_calls);
  CHECK_EQ(suiro_worker_run("no-slot-here"), 2);
  CHECK_EQ(diag_calls, 1);
  CHECK(strcmp(diag_seen, "suiro worker: malformed token 'no-slot-here'") == 0);

  suiro_set_diag(NULL, NULL); /* back to fd 2, here a pipe */
  int fds[2], saved = dup(2);
  CHECK(pipe(fds) == 0 && saved >= 0);
  CHECK(dup2(fds[1], 2) == 2);
  int rc = suiro_worker_run("/suiro_no_such_pool:0:1");
  dup2(saved, 2);
  close(fds[1]);
  char buf[512];
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  CHECK_EQ(rc, 2);
  CHECK(n > 0);
  buf[n] = 0;
  CHECK(strncmp(buf, "suiro worker: ", 14) == 0);
  CHECK(strchr(buf, '\n') == buf + n - 1); /* one line */
  CHECK_EQ(diag_calls, 1);
}
