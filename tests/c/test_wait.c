/* test_wait.c — suiro_wait_sliced (suiro_face.h section 5), the one wait loop of every face:
 * the order of its phases and hooks, deadlines, interrupts, a failed reacquire, and the event fd
 * slice waking on a completion. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "suiro_face.h"

/* A scripted wait: step answers TIMEOUT (after sleeping its slice) until call `ok_at`, then OK;
 * every call and hook is logged as one letter (h/b/s: a step with the held/block/slice length,
 * z: a step of 0, r/R: release shallow/deep, a/A: reacquire, i: interrupted). */
typedef struct script {
  int calls, ok_at, interrupt_at, interrupts, fail_reacquire;
  double held, block, slice;
  char log[256];
  int n;
} script;

static void logc(script *s, char c) {
  if (s->n < (int)sizeof s->log - 1) s->log[s->n++] = c;
}

static void sleep_s(double s) {
  struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
  nanosleep(&ts, NULL);
}

static suiro_status step(void *ctx, double slice) {
  script *s = ctx;
  s->calls++;
  logc(s, slice == 0 ? 'z' : slice == s->held ? 'h' : slice == s->block ? 'b' : 's');
  if (s->ok_at && s->calls >= s->ok_at) return SUIRO_OK;
  if (slice > 0) sleep_s(slice);
  return SUIRO_TIMEOUT;
}

static void release(void *ud, int deep) { logc(ud, deep ? 'R' : 'r'); }
static int reacquire(void *ud, int deep) {
  script *s = ud;
  logc(s, deep ? 'A' : 'a');
  return s->fail_reacquire;
}
static int interrupted(void *ud) {
  script *s = ud;
  logc(s, 'i');
  return s->interrupt_at && ++s->interrupts >= s->interrupt_at;
}

static suiro_wait_hooks hooks_of(script *s, int use_eventfd) {
  return (suiro_wait_hooks){ s->held, s->block, s->slice, use_eventfd, release, reacquire, interrupted };
}

TEST(a_zero_timeout_steps_once) {
  script s = { .held = 1e-4, .block = 1e-3, .slice = 1e-3 };
  suiro_wait_hooks h = hooks_of(&s, 0);
  CHECK_EQ(suiro_wait_sliced(NULL, 0, step, &s, &h, &s), SUIRO_TIMEOUT);
  CHECK(strcmp(s.log, "z") == 0);
}

TEST(phases_come_in_order) {
  script s = { .ok_at = 5, .held = 1e-4, .block = 2e-3, .slice = 1e-3 };
  suiro_wait_hooks h = hooks_of(&s, 0);
  CHECK_EQ(suiro_wait_sliced(NULL, 10, step, &s, &h, &s), SUIRO_OK);
  /* held, then block inside a shallow release, then slices each after an interrupt check */
  if (strcmp(s.log, "hrbairsairsairsa") != 0) fprintf(stderr, "log %s\n", s.log);
  CHECK(strcmp(s.log, "hrbairsairsairsa") == 0);
}

TEST(the_deadline_ends_the_wait) {
  script s = { .held = 1e-4, .block = 5e-3, .slice = 5e-3 };
  suiro_wait_hooks h = hooks_of(&s, 0);
  double t0 = suiro_now();
  CHECK_EQ(suiro_wait_sliced(NULL, 0.05, step, &s, &h, &s), SUIRO_TIMEOUT);
  double took = suiro_now() - t0;
  CHECK(took >= 0.05);
  CHECK(took < 5); /* bounded: slices are clipped to the deadline */
  CHECK(s.calls >= 3);
}

TEST(an_interrupt_or_a_failed_reacquire_stops_it) {
  script s = { .held = 1e-4, .block = 1e-3, .slice = 1e-3, .interrupt_at = 3 };
  suiro_wait_hooks h = hooks_of(&s, 0);
  CHECK_EQ(suiro_wait_sliced(NULL, -1, step, &s, &h, &s), SUIRO_WAIT_STOPPED);
  CHECK_EQ(s.interrupts, 3);
  script f = { .held = 1e-4, .block = 1e-3, .slice = 1e-3, .fail_reacquire = 1 };
  h = hooks_of(&f, 0);
  CHECK_EQ(suiro_wait_sliced(NULL, -1, step, &f, &h, &f), SUIRO_WAIT_STOPPED);
  CHECK(strcmp(f.log, "hrba") == 0);
}

TEST(hooks_may_be_null) {
  script s = { .ok_at = 3 };
  suiro_wait_hooks h = { 0, 1e-3, 1e-3, 0, NULL, NULL, NULL };
  s.block = 1e-3;
  s.slice = 1e-3;
  CHECK_EQ(suiro_wait_sliced(NULL, 10, step, &s, &h, NULL), SUIRO_OK);
  CHECK_EQ(s.calls, 3);
}

NATIVE(sleep_ms) {
  int64_t ms;
  memcpy(&ms, arg, sizeof ms);
  sleep_s((double)ms / 1000);
  return suiro_out_write(out, &ms, sizeof ms);
}

typedef struct collect_ctx {
  suiro_pool *p;
  suiro_task t;
  suiro_result r;
  int steps;
} collect_ctx;

static suiro_status step_collect(void *ctx, double slice) {
  collect_ctx *c = ctx;
  c->steps++;
  return suiro_collect(c->p, c->t, &c->r, slice);
}

TEST(an_event_fd_slice_wakes_on_completion) {
  suiro_pool *p = test_pool(1);
  CHECK(suiro_pool_eventfd(p) >= 0);
  collect_ctx c = { p, 0, { 0 }, 0 };
  int64_t ms = 100;
  CHECK_OK(suiro_submit(p, suiro_fn_id("sleep_ms"), &ms, sizeof ms, &c.t, -1));
  script s = { .held = 1e-4, .block = 1e-3, .slice = 30 };
  suiro_wait_hooks h = hooks_of(&s, 1);
  double t0 = suiro_now();
  CHECK_EQ(suiro_wait_sliced(p, 60, step_collect, &c, &h, &s), SUIRO_OK);
  double took = suiro_now() - t0;
  CHECK(took < 20); /* the poll (a 30 s slice) was woken by the completion, not its end */
  CHECK(c.r.len == sizeof ms);
  CHECK(strchr(s.log, 'R') != NULL && strchr(s.log, 'A') != NULL); /* polled in a deep release */
  CHECK_OK(suiro_pool_stop(p, 5));
}

TEST(one_rule_for_timeout_arguments) {
  double out = 7;
  CHECK_EQ(suiro_timeout_norm(NAN, &out), SUIRO_TIMEOUT_NAN);
  CHECK_EQ(suiro_timeout_norm(-0.5, &out), SUIRO_TIMEOUT_NEGATIVE);
  CHECK_EQ(suiro_timeout_norm(-INFINITY, &out), SUIRO_TIMEOUT_NEGATIVE);
  CHECK(out == 7); /* untouched on a refusal */
  CHECK_EQ(suiro_timeout_norm(0, &out), 0);
  CHECK(out == 0);
  CHECK_EQ(suiro_timeout_norm(2.5, &out), 0);
  CHECK(out == 2.5);
  CHECK_EQ(suiro_timeout_norm(1e12, &out), 0);
  CHECK(out == -1);
  CHECK_EQ(suiro_timeout_norm(INFINITY, &out), 0);
  CHECK(out == -1);
}
