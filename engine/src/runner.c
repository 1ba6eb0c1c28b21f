/*
 * runner.c — the map runner, once for every face (suiro_face.h section 2): attach to the map,
 * build the function (the face's prepare), claim ranges and run them (the face's range callback,
 * iterating with suiro_runner_next), mark them completed, stop at a cancel, turn a failure into the
 * map's error payload, detach.
 *
 * Ownership: a runner is one worker thread's; the map's shared state (cursor, cancel flag, results)
 * is map.c's, with its own ordering rules. The runner holds across the face's callbacks only what
 * lives in the suiro_runner (its result message, the entered element), and after `protect`
 * returns with a failure it releases both here: nothing leaks when a callback longjmps.
 *
 * Why a range callback and not one per element: the design (one-engine.md, "Risks to measure")
 * priced two indirect calls per element against bench_map's identity overhead (~20 ns/elt); with
 * the range callback the per-element path is the face's loop plus direct calls, and it replaces
 * the four calls each face made per element (plan_elem, enter, leave, cancelled) by one
 * (suiro_runner_next).
 */
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "suiro_face.h"

typedef struct run_ctx {
  suiro_runner *r;
  const suiro_runner_ops *ops;
  void *ud;
} run_ctx;

/* The public runner and the engine's fast path (pool.h), behind one pointer. */
typedef struct runner_full {
  suiro_runner pub;
  runner_fast f;
} runner_full;

/* Per element, what suiro_plan_elem/enter/leave and suiro_map_cancelled do, without their calls
 * and checks (the plan and map are this runner's, validated at attach): the faces' cost per
 * element stays what it was before the loop moved here. */
int suiro_runner_next(suiro_runner *r, suiro_elem *e) {
  runner_fast *f = &((runner_full *)r)->f;
  if (r->entered) {
    if (f->seeded) rng_leave();
    r->entered = 0;
    r->current++;
    if (__builtin_expect(ld_rlx(f->cancel) != 0, 0)) return 0;
  }
  uint64_t i = r->current;
  if (i >= r->end) return 0;
  if (f->in_kind == SUIRO_IN_RANGE) {
    e->kind = 'i';
    e->i = (int64_t)((uint64_t)f->start + i * (uint64_t)f->step); /* checked at creation: no overflow */
  } else if (f->in_kind == SUIRO_IN_ARRAY && f->in_type == WIRE_T_F64) {
    e->kind = 'f';
    memcpy(&e->f, f->in + i * 8, 8);
  } else if (suiro_plan_elem(r->plan, i, e) != 0) {
    return -1;
  }
  st_rlx(f->at, i);
  if (f->seeded) rng_enter(f->seed, f->index_base + i);
  r->entered = 1;
  return 1;
}

suiro_msg *suiro_runner_msg(suiro_runner *r) {
  if (r->msg_live) suiro_msg_free(&r->msg); /* an earlier result left unput: its grants go back */
  r->msg_live = 1;
  return &r->msg;
}

int suiro_runner_put(suiro_runner *r) {
  const void *buf;
  size_t len;
  if (!r->msg_live) return suiro_set_error(SUIRO_ERR, "element %llu: no result message", (unsigned long long)r->current), -1;
  if (suiro_msg_finish(&r->msg, &buf, &len) != WIRE_OK) {
    suiro_set_error(SUIRO_ERR, "element %llu: %s", (unsigned long long)r->current + 1, suiro_wire_writer_error(&r->msg.w));
    r->msg_live = 0;
    suiro_msg_free(&r->msg);
    return -1;
  }
  int full = suiro_map_put(r->map, r->current, buf, len) != 0;
  r->msg_live = 0;
  if (full) {
    suiro_msg_free(&r->msg);
    suiro_set_error(SUIRO_ERR, "element %llu: the map's results outgrew its heap; use a template",
                    (unsigned long long)r->current + 1);
    return -1;
  }
  suiro_msg_sent(&r->msg);
  return 0;
}

static int run_body(void *p) {
  run_ctx *c = p;
  suiro_runner *r = c->r;
  if (c->ops->prepare && c->ops->prepare(c->ud, r) != 0) return -1;
  r->started = 1;
  uint64_t b, e;
  while (suiro_map_claim(r->map, &b, &e)) { /* returns 0 once the map is cancelled */
    r->current = b;
    r->end = e;
    if (c->ops->range(c->ud, r, b, e) != 0) return -1;
    if (r->entered) { /* the face left its loop early */
      if (((runner_full *)r)->f.seeded) rng_leave();
      r->entered = 0;
    }
    suiro_map_completed(r->map, b, e);
  }
  return 0;
}

int suiro_run_map(const void *arg, size_t len, suiro_out *out, const suiro_runner_ops *ops, void *ud) {
  if (!ops || !ops->protect || !ops->range || !ops->fail)
    return suiro_out_error(out, "map runner: %s", "ops (protect, range and fail are required)");
  runner_full *rf = calloc(1, sizeof *rf); /* off the stack: the face's frames may longjmp over ours */
  suiro_runner *r = &rf->pub;
  if (!rf) return suiro_out_error(out, "map runner: %s", "out of memory");
  unsigned idx;
  if (suiro_map_attach(arg, len, &r->map, &idx) != SUIRO_OK) {
    free(rf);
    return suiro_out_error(out, "map runner: %s", suiro_last_error());
  }
  r->plan = suiro_plan_of(r->map);
  if (!r->plan) {
    int rc = suiro_out_error(out, "map runner: %s", suiro_last_error());
    suiro_map_detach(r->map);
    free(rf);
    return rc;
  }
  r->tpl = suiro_plan_template(r->plan);
  r->width = 1;
  if (r->tpl) suiro_template_check(r->tpl, &r->width, NULL, 0);
  r->out = suiro_map_runner_output(r->map);
  map_runner_fast(r->map, &rf->f);
  plan_runner_fast(r->plan, &rf->f);
  suiro_msg_init(&r->msg, r->stack, sizeof r->stack);
  run_ctx c = { r, ops, ud };
  if (ops->protect(ud, run_body, &c) != 0) {
    if (r->entered) suiro_plan_leave();
    r->entered = 0;
    if (r->msg_live) suiro_msg_free(&r->msg); /* raised while writing a result: grants go back */
    r->msg_live = 0;
    suiro_wire_str cls = { "", 0 }, msg = { "", 0 }, tb = { "", 0 };
    ops->fail(ud, r, &cls, &msg, &tb);
    if (!cls.ptr || !cls.len) cls = (suiro_wire_str){ SUIRO_CLASS_REMOTE, strlen(SUIRO_CLASS_REMOTE) };
    if (!msg.ptr) msg = (suiro_wire_str){ "", 0 };
    if (!tb.ptr) tb = (suiro_wire_str){ "", 0 };
    /* one size rule: room for the whole message and traceback (the payload's framing is < 4 KiB) */
    size_t cap = 4096;
    if (msg.len > SIZE_MAX / 2 - cap || tb.len > SIZE_MAX / 2 - cap - msg.len) msg.len = tb.len = 0;
    cap += msg.len + tb.len + cls.len;
    void *eb = malloc(cap);
    if (eb) {
      size_t n = suiro_error_encode(eb, cap, cls, msg, tb, (int64_t)r->current);
      suiro_map_fail(r->map, r->current, eb, n);
      free(eb);
    } else {
      _Alignas(8) unsigned char small[256];
      size_t n = suiro_error_encode(small, sizeof small, cls, (suiro_wire_str){ "out of memory", 13 },
                                    (suiro_wire_str){ "", 0 }, (int64_t)r->current);
      suiro_map_fail(r->map, r->current, small, n);
    }
    if (ops->done) ops->done(ud);
  }
  suiro_msg_free(&r->msg); /* empty: frees nothing unless a face left a message unput */
  suiro_map_detach(r->map);
  free(rf);
  return 0;
}
