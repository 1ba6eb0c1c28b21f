/*
 * rsuiro.h — the R face's internal interface (package suiro's shared library).
 *
 * Modules, one concept each:
 *   init.c    registration of the .Call entry points and the ALTREP classes; the engine's
 *             diagnostics through REprintf (suiro_set_diag)
 *   renc.c    R values -> wire values (suiro_wire.h), the R conventions of docs/wire-format.md
 *   rdec.c    wire values -> R values, the same conventions
 *   rclass.c  the classes and attributes both directions know, made once at load
 *   rview.c   read-only ALTREP views over shared regions (suiro_buf)
 *   rpool.c   pools, tasks, collect, outcomes and errors
 *   rfunc.c   what a task runs: functions as code keys, task lists, names resolved
 *   rworker.c the R worker: the executor for tasks and map runners, the function cache
 *   rerror.c  the worker's errors: the calling handler, and a failure's class, message, traceback
 *   rmap.c    parallel maps (plans, templates, results)
 *   rcall.c   call specs (suiro_call objects), built in one .Call
 *   rembed.c  the Lua face's readers (config scripts, templates, durations) through suiro_embed.h
 *   rasync.c  promises: tasks, maps and batches settled from the pool's event fd
 *   rwatch.c  the fd watcher thread (promises and suiro_recv_async) that schedules later callbacks
 *   rchan.c   channels: endpoints, send and receive, their wire form, suiro_recv_async
 *   rrandom.c suiro_random(): the per-element streams of seeded maps
 *
 * Everything here runs on R's main thread except the watcher thread of rwatch.c (see its header).
 * Only public engine headers are used: suiro.h, suiro_wire.h, suiro_bind.h, suiro_embed.h.
 */
#ifndef RSUIRO_H
#define RSUIRO_H

#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Altrep.h>
#include <R_ext/Rdynload.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_face.h"
#include "suiro_wire.h"
#include "suiro_wire_compat.h" /* the face still spells the wire API wire_* */

/* ---- pools (rpool.c) ---------------------------------------------------------------------------- */

/* A pool as R sees it. The struct outlives the R object while tasks or maps still point at it
 * (refs counts the pool object and each of them); the engine pool is stopped once. */
typedef struct rpool {
  suiro_pool *p;      /* NULL once stopped */
  int owner;          /* 1: created here (stopped by suiro_pool_stop or at GC); 0: a worker's own */
  int lang;           /* what the workers run: WIRE_LANG_R, WIRE_LANG_LUA, WIRE_LANG_PYTHON */
  int refs;
  double timeout;     /* default collect timeout in seconds (< 0: forever) */
  struct rwatch *watch; /* rasync.c: the eventfd watcher, NULL until a promise needs it */
  SEXP fn_last;       /* the last closure sent (preserved) and its key: the submit loop's memo */
  uint64_t fn_last_key;
  SEXP slab;          /* the task slab being filled (preserved; rpool.c), or NULL */
  int slab_cap;       /* tasks a slab holds (0: not sized yet) */
} rpool;

rpool *rs_pool_of(SEXP pool, const char *verb, int must_run); /* errors naming the argument */
SEXP rs_pool_new_sexp(rpool *rp, SEXP info);
void rs_pool_unref(rpool *rp);
void rs_pool_retire_slab(rpool *rp);
/* R's waits (suiro_wait_sliced, suiro_face.h section 5): slices of RS_CHECK_INTERRUPT_SLICE with
 * R_CheckUserInterrupt between them (it may longjmp: the engine holds nothing then); no locks.
 * p may be NULL (it is used only for an event fd, which R's waits do not poll). */
suiro_status rs_wait(suiro_pool *p, double timeout, suiro_wait_step step, void *ctx);
/* suiro_collect through rs_wait: returns the engine's status. */
suiro_status rs_collect_sliced(suiro_pool *p, suiro_task t, suiro_result *res, double timeout);
/* Signals the condition for a failed result (never returns). index: element index or -1. */
void rs_signal_failure(const suiro_result *r, int64_t index) __attribute__((noreturn));
void rs_signal_error_info(const suiro_error_info *e) __attribute__((noreturn));
/* The same with the error condition an R worker raised (R_NilValue: none): it is signalled itself,
 * with suiro's classes and fields added (docs/r.md, "Conditions"). */
void rs_signal_error_cond(const suiro_error_info *e, SEXP cond) __attribute__((noreturn));
void rs_signal_plain(const suiro_error_info *e) __attribute__((noreturn));
/* A failed result of a pool of language lang: the conditions it relayed, then its error. */
void rs_signal_result_failure(int lang, const suiro_result *r, int64_t index) __attribute__((noreturn));
/* Of a failed result from R workers: the error condition raised (R_NilValue when none travelled)
 * and the conditions signalled before it (*conds). Never signals. */
SEXP rs_failure_raised(int lang, const suiro_result *r, SEXP *conds);
SEXP rs_sentinel(const char *which); /* "timeout", "closed", "peer_gone", "full" */
SEXP rs_outcome(suiro_status st, const char *verb); /* sentinel or error */
/* A condition of class c(cls, "suiro_error", "error", "condition") with these fields (the values
 * protected by the caller). */
SEXP rs_condition(const char *cls, int nfields, const char **names, SEXP *values);
double rs_timeout_arg(SEXP t, double dflt, const char *verb);

/* ---- classes and attributes (rclass.c), shared by renc.c and rdec.c -------------------------- */

/* Made by rs_class_init at load and preserved; read-only after. */
extern SEXP rs_sym_class, rs_sym_levels, rs_sym_tzone, rs_sym_names, rs_sym_dim, rs_sym_rownames;
extern SEXP rs_sym_suiro_bits, rs_sym_suiro_type, rs_sym_suiro_form, rs_sym_suiro_order, rs_sym_suiro_shape,
  rs_sym_suiro_unit;
extern SEXP rs_cls_factor, rs_cls_ordered, rs_cls_date, rs_cls_posixct, rs_cls_integer64, rs_cls_frame;
extern SEXP rs_cls_call, rs_cls_remote, rs_cls_wire_ref, rs_cls_wire_func;
/* list(value, conditions) decoded from FUNC(R) "suiro::relay": this very class object marks it (a
 * value of that class made by anyone else has a class vector of its own) */
extern SEXP rs_cls_relay;
extern int rs_native_utf8; /* the session's native encoding is UTF-8 */
void rs_class_init(void);
int rs_class_is(SEXP x, SEXP cls);  /* the class attribute is exactly cls */
SEXP rs_attr_raw(SEXP x, SEXP sym); /* an attribute as stored (row.names stays compact) */
int rs_attr_count(SEXP x);
/* i64 timestamps as POSIXct double seconds (docs/wire-format.md, "R conventions"): the value of
 * v in unit (WIRE_UNIT_*) as seconds, 1 when encoding them gives v back, 0 when beyond that,
 * -1 for a sub-microsecond part; and the i64 of x seconds in unit, 1 when it decodes to x itself */
int rs_ts_decode(int64_t v, int unit, double *x);
int rs_ts_encode(double x, int unit, int64_t *v);
int rs_ts_unit(SEXP x); /* the WIRE_UNIT_* of a POSIXct's suiro_unit attribute, or -1 */
const char *rs_ts_unit_name(int unit);

/* ---- values: encoding (renc.c), decoding (rdec.c) ---------------------------------------------- */

/* Encoding options: rich = the receiver runs R (R-only forms allowed: attributes, serialized
 * objects); zc = large vectors may cross by reference (this process has a pool or is a worker). */
typedef struct rs_enc_opts {
  int rich;
  int zc;
  const char *peer;   /* "lua workers", "python workers", "the host": for messages */
} rs_enc_opts;

/* Growable wire writers that are freed by a cleanup even when R unwinds (rs_with_writer). */
typedef struct rs_encoder {
  suiro_msg m;        /* the writer (m.w) and the grants written into it (suiro_face.h section 3) */
  _Alignas(8) unsigned char stack[512];
  rs_enc_opts o;
  /* zero-copy staging: private vectors are copied into one region per message */
  suiro_buf *stage;
  size_t stage_used, stage_cap, stage_need;
  int finished;       /* the message was sent: grants belong to it */
  /* where in the value the encoder is, for messages: kept as segments (a format and its
   * arguments) and rendered only when something cannot be sent */
  struct rs_path_seg {
    const char *fmt;  /* with %s (up to two) and %.0f (one), in any order */
    const char *s[2];
    double d;
  } seg[WIRE_MAX_DEPTH + 16];
  size_t plen;        /* segments in use */
  char path[512];     /* rendered by rs_enc_path */
  int depth;
  uint64_t ncont;     /* containers written (BACKREF ordinals; R never writes backrefs) */
  void *chans;        /* rchan.c: the channel endpoints written into the message (a list) */
} rs_encoder;

void rs_encoder_init(rs_encoder *e, const rs_enc_opts *o);
/* Undoes what an unsent message granted and frees the writer (idempotent). */
void rs_encoder_cleanup(rs_encoder *e);
/* Writes one R value; on a value that cannot cross signals an R error naming `what` and the
 * path inside it ("suiro_submit: argument 'x'[['conn']]: an environment cannot be sent to lua
 * workers"). Safe to unwind from: the caller's cleanup calls rs_encoder_cleanup. */
void rs_enc_value(rs_encoder *e, SEXP x, const char *what);
/* The finished buffer (8-aligned). */
void rs_encoder_finish(rs_encoder *e, const void **buf, size_t *len);
/* Before the engine call that sends the buffer: the staged region's own reference is dropped
 * (the grants keep it alive); after a failed send call rs_encoder_unsend. */
void rs_encoder_sent(rs_encoder *e);
/* Where the encoder is in the value (rendered lazily: a push only records fmt and its arguments,
 * which must stay valid until the matching pop). rs_enc_path renders it. */
void rs_enc_path_push(rs_encoder *e, const char *fmt, ...);
void rs_enc_path_pop(rs_encoder *e, size_t at);
const char *rs_enc_path(rs_encoder *e);
/* FUNC(R) "suiro::relay" [value, conditions]: a result with the conditions its task signalled. */
void rs_enc_relay(rs_encoder *e, SEXP value, SEXP conds, const char *what);
/* Prepares the zero-copy stage for the value (one region for all large private vectors). */
void rs_enc_prescan(rs_encoder *e, SEXP x);

/* Decoding. region: the buffer lies in that region (a REF_WIRE value or a spilled map value),
 * so large arrays inside it become views holding the region. where: "result", "argument". */
typedef struct rs_dec_opts {
  int describe;       /* refs and foreign functions become descriptors (suiro_wire_decode) */
  suiro_buf *region;
  const char *where;
  suiro_pool *pool;   /* for functions by key (a worker's own pool) */
  const char *foreign; /* NULL: an R process of the pool family wrote the bytes; else who did
                          ("lua workers", "the python host", ...): R-only forms (serialize()
                          bytes, attributes, R functions) are refused naming it */
} rs_dec_opts;

/* Who wrote a pool's results, for rs_dec_opts.foreign: NULL for R workers. */
const char *rs_lang_origin(int lang);
/* Inside an R worker's task: who wrote its bytes (NULL: an R host or a sibling R worker). */
const char *rs_task_foreign(void);

/* Decodes a whole buffer holding one value. */
SEXP rs_decode(const void *buf, size_t len, const rs_dec_opts *o);
/* Decodes a LIST [value] buffer (task results, map elements): the value. */
SEXP rs_decode_single(const void *buf, size_t len, const rs_dec_opts *o);
/* A decoded result that carried relayed conditions (FUNC(R) "suiro::relay"): its value, with the
 * conditions in *conds (R_NilValue when none; protect both). */
SEXP rs_unrelay(SEXP x, SEXP *conds);
/* Signals the conditions of a result again in the host, in order (R/worker.R relay_conditions). */
void rs_relay_signal(SEXP conds);

/* Pull-decoding for the worker's task lists: a reader positioned on an item. Lives on the C stack
 * of its user (no allocation per decode); rs_decoder_init protects one R object (the back-reference
 * table): the user unprotects it with UNPROTECT(1) when done. */
#define RS_PATH_MAX 72 /* path steps a decoder keeps (values nest at most 64 deep) */
typedef struct rs_decoder {
  wire_reader r;
  rs_dec_opts o;
  SEXP refs;        /* containers by ordinal (when the buffer has backrefs) */
  PROTECT_INDEX refs_pi;
  int have_refs;
  uint64_t ncont;
  char *open;       /* per ordinal: still open (a backref to it is a cycle); R_alloc'd */
  size_t open_cap;
  int interruptible; /* long loops may R_CheckUserInterrupt (0 while a region reference is held) */
  /* Where the value being decoded sits, for error messages ("argument 'x'[[2]][['k']]"): one
   * entry per open list, dict, frame or call (the wire's depth limit bounds them). kind: 'i' an
   * element (at, 0-based), 'k' a key or column name, 'a' / 'n' a call's positional / named args. */
  int depth;
  struct rs_path_step { char kind; uint64_t at; const char *key; } path[RS_PATH_MAX];
} rs_decoder;
void rs_decoder_init(rs_decoder *d, const void *buf, size_t len, const rs_dec_opts *o);
void rs_decoder_init_at(rs_decoder *d, const wire_reader *r, const rs_dec_opts *o); /* continues a reader */
int rs_dec_next(rs_decoder *d, wire_item *it);  /* WIRE_OK or signals an R error */
SEXP rs_dec_item(rs_decoder *d, wire_item *it); /* the value of an item just read (children too) */
SEXP rs_dec_next_value(rs_decoder *d);          /* next item's value */
void rs_dec_count_container(rs_decoder *d);     /* a container the caller consumed by hand */

/* Helpers shared by the face's modules (rclass.c). */
SEXP rs_mkstr_utf8(const char *s, size_t n, const char *what); /* errors on NUL bytes */
int rs_is_integer64(SEXP x);
SEXP rs_integer64(R_xlen_t n);
SEXP rs_call_fn(const char *pkg, const char *name); /* pkg::name as a function (base/stats...) */
int rs_inherits(SEXP x, const char *cls);

/* ---- views (rview.c) ---------------------------------------------------------------------------- */

void rs_views_init(DllInfo *dll);
/* A read-only view over `bytes` at data inside region b (the view owns one reference of b: it
 * takes the caller's). type: WIRE_T_F64, I64 (an integer64), I32, C128, U8. fresh: the region
 * is new to this process (counts as memory pressure). */
SEXP rs_view_new(suiro_buf *b, const void *data, R_xlen_t n, int type, int fresh);
/* When x is an unmodified view: its region, data and element type; else 0. */
int rs_view_info(SEXP x, suiro_buf **b, const void **data, size_t *bytes);
SEXP rs_view_stats(void);
void rs_region_made(suiro_buf *b); /* a region this process's encoder made (its views weigh nothing) */
void rs_views_new_message(void);    /* decoding of a new message starts */

/* ---- worker (rworker.c), maps (rmap.c), embed (rembed.c), async (rasync.c) -------------------- */

extern int rs_in_worker;
SEXP rs_current_pool(void);
int rs_template_from_string(const char *spec, suiro_template *t, char *err, size_t cap);
int rs_fnref_check(const char *name, char *err, size_t cap); /* the grammar of "pkg::fn" names */
void rs_map_runner(const void *arg, size_t len, suiro_out *out);

/* ---- channels (rchan.c) ------------------------------------------------------------------------ */

void rs_chan_init(void);
int rs_chan_is(SEXP x); /* x is a channel endpoint */
/* Writes endpoint x's reference into w (exporting it) and links it into *list; NULL, or why not. */
const char *rs_chan_export(SEXP x, wire_writer *w, void **list);
/* The message holding the endpoints of list went out (sent: the handles are freed) or never will
 * (they are taken back, usable again). rs_encoder_cleanup calls it. */
void rs_chan_exports_done(void *list, int sent);
/* An endpoint received (imports it): the R object, or NULL with suiro_last_error(). */
SEXP rs_chan_from_ref(const wire_ref *r);

/* ---- the worker's errors (rerror.c) ------------------------------------------------------------ */

void rs_worker_handle_errors(void);                 /* establishes the calling handler (map runners) */
SEXP rs_on_task_error(SEXP cond, void *unused);     /* the same, as R_withCallingErrorHandler's */
void rs_error_parts(char **cls, char **msg, char **tb); /* the last error's parts, malloc'd; clears it */
SEXP rs_error_cond(void);          /* the last error's condition, fit to travel (before rs_error_parts) */
void rs_relay_on(void);            /* record conditions for the host until the top-level context ends */
void rs_relay_clear(void);
void rs_relay_global_push(void);   /* the worker loop's relay handler (rworker.c), established once */
void rs_relay_global_set(int on);  /* it records (1, a task from an R process runs) or not (0) */
R_xlen_t rs_relay_count(void);     /* conditions recorded so far */
SEXP rs_relay_save(void);          /* the record, taken aside (nested tasks), and put back */
void rs_relay_restore(SEXP saved);
void rs_put_relay(rs_encoder *e, SEXP value); /* FUNC(R) "suiro::relay" [value, conditions]; clears */

/* the serialize()/unserialize() fallbacks for R-only objects (rclass.c) */
SEXP rs_serialize(SEXP x);
SEXP rs_unserialize(SEXP raw);

#define RS_CHECK_INTERRUPT_SLICE 0.1 /* seconds between interrupt checks while waiting */
#define RS_INTERRUPT_MASK ((R_xlen_t)(1 << 20) - 1) /* long C loops check every 2^20 elements */

#endif
