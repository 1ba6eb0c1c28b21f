/*
 * suiro_face.h — the loops the engine runs for a language face, over the face's callbacks.
 *
 * suiro_bind.h gives a face the seam's facts (protocol, payloads, plans, cells, references); this
 * header gives it the algorithms every face would otherwise write again in its own host API. A
 * face keeps only what needs its language: its value walk, its objects' lifetimes, its function
 * identity, and small callback tables. Sections:
 *
 *   2. map runners            suiro_run_map: attach, claim, elements, completion, cancel, failure
 *   3. outgoing messages      suiro_msg: a wire writer that remembers the references it granted
 *
 * (Section 1, a worker's task, suiro_exec, is written by the worker-dispatch step.)
 *
 * Raising: a face's callback may raise (longjmp: lua_error, Rf_error) only inside the `protect`
 * callback the face implements with its own protected call (lua_pcall, R_ToplevelExec, a plain call
 * in Python). The engine holds nothing across a callback that it does not release after `protect`
 * returns, so its loops are longjmp-safe. Threads: one thread per runner / per message.
 */
#ifndef SUIRO_FACE_H
#define SUIRO_FACE_H

#include "suiro_bind.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---------------------------------------------------------------------------------------------
 * 3. Outgoing messages (declared first: a runner's results are messages)
 *
 * A message is a wire writer plus a ledger of the zero-copy grants (suiro_bind.h section 4) written
 * into it. Exactly one of these ends every message that was initialised:
 *   suiro_msg_sent  the bytes went out (the receiver now owns the grants): the message drops the
 *                   references it held of its own (regions it made for a copy);
 *   suiro_msg_free  they never will: every grant is given back (suiro_buf_unsend), then as sent.
 * Both free the writer's heap and leave the message initialised and empty (as after init), so a
 * message may be reused; calling either again is harmless. The ledger holds 8 grants inline and
 * grows on the heap. The writer starts in the caller's `stack` buffer (it must outlive the message).
 */
typedef struct suiro_msg_grant {
  suiro_buf *b;
  int own; /* 1: the message holds one reference of b (a region it made), dropped when it ends */
} suiro_msg_grant;

typedef struct suiro_msg {
  suiro_wire_writer w;     /* write the value here (suiro_msg_writer) */
  int n, cap;              /* grants written, room */
  suiro_msg_grant *g;      /* inl, or the heap */
  suiro_msg_grant inl[8];
  void *stack;             /* the writer's first buffer, for reuse */
  size_t stack_cap;
} suiro_msg;

void suiro_msg_init(suiro_msg *m, void *stack, size_t cap);
static inline suiro_wire_writer *suiro_msg_writer(suiro_msg *m) { return &m->w; }
/* Writes a REF to `bytes` at `data` inside region b (as suiro_zc_put) and records the grant; with
 * own = 1 the message takes over one reference of b (given or not: on WIRE_ERR it is dropped).
 * WIRE_OK; WIRE_ERR when no REF was written (b has no name, or out of memory: then nothing is
 * granted, and the caller may send a copy instead). */
int suiro_msg_put_ref(suiro_msg *m, suiro_buf *b, int own, const void *data, size_t bytes, int type, int order,
                      int ndim, const uint64_t *dims);
/* The message's bytes (suiro_wire_writer_finish): WIRE_OK, or an error (suiro_wire_writer_error). */
int suiro_msg_finish(suiro_msg *m, const void **buf, size_t *len);
void suiro_msg_sent(suiro_msg *m);
void suiro_msg_free(suiro_msg *m);

/* ---------------------------------------------------------------------------------------------
 * 2. Map runners (docs/maps.md; the plan of suiro_bind.h section 6)
 *
 * A map runner task (a worker's SUIRO_FN_MAP_RUNNER) is run by
 *   suiro_run_map(arg, len, out, ops, ud)
 * which attaches to the map, claims ranges of elements until none is left or the map is cancelled
 * (one rule: a cancel leaves the element loop and the claim loop), marks each range completed, and
 * detaches. The face's callbacks, all but `fail` inside one `protect`:
 *   prepare(ud, r)       build the plan's function (suiro_plan_fn(r->plan)); keep it in ud
 *   range(ud, r, b, e)   run elements b..e-1: the face's inner loop is
 *                          suiro_elem el;
 *                          while ((k = suiro_runner_next(r, &el)) > 0) {
 *                            v = f(el);                              the face's call
 *                            if (r->tpl) store v into the cells of suiro_plan_cell(r->plan,
 *                                        r->out, r->current, field, &type) (width r->width)
 *                            else { encode v into suiro_msg_writer(suiro_runner_msg(r));
 *                                   suiro_runner_put(r) }          -1: raise suiro_last_error()
 *                          }
 *                          k < 0: raise "map: " suiro_last_error() (damaged input)
 *                        suiro_runner_next leaves the previous element (suiro_plan_leave), stops at
 *                        e or at a cancel, decodes the next one and enters it (its random stream).
 *   fail(ud, r, &cls, &msg, &trace)  after protect failed: the pending error's parts (borrowed
 *                        until `done`); the engine encodes the payload (heap, the whole message
 *                        and traceback) and fails the map at r->current (element index, 0-based).
 *   done(ud)             (may be NULL) release what fail lent.
 * protect(ud, body, ctx) returns 0 when body returned 0, nonzero when it raised or returned
 * nonzero (a face without longjmp, Python, returns -1 from a callback with its exception set).
 * A failure before the map is attached, or an attach error, is the task's error (suiro_out_error).
 * After a failure the engine leaves the element (suiro_plan_leave) and frees the runner's message
 * if the failure came while it was being written (its grants given back). suiro_run_map returns 0
 * (the outcome is the map's), or -1 when the task itself failed (out holds the error).
 * The per-element work is the face's loop and direct calls; the callbacks run once per range
 * (measured: bench/bench_map.lua identity, docs in engine/src/runner.c).
 */
typedef struct suiro_runner {
  suiro_map *map;
  const suiro_plan *plan;
  const suiro_template *tpl; /* NULL: results are wire values (suiro_runner_put) */
  void *out;                 /* the runner's typed output area (tpl != NULL) */
  uint64_t width;            /* values per ARRAY cell, else 1 */
  uint64_t current;          /* the element running (0-based) */
  /* the engine's, below */
  uint64_t end;
  int entered, started, msg_live;
  suiro_msg msg;
  uint64_t stack[32];      /* the message's first buffer */
} suiro_runner;

typedef struct suiro_runner_ops {
  int (*protect)(void *ud, int (*body)(void *ctx), void *ctx);
  int (*prepare)(void *ud, suiro_runner *r);
  int (*range)(void *ud, suiro_runner *r, uint64_t begin, uint64_t end);
  void (*fail)(void *ud, suiro_runner *r, suiro_wire_str *cls, suiro_wire_str *msg, suiro_wire_str *trace);
  void (*done)(void *ud);
} suiro_runner_ops;

int suiro_run_map(const void *arg, size_t len, suiro_out *out, const suiro_runner_ops *ops, void *ud);
/* 1: element r->current is entered, its input in *e; 0: the range is over (or cancelled); -1: the
 * staged input is damaged (suiro_last_error). */
int suiro_runner_next(suiro_runner *r, suiro_elem *e);
/* The message for element r->current's wire result (initialised, empty). */
suiro_msg *suiro_runner_msg(suiro_runner *r);
/* Stores the message as element r->current's result and ends it (sent, or freed): 0, or -1 with
 * suiro_last_error (the writer's error, or the map's heap is full). */
int suiro_runner_put(suiro_runner *r);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
