/*
 * lmpi.c — rank 0 of the MPI tier for the Lua face, and the module (build/lib/suiro/mpi.so, luaopen_suiro_mpi):
 * MPI pools whose tasks and maps are spread over every host of the job.
 *
 *   local x = core.pool_new(local_pool, options, start_timeout)   -- POOL_NEW to every rank
 *   core.submit(x, host, f, ...)      a task on host `host` (>= 1; host 0 is the local pool)
 *   core.map(x, f, xs, spec)          a map dealt out across every host, rank 0 included
 *
 * Maps: the function and input are staged once on rank 0 (lmap_stage, as for a local map); each
 * host gets the plan once and then ranges of it, sized like guided self-scheduling (a share of
 * what is left: remaining / (2 x hosts), never below a floor), each asked for by the host when
 * the range it runs is half done, so a host that finishes early takes more, none waits for a
 * round trip, and none holds a range it cannot start soon. Every range runs on its host's local pool as a plan of its own whose
 * index_base is where it starts: the random streams and element numbers are the whole map's.
 * Results are written into rank 0's output by index: typed cells into one area laid out as the
 * template says, untyped results kept as each range's buffer.
 *
 * Threads and ownership
 *   - The communication thread (comm.c) deals ranges to hosts that ask (intercept: NEED),
 *     so hosts get work while the script is busy; everything else is done on the Lua state's
 *     thread when the script calls in (pump): placing results, running rank 0's own ranges,
 *     task results.
 *   - comm_lock guards what both threads touch: the list of maps being dealt and, of each map,
 *     the cursor `next`, `stop` and its staged input (read by the dealer to slice ranges; freed
 *     only after the map left the list). Everything else belongs to the Lua thread.
 *   - A task's or map's state is C memory owned by this module, reachable from the Lua object;
 *     a result that arrives after the Lua object was collected is dropped (released).
 */
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "larray.h"
#include "cluster.h"
#include "lsuiro.h"
#include "lvalues.h"

#define MAX_LOCAL_RANGES 2
#define REGION_CACHE_BYTES ((uint64_t)2 << 30)
#define REGION_CACHE_COUNT 256

static const char key_xpool, key_xtask, key_xmap;

/* ---- state ----------------------------------------------------------------------------------- */

/* 1 when key is new to s (or cannot be remembered: then it is sent again rather than fail). */
static int keyset_add(suiro_keyidx *s, uint64_t key) {
  size_t before = s->n;
  return suiro_keyidx_add(s, key) < 0 || s->n > before;
}

typedef struct xhost {
  int up;              /* 1 started, -1 failed, 0 waiting for POOL_UP */
  int workers;
  char err[512];
  suiro_keyidx funcs;  /* content keys whose code this host's pool has */
} xhost;

typedef struct xpool {
  uint32_t id;
  lpool *lp;           /* the local pool (the Lua object is user value 1 of the xpool's) */
  int nranks;
  xhost *hosts;        /* [nranks]; 0 is this host */
  int closed;
  uint64_t rr;         /* task placement */
  uint64_t status_req;
  int status_left;
  msg **status;        /* [nranks] replies */
  struct xpool *next;
} xpool;

typedef struct xregion { /* a large value sent to hosts: held open so its bytes cannot change */
  region_wire id;
  suiro_view view;
  unsigned char *sent; /* [nranks] */
  uint64_t last_use;
  struct xregion *next;
} xregion;

typedef struct xrange { uint64_t b, e; } xrange;

/* A range as dealt: to whom, and whether its results came (each is accepted once, complete, from
 * that rank only). Dealt in order, so the list is sorted by b. */
typedef struct xdealt { uint64_t b, e; int rank, got; } xdealt;

typedef struct xlocal { suiro_map *m; uint64_t b, e; } xlocal;

typedef struct xfail {
  int kind;
  char cls[64];
  char *msg, *tb;
  int64_t index;
  int slot, pid;
} xfail;

typedef struct xmap {
  uint64_t id;
  xpool *pool;
  uint64_t n;
  /* the plan (immutable once dealing starts) */
  plan_wire pw;
  unsigned char *fn;
  unsigned char *in;       /* ARRAY elements, or VALUES data */
  uint64_t *offs;          /* VALUES: n + 1 offsets into in */
  size_t in_es;
  int stream;
  uint64_t width;          /* cells per element (SCALAR 1) */
  /* dealing: under comm_lock */
  uint64_t cursor;         /* the first element not dealt yet */
  uint64_t min_chunk;
  int hosts;               /* ranks taking part */
  int stop;
  int listed;              /* in R.maps */
  xdealt *dealt;           /* [ndealt]: every range dealt, sorted by b */
  size_t ndealt, capdealt;
  /* results (Lua thread) */
  unsigned char *out;      /* typed cells */
  uint64_t col_off[SUIRO_TEMPLATE_MAX_FIELDS];
  struct { const unsigned char *p; uint64_t len; } *slots; /* untyped */
  msg **kept;              /* result messages the slots point into */
  size_t nkept, capkept;
  uint64_t done;
  xrange *ranges;          /* completed, in completion order */
  size_t nranges, capranges, next_range;
  xlocal local[MAX_LOCAL_RANGES];
  int nlocal;
  xfail fail;              /* kind 0: none */
  int user_cancel, killed;
  int finished;            /* every element placed, or stopped and the local ranges ended */
  int ended_sent;
  int closed;              /* its pool was stopped */
  double t0, last_draw;
  struct xmap *next;       /* R.all_maps */
  struct xmap *dnext;      /* R.maps (being dealt), under comm_lock */
} xmap;

typedef struct xtask {
  uint64_t id;
  xpool *pool;
  int host;
  int arrived, released, closed;
  int kind, slot, pid;
  unsigned char *data;
  size_t len;
  int cancel_ack;          /* -1 waiting, 0 / 1 */
  struct xtask *hnext;
} xtask;

#define TASK_BUCKETS 4096

static struct {
  int started;
  int rank, size;
  char **names;            /* host name of each rank (HELLO) */
  int *pids;               /* pid of each rank's process */
  int *cpus;               /* CPUs each rank's workers may use (its affinity) */
  uint32_t next_pool;
  uint64_t next_map, next_task, next_req;
  xpool *pools;
  xmap *maps;              /* being dealt (comm_lock for changes) */
  xmap *all_maps;          /* every live map of this module (Lua thread) */
  xtask *tasks[TASK_BUCKETS];
  xregion *regions;
  uint64_t region_bytes, region_count, use_clock;
  char lost[600];
  int exited;
  int waiting_tasks;       /* remote tasks whose result has not arrived */
} R;

static int interrupted(lua_State *L) {
  if (lpool_signal == SIGTERM && R.size > 1)
    luaL_error(L, "terminated: Open MPI is ending the job (a rank exited or was killed, or mpirun was stopped; "
                  "Open MPI 4.1 ends every rank when one dies)");
  if (lpool_signal) luaL_error(L, "%s", lpool_signal == SIGTERM ? "terminated" : "interrupted!");
  return 0;
}

/* SIGTERM inside a job comes from Open MPI's runtime ending it, usually because a rank died: say
 * so on rank 0 (mpirun names the rank below), then let the previous handler (the suiro command
 * turns it into a Lua error, so pools close) do its work. */
static struct sigaction old_term;
static void on_term(int sig) {
  static const char text[] =
    "suiro: Open MPI is ending the job (SIGTERM on rank 0): a rank exited or was killed, or mpirun was "
    "stopped; Open MPI 4.1 ends every rank when one dies (mpirun's message names it)\n";
  if (R.rank == 0) {
    ssize_t w = write(2, text, sizeof text - 1);
    (void)w;
  }
  if (old_term.sa_handler != SIG_DFL && old_term.sa_handler != SIG_IGN && !(old_term.sa_flags & SA_SIGINFO)) {
    old_term.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

static const char *host_name(int rank) {
  if (rank == R.rank) return comm_host();
  return R.names && R.names[rank] ? R.names[rank] : "?";
}

/* ---- sending code and large values once per host ----------------------------------------------- */

typedef struct ship_ctx {
  lua_State *L;
  xpool *x;
  int host;          /* -1: every remote host */
  int err;
  char msg[300];
} ship_ctx;

static void ship_key_to(ship_ctx *c, int host, uint64_t key) {
  xhost *h = &c->x->hosts[host];
  if (!keyset_add(&h->funcs, key)) return;
  void *code;
  size_t len;
  if (suiro_blob_get(c->x->lp->p, key, &code, &len) != SUIRO_OK) return; /* not ours: the worker says so */
  msg *m = msg_new(MSG_BLOB, len);
  if (m) {
    memcpy(msg_payload(m), code, len);
    m->h.pool = c->x->id;
    m->h.a = key;
    comm_send(host, m);
  }
  free(code);
}

static void ship_key(void *ud, uint64_t key) {
  ship_ctx *c = ud;
  for (int h = 1; h < c->x->nranks; h++)
    if (c->host < 0 || c->host == h) ship_key_to(c, h, key);
}

static xregion *find_xregion(const wire_ref *r) {
  for (xregion *g = R.regions; g; g = g->next)
    if (g->id.offset == r->offset && g->id.length == r->length && strlen(g->id.name) == r->name.len &&
        !memcmp(g->id.name, r->name.ptr, r->name.len))
      return g;
  return NULL;
}

static void drop_xregion(xregion *g) {
  for (xregion **gp = &R.regions; *gp; gp = &(*gp)->next)
    if (*gp == g) {
      *gp = g->next;
      break;
    }
  msg *m = msg_new(MSG_FORGET, sizeof g->id);
  if (m) {
    memcpy(msg_payload(m), &g->id, sizeof g->id);
    for (int r = 1; r < R.size; r++)
      if (g->sent[r]) {
        msg *c = msg_new(MSG_FORGET, sizeof g->id);
        if (c) {
          memcpy(c, m, sizeof *m + sizeof g->id);
          comm_send(r, c);
        }
      }
    msg_free(m);
  }
  R.region_bytes -= g->id.length;
  R.region_count--;
  suiro_buf_unref(g->view.buf);
  free(g->sent);
  free(g);
}

/* A REF of a value about to go to other hosts: it takes the grant its encoder made (nobody here
 * receives that message), and the bytes go once to each host named. */
static void ship_ref(void *ud, const wire_ref *r) {
  ship_ctx *c = ud;
  xregion *g = find_xregion(r);
  suiro_view v;
  if (suiro_zc_open(r, &v) != SUIRO_OK) {
    c->err = 1;
    snprintf(c->msg, sizeof c->msg, "%s", suiro_last_error());
    return;
  }
  if (g) {
    suiro_buf_unref(v.buf); /* the grant; the cache holds its own */
  } else {
    while (R.region_count >= REGION_CACHE_COUNT || (R.regions && R.region_bytes + r->length > REGION_CACHE_BYTES)) {
      xregion *old = R.regions;
      for (xregion *q = R.regions; q; q = q->next)
        if (q->last_use < old->last_use) old = q;
      drop_xregion(old);
    }
    g = calloc(1, sizeof *g);
    unsigned char *sent = calloc((size_t)R.size, 1);
    if (!g || !sent || r->name.len >= sizeof g->id.name) {
      free(g);
      free(sent);
      suiro_buf_unref(v.buf);
      c->err = 1;
      snprintf(c->msg, sizeof c->msg, "out of memory");
      return;
    }
    memcpy(g->id.name, r->name.ptr, r->name.len);
    g->id.offset = r->offset;
    g->id.length = r->length;
    g->view = v;
    g->sent = sent;
    g->next = R.regions;
    R.regions = g;
    R.region_bytes += r->length;
    R.region_count++;
  }
  g->last_use = ++R.use_clock;
  for (int h = 1; h < c->x->nranks; h++) {
    if ((c->host >= 0 && c->host != h) || g->sent[h]) continue;
    /* the bytes go straight from the region's pages (no copy into the message) */
    msg *m = msg_new_ext(MSG_REGION, sizeof g->id, g->view.data, (size_t)g->id.length, g->view.buf);
    if (!m) {
      c->err = 1;
      snprintf(c->msg, sizeof c->msg, "out of memory for a value of %llu bytes", (unsigned long long)g->id.length);
      return;
    }
    memcpy(msg_payload(m), &g->id, sizeof g->id);
    comm_send(h, m);
    g->sent[h] = 1;
  }
}

/* Sends what buf names (code, large values) to host (or every remote host: -1) ahead of buf. */
static void ship(lua_State *L, xpool *x, int host, const void *buf, size_t len, const char *verb) {
  ship_ctx c = { .L = L, .x = x, .host = host };
  if (xwire_scan(buf, len, ship_key, ship_ref, &c) < 0) luaL_error(L, "%s: a malformed buffer", verb);
  if (c.err) luaL_error(L, "%s: a large value cannot go to the other hosts: %s", verb, c.msg);
}

/* ---- tasks ---------------------------------------------------------------------------------- */

typedef struct ltaskx { xtask *t; int state; } ltaskx; /* the Lua object: 0 pending, 1 collected, 2 released */

static void task_insert(xtask *t) {
  size_t b = (size_t)(t->id % TASK_BUCKETS);
  t->hnext = R.tasks[b];
  R.tasks[b] = t;
}

static xtask *task_find(uint64_t id) {
  for (xtask *t = R.tasks[id % TASK_BUCKETS]; t; t = t->hnext)
    if (t->id == id) return t;
  return NULL;
}

static void task_free(xtask *t) {
  for (xtask **tp = &R.tasks[t->id % TASK_BUCKETS]; *tp; tp = &(*tp)->hnext)
    if (*tp == t) {
      *tp = t->hnext;
      break;
    }
  free(t->data);
  free(t);
}

/* ---- maps: dealing (both threads, under comm_lock) ----------------------------------------------- */

static xmap *listed_map(uint64_t id) {
  for (xmap *x = R.maps; x; x = x->dnext)
    if (x->id == id) return x;
  return NULL;
}

/* The next range for rank `rank`, guided self-scheduling: a share of what is left, at least the
 * floor. Recorded as dealt to that rank (0 when the record cannot grow: the map stops dealing, and
 * what was dealt still completes it or fails it). */
static int deal(xmap *x, int rank, uint64_t *b, uint64_t *e) {
  if (x->stop || x->cursor >= x->n) return 0;
  if (x->ndealt == x->capdealt) {
    size_t cap = x->capdealt ? x->capdealt * 2 : 32;
    xdealt *d = realloc(x->dealt, cap * sizeof *d);
    if (!d) return 0;
    x->dealt = d;
    x->capdealt = cap;
  }
  uint64_t left = x->n - x->cursor, h2 = 2 * (uint64_t)(x->hosts > 0 ? x->hosts : 1);
  uint64_t c = (left + h2 - 1) / h2;
  if (c < x->min_chunk) c = x->min_chunk;
  if (c > left) c = left;
  *b = x->cursor;
  *e = x->cursor + c;
  x->cursor = *e;
  x->dealt[x->ndealt++] = (xdealt){ *b, *e, rank, 0 };
  return 1;
}

/* The range dealt that starts at b, or NULL (under comm_lock). */
static xdealt *dealt_at(xmap *x, uint64_t b) {
  size_t lo = 0, hi = x->ndealt;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (x->dealt[mid].b < b) lo = mid + 1;
    else hi = mid;
  }
  return lo < x->ndealt && x->dealt[lo].b == b ? &x->dealt[lo] : NULL;
}

/* A CHUNK message with the input of [b, e) (ranges carry nothing: the host computes them). */
static msg *chunk_msg(const xmap *x, uint64_t b, uint64_t e) {
  uint64_t n = e - b;
  size_t bytes = 0;
  if (x->pw.in_kind == SUIRO_IN_ARRAY) bytes = (size_t)n * x->in_es;
  else if (x->pw.in_kind == SUIRO_IN_VALUES) bytes = ((size_t)n + 1) * 8 + (size_t)(x->offs[e] - x->offs[b]);
  msg *m = msg_new(MSG_CHUNK, bytes);
  if (!m) return NULL;
  m->h.id = x->id;
  m->h.a = b;
  m->h.b = e;
  unsigned char *p = msg_payload(m);
  if (x->pw.in_kind == SUIRO_IN_ARRAY) {
    memcpy(p, x->in + (size_t)b * x->in_es, bytes);
  } else if (x->pw.in_kind == SUIRO_IN_VALUES) {
    uint64_t *o = (uint64_t *)(void *)p;
    for (uint64_t i = 0; i <= n; i++) o[i] = x->offs[b + i] - x->offs[b];
    memcpy(p + ((size_t)n + 1) * 8, x->in + x->offs[b], (size_t)(x->offs[e] - x->offs[b]));
  }
  return m;
}

static msg *nomore_msg(uint64_t id) {
  msg *m = msg_new(MSG_NOMORE, 0);
  if (m) m->h.id = id;
  return m;
}

/* Runs on the communication thread: a host asking for work gets it at once. */
static int intercept(msg *m) {
  if (m->h.type == MSG_FAIL) { /* stop dealing this map now; the Lua side reads the failure later */
    comm_lock();
    xmap *x = listed_map(m->h.id);
    if (x) x->stop = 1;
    comm_unlock();
    return 0;
  }
  if (m->h.type != MSG_NEED) return 0;
  comm_lock();
  xmap *x = listed_map(m->h.id);
  uint64_t b, e;
  msg *r = x && deal(x, m->peer, &b, &e) ? chunk_msg(x, b, e) : nomore_msg(m->h.id);
  comm_unlock();
  if (r) comm_send(m->peer, r);
  msg_free(m);
  return 1;
}

/* ---- maps: results (Lua thread) ---------------------------------------------------------------- */

static void set_fail(xmap *x, int kind, const char *cls, size_t cl, const char *text, size_t tl, const char *tb,
                     size_t tbl, int64_t index, int slot, int pid) {
  if (x->fail.kind) return; /* the first failure wins */
  x->fail.kind = kind;
  snprintf(x->fail.cls, sizeof x->fail.cls, "%.*s", (int)cl, cls);
  x->fail.msg = malloc(tl + 1);
  if (x->fail.msg) {
    memcpy(x->fail.msg, text, tl);
    x->fail.msg[tl] = 0;
  }
  x->fail.tb = malloc(tbl + 1);
  if (x->fail.tb) {
    memcpy(x->fail.tb, tb, tbl);
    x->fail.tb[tbl] = 0;
  }
  x->fail.index = index;
  x->fail.slot = slot;
  x->fail.pid = pid;
}

static void fail_from_info(xmap *x, const suiro_error_info *e, int kind) {
  set_fail(x, kind, e->cls.ptr, e->cls.len, e->message.ptr, e->message.len, e->traceback.ptr, e->traceback.len,
           e->index, e->slot, e->pid);
}

static void send_map_end(xmap *x, uint64_t how) {
  if (x->ended_sent) return;
  x->ended_sent = 1;
  msg *m = msg_new(MSG_MAP_END, 0);
  if (!m) return;
  m->h.id = x->id;
  m->h.a = how;
  comm_send_all(m);
  msg_free(m);
}

static void unlist(xmap *x) {
  comm_lock();
  x->stop = 1;
  if (x->listed) {
    for (xmap **xp = &R.maps; *xp; xp = &(*xp)->dnext)
      if (*xp == x) {
        *xp = x->dnext;
        break;
      }
    x->listed = 0;
  }
  comm_unlock();
  /* the dealer cannot see it any more: its staged input can go */
  free(x->in);
  free(x->offs);
  x->in = NULL;
  x->offs = NULL;
}

/* Stops dealing and the local ranges (a failure, cancel or kill); the remote hosts are told. */
static void stop_map(xmap *x, uint64_t how) {
  comm_lock();
  x->stop = 1;
  comm_unlock();
  for (int i = 0; i < x->nlocal; i++) {
    if (how == 2) suiro_map_kill(x->local[i].m);
    else suiro_map_cancel(x->local[i].m);
  }
  if (x->pool && x->pool->nranks > 1) send_map_end(x, how);
}

static void check_finished(xmap *x) {
  if (x->finished) return;
  if (x->done >= x->n || (x->fail.kind && x->nlocal == 0)) {
    x->finished = 1;
    if (x->done >= x->n && !x->fail.kind) send_map_end(x, 0);
    unlist(x);
  }
}

static void add_range(xmap *x, uint64_t b, uint64_t e) {
  if (x->nranges == x->capranges) {
    size_t cap = x->capranges ? x->capranges * 2 : 16;
    xrange *r = realloc(x->ranges, cap * sizeof *r);
    if (!r) return; /* streaming loses this range's order; collect still has it */
    x->ranges = r;
    x->capranges = cap;
  }
  x->ranges[x->nranges++] = (xrange){ b, e };
}

/* A RESULT that breaks the protocol fails the map, naming the rank and what was wrong. */
static void reject(xmap *x, const msg *m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reject(xmap *x, const msg *m, const char *fmt, ...) {
  char why[300], text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  int n = snprintf(text, sizeof text, "the map's results from host %s (rank %d) for elements %llu..%llu were refused: %s",
                   host_name(m->peer), m->peer, (unsigned long long)m->h.a + 1, (unsigned long long)m->h.b, why);
  set_fail(x, SUIRO_RESULT_ERROR, SUIRO_CLASS_REMOTE, strlen(SUIRO_CLASS_REMOTE), text,
           n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, "", 0, -1, -1, 0);
  stop_map(x, 1);
  check_finished(x);
}

/* The payload bytes a RESULT of n elements must have (typed cells), or 0 for untyped results. */
static size_t typed_bytes(const xmap *x, uint64_t n) {
  const suiro_template *t = &x->pw.tpl;
  if (!x->pw.has_tpl) return 0;
  if (t->kind != SUIRO_OUT_RECORD) return (size_t)n * cluster_tpl_elem_bytes(t);
  size_t bytes = 0;
  for (int k = 0; k < t->nfields; k++) bytes += align8z((size_t)n * wire_type_size(t->fields[k].type));
  return bytes;
}

/* Writes a RESULT message's cells into the map's output (takes m). A range's results are taken
 * only from the rank it was dealt to, once, and complete; anything else fails the map. */
static void place(xmap *x, msg *m) {
  uint64_t b = m->h.a, e = m->h.b, n = e - b;
  if (x->finished || x->fail.kind) {
    msg_free(m);
    return;
  }
  comm_lock();
  xdealt *d = e > b && e <= x->n ? dealt_at(x, b) : NULL;
  xdealt seen = d ? *d : (xdealt){ 0, 0, -1, 0 };
  if (d && d->e == e && d->rank == m->peer && !d->got) d->got = 1;
  comm_unlock();
  if (!d || seen.e != e) {
    reject(x, m, "no range of that extent was dealt");
    msg_free(m);
    return;
  }
  if (seen.rank != m->peer) {
    reject(x, m, "that range was dealt to host %s (rank %d)", host_name(seen.rank), seen.rank);
    msg_free(m);
    return;
  }
  if (seen.got) {
    reject(x, m, "they came twice");
    msg_free(m);
    return;
  }
  const unsigned char *p = msg_payload(m);
  size_t len = (size_t)m->h.len;
  if (x->pw.has_tpl) {
    size_t want = typed_bytes(x, n);
    if (len != want) {
      reject(x, m, "%zu bytes of cells, not the %zu of %llu elements", len, want, (unsigned long long)n);
      msg_free(m);
      return;
    }
    const suiro_template *t = &x->pw.tpl;
    if (t->kind == SUIRO_OUT_RECORD) {
      size_t at = 0;
      for (int k = 0; k < t->nfields; k++) {
        size_t es = wire_type_size(t->fields[k].type), cb = (size_t)n * es;
        memcpy(x->out + x->col_off[k] + (size_t)b * es, p + at, cb);
        at += align8z(cb);
      }
    } else if (want) {
      memcpy(x->out + (size_t)b * cluster_tpl_elem_bytes(t), p, want);
    }
    msg_free(m);
  } else {
    const uint64_t *offs = (const uint64_t *)(const void *)p;
    size_t head = ((size_t)n + 1) * 8;
    int bad = len < head || offs[0] != 0 || offs[n] > len - head;
    for (uint64_t i = 0; i < n && !bad; i++) bad = offs[i + 1] < offs[i] || offs[i] % 8 != 0;
    if (bad) {
      reject(x, m, "their offsets do not describe %llu results in %zu bytes", (unsigned long long)n, len);
      msg_free(m);
      return;
    }
    if (x->nkept == x->capkept) {
      size_t cap = x->capkept ? x->capkept * 2 : 16;
      msg **k = realloc(x->kept, cap * sizeof *k);
      if (!k) {
        msg_free(m);
        set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, "out of memory for the results", 29, "", 0, -1, -1, 0);
        return;
      }
      x->kept = k;
      x->capkept = cap;
    }
    x->kept[x->nkept++] = m;
    for (uint64_t i = 0; i < n; i++) {
      x->slots[b + i].p = p + head + offs[i];
      x->slots[b + i].len = offs[i + 1] - offs[i];
    }
  }
  x->done += n;
  add_range(x, b, e);
  check_finished(x);
}

static void on_fail_msg(xmap *x, msg *m) {
  suiro_error_info e;
  int kind = (int)m->h.a;
  if (suiro_error_read(SUIRO_RESULT_ERROR, msg_payload(m), (size_t)m->h.len, &e) == 0) {
    e.slot = (int)(int64_t)m->h.b;
    e.pid = (int)(int64_t)m->h.c;
    fail_from_info(x, &e, kind);
  } else {
    set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, "a host reported a failure that cannot be read", 46, "", 0, -1, -1, 0);
  }
  stop_map(x, 1);
  check_finished(x);
}

/* Starts rank 0's own range [b, e) on the local pool: a plan of its own with index_base b. */
static int start_local(xmap *x, uint64_t b, uint64_t e, char *err, size_t cap) {
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  s.fn = x->fn;
  s.fn_len = (size_t)x->pw.fn_len;
  s.n = e - b;
  s.in_kind = x->pw.in_kind;
  s.index_base = b;
  s.seeded = (int)x->pw.seeded;
  s.seed = x->pw.seed;
  s.tpl = x->pw.has_tpl ? &x->pw.tpl : NULL;
  uint64_t *offs = NULL;
  if (s.in_kind == SUIRO_IN_ARRAY) {
    s.in_type = x->pw.in_type;
    s.in_data = x->in + (size_t)b * x->in_es;
  } else if (s.in_kind == SUIRO_IN_RANGE) {
    s.start = (int64_t)((uint64_t)x->pw.start + b * (uint64_t)x->pw.step);
    s.step = x->pw.step;
  } else {
    offs = malloc(((size_t)(e - b) + 1) * 8);
    if (!offs) return snprintf(err, cap, "out of memory"), -1;
    for (uint64_t i = 0; i <= e - b; i++) offs[i] = x->offs[b + i] - x->offs[b];
    s.in_offsets = offs;
    s.in_data = x->in + x->offs[b];
    s.in_len = (size_t)offs[e - b];
  }
  suiro_map *m;
  suiro_status st = suiro_plan_create(x->pool->lp->p, &s, &m);
  free(offs);
  if (st == SUIRO_OK) {
    st = suiro_map_start(m, x->pool->lp->default_timeout);
    if (st != SUIRO_OK) suiro_map_free(m);
  }
  if (st != SUIRO_OK) return snprintf(err, cap, "%s", suiro_last_error()), -1;
  x->local[x->nlocal++] = (xlocal){ m, b, e };
  return 0;
}

/* Rank 0's share: collects its finished ranges and starts the next when the running one is half
 * done. */
static void pump_local(lua_State *L, xmap *x) {
  for (int i = 0; i < x->nlocal;) {
    xlocal *lr = &x->local[i];
    suiro_status st = suiro_map_wait(lr->m, 0);
    if (st == SUIRO_TIMEOUT) {
      i++;
      continue;
    }
    suiro_error_info e;
    char err[400];
    if (st == SUIRO_CLOSED) {
      set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, "the local pool was stopped", 26, "", 0, -1, -1, 0);
    } else if (st != SUIRO_OK) {
      const char *m = suiro_last_error();
      set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, m, strlen(m), "", 0, -1, -1, 0);
    } else if (suiro_map_failure(lr->m, &e)) {
      msg *f = cluster_chunk_failure(x->id, &e, cluster_failure_kind(&e), lr->b, NULL, 0);
      if (f) on_fail_msg(x, f), msg_free(f);
    } else {
      msg *r = cluster_chunk_result(lr->m, x->id, lr->b, lr->e, 0, err, sizeof err);
      if (r) place(x, r);
      else set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, err, strlen(err), "", 0, -1, -1, 0);
    }
    suiro_map_free(lr->m);
    x->local[i] = x->local[--x->nlocal];
    if (x->fail.kind) stop_map(x, 1);
  }
  while (!x->finished && !x->fail.kind && x->nlocal < MAX_LOCAL_RANGES) {
    /* the next range once the running one is half done (as the hosts do, serve.c) */
    if (x->nlocal == 1 && suiro_map_done(x->local[0].m) * 2 < x->local[0].e - x->local[0].b) break;
    uint64_t b, e;
    comm_lock();
    int got = x->listed && deal(x, 0, &b, &e);
    comm_unlock();
    if (!got) break;
    char m[400];
    if (start_local(x, b, e, m, sizeof m) != 0) {
      char text[600];
      snprintf(text, sizeof text, "elements %llu..%llu could not start on host %s: %s", (unsigned long long)b + 1,
               (unsigned long long)e, comm_host(), m);
      set_fail(x, SUIRO_RESULT_ERROR, "remote", 6, text, strlen(text), "", 0, -1, -1, 0);
      stop_map(x, 1);
    }
  }
  check_finished(x);
}

/* ---- the pump: what arrived, and rank 0's own ranges -------------------------------------------- */

static xmap *any_map(uint64_t id) {
  for (xmap *x = R.all_maps; x; x = x->next)
    if (x->id == id) return x;
  return NULL;
}

static xpool *find_xpool(uint32_t id) {
  for (xpool *x = R.pools; x; x = x->next)
    if (x->id == id) return x;
  return NULL;
}

static void lost_everything(const char *why) {
  if (R.lost[0]) return;
  snprintf(R.lost, sizeof R.lost, "%s", why);
  for (xmap *x = R.all_maps; x; x = x->next) {
    if (x->finished) continue;
    set_fail(x, SUIRO_RESULT_ERROR, "host_lost", 9, why, strlen(why), "", 0, -1, -1, 0);
    stop_map(x, 1);
  }
}

static void handle(msg *m) {
  switch (m->h.type) {
  case MSG_HELLO:
    if (R.names && m->peer > 0 && m->peer < R.size && m->h.len > 0) {
      free(R.names[m->peer]);
      R.names[m->peer] = strndup((const char *)msg_payload(m), (size_t)m->h.len);
      R.pids[m->peer] = (int)m->h.a;
      R.cpus[m->peer] = (int)m->h.b;
    }
    break;
  case MSG_POOL_UP: {
    xpool *x = find_xpool(m->h.pool);
    if (x && m->peer > 0 && m->peer < x->nranks) {
      xhost *h = &x->hosts[m->peer];
      h->up = m->h.a ? 1 : -1;
      h->workers = (int)m->h.b;
      if (!m->h.a) snprintf(h->err, sizeof h->err, "%.*s", (int)m->h.len, (const char *)msg_payload(m));
    }
    break;
  }
  case MSG_RESULT: {
    xmap *x = any_map(m->h.id);
    if (x) {
      place(x, m);
      return;
    }
    break;
  }
  case MSG_FAIL: {
    xmap *x = any_map(m->h.id);
    if (x && !x->finished) on_fail_msg(x, m);
    break;
  }
  case MSG_TRESULT: {
    xtask *t = task_find(m->h.id);
    if (!t || t->arrived) break;
    if (!t->closed) R.waiting_tasks--;
    if (t->released) {
      task_free(t);
      break;
    }
    t->arrived = 1;
    t->kind = (int)m->h.a;
    t->slot = (int)(int64_t)m->h.b;
    t->pid = (int)(int64_t)m->h.c;
    t->len = (size_t)m->h.len;
    if (m->peer != t->host) { /* a task's result is taken only from the rank it was sent to */
      char text[400];
      int n = snprintf(text, sizeof text, "host %s (rank %d) sent a result for a task that runs on host %s (rank %d)",
                       host_name(m->peer), m->peer, host_name(t->host), t->host);
      t->kind = SUIRO_RESULT_ERROR;
      t->slot = -1;
      t->pid = 0;
      t->len = 0;
      t->data = malloc(1024);
      if (t->data)
        t->len = suiro_error_encode(t->data, 1024, WIRE_CSTR(SUIRO_CLASS_REMOTE),
                                    (wire_str){ text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1 },
                                    WIRE_CSTR(""), -1);
      break;
    }
    t->data = malloc(t->len ? t->len : 8);
    if (t->data) memcpy(t->data, msg_payload(m), t->len);
    else t->len = 0;
    break;
  }
  case MSG_TCANCEL_ACK: {
    xtask *t = task_find(m->h.id);
    if (t && m->peer == t->host) t->cancel_ack = (int)m->h.a;
    break;
  }
  case MSG_STATUS_REPLY: {
    xpool *x = find_xpool(m->h.pool);
    if (x && m->h.id == x->status_req && m->peer > 0 && m->peer < x->nranks && x->status && !x->status[m->peer]) {
      x->status[m->peer] = m;
      x->status_left--;
      return;
    }
    break;
  }
  case MSG_LOST: lost_everything((const char *)msg_payload(m)); break;
  default: break;
  }
  msg_free(m);
}

static void pump(lua_State *L) {
  msg *m;
  while ((m = comm_recv())) handle(m);
  int busy = R.waiting_tasks > 0;
  for (xmap *x = R.all_maps; x; x = x->next) {
    if (!x->finished && x->nlocal + (x->listed ? 1 : 0) > 0) pump_local(L, x);
    if (!x->finished) busy = 1;
  }
  comm_set_eager(busy);
}

/* Sleeps until a message arrives or a local pool has results, at most `timeout` (and 100 ms, to
 * see signals). */
static void sleep_events(lua_State *L, double timeout) {
  struct pollfd fds[65];
  nfds_t n = 0;
  fds[n++] = (struct pollfd){ .fd = comm_inbox_fd(), .events = POLLIN };
  for (xpool *x = R.pools; x && n < 65; x = x->next)
    if (!x->closed && x->lp->p) fds[n++] = (struct pollfd){ .fd = suiro_pool_eventfd(x->lp->p), .events = POLLIN };
  /* armed: what lands from here on makes a fd readable; what landed before, the pump sees */
  pump(L);
  int ranging = 0; /* rank 0's own ranges running: look at their progress often */
  for (xmap *x = R.all_maps; x && !ranging; x = x->next) ranging = x->nlocal > 0;
  double cap = ranging ? 0.002 : 0.1;
  if (timeout > cap || timeout < 0) timeout = cap;
  struct timespec ts = { (time_t)timeout, (long)((timeout - floor(timeout)) * 1e9) };
  ppoll(fds, n, &ts, NULL);
  for (xpool *x = R.pools; x; x = x->next)
    if (!x->closed && x->lp->p) suiro_pool_event_ack(x->lp->p);
  interrupted(L);
}

/* ---- pools ------------------------------------------------------------------------------------ */

typedef struct lxpool { xpool *x; } lxpool;

static xpool *check_xpool(lua_State *L, int idx) {
  lxpool *u = lsuiro_checkud(L, idx, &key_xpool, "suiro.mpi_pool");
  if (!u->x) luaL_error(L, "this MPI pool was stopped");
  return u->x;
}

static void close_pool(xpool *x) {
  if (x->closed) return;
  x->closed = 1;
  for (xmap *m = R.all_maps; m; m = m->next) {
    if (m->pool != x || m->finished) continue;
    stop_map(m, 1);
    for (int i = 0; i < m->nlocal; i++) suiro_map_free(m->local[i].m);
    m->nlocal = 0;
    m->closed = 1;
    m->finished = 1;
    unlist(m);
  }
  for (int b = 0; b < TASK_BUCKETS; b++)
    for (xtask *t = R.tasks[b]; t; t = t->hnext)
      if (t->pool == x && !t->closed) {
        if (!t->arrived) R.waiting_tasks--;
        t->closed = 1;
      }
  if (x->nranks > 1) {
    msg *m = msg_new(MSG_POOL_STOP, 0);
    if (m) {
      m->h.pool = x->id;
      comm_send_all(m);
      msg_free(m);
    }
  }
}

/* core.pool_new(local_pool, options_wire, start_timeout) -> xpool: the same pool on every host */
static int l_pool_new(lua_State *L) {
  lpool *lp = lpool_check(L, 1);
  size_t olen;
  const char *opts = luaL_checklstring(L, 2, &olen);
  double timeout = luaL_optnumber(L, 3, 10);
  lxpool *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->x = NULL;
  lsuiro_setmt(L, &key_xpool);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the local pool lives as long as this */
  xpool *x = calloc(1, sizeof *x);
  if (!x) return luaL_error(L, "suiro.pool: out of memory");
  x->id = ++R.next_pool;
  x->lp = lp;
  x->nranks = R.size;
  x->hosts = calloc((size_t)R.size, sizeof *x->hosts);
  if (!x->hosts) {
    free(x);
    return luaL_error(L, "suiro.pool: out of memory");
  }
  suiro_pool_stats st;
  suiro_pool_status(lp->p, &st, NULL, 0);
  x->hosts[0].up = 1;
  x->hosts[0].workers = st.workers;
  x->next = R.pools;
  R.pools = x;
  u->x = x;
  if (R.size > 1) {
    msg *m = msg_new(MSG_POOL_NEW, olen);
    if (!m) return luaL_error(L, "suiro.pool: out of memory");
    memcpy(msg_payload(m), opts, olen);
    m->h.pool = x->id;
    comm_send_all(m);
    msg_free(m);
    double deadline = suiro_now() + timeout + 5;
    for (;;) {
      pump(L);
      int waiting = 0;
      for (int r = 1; r < R.size; r++) {
        if (x->hosts[r].up < 0) {
          close_pool(x);
          return luaL_error(L, "suiro.pool: host %s (rank %d): %s", host_name(r), r, x->hosts[r].err);
        }
        if (x->hosts[r].up == 0) waiting = r;
      }
      if (!waiting) break;
      if (R.lost[0]) return luaL_error(L, "suiro.pool: %s", R.lost);
      if (suiro_now() > deadline) {
        close_pool(x);
        return luaL_error(L, "suiro.pool: host %s (rank %d) did not start its pool within %.0f s", host_name(waiting),
                          waiting, timeout + 5);
      }
      sleep_events(L, 0.05);
    }
  }
  return 1;
}

static int l_pool_stop(lua_State *L) {
  lxpool *u = lsuiro_checkud(L, 1, &key_xpool, "suiro.mpi_pool");
  if (u->x) close_pool(u->x);
  return 0;
}

/* core.place(x) -> the host of the next task: round robin over the hosts whose pool started. */
static int l_place(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  int h = (int)(x->rr++ % (uint64_t)x->nranks);
  lua_pushinteger(L, h);
  return 1;
}

/* ---- remote tasks ------------------------------------------------------------------------------ */

static ltaskx *check_xtask(lua_State *L, int idx) { return lsuiro_checkud(L, idx, &key_xtask, "suiro.task"); }

/* core.submit(x, host, f, ...) -> a task running on host `host` */
static int l_submit(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  lua_Integer host = luaL_checkinteger(L, 2);
  if (host < 1 || host >= x->nranks) return luaL_error(L, "pool:submit: no host %I", host);
  if (x->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  int n = lua_gettop(L) - 3;
  if (n < 0) return luaL_error(L, "pool:submit: argument 1 must be a function or call spec, got no value");
  _Alignas(8) unsigned char stack[512];
  wire_writer w;
  wire_writer_init(&w, stack, sizeof stack);
  lcodec_ctx c = { .L = L, .pool = x->lp, .verb = "submit" };
  lcodec_encode_task(&c, 3, 4, n, &w);
  const void *buf;
  size_t len;
  if (wire_writer_finish(&w, &buf, &len) != WIRE_OK) {
    wire_writer_free(&w);
    return luaL_error(L, "pool:submit: %s", wire_writer_error(&w));
  }
  msg *m = msg_new(MSG_TASK, len);
  xtask *t = calloc(1, sizeof *t);
  if (!m || !t) {
    suiro_zc_revoke(buf, len);
    wire_writer_free(&w);
    free(m);
    free(t);
    return luaL_error(L, "pool:submit: out of memory");
  }
  memcpy(msg_payload(m), buf, len);
  wire_writer_free(&w);
  ship(L, x, (int)host, msg_payload(m), len, "pool:submit"); /* may raise: nothing was sent */
  t->id = ++R.next_task;
  t->pool = x;
  t->host = (int)host;
  t->cancel_ack = -1;
  task_insert(t);
  R.waiting_tasks++;
  comm_set_eager(1);
  m->h.pool = x->id;
  m->h.id = t->id;
  comm_send((int)host, m);
  ltaskx *k = lua_newuserdatauv(L, sizeof *k, 1);
  k->t = t;
  k->state = 0;
  lsuiro_setmt(L, &key_xtask);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

static int push_task_result(lua_State *L, xtask *t) {
  suiro_result r = { .kind = t->kind, .data = t->data, .len = t->len, .worker_slot = t->slot, .worker_pid = t->pid };
  if (r.kind == SUIRO_RESULT_VALUE) {
    int top = lua_gettop(L);
    lcodec_decode_values(L, r.data, r.len);
    return lua_gettop(L) - top;
  }
  lerror_push_result(L, &r, 0);
  return lerror_raise(L);
}

/* task:collect([timeout]) */
static int l_task_collect(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state == 1) return luaL_error(L, "task:collect: this task was collected already");
  if (k->state == 2) return luaL_error(L, "task:collect: this task was released");
  xtask *t = k->t;
  double timeout = lua_isnoneornil(L, 2) ? t->pool->lp->default_timeout : lpool_seconds(L, 2, "task:collect", "timeout");
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  for (;;) {
    pump(L);
    if (t->arrived) break;
    if (t->closed) {
      lua_pushnil(L);
      lua_pushliteral(L, "closed");
      return 2;
    }
    if (R.lost[0]) { /* class host_lost, as the maps' */
      char text[800];
      int n = snprintf(text, sizeof text, "host %s (rank %d): %s", host_name(t->host), t->host, R.lost);
      lerror_push(L, "host_lost", 9, text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, "", 0, -1);
      return lua_error(L);
    }
    double left = deadline - suiro_now();
    if (left <= 0) {
      lua_pushnil(L);
      lua_pushliteral(L, "timeout");
      return 2;
    }
    sleep_events(L, left);
  }
  k->state = 1;
  k->t = NULL;
  lua_settop(L, 0);
  /* decode from a Lua-owned copy, so the C state is freed even when decoding raises */
  lbuf *keep = lbuf_push(L);
  lbuf_put(L, keep, t->data ? (const void *)t->data : "", t->len);
  xtask copy = *t;
  copy.data = keep->len ? keep->p : (unsigned char *)""; /* an empty result: no NULL for the decoder */
  task_free(t);
  int base = lua_gettop(L);
  int n = push_task_result(L, &copy);
  lua_remove(L, base);
  return n;
}

static int l_task_ready(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  pump(L);
  lua_pushboolean(L, k->t->arrived || k->t->closed);
  return 1;
}

static int l_task_cancel(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0 || k->t->arrived || k->t->closed) {
    lua_pushboolean(L, 0);
    return 1;
  }
  xtask *t = k->t;
  msg *m = msg_new(MSG_TCANCEL, 0);
  if (!m) return luaL_error(L, "task:cancel: out of memory");
  m->h.id = t->id;
  t->cancel_ack = -1;
  comm_send(t->host, m);
  double deadline = suiro_now() + 10;
  while (t->cancel_ack < 0 && !t->closed && !R.lost[0] && suiro_now() < deadline) {
    pump(L);
    if (t->cancel_ack >= 0) break;
    sleep_events(L, 0.05);
  }
  lua_pushboolean(L, t->cancel_ack == 1);
  return 1;
}

static int l_task_kill(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) return luaL_error(L, "task:kill: this task was %s already", k->state == 1 ? "collected" : "released");
  if (k->t->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  if (!k->t->arrived) {
    msg *m = msg_new(MSG_TKILL, 0);
    if (!m) return luaL_error(L, "task:kill: out of memory");
    m->h.id = k->t->id;
    comm_send(k->t->host, m);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_task_gc(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  if (k->state != 0) return 0;
  k->state = 2;
  xtask *t = k->t;
  k->t = NULL;
  if (t->arrived || t->closed || R.exited) task_free(t);
  else t->released = 1; /* freed when its result arrives */
  return 0;
}

static int l_task_tostring(lua_State *L) {
  ltaskx *k = check_xtask(L, 1);
  static const char *states[] = { "pending", "collected", "released" };
  if (k->t) lua_pushfstring(L, "suiro.task(%p, %s, host %s)", (void *)k, states[k->state], host_name(k->t->host));
  else lua_pushfstring(L, "suiro.task(%p, %s)", (void *)k, states[k->state]);
  return 1;
}

/* core.task_host(task) -> the rank running it (nil: not a remote task) */
static int l_task_host(lua_State *L) {
  ltaskx *k = lsuiro_testud(L, 1, &key_xtask);
  if (!k || !k->t) lua_pushnil(L);
  else lua_pushinteger(L, k->t->host);
  return 1;
}

/* core.wait(timeout): pumps once and sleeps until something arrives (collect_any / collect_all) */
static int l_wait(lua_State *L) {
  double t = luaL_optnumber(L, 1, 0.1);
  pump(L);
  if (t > 0) sleep_events(L, t);
  if (R.lost[0]) return luaL_error(L, "%s", R.lost);
  return 0;
}

/* ---- maps ---------------------------------------------------------------------------------------- */

typedef struct lxmap { xmap *x; int collected; uint64_t n; } lxmap;

static lxmap *check_xmap(lua_State *L, int idx) { return lsuiro_checkud(L, idx, &key_xmap, "suiro.map"); }

static void free_xmap(xmap *x) {
  for (int i = 0; i < x->nlocal; i++) suiro_map_free(x->local[i].m);
  x->nlocal = 0;
  if (!x->finished && x->pool && !x->pool->closed) send_map_end(x, 1);
  unlist(x);
  for (xmap **xp = &R.all_maps; *xp; xp = &(*xp)->next)
    if (*xp == x) {
      *xp = x->next;
      break;
    }
  for (size_t i = 0; i < x->nkept; i++) msg_free(x->kept[i]);
  free(x->kept);
  free(x->slots);
  free(x->out);
  free(x->fn);
  free(x->ranges);
  free(x->dealt);
  free(x->fail.msg);
  free(x->fail.tb);
  free(x);
}

/* Inlines the references of VALUES elements: an element goes to one host, so its large values
 * travel inline (rank 0's own ranges get the same bytes). */
static void inline_values(lua_State *L, suiro_plan_spec *s, unsigned char **data, uint64_t **offs) {
  lbuf *nd = lbuf_push(L);
  uint64_t *o = malloc(((size_t)s->n + 1) * 8);
  if (!o) luaL_error(L, "pool:map: out of memory");
  o[0] = 0;
  char err[300];
  for (uint64_t i = 0; i < s->n; i++) {
    const unsigned char *b = (const unsigned char *)s->in_data + s->in_offsets[i];
    size_t len = (size_t)(s->in_offsets[i + 1] - s->in_offsets[i]);
    void *c;
    size_t cl;
    int rc = xwire_inline_all(b, len, &c, &cl, err, sizeof err);
    if (rc < 0) {
      free(o);
      luaL_error(L, "pool:map: element %I: %s", (lua_Integer)i + 1, err);
    }
    if (rc > 0) {
      lbuf_put(L, nd, c, cl);
      free(c);
    } else {
      lbuf_put(L, nd, b, len);
    }
    o[i + 1] = nd->len;
  }
  *data = malloc(nd->len ? nd->len : 8);
  if (!*data) {
    free(o);
    luaL_error(L, "pool:map: out of memory");
  }
  memcpy(*data, nd->p, nd->len);
  *offs = o;
  lua_pop(L, 1);
}

/* core.map(x, f, xs, spec) -> a map running on every host */
static int l_map(lua_State *L) {
  xpool *xp = check_xpool(L, 1);
  if (xp->closed) {
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  suiro_plan_spec s;
  lmap_stage(L, xp->lp, &s); /* stack: x f xs spec | fn data offs */
  lxmap *u = lua_newuserdatauv(L, sizeof *u, 2);
  u->x = NULL;
  u->collected = 0;
  u->n = 0;
  lsuiro_setmt(L, &key_xmap);
  int self = lua_gettop(L);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, self, 1);
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, self, 2);
  xmap *x = calloc(1, sizeof *x);
  if (!x) return luaL_error(L, "pool:map: out of memory");
  x->id = ++R.next_map;
  x->pool = xp;
  x->n = s.n;
  u->n = s.n;
  x->pw.n = s.n;
  x->pw.in_kind = s.in_kind;
  x->pw.in_type = s.in_type;
  x->pw.start = s.start;
  x->pw.step = s.step;
  u->x = x;
  x->next = R.all_maps; /* from here on free_xmap cleans up */
  R.all_maps = x;
  lua_getfield(L, 4, "template");
  if (!lua_isnil(L, -1)) {
    char err[256];
    if (lembed_template_read(L, -1, &x->pw.tpl, err, sizeof err) != 0) return luaL_error(L, "pool:map: %s", err);
    uint64_t w;
    if (suiro_template_check(&x->pw.tpl, &w, err, sizeof err) != 0) return luaL_error(L, "pool:map: %s", err);
    x->pw.has_tpl = 1;
    x->width = w;
  }
  lua_pop(L, 1);
  lua_getfield(L, 4, "seed");
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1)) return luaL_error(L, "pool:map: seed must be an integer, got %s", luaL_typename(L, -1));
    x->pw.seeded = 1;
    x->pw.seed = (uint64_t)lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  lua_getfield(L, 4, "stream");
  x->stream = lua_toboolean(L, -1);
  lua_pop(L, 1);
  /* the staged plan, owned here (the dealer slices it on the comm thread) */
  x->pw.fn_len = s.fn_len;
  x->fn = malloc(s.fn_len);
  if (!x->fn) return luaL_error(L, "pool:map: out of memory");
  memcpy(x->fn, s.fn, s.fn_len);
  if (s.in_kind == SUIRO_IN_ARRAY) {
    x->in_es = wire_type_size(s.in_type);
    uint64_t bytes;
    if (__builtin_mul_overflow(s.n, (uint64_t)x->in_es, &bytes) || bytes > SIZE_MAX / 2)
      return luaL_error(L, "pool:map: %I elements are too many", (lua_Integer)s.n);
    x->in = malloc(bytes ? (size_t)bytes : 8);
    if (!x->in) return luaL_error(L, "pool:map: out of memory for %I elements", (lua_Integer)s.n);
    if (bytes) memcpy(x->in, s.in_data, (size_t)bytes);
  } else if (s.in_kind == SUIRO_IN_VALUES) {
    inline_values(L, &s, &x->in, &x->offs);
  }
  /* outputs, every size checked before use */
  uint64_t out_bytes = 0;
  if (x->pw.has_tpl) {
    const suiro_template *t = &x->pw.tpl;
    if (t->kind == SUIRO_OUT_RECORD) {
      for (int k = 0; k < t->nfields; k++) {
        uint64_t cb;
        x->col_off[k] = out_bytes;
        if (__builtin_mul_overflow(s.n, (uint64_t)wire_type_size(t->fields[k].type), &cb) ||
            __builtin_add_overflow(out_bytes, cb + 7, &out_bytes))
          return luaL_error(L, "pool:map: the output of %I elements overflows", (lua_Integer)s.n);
        out_bytes &= ~(uint64_t)7;
      }
    } else if (__builtin_mul_overflow(s.n, (uint64_t)cluster_tpl_elem_bytes(t), &out_bytes)) {
      return luaL_error(L, "pool:map: the output of %I elements overflows", (lua_Integer)s.n);
    }
    if (out_bytes > SIZE_MAX / 2) return luaL_error(L, "pool:map: the output of %I elements is too large", (lua_Integer)s.n);
    x->out = malloc(out_bytes ? (size_t)out_bytes : 8);
    if (!x->out) return luaL_error(L, "pool:map: out of memory for the output of %I elements", (lua_Integer)s.n);
  } else {
    if (s.n > SIZE_MAX / 32) return luaL_error(L, "pool:map: %I elements are too many", (lua_Integer)s.n);
    x->slots = calloc(s.n ? (size_t)s.n : 1, sizeof *x->slots);
    if (!x->slots) return luaL_error(L, "pool:map: out of memory for %I results", (lua_Integer)s.n);
  }
  /* hosts taking part: every rank whose pool started */
  int hosts = 0;
  for (int r = 0; r < xp->nranks; r++)
    if (xp->hosts[r].up == 1) hosts++;
  x->hosts = hosts;
  uint64_t w = (uint64_t)(xp->hosts[0].workers > 0 ? xp->hosts[0].workers : 1);
  x->min_chunk = s.n / (32 * (uint64_t)hosts * w);
  if (x->min_chunk < 1) x->min_chunk = 1;
  x->t0 = suiro_now();
  /* dealing starts: the comm thread may hand out ranges from here on */
  comm_lock();
  x->listed = 1;
  x->dnext = R.maps;
  R.maps = x;
  comm_unlock();
  /* the plan goes to every host, after the code and large values its function names, with its
   * first range (the rest they ask for) */
  if (xp->nranks > 1 && s.n > 0) {
    ship(L, xp, -1, x->fn, (size_t)x->pw.fn_len, "pool:map");
    msg *pm = msg_new(MSG_PLAN, sizeof x->pw + (size_t)x->pw.fn_len);
    if (!pm) return luaL_error(L, "pool:map: out of memory");
    memcpy(msg_payload(pm), &x->pw, sizeof x->pw);
    memcpy(msg_payload(pm) + sizeof x->pw, x->fn, (size_t)x->pw.fn_len);
    pm->h.pool = xp->id;
    pm->h.id = x->id;
    comm_send_all(pm);
    msg_free(pm);
    for (int r = 1; r < xp->nranks; r++) {
      if (xp->hosts[r].up != 1) continue;
      uint64_t b, e;
      comm_lock();
      msg *c = deal(x, r, &b, &e) ? chunk_msg(x, b, e) : nomore_msg(x->id);
      comm_unlock();
      if (c) comm_send(r, c);
    }
  }
  pump_local(L, x); /* rank 0's first ranges */
  lua_settop(L, self);
  return 1;
}

/* The timeout of a collect: the argument, else the map's timeout option, else the pool's. */
static double map_timeout(lua_State *L, int arg, xmap *x) {
  if (!lua_isnoneornil(L, arg)) return lpool_seconds(L, arg, "map:collect", "timeout");
  lua_getiuservalue(L, 1, 2);
  lua_getfield(L, -1, "timeout_s");
  double t = -1;
  if (!lua_isnil(L, -1)) t = lua_tonumber(L, -1) >= 1e12 ? -1 : lua_tonumber(L, -1);
  lua_pop(L, 2);
  if (t < 0 && x->pool) t = x->pool->lp->default_timeout;
  return t;
}

static void draw_progress(lua_State *L, xmap *x, int self, int final) {
  lmap_progress(L, self, x->done, x->n, x->t0, &x->last_draw, x->hosts, final);
}

/* Waits for the map to end: 1 done, 0 on timeout (it keeps running), -1 when its pool stopped. */
static int wait_map(lua_State *L, xmap *x, int self, double timeout) {
  double deadline = timeout < 0 ? INFINITY : suiro_now() + timeout;
  lua_getiuservalue(L, self, 2);
  lua_getfield(L, -1, "progress");
  int progress = lua_toboolean(L, -1);
  lua_pop(L, 2);
  for (;;) {
    pump(L);
    if (x->closed) return -1;
    if (x->finished) break;
    double left = deadline - suiro_now();
    if (left <= 0) return 0;
    sleep_events(L, progress && left > 0.1 ? 0.1 : left);
    if (progress) draw_progress(L, x, self, 0);
  }
  if (progress) draw_progress(L, x, self, 1);
  return 1;
}

static void raise_failure(lua_State *L, xmap *x) {
  if (!x->fail.kind) return;
  suiro_error_info e;
  memset(&e, 0, sizeof e);
  e.cls = (wire_str){ x->fail.cls, strlen(x->fail.cls) };
  e.message = (wire_str){ x->fail.msg ? x->fail.msg : "", x->fail.msg ? strlen(x->fail.msg) : 0 };
  e.traceback = (wire_str){ x->fail.tb ? x->fail.tb : "", x->fail.tb ? strlen(x->fail.tb) : 0 };
  e.index = x->fail.index;
  e.slot = x->fail.slot;
  e.pid = x->fail.pid;
  lerror_push_info(L, &e);
  lua_error(L);
}

static void push_cell(lua_State *L, int type, const unsigned char *p) {
  switch (type) {
  case WIRE_T_F64: { double v; memcpy(&v, p, 8); lua_pushnumber(L, v); return; }
  case WIRE_T_F32: { float v; memcpy(&v, p, 4); lua_pushnumber(L, v); return; }
  case WIRE_T_I64: { int64_t v; memcpy(&v, p, 8); lua_pushinteger(L, v); return; }
  case WIRE_T_I32: { int32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); return; }
  case WIRE_T_U8: lua_pushinteger(L, *p); return;
  case WIRE_T_BOOL:
    if (*p == WIRE_NA_BOOL) lvalues_push_na(L);
    else lua_pushboolean(L, *p == 1);
    return;
  }
  lua_pushnil(L);
}

/* Element i's result (what a local map's results() hands out). */
static void push_element(lua_State *L, xmap *x, uint64_t i) {
  if (x->pw.has_tpl) {
    const suiro_template *t = &x->pw.tpl;
    if (t->kind == SUIRO_OUT_RECORD) {
      lua_createtable(L, 0, t->nfields);
      for (int k = 0; k < t->nfields; k++) {
        size_t es = wire_type_size(t->fields[k].type);
        push_cell(L, t->fields[k].type, x->out + x->col_off[k] + (size_t)i * es);
        lua_setfield(L, -2, t->fields[k].name);
      }
      return;
    }
    size_t es = wire_type_size(t->type);
    const unsigned char *cell = x->out + (size_t)i * (size_t)x->width * es;
    if (t->kind == SUIRO_OUT_ARRAY) {
      larray *a = larray_new_raw(L, t->type, (int64_t)x->width);
      memcpy(a->data, cell, larray_bytes(a));
      if (t->ndim > 1) {
        a->nd = 1;
        a->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) a->shape[k] = (int64_t)t->shape[k];
      }
      return;
    }
    push_cell(L, t->type, cell);
    return;
  }
  if (!x->slots[i].p || x->slots[i].len == 0) {
    lua_pushnil(L);
    return;
  }
  int top = lua_gettop(L);
  int n = lcodec_decode_values(L, x->slots[i].p, (size_t)x->slots[i].len);
  if (n == 0) lua_pushnil(L);
  lua_settop(L, top + 1);
}

static const void *out_column(void *ud, int k) {
  xmap *x = ud;
  const suiro_template *t = &x->pw.tpl;
  return t->kind == SUIRO_OUT_RECORD ? x->out + x->col_off[k] : x->out;
}
static void out_element(lua_State *L, void *ud, uint64_t i) { push_element(L, ud, i); }

/* The results in the shape the template asks for, as a local map gives them. */
static void push_results(lua_State *L, xmap *x) {
  lmap_push_results(L, x->pw.has_tpl ? &x->pw.tpl : NULL, x->n, out_column, out_element, x);
}

static int push_closed(lua_State *L) {
  lua_pushnil(L);
  lua_pushliteral(L, "closed");
  return 2;
}

/* m:collect([timeout]) -> results | nil, "timeout" | nil, "closed" */
static int l_map_collect(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->collected) return luaL_error(L, "map:collect: the results were collected already");
  xmap *x = u->x;
  if (!x) return luaL_error(L, "map:collect: this map was freed");
  if (x->closed) return push_closed(L);
  int w = wait_map(L, x, 1, map_timeout(L, 2, x));
  if (w < 0) return push_closed(L);
  if (w == 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "timeout");
    return 2;
  }
  u->collected = 1;
  raise_failure(L, x);
  push_results(L, x);
  free_xmap(x); /* the results are copies */
  u->x = NULL;
  return 1;
}

static int l_map_cancel(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  int running = x && !x->finished && !x->closed;
  if (running) {
    char text[160];
    pump(L);
    snprintf(text, sizeof text, "the map was cancelled with %llu of %llu elements done", (unsigned long long)x->done,
             (unsigned long long)x->n);
    x->user_cancel = 1;
    set_fail(x, SUIRO_RESULT_CANCELLED, SUIRO_CLASS_CANCELLED, strlen(SUIRO_CLASS_CANCELLED), text, strlen(text), "",
             0, -1, -1, 0);
    stop_map(x, 1);
    check_finished(x);
  }
  lua_pushboolean(L, running);
  return 1;
}

static int l_map_kill(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x && x->closed) return push_closed(L);
  int running = x && !x->finished;
  if (running) {
    const char *text = "the map was killed (map:kill()); its workers were replaced";
    x->killed = 1;
    set_fail(x, SUIRO_RESULT_CANCELLED, SUIRO_CLASS_CANCELLED, strlen(SUIRO_CLASS_CANCELLED), text, strlen(text), "",
             0, -1, -1, 0);
    stop_map(x, 2);
    check_finished(x);
  }
  lua_pushboolean(L, running);
  return 1;
}

static int l_map_ready(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x) pump(L);
  lua_pushboolean(L, !x || x->finished || x->closed);
  return 1;
}

static int l_map_progress(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (x) pump(L);
  lua_Integer n = (lua_Integer)u->n, done = x ? (lua_Integer)x->done : u->collected ? (lua_Integer)u->n : 0;
  lua_pushinteger(L, done);
  lua_pushinteger(L, n);
  return 2;
}

/* results() step: (i, value) in completion order (streamed maps) or index order. Upvalues: the
 * map, then the range being handed out (b, e) and the next index. */
static int l_map_next(lua_State *L) {
  lxmap *u = check_xmap(L, lua_upvalueindex(1));
  xmap *x = u->x;
  lua_Integer b = lua_tointeger(L, lua_upvalueindex(2)), e = lua_tointeger(L, lua_upvalueindex(3));
  for (;;) {
    if (!x) return luaL_error(L, "map:results: this map was freed");
    if (x->closed) return luaL_error(L, "map:results: the map's pool was stopped");
    if (b < e) {
      lua_pushinteger(L, b + 1);
      lua_replace(L, lua_upvalueindex(2));
      lua_pushinteger(L, b + 1);
      push_element(L, x, (uint64_t)b);
      return 2;
    }
    if (!x->stream) {
      if (lua_toboolean(L, lua_upvalueindex(4))) return 0; /* handed out */
      int w = wait_map(L, x, lua_upvalueindex(1), -1);
      if (w < 0) return luaL_error(L, "map:results: the map's pool was stopped");
      raise_failure(L, x);
      b = 0;
      e = (lua_Integer)x->n;
      lua_pushboolean(L, 1);
      lua_replace(L, lua_upvalueindex(4));
    } else if (x->next_range < x->nranges) {
      b = (lua_Integer)x->ranges[x->next_range].b;
      e = (lua_Integer)x->ranges[x->next_range].e;
      x->next_range++;
    } else if (x->finished) {
      raise_failure(L, x);
      return 0;
    } else {
      sleep_events(L, 0.1);
      pump(L);
      continue;
    }
    lua_pushinteger(L, b);
    lua_replace(L, lua_upvalueindex(2));
    lua_pushinteger(L, e);
    lua_replace(L, lua_upvalueindex(3));
  }
}

static int l_map_results(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->collected) return luaL_error(L, "map:results: the results were collected already");
  if (!u->x) return luaL_error(L, "map:results: this map was freed");
  if (u->x->closed) return luaL_error(L, "map:results: the map's pool was stopped");
  u->collected = 1;
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  lua_pushinteger(L, 0);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, l_map_next, 4);
  return 1;
}

static int l_map_gc(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  if (u->x) free_xmap(u->x); /* a map still running is cancelled; its local ranges are waited for */
  u->x = NULL;
  return 0;
}

static int l_map_tostring(lua_State *L) {
  lxmap *u = check_xmap(L, 1);
  xmap *x = u->x;
  if (!x) lua_pushfstring(L, "suiro.map(%s)", u->collected ? "collected" : "freed");
  else
    lua_pushfstring(L, "suiro.map(%I elements, %s, %d hosts)", (lua_Integer)x->n,
                    x->closed ? "closed" : x->finished ? "finished" : "running", x->hosts);
  return 1;
}

/* ---- status ------------------------------------------------------------------------------------ */

/* core.status(x) -> { { rank =, host =, status = (pool:status() there), sent =, received = }, ... }
 * for ranks 1..K-1 (rank 0's is the local pool's) */
static int l_status(lua_State *L) {
  xpool *x = check_xpool(L, 1);
  lua_createtable(L, x->nranks > 1 ? x->nranks - 1 : 0, 0);
  int out = lua_gettop(L);
  if (x->nranks < 2) return 1;
  for (int r = 1; r < x->nranks; r++) free(x->status ? x->status[r] : NULL);
  free(x->status);
  x->status = calloc((size_t)x->nranks, sizeof *x->status);
  if (!x->status) return luaL_error(L, "pool:status: out of memory");
  x->status_req = ++R.next_req;
  x->status_left = 0;
  for (int r = 1; r < x->nranks; r++) {
    if (x->hosts[r].up != 1) continue;
    msg *m = msg_new(MSG_STATUS, 0);
    if (!m) continue;
    m->h.pool = x->id;
    m->h.id = x->status_req;
    comm_send(r, m);
    x->status_left++;
  }
  double deadline = suiro_now() + 10;
  while (x->status_left > 0 && !R.lost[0] && suiro_now() < deadline) {
    pump(L);
    if (x->status_left > 0) sleep_events(L, 0.05);
  }
  for (int r = 1; r < x->nranks; r++) {
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, r);
    lua_setfield(L, -2, "rank");
    lua_pushstring(L, host_name(r));
    lua_setfield(L, -2, "host");
    lua_pushinteger(L, R.pids[r]);
    lua_setfield(L, -2, "pid");
    lua_pushinteger(L, R.cpus[r]);
    lua_setfield(L, -2, "cpus");
    uint64_t sent, recvd;
    comm_traffic(r, &sent, &recvd);
    lua_pushinteger(L, (lua_Integer)sent);
    lua_setfield(L, -2, "bytes_sent");
    lua_pushinteger(L, (lua_Integer)recvd);
    lua_setfield(L, -2, "bytes_received");
    msg *m = x->status[r];
    if (m && m->h.len) {
      int top = lua_gettop(L);
      if (lcodec_decode_values(L, msg_payload(m), (size_t)m->h.len) >= 1) {
        lua_settop(L, top + 1);
        lua_setfield(L, -2, "status");
      } else {
        lua_settop(L, top);
      }
    } else if (x->hosts[r].up != 1) {
      lua_pushstring(L, x->hosts[r].err[0] ? x->hosts[r].err : "its pool did not start");
      lua_setfield(L, -2, "error");
    } else {
      lua_pushliteral(L, "no answer within 10 s");
      lua_setfield(L, -2, "error");
    }
    lua_rawseti(L, out, r);
    free(m);
    x->status[r] = NULL;
  }
  return 1;
}

/* ---- the module -------------------------------------------------------------------------------- */

static void shutdown_all(void) {
  if (!R.started || R.exited) return;
  R.exited = 1;
  if (R.rank == 0) {
    for (xpool *x = R.pools; x; x = x->next) close_pool(x);
    msg *m = msg_new(MSG_EXIT, 0);
    if (m) {
      comm_send_all(m);
      msg_free(m);
    }
  }
  comm_stop(8, lpool_signal != 0); /* bounded: the job ends within seconds even when a rank hangs (cluster.h) */
}

/* CPUs this process (and the workers it spawns) may run on. */
static int usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
  return CPU_COUNT(&set);
}

/* core.start() -> rank, size, host: MPI comes up (once); rank 0 waits for every host's hello */
static int l_start(lua_State *L) {
  if (!R.started) {
    char err[600];
    if (comm_start(err, sizeof err) != 0) return luaL_error(L, "suiro.mpi: %s", err);
    R.started = 1;
    R.rank = comm_rank();
    R.size = comm_size();
    R.names = calloc((size_t)R.size, sizeof *R.names);
    R.pids = calloc((size_t)R.size, sizeof *R.pids);
    if (!R.names || !R.pids) return luaL_error(L, "suiro.mpi: out of memory");
    R.pids[R.rank] = (int)getpid();
    R.cpus = calloc((size_t)R.size, sizeof *R.cpus);
    if (!R.cpus) return luaL_error(L, "suiro.mpi: out of memory");
    R.cpus[R.rank] = usable_cpus();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (R.rank == 0 && R.size > 1 && online > 0 && R.cpus[0] < online)
      fprintf(stderr,
              "suiro: rank 0 is bound to %d of the %ld CPUs of %s, and so are its workers (Open MPI binds "
              "ranks to cores by default when there are few): run mpirun with --bind-to none\n",
              R.cpus[0], online, comm_host());
    if (R.rank == 0) comm_set_intercept(intercept);
    if (R.size > 1) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_term;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, &old_term);
    }
    atexit(shutdown_all); /* os.exit() without closing the state still ends the job cleanly */
    if (R.rank == 0 && R.size > 1) {
      double deadline = suiro_now() + 60;
      for (;;) {
        pump(L);
        int missing = 0;
        for (int r = 1; r < R.size; r++)
          if (!R.names[r]) missing = r;
        if (!missing) break;
        if (R.lost[0]) return luaL_error(L, "suiro.mpi: %s", R.lost);
        if (suiro_now() > deadline)
          return luaL_error(L, "suiro.mpi: rank %d did not start serving within 60 s (is it running suiro?)", missing);
        sleep_events(L, 0.01);
      }
    }
  }
  lua_pushinteger(L, R.rank);
  lua_pushinteger(L, R.size);
  lua_pushstring(L, comm_host());
  return 3;
}

/* core.serve() -> ok, lost message or nil, signal: ranks 1..K-1 until rank 0 ends the job (the
 * serving loop is C only, engine/cluster/serve.c: no Lua runs from here on) */
static int l_serve(lua_State *L) {
  if (!R.started) return luaL_error(L, "suiro.mpi: serve before start");
  int rc = cluster_serve(&lpool_signal);
  R.exited = 1;
  comm_stop(8, lpool_signal != 0); /* bounded: the job ends within seconds even when a rank hangs (cluster.h) */
  lua_pushboolean(L, rc == 0);
  if (comm_lost()) lua_pushstring(L, comm_lost());
  else lua_pushnil(L);
  lua_pushinteger(L, lpool_signal);
  return 3;
}

static int l_shutdown(lua_State *L) {
  (void)L;
  shutdown_all();
  return 0;
}

/* core.cpus() -> the CPUs this process's workers may use */
static int l_cpus(lua_State *L) {
  lua_pushinteger(L, usable_cpus());
  return 1;
}

/* core.hosts() -> { [rank] = host name } (0-based ranks as integer keys) */
static int l_hosts(lua_State *L) {
  if (R.started) pump(L);
  lua_createtable(L, 0, R.size);
  for (int r = 0; r < R.size; r++) {
    lua_pushstring(L, host_name(r));
    lua_rawseti(L, -2, r);
  }
  return 1;
}

/* core.version() -> the MPI library's version line ("Open MPI v4.1.4, ..."), once started */
static int l_version(lua_State *L) {
  lua_pushstring(L, comm_version());
  return 1;
}

int luaopen_suiro_mpi(lua_State *L) {
  static const luaL_Reg task_methods[] = {
    { "collect", l_task_collect }, { "ready", l_task_ready }, { "cancel", l_task_cancel },
    { "kill", l_task_kill },       { "release", l_task_gc },  { NULL, NULL },
  };
  static const luaL_Reg map_methods[] = {
    { "collect", l_map_collect },   { "cancel", l_map_cancel },   { "kill", l_map_kill },
    { "ready", l_map_ready },       { "progress", l_map_progress }, { "results", l_map_results },
    { "free", l_map_gc },           { NULL, NULL },
  };
  static const luaL_Reg funcs[] = {
    { "start", l_start },   { "serve", l_serve },     { "shutdown", l_shutdown }, { "hosts", l_hosts },
    { "pool_new", l_pool_new }, { "pool_stop", l_pool_stop }, { "place", l_place }, { "submit", l_submit },
    { "map", l_map },       { "status", l_status },   { "wait", l_wait },         { "task_host", l_task_host },
    { "version", l_version }, { "cpus", l_cpus }, { NULL, NULL },
  };
  lsuiro_newmt(L, "suiro.mpi_pool", &key_xpool);
  lua_pushcfunction(L, l_pool_stop);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.mpi_task", &key_xtask);
  luaL_newlib(L, task_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_task_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_task_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lsuiro_newmt(L, "suiro.mpi_map", &key_xmap);
  luaL_newlib(L, map_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_map_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, l_map_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  luaL_getmetatable(L, "suiro.mpi_task");
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "task_methods");
  lua_pop(L, 1);
  luaL_getmetatable(L, "suiro.mpi_map");
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "map_methods");
  lua_pop(L, 1);
  return 1;
}
