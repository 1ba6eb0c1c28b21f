/* test_misuse.c — the C API used wrongly: NULL arguments, absurd sizes, stale handles (use after
 * stop, double free, double unref) and pools inherited across fork. Every case must end in a clear
 * error (never a crash, a hang or a sanitizer report), within its time limit and under a 1 GB
 * memory limit (RLIMIT_AS; under AddressSanitizer, which reserves terabytes of shadow, the engine's
 * budget SUIRO_MAX_BYTES=1G instead). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_bind.h"

NATIVE(m_echo) {
  (void)ud;
  return suiro_out_write(out, arg, len);
}

NATIVE(m_sleep) { /* sleeps the milliseconds in its argument */
  (void)ud;
  int64_t ms = 0;
  if (len == sizeof ms) memcpy(&ms, arg, sizeof ms);
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  nanosleep(&ts, NULL);
  return suiro_out_write(out, &ms, sizeof ms);
}

static const uint64_t GB = (uint64_t)1 << 30;

/* Every case runs under 1 GB. */
static void limit_memory(void) {
  if (getenv("SUIRO_SANITIZED")) {
    setenv("SUIRO_MAX_BYTES", "1G", 1);
    return;
  }
  struct rlimit rl = { GB, GB };
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
}

#define CHECK_ERR(expr, needle)                                                                   \
  do {                                                                                            \
    suiro_status st_ = (expr);                                                                    \
    CHECK(st_ == SUIRO_ERR);                                                                      \
    if (!strstr(suiro_last_error(), (needle))) {                                                  \
      fprintf(stderr, "%s:%d: error \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__,      \
              suiro_last_error(), (needle));                                                      \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)
#define CHECK_MSG(needle)                                                                         \
  do {                                                                                            \
    if (!strstr(suiro_last_error(), (needle))) {                                                  \
      fprintf(stderr, "%s:%d: error \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__,      \
              suiro_last_error(), (needle));                                                      \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static int64_t echo_round_trip(suiro_pool *p, int64_t v) {
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, 5));
  suiro_result r;
  CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  CHECK_EQ(r.len, sizeof v);
  int64_t got;
  memcpy(&got, r.data, sizeof got);
  return got;
}

TEST_T(create_null_out, 20) {
  limit_memory();
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  CHECK_ERR(suiro_pool_create(&o, NULL), "out");
  CHECK_ERR(suiro_pool_create(NULL, NULL), "NULL");
  o.workers = -1;
  suiro_pool *p = (suiro_pool *)1;
  CHECK_ERR(suiro_pool_create(&o, &p), "workers");
  CHECK(p == NULL);
  suiro_pool_opts_init(&o);
  o.size = 3;
  CHECK_ERR(suiro_pool_create(&o, &p), "suiro_pool_opts_init");
  suiro_pool_opts_init(&o);
  o.ring_cap = 3;
  CHECK_ERR(suiro_pool_create(&o, &p), "ring_cap");
  suiro_pool_opts_init(&o);
  o.result_slots = 1u << 30;
  CHECK_ERR(suiro_pool_create(&o, &p), "result_slots");
}

TEST_T(null_handles, 20) {
  limit_memory();
  suiro_task t = 0;
  suiro_result r;
  int64_t v = 1;
  CHECK_ERR(suiro_submit(NULL, 2, &v, sizeof v, &t, 0), "NULL");
  CHECK_ERR(suiro_collect(NULL, t, &r, 0), "NULL");
  size_t idx;
  CHECK_ERR(suiro_collect_any(NULL, &t, 1, &idx, &r, 0), "NULL");
  CHECK_ERR(suiro_wait_all(NULL, &t, 0, 0), "NULL");
  CHECK_ERR(suiro_collect_all(NULL, &t, 0, NULL, NULL, 0), "NULL");
  CHECK_EQ(suiro_task_ready(NULL, t), 0);
  CHECK_EQ(suiro_task_kind(NULL, t), -1);
  CHECK_EQ(suiro_cancel(NULL, t), 0);
  CHECK_ERR(suiro_task_kill(NULL, t), "NULL");
  suiro_task_release(NULL, t);
  uint32_t total = 7;
  CHECK_EQ(suiro_free_slots(NULL, &total), 0);
  CHECK_EQ(total, 0);
  CHECK_EQ(suiro_pool_eventfd(NULL), -1);
  suiro_pool_event_ack(NULL);
  CHECK_ERR(suiro_pool_spawn_workers(NULL, 1), "NULL");
  CHECK_ERR(suiro_pool_retire(NULL, 0, 0), "NULL");
  suiro_pool_stats s;
  CHECK_EQ(suiro_pool_status(NULL, &s, NULL, 0), -1);
  CHECK(suiro_pool_name(NULL) == NULL);
  CHECK_OK(suiro_pool_stop(NULL, 0)); /* like free(NULL) */
  CHECK_ERR(suiro_blob_put(NULL, 1, "x", 1), "NULL");
  void *d;
  size_t n;
  CHECK_ERR(suiro_blob_get(NULL, 1, &d, &n), "NULL");
  CHECK_ERR(suiro_fn_publish(NULL, 1, "x", 1), "NULL");
  suiro_map_opts mo;
  suiro_map_opts_init(&mo);
  suiro_map *m;
  CHECK_ERR(suiro_map_create(NULL, &mo, &m), "NULL");
  CHECK(suiro_map_desc(NULL) == NULL);
  CHECK_EQ(suiro_map_size(NULL), 0);
  CHECK_ERR(suiro_map_start(NULL, 0), "NULL");
  CHECK_ERR(suiro_map_wait(NULL, 0), "NULL");
  CHECK_ERR(suiro_map_kill(NULL), "NULL");
  suiro_map_cancel(NULL);
  uint64_t b, e;
  CHECK_EQ(suiro_map_claim(NULL, &b, &e), 0);
  CHECK_EQ(suiro_map_next_range(NULL, &b, &e), 0);
  CHECK_EQ(suiro_map_put(NULL, 0, "x", 1), -1);
  CHECK(suiro_plan_of(NULL) == NULL);
  suiro_map_free(NULL);
  suiro_map_detach(NULL);
  suiro_buf_unref(NULL);
  suiro_buf_ref(NULL);
  suiro_buf_hold(NULL);
  CHECK(suiro_buf_data(NULL) == NULL);
  CHECK(suiro_buf_name(NULL) == NULL);
  CHECK_ERR(suiro_buf_open("/suiro_x", 0, NULL), "NULL");
  CHECK_EQ(suiro_wait_pools(NULL, 1, 0), -1);
  suiro_pool *none[1] = { NULL };
  CHECK_EQ(suiro_wait_pools(none, 1, 0), -1);
}

TEST_T(null_arguments, 30) {
  limit_memory();
  suiro_pool *p = test_pool(1);
  int64_t v = 5;
  CHECK_ERR(suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, NULL, 1), "out");
  CHECK_ERR(suiro_submit(p, suiro_fn_id("m_echo"), NULL, 8, &(suiro_task){ 0 }, 1), "arg");
  CHECK_ERR(suiro_submit_batch(p, NULL, 3, NULL, NULL, 1), "NULL");
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, 1));
  CHECK_ERR(suiro_collect(p, t, NULL, 1), "res");
  size_t idx;
  CHECK_ERR(suiro_collect_any(p, NULL, 1, &idx, NULL, 1), "NULL");
  CHECK_ERR(suiro_wait_all(p, NULL, 2, 1), "NULL");
  CHECK_ERR(suiro_pool_status(p, NULL, NULL, 5) == -1 ? SUIRO_ERR : SUIRO_OK, "cap");
  CHECK_ERR(suiro_pool_status(p, NULL, NULL, -1) == -1 ? SUIRO_ERR : SUIRO_OK, "cap");
  CHECK_ERR(suiro_blob_get(p, 1, NULL, NULL), "NULL");
  CHECK_ERR(suiro_blob_put(p, 1, NULL, 5), "NULL");
  /* NaN timeouts poll instead of converting NaN */
  suiro_result r;
  suiro_status st = suiro_collect(p, t, &r, 0.0 / 0.0);
  CHECK(st == SUIRO_OK || st == SUIRO_TIMEOUT);
  if (st == SUIRO_TIMEOUT) CHECK_OK(suiro_collect(p, t, &r, 10));
  CHECK_EQ(echo_round_trip(p, 9), 9); /* the pool is unharmed */
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST_T(map_absurd_sizes, 30) {
  limit_memory();
  suiro_pool *p = test_pool(1);
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  suiro_map *m = (suiro_map *)1;
  o.n = (uint64_t)1 << 60;
  CHECK_ERR(suiro_map_create(p, &o, &m), "2^48");
  CHECK(m == NULL);
  o.n = 10;
  o.runners = -3;
  CHECK_ERR(suiro_map_create(p, &o, &m), "runners");
  o.runners = 1000;
  CHECK_ERR(suiro_map_create(p, &o, &m), "runners");
  o.runners = 0;
  o.n = (uint64_t)1 << 40;
  o.slots = 1; /* 16 TB of result slots */
  CHECK_ERR(suiro_map_create(p, &o, &m), "memory limit");
  o.slots = 0;
  o.n = 10;
  o.desc_bytes = (size_t)1 << 62;
  CHECK_ERR(suiro_map_create(p, &o, &m), "memory limit");
  o.desc_bytes = SIZE_MAX;
  o.out_bytes = SIZE_MAX;
  CHECK_ERR(suiro_map_create(p, &o, &m), "memory limit");
  CHECK_ERR(suiro_map_create(p, &o, NULL), "out");
  o.desc_bytes = o.out_bytes = 0;
  o.slots = 2;
  CHECK_ERR(suiro_map_create(p, &o, &m), "slots");
  /* a sane map still works */
  o.slots = 0;
  CHECK_OK(suiro_map_create(p, &o, &m));
  CHECK_EQ(suiro_map_size(m), 10);
  suiro_map_free(m);
  /* zero-copy buffers refuse sizes beyond the budget before touching /dev/shm */
  CHECK(suiro_buf_alloc((size_t)1 << 50) == NULL);
  CHECK_MSG("memory limit");
  CHECK(suiro_buf_alloc(SIZE_MAX) == NULL);
  CHECK_EQ(echo_round_trip(p, 3), 3);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST_T(budget_names_limit, 10) {
  limit_memory();
  CHECK(suiro_budget() <= GB);
  CHECK_OK(suiro_budget_check("n", 1000, 8));
  CHECK_ERR(suiro_budget_check("argument n", (uint64_t)1 << 40, 16), "argument n");
  CHECK_MSG("1099511627776 elements");
  CHECK_MSG("1.0 GiB");
  CHECK_ERR(suiro_budget_check("n", UINT64_MAX, UINT64_MAX), "2^64");
}

TEST_T(use_after_stop, 30) {
  limit_memory();
  suiro_pool *p = test_pool(1);
  int64_t v = 1;
  suiro_task t;
  CHECK_OK(suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, 1));
  CHECK_OK(suiro_pool_stop(p, 5));
  /* p now points at a retired handle: every entry reads its dead word */
  suiro_result r;
  CHECK_ERR(suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, 1), "stopped");
  CHECK_ERR(suiro_collect(p, t, &r, 1), "stopped");
  CHECK_ERR(suiro_pool_stop(p, 1), "stopped");
  CHECK_ERR(suiro_pool_spawn_workers(p, 1), "stopped");
  CHECK_EQ(suiro_task_ready(p, t), 0);
  CHECK_EQ(suiro_cancel(p, t), 0);
  suiro_task_release(p, t);
  CHECK_EQ(suiro_pool_eventfd(p), -1);
  CHECK(suiro_pool_name(p) == NULL);
  suiro_pool_stats s;
  CHECK_EQ(suiro_pool_status(p, &s, NULL, 0), -1);
  CHECK_MSG("stopped");
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  o.n = 4;
  suiro_map *m;
  CHECK_ERR(suiro_map_create(p, &o, &m), "stopped");
}

TEST_T(map_after_stop_and_double_free, 30) {
  limit_memory();
  suiro_pool *p = test_pool(1);
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  o.n = 4;
  suiro_map *m, *m2;
  CHECK_OK(suiro_map_create(p, &o, &m));
  CHECK_OK(suiro_map_create(p, &o, &m2));
  suiro_map_free(m);
  suiro_map_free(m); /* double free: detected */
  CHECK_MSG("freed");
  CHECK_ERR(suiro_map_start(m, 1), "freed");
  CHECK_ERR(suiro_map_wait(m, 1), "freed");
  CHECK(suiro_map_desc(m) == NULL);
  CHECK_OK(suiro_pool_stop(p, 5));
  /* a map outliving its pool answers CLOSED and frees safely, once */
  suiro_status st = suiro_map_start(m2, 1);
  CHECK(st == SUIRO_CLOSED);
  CHECK_EQ(suiro_map_size(m2), 4);
  suiro_map_free(m2);
  suiro_map_free(m2);
  CHECK_MSG("freed");
}

TEST_T(buf_double_unref, 20) {
  limit_memory();
  suiro_pool *p = test_pool(0); /* gives regions a home */
  suiro_buf *b = suiro_buf_alloc(1 << 20);
  CHECK(b != NULL);
  memset(suiro_buf_data(b), 7, 1 << 20);
  CHECK_EQ(suiro_buf_holders(b), 1);
  suiro_buf_unref(b);
  suiro_buf_unref(b); /* second unref of the same holder: detected, the count untouched */
  CHECK_MSG("twice");
  /* the region is whole: the next allocation of its size reuses it */
  suiro_buf *c = suiro_buf_alloc(1 << 20);
  CHECK(c != NULL);
  suiro_buf_unref(c);
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST_T(buf_unref_after_destroy, 20) {
  limit_memory();
  suiro_pool *p = test_pool(0);
  suiro_zc_configure(0, 1, 1); /* free list of one: the second free region is destroyed */
  suiro_buf *a = suiro_buf_alloc(1 << 16), *b = suiro_buf_alloc(1 << 20);
  CHECK(a && b);
  suiro_buf_unref(a);
  suiro_buf_unref(b); /* evicts a: its handle is retired */
  suiro_buf_unref(a);
  CHECK_MSG("freed");
  CHECK(suiro_buf_data(a) == NULL);
  CHECK(suiro_buf_name(a) == NULL);
  CHECK_OK(suiro_pool_stop(p, 5));
}

/* ---- fork ---------------------------------------------------------------------------------- */

static int wait_child(pid_t pid, double secs) {
  double end = suiro_now() + secs;
  int status;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (suiro_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    struct timespec ts = { 0, 2000000 };
    nanosleep(&ts, NULL);
  }
}

/* In the child: exit 0 when every use of the parent's pool fails as inherited. */
static int child_uses_parent_pool(suiro_pool *p, suiro_map *m, suiro_buf *b, suiro_task pending) {
  char want[64];
  snprintf(want, sizeof want, "belongs to process %d", (int)getppid());
  int64_t v = 1;
  suiro_task t;
  suiro_result r;
  if (!suiro_pool_inherited(p)) return 10;
  if (suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, 1) != SUIRO_ERR) return 11;
  if (!strstr(suiro_last_error(), want)) {
    fprintf(stderr, "child: %s\n", suiro_last_error());
    return 12;
  }
  if (suiro_collect(p, pending, &r, 1) != SUIRO_ERR) return 13;
  if (suiro_task_kill(p, pending) != SUIRO_ERR) return 14;
  if (suiro_pool_spawn_workers(p, 1) != SUIRO_ERR) return 15;
  if (suiro_pool_stop(p, 1) != SUIRO_ERR) return 16; /* refused: touches nothing */
  if (!strstr(suiro_last_error(), want)) return 17;
  if (suiro_pool_eventfd(p) != -1) return 18;
  if (suiro_pool_name(p) == NULL) return 19; /* still has its name (read-only) */
  if (suiro_map_start(m, 1) != SUIRO_ERR) return 20;
  if (suiro_map_size(m) != 8) return 21; /* readable */
  suiro_map_free(m);                      /* refused: the parent's */
  /* the parent's value stays readable; sending it is refused (no name); dropping it is local */
  const unsigned char *d = suiro_buf_data(b);
  if (!d || d[0] != 42 || d[(1 << 20) - 1] != 42) return 22;
  if (suiro_buf_name(b) != NULL) return 23;
  suiro_buf_unref(b);
  /* a pool of its own works */
  suiro_pool *q = NULL;
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  if (suiro_pool_create(&o, &q) != SUIRO_OK) return 24;
  if (echo_round_trip(q, 77) != 77) return 25;
  if (suiro_pool_stop(q, 5) != SUIRO_OK) return 26;
  return 0;
}

TEST_T(fork_child_cannot_use_parent_pool, 60) {
  limit_memory();
  suiro_pool *p = test_pool(2);
  suiro_map_opts o;
  suiro_map_opts_init(&o);
  o.n = 8;
  suiro_map *m;
  CHECK_OK(suiro_map_create(p, &o, &m));
  suiro_buf *b = suiro_buf_alloc(1 << 20);
  CHECK(b != NULL);
  memset(suiro_buf_data(b), 42, 1 << 20);
  char name[128];
  snprintf(name, sizeof name, "%s", suiro_buf_name(b));
  int64_t ms = 300;
  suiro_task slow;
  CHECK_OK(suiro_submit(p, suiro_fn_id("m_sleep"), &ms, sizeof ms, &slow, 1));
  suiro_pool_stats before;
  suiro_pool_status(p, &before, NULL, 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int rc = child_uses_parent_pool(p, m, b, slow);
    if (rc) fprintf(stderr, "child failed at step %d: %s\n", rc, suiro_last_error());
    exit(rc); /* exit(), not _exit(): at-exit handlers must leave the parent's pool alone */
  }
  CHECK_EQ(wait_child(pid, 30), 0);
  /* the parent's pool is whole: same workers, its task completes, its names are there */
  suiro_result r;
  CHECK_OK(suiro_collect(p, slow, &r, 10));
  CHECK_EQ(r.kind, SUIRO_RESULT_VALUE);
  suiro_pool_stats after;
  suiro_pool_status(p, &after, NULL, 0);
  CHECK_EQ(after.workers, before.workers);
  CHECK_EQ(after.deaths, 0);
  for (int i = 0; i < 50; i++) CHECK_EQ(echo_round_trip(p, i), i);
  CHECK(shm_count(suiro_pool_name(p) + 1) >= 1);
  CHECK_EQ(shm_count(name + 1), 1);
  CHECK_EQ(suiro_buf_holders(b), 1);
  CHECK_EQ(((unsigned char *)suiro_buf_data(b))[0], 42);
  suiro_buf_unref(b);
  CHECK_OK(suiro_map_start(m, 5));
  suiro_map_free(m);
  CHECK_OK(suiro_pool_stop(p, 5));
}

/* Several forked children submitting at once (R's mclapply): each is refused at once, none hangs,
 * and the parent's ring is untouched. */
TEST_T(fork_children_submit_storm, 60) {
  limit_memory();
  suiro_pool *p = test_pool(1);
  pid_t kids[4];
  fflush(NULL);
  for (int k = 0; k < 4; k++) {
    kids[k] = fork();
    CHECK(kids[k] >= 0);
    if (kids[k] == 0) {
      int64_t v = k;
      suiro_task t;
      for (int i = 0; i < 10000; i++)
        if (suiro_submit(p, suiro_fn_id("m_echo"), &v, sizeof v, &t, -1) != SUIRO_ERR) _exit(3);
      _exit(0);
    }
  }
  for (int k = 0; k < 4; k++) CHECK_EQ(wait_child(kids[k], 30), 0);
  uint32_t total;
  CHECK_EQ(suiro_free_slots(p, &total), total);
  for (int i = 0; i < 5000; i++) CHECK_EQ(echo_round_trip(p, i), i);
  CHECK_OK(suiro_pool_stop(p, 5));
}

/* ---- every other public entry: NULL where a pointer is expected ---------------------------- */

static int noop_native(const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)arg, (void)len, (void)out, (void)ud;
  return 0;
}

TEST_T(null_pointers_elsewhere, 20) {
  limit_memory();
  suiro_region *r = (suiro_region *)1;
  CHECK_ERR(suiro_region_create(4096, NULL), "NULL");
  CHECK_ERR(suiro_region_open(NULL, 0, &r), "name");
  CHECK(suiro_region_addr(NULL) == NULL);
  CHECK_EQ(suiro_region_size(NULL), 0);
  CHECK(suiro_region_name(NULL) == NULL);
  suiro_region_close(NULL, 1);
  CHECK_ERR(suiro_register(NULL, noop_native, NULL), "name");
  CHECK_ERR(suiro_register("misuse_null_fn", NULL, NULL), "fn");
  CHECK(suiro_fn_key(NULL, 5) != 0);
  CHECK_EQ(suiro_out_write(NULL, "x", 1), -1);
  CHECK(suiro_out_reserve(NULL, 8) == NULL);
  suiro_out_commit(NULL, 8);
  suiro_out_reset(NULL);
  CHECK_EQ(suiro_out_error(NULL, "x %d", 1), -1);
  CHECK_EQ(suiro_out_error_bytes(NULL, "x", 1), -1);
  suiro_error_info e;
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, NULL, 5, &e), 0); /* no payload: an empty message */
  CHECK_EQ(suiro_error_read(SUIRO_RESULT_ERROR, "x", 1, NULL), -1);
  CHECK_EQ(suiro_result_error(NULL, &e), -1);
  CHECK_EQ(suiro_map_failure(NULL, &e), 0);
  CHECK_EQ(suiro_keyidx_find(NULL, 1), -1);
  CHECK_EQ(suiro_keyidx_add(NULL, 1), -1);
  suiro_keyidx_free(NULL);
  suiro_rng_seed(NULL, 1, 2);
  CHECK_EQ(suiro_rng_next(NULL), 0);
  char err[64];
  CHECK_EQ(suiro_template_check(NULL, NULL, err, sizeof err), -1);
  CHECK_EQ(suiro_template_check(NULL, NULL, NULL, 0), -1);
  suiro_plan_spec_init(NULL);
  suiro_pool_opts_init(NULL);
  suiro_map_opts_init(NULL);
  CHECK_EQ(suiro_plan_size(NULL), 0);
  CHECK_EQ(suiro_plan_in_kind(NULL), 0);
  CHECK(suiro_plan_template(NULL) == NULL);
  const void *fb = (const void *)1;
  size_t fl = 7;
  suiro_plan_fn(NULL, &fb, &fl);
  CHECK(fb == NULL && fl == 0);
  suiro_elem el;
  CHECK_EQ(suiro_plan_elem(NULL, 0, &el), -1);
  int type;
  CHECK(suiro_plan_cell(NULL, NULL, 0, 0, &type) == NULL);
  uint64_t count = 9;
  CHECK(suiro_plan_column(NULL, NULL, 0, &count) == NULL);
  CHECK_EQ(count, 0);
  CHECK_EQ(suiro_cell_put_int(NULL, 1, 5, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_real(NULL, 1, 5, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_bool(NULL, 1, 1, err, sizeof err), -1);
  CHECK_EQ(suiro_cell_put_na(NULL, 1, NULL, 0), -1);
  suiro_zc_revoke(NULL, 64);
  suiro_view v;
  CHECK_ERR(suiro_zc_open(NULL, &v), "NULL");
  CHECK(suiro_worker_token(3, NULL) == NULL);
  CHECK_EQ(suiro_worker_main(3, NULL), -1);
  CHECK(suiro_worker_run(NULL) != 0);
  CHECK(suiro_status_name((suiro_status)99) != NULL);
  CHECK(suiro_worker_state_name(-5) != NULL);
}
