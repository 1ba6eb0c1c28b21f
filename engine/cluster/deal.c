/*
 * deal.c — rank 0 of the MPI tier, language-neutral: MPI pools whose tasks and maps are spread
 * over every rank of the job (cluster.h, "rank 0"). A face (lua/lmpi.c) stages tasks and maps as
 * for a local pool and reads their results from the structs here.
 *
 * Maps: the function and input are staged once on rank 0 (as for a local map); each rank gets
 * the plan once and then ranges of it, sized like guided self-scheduling (a share of what is
 * left: remaining / (2 x hosts), never below a floor), each asked for by the rank when the range
 * it runs is half done, so a rank that finishes early takes more, none waits for a round trip,
 * and none holds a range it cannot start soon. Every range runs on its rank's local pool as a
 * plan of its own whose index_base is where it starts: the random streams and element numbers
 * are the whole map's. Results are written into rank 0's output by index: typed cells into one
 * area laid out as the template says, untyped results kept as each range's buffer. A range's
 * results are taken only from the rank it was dealt to, once, complete.
 *
 * Threads and ownership
 *   - The communication thread (comm.c) deals ranges to ranks that ask (intercept: NEED), so
 *     they get work while the script is busy; everything else is done on the face's thread when
 *     it calls in (cluster_pump): placing results, running rank 0's own ranges, task results.
 *   - comm_lock guards what both threads touch: the list of maps being dealt and, of each map,
 *     the cursor `next`, `stop`, the dealt ranges and its staged input (read by the dealer to
 *     slice ranges; freed only after the map left the list). Everything else belongs to the
 *     face's thread.
 *   - A task's or map's state is C memory owned here, reachable from the face's object; a result
 *     that arrives after the face released the task is dropped.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"

#define MAX_LOCAL_RANGES CLUSTER_MAX_LOCAL_RANGES
#define REGION_CACHE_BYTES ((uint64_t)2 << 30)
#define REGION_CACHE_COUNT 256
#define R cluster_r0

cluster_rank0 cluster_r0;
static volatile sig_atomic_t *interrupt_flag; /* the face's signal flag (cluster_start) */



/* ---- state ----------------------------------------------------------------------------------- */

/* 1 when key is new to s (or cannot be remembered: then it is sent again rather than fail). */
static int keyset_add(suiro_keyidx *s, uint64_t key) {
  size_t before = s->n;
  return suiro_keyidx_add(s, key) < 0 || s->n > before;
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

const char *cluster_node_name(int rank) {
  if (rank == R.rank) return comm_host();
  return R.names && R.names[rank] ? R.names[rank] : "?";
}

/* ---- sending code and large values once per host ----------------------------------------------- */

typedef struct ship_ctx {
  xpool *x;
  int host;          /* -1: every remote host */
  int err;
  char msg[300];
} ship_ctx;

static void ship_key_to(ship_ctx *c, int host, uint64_t key) {
  xnode *h = &c->x->nodes[host];
  if (!keyset_add(&h->funcs, key)) return;
  void *code;
  size_t len;
  if (!*c->x->local || suiro_blob_get(*c->x->local, key, &code, &len) != SUIRO_OK) return; /* not ours: the worker says so */
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

static xregion *find_xregion(const suiro_wire_ref *r) {
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
static void ship_ref(void *ud, const suiro_wire_ref *r) {
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
int cluster_ship(xpool *x, int host, const void *buf, size_t len, char *err, size_t cap) {
  ship_ctx c = { .x = x, .host = host };
  if (xwire_scan(buf, len, ship_key, ship_ref, &c) < 0) return snprintf(err, cap, "a malformed buffer"), -1;
  if (c.err) return snprintf(err, cap, "a large value cannot go to the other hosts: %s", c.msg), -1;
  return 0;
}


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

void cluster_task_free(xtask *t) {
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
  uint64_t left = x->n - x->cursor, h2 = 2 * (uint64_t)(x->nodes > 0 ? x->nodes : 1);
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
  if (m->h.type == MSG_FAIL) { /* stop dealing this map now; the face's thread reads the failure later */
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

/* ---- maps: results (the face's thread) ---------------------------------------------------------------- */

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
                   cluster_node_name(m->peer), m->peer, (unsigned long long)m->h.a + 1, (unsigned long long)m->h.b, why);
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
  for (int k = 0; k < t->nfields; k++) bytes += align8z((size_t)n * suiro_wire_type_size(t->fields[k].type));
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
    reject(x, m, "that range was dealt to host %s (rank %d)", cluster_node_name(seen.rank), seen.rank);
    msg_free(m);
    return;
  }
  if (x->running_done) x->running_done[m->peer] = 0; /* its next report counts what still runs */
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
        size_t es = suiro_wire_type_size(t->fields[k].type), cb = (size_t)n * es;
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
  suiro_status st = *x->pool->local ? suiro_plan_create(*x->pool->local, &s, &m) : SUIRO_CLOSED;
  free(offs);
  if (st == SUIRO_OK) {
    st = suiro_map_start(m, *x->pool->default_timeout);
    if (st != SUIRO_OK) suiro_map_free(m);
  }
  if (st != SUIRO_OK) return snprintf(err, cap, "%s", suiro_last_error()), -1;
  x->local[x->nlocal++] = (xlocal){ m, b, e };
  return 0;
}

/* Rank 0's share: collects its finished ranges and starts the next when the running one is half
 * done. */
static void pump_local(xmap *x) {
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
      xnode *h = &x->nodes[m->peer];
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
  case MSG_PROGRESS: {
    xmap *x = any_map(m->h.id);
    if (x && !x->finished && x->running_done && m->peer > 0 && m->peer < x->pool->nranks)
      x->running_done[m->peer] = m->h.a < x->n - x->done ? m->h.a : x->n - x->done; /* a rank's word, bounded */
    break;
  }
  case MSG_TRESULT: {
    xtask *t = task_find(m->h.id);
    if (!t || t->arrived) break;
    if (!t->closed) R.waiting_tasks--;
    if (t->released) {
      cluster_task_free(t);
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
                       cluster_node_name(m->peer), m->peer, cluster_node_name(t->host), t->host);
      t->kind = SUIRO_RESULT_ERROR;
      t->slot = -1;
      t->pid = 0;
      t->len = 0;
      t->data = malloc(1024);
      if (t->data)
        t->len = suiro_error_encode(t->data, 1024, WIRE_CSTR(SUIRO_CLASS_REMOTE),
                                    (suiro_wire_str){ text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1 },
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

void cluster_pump(void) {
  msg *m;
  while ((m = comm_recv())) handle(m);
  int busy = R.waiting_tasks > 0;
  for (xmap *x = R.all_maps; x; x = x->next) {
    if (!x->finished && x->nlocal + (x->listed ? 1 : 0) > 0) pump_local(x);
    if (!x->finished) busy = 1;
  }
  comm_set_eager(busy);
}

/* Sleeps until a message arrives or a local pool has results, at most `timeout` (and 100 ms, to
 * see signals). */
void cluster_sleep(double timeout) {
  struct pollfd fds[65];
  nfds_t n = 0;
  fds[n++] = (struct pollfd){ .fd = comm_inbox_fd(), .events = POLLIN };
  for (xpool *x = R.pools; x && n < 65; x = x->next)
    if (!x->closed && *x->local) fds[n++] = (struct pollfd){ .fd = suiro_pool_eventfd(*x->local), .events = POLLIN };
  /* armed: what lands from here on makes a fd readable; what landed before, the pump sees */
  cluster_pump();
  int ranging = 0; /* rank 0's own ranges running: look at their progress often */
  for (xmap *x = R.all_maps; x && !ranging; x = x->next) ranging = x->nlocal > 0;
  double cap = ranging ? 0.002 : 0.1;
  if (timeout > cap || timeout < 0) timeout = cap;
  struct timespec ts = { (time_t)timeout, (long)((timeout - floor(timeout)) * 1e9) };
  ppoll(fds, n, &ts, NULL);
  for (xpool *x = R.pools; x; x = x->next)
    if (!x->closed && *x->local) suiro_pool_event_ack(*x->local);
}


void cluster_pool_close(xpool *x) {
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


void cluster_map_free(xmap *x) {
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
  free(x->running_done);
  free(x);
}

uint64_t cluster_map_progress(xmap *x) {
  uint64_t d = x->done;
  for (int i = 0; i < x->nlocal; i++) d += suiro_map_done(x->local[i].m);
  if (x->running_done && x->pool)
    for (int r = 1; r < x->pool->nranks; r++) d += x->running_done[r];
  if (d > x->n) d = x->n;
  if (d > x->progress) x->progress = d;
  return x->progress;
}

int cluster_progress_due(xmap *x, uint64_t done, int final) {
  double now = suiro_now();
  if (!final && x->fired_any && (done == x->fired || now - x->fired_at < 0.05)) return 0;
  x->fired = done;
  x->fired_at = now;
  x->fired_any = 1;
  return 1;
}


void cluster_shutdown(int ending) {
  if (!R.started || R.exited) return;
  R.exited = 1;
  if (R.rank == 0) {
    for (xpool *x = R.pools; x; x = x->next) cluster_pool_close(x);
    msg *m = msg_new(MSG_EXIT, 0);
    if (m) {
      comm_send_all(m);
      msg_free(m);
    }
  }
  comm_stop(8, ending); /* bounded: the job ends within seconds even when a rank hangs (cluster.h) */
}

/* CPUs this process (and the workers it spawns) may run on. */
int cluster_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
  return CPU_COUNT(&set);
}


/* ---- what a face calls --------------------------------------------------------------------------- */

static int interrupted(void) { return interrupt_flag && *interrupt_flag; }

int cluster_start(volatile sig_atomic_t *interrupt, char *err, size_t cap) {
  if (R.started) return 0;
  interrupt_flag = interrupt;
  if (comm_start(err, cap) != 0) return -1;
  R.started = 1;
  R.rank = comm_rank();
  R.size = comm_size();
  R.names = calloc((size_t)R.size, sizeof *R.names);
  R.pids = calloc((size_t)R.size, sizeof *R.pids);
  R.cpus = calloc((size_t)R.size, sizeof *R.cpus);
  if (!R.names || !R.pids || !R.cpus) return snprintf(err, cap, "out of memory"), -1;
  R.pids[R.rank] = (int)getpid();
  R.cpus[R.rank] = cluster_cpus();
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
  if (R.rank == 0 && R.size > 1) {
    double deadline = suiro_now() + 60;
    for (;;) {
      cluster_pump();
      int missing = 0;
      for (int r = 1; r < R.size; r++)
        if (!R.names[r]) missing = r;
      if (!missing) break;
      if (R.lost[0]) return snprintf(err, cap, "%s", R.lost), -1;
      if (interrupted()) return snprintf(err, cap, "interrupted while waiting for rank %d", missing), -1;
      if (suiro_now() > deadline)
        return snprintf(err, cap, "rank %d did not start serving within 60 s (is it running suiro?)", missing), -1;
      cluster_sleep(0.01);
    }
  }
  return 0;
}

xpool *cluster_pool_new(suiro_pool *const *local, const double *default_timeout, const void *spec, size_t len,
                        double start_timeout, char *err, size_t cap) {
  xpool *x = calloc(1, sizeof *x);
  if (!x) return snprintf(err, cap, "out of memory"), NULL;
  x->id = ++R.next_pool;
  x->local = local;
  x->default_timeout = default_timeout;
  x->nranks = R.size > 0 ? R.size : 1;
  x->nodes = calloc((size_t)x->nranks, sizeof *x->nodes);
  if (!x->nodes) {
    free(x);
    return snprintf(err, cap, "out of memory"), NULL;
  }
  suiro_pool_stats st;
  suiro_pool_status(*local, &st, NULL, 0);
  x->nodes[0].up = 1;
  x->nodes[0].workers = st.workers;
  x->next = R.pools;
  R.pools = x;
  if (R.size < 2) return x;
  msg *m = msg_new(MSG_POOL_NEW, len);
  if (!m) {
    cluster_pool_close(x);
    return snprintf(err, cap, "out of memory"), NULL;
  }
  memcpy(msg_payload(m), spec, len);
  m->h.pool = x->id;
  comm_send_all(m);
  msg_free(m);
  double deadline = suiro_now() + start_timeout + 5;
  for (;;) {
    cluster_pump();
    int waiting = 0;
    for (int r = 1; r < R.size; r++) {
      if (x->nodes[r].up < 0) {
        cluster_pool_close(x);
        snprintf(err, cap, "host %s (rank %d): %s", cluster_node_name(r), r, x->nodes[r].err);
        return NULL;
      }
      if (x->nodes[r].up == 0) waiting = r;
    }
    if (!waiting) break;
    if (R.lost[0]) {
      cluster_pool_close(x);
      snprintf(err, cap, "%s", R.lost);
      return NULL;
    }
    if (interrupted() || suiro_now() > deadline) {
      cluster_pool_close(x);
      if (interrupted()) snprintf(err, cap, "interrupted while host %s (rank %d) started its pool", cluster_node_name(waiting), waiting);
      else snprintf(err, cap, "host %s (rank %d) did not start its pool within %.0f s", cluster_node_name(waiting), waiting,
                    start_timeout + 5);
      return NULL;
    }
    cluster_sleep(0.05);
  }
  return x;
}

xtask *cluster_submit(xpool *x, int host, const void *buf, size_t len, char *err, size_t cap) {
  if (host < 1 || host >= x->nranks) return snprintf(err, cap, "no host %d", host), NULL;
  msg *m = msg_new(MSG_TASK, len);
  xtask *t = calloc(1, sizeof *t);
  if (!m || !t) {
    free(m);
    free(t);
    return snprintf(err, cap, "out of memory"), NULL;
  }
  memcpy(msg_payload(m), buf, len);
  if (cluster_ship(x, host, msg_payload(m), len, err, cap) != 0) { /* nothing was sent */
    free(m);
    free(t);
    return NULL;
  }
  t->id = ++R.next_task;
  t->pool = x;
  t->host = host;
  t->cancel_ack = -1;
  task_insert(t);
  R.waiting_tasks++;
  comm_set_eager(1);
  m->h.pool = x->id;
  m->h.id = t->id;
  comm_send(host, m);
  return t;
}

int cluster_task_cancel(xtask *t) {
  msg *m = msg_new(MSG_TCANCEL, 0);
  if (!m) return 0;
  m->h.id = t->id;
  t->cancel_ack = -1;
  comm_send(t->host, m);
  double deadline = suiro_now() + 10;
  while (t->cancel_ack < 0 && !t->closed && !R.lost[0] && !interrupted() && suiro_now() < deadline) {
    cluster_pump();
    if (t->cancel_ack >= 0) break;
    cluster_sleep(0.05);
  }
  return t->cancel_ack == 1;
}

void cluster_task_kill(xtask *t) {
  if (t->arrived || t->closed) return;
  msg *m = msg_new(MSG_TKILL, 0);
  if (!m) return;
  m->h.id = t->id;
  comm_send(t->host, m);
}

void cluster_map_fail(xmap *x, int kind, const char *cls, const char *text, uint64_t how) {
  set_fail(x, kind, cls, strlen(cls), text, strlen(text), "", 0, -1, -1, 0);
  stop_map(x, how);
  check_finished(x);
}

/* Inlines the references of VALUES elements: an element goes to one rank, so its large values
 * travel inline (rank 0's own ranges get the same bytes). */
static int inline_values(const suiro_plan_spec *s, unsigned char **data, uint64_t **offs, char *err, size_t cap) {
  uint64_t *o = malloc(((size_t)s->n + 1) * 8);
  size_t have = 0, room = s->in_len > 0 ? s->in_len : 64;
  unsigned char *d = malloc(room);
  if (!o || !d) {
    free(o), free(d);
    return snprintf(err, cap, "out of memory"), -1;
  }
  o[0] = 0;
  for (uint64_t i = 0; i < s->n; i++) {
    const unsigned char *b = (const unsigned char *)s->in_data + s->in_offsets[i];
    size_t len = (size_t)(s->in_offsets[i + 1] - s->in_offsets[i]);
    void *c = NULL;
    size_t cl;
    char why[300];
    int rc = xwire_inline_all(b, len, &c, &cl, why, sizeof why);
    if (rc < 0) {
      free(o), free(d);
      return snprintf(err, cap, "element %llu: %s", (unsigned long long)i + 1, why), -1;
    }
    const void *src = rc > 0 ? c : b;
    size_t n = rc > 0 ? cl : len;
    if (n > room - have) {
      while (n > room - have) {
        if (room > SIZE_MAX / 4) {
          free(c), free(o), free(d);
          return snprintf(err, cap, "out of memory"), -1;
        }
        room *= 2;
      }
      unsigned char *nd = realloc(d, room);
      if (!nd) {
        free(c), free(o), free(d);
        return snprintf(err, cap, "out of memory"), -1;
      }
      d = nd;
    }
    memcpy(d + have, src, n);
    have += n;
    free(c);
    o[i + 1] = have;
  }
  *data = d;
  *offs = o;
  return 0;
}

xmap *cluster_map_new(xpool *xp, const suiro_plan_spec *s, const suiro_template *tpl, int stream, char *err,
                      size_t cap) {
  xmap *x = calloc(1, sizeof *x);
  if (!x) return snprintf(err, cap, "out of memory"), NULL;
  x->id = ++R.next_map;
  x->pool = xp;
  x->n = s->n;
  x->pw.n = s->n;
  x->pw.in_kind = s->in_kind;
  x->pw.in_type = s->in_type;
  x->pw.start = s->start;
  x->pw.step = s->step;
  x->pw.seeded = (uint32_t)(s->seeded != 0);
  x->pw.seed = s->seed;
  x->stream = stream;
  x->next = R.all_maps; /* from here on cluster_map_free cleans up */
  R.all_maps = x;
  if (tpl) {
    uint64_t w;
    x->pw.tpl = *tpl;
    if (suiro_template_check(&x->pw.tpl, &w, err, cap) != 0) goto fail;
    x->pw.has_tpl = 1;
    x->width = w;
  }
  /* the staged plan, owned here (the dealer slices it on the comm thread) */
  x->pw.fn_len = s->fn_len;
  x->fn = malloc(s->fn_len ? s->fn_len : 8);
  if (!x->fn) goto oom;
  memcpy(x->fn, s->fn, s->fn_len);
  if (s->in_kind == SUIRO_IN_ARRAY) {
    x->in_es = suiro_wire_type_size(s->in_type);
    uint64_t bytes;
    if (__builtin_mul_overflow(s->n, (uint64_t)x->in_es, &bytes) || bytes > SIZE_MAX / 2) {
      snprintf(err, cap, "%llu elements are too many", (unsigned long long)s->n);
      goto fail;
    }
    x->in = malloc(bytes ? (size_t)bytes : 8);
    if (!x->in) goto oom;
    if (bytes) memcpy(x->in, s->in_data, (size_t)bytes);
  } else if (s->in_kind == SUIRO_IN_VALUES) {
    if (inline_values(s, &x->in, &x->offs, err, cap) != 0) goto fail;
  }
  /* outputs, every size checked before use */
  uint64_t out_bytes = 0;
  if (x->pw.has_tpl) {
    const suiro_template *t = &x->pw.tpl;
    if (t->kind == SUIRO_OUT_RECORD) {
      for (int k = 0; k < t->nfields; k++) {
        uint64_t cb;
        x->col_off[k] = out_bytes;
        if (__builtin_mul_overflow(s->n, (uint64_t)suiro_wire_type_size(t->fields[k].type), &cb) ||
            __builtin_add_overflow(out_bytes, cb + 7, &out_bytes)) {
          snprintf(err, cap, "the output of %llu elements overflows", (unsigned long long)s->n);
          goto fail;
        }
        out_bytes &= ~(uint64_t)7;
      }
    } else if (__builtin_mul_overflow(s->n, (uint64_t)cluster_tpl_elem_bytes(t), &out_bytes)) {
      snprintf(err, cap, "the output of %llu elements overflows", (unsigned long long)s->n);
      goto fail;
    }
    if (out_bytes > SIZE_MAX / 2) {
      snprintf(err, cap, "the output of %llu elements is too large", (unsigned long long)s->n);
      goto fail;
    }
    x->out = malloc(out_bytes ? (size_t)out_bytes : 8);
    if (!x->out) goto oom;
  } else {
    if (s->n > SIZE_MAX / 32) {
      snprintf(err, cap, "%llu elements are too many", (unsigned long long)s->n);
      goto fail;
    }
    x->slots = calloc(s->n ? (size_t)s->n : 1, sizeof *x->slots);
    if (!x->slots) goto oom;
  }
  x->running_done = calloc((size_t)xp->nranks, sizeof *x->running_done);
  if (!x->running_done) goto oom;
  /* ranks taking part: every rank whose pool started */
  int hosts = 0;
  for (int r = 0; r < xp->nranks; r++)
    if (xp->nodes[r].up == 1) hosts++;
  x->nodes = hosts;
  uint64_t w = (uint64_t)(xp->nodes[0].workers > 0 ? xp->nodes[0].workers : 1);
  x->min_chunk = s->n / (32 * (uint64_t)(hosts > 0 ? hosts : 1) * w);
  if (x->min_chunk < 1) x->min_chunk = 1;
  x->t0 = suiro_now();
  /* dealing starts: the comm thread may hand out ranges from here on */
  comm_lock();
  x->listed = 1;
  x->dnext = R.maps;
  R.maps = x;
  comm_unlock();
  /* the plan goes to every rank, after the code and large values its function names, with its
   * first range (the rest they ask for) */
  if (xp->nranks > 1 && s->n > 0) {
    if (cluster_ship(xp, -1, x->fn, (size_t)x->pw.fn_len, err, cap) != 0) goto fail;
    msg *pm = msg_new(MSG_PLAN, sizeof x->pw + (size_t)x->pw.fn_len);
    if (!pm) goto oom;
    memcpy(msg_payload(pm), &x->pw, sizeof x->pw);
    memcpy(msg_payload(pm) + sizeof x->pw, x->fn, (size_t)x->pw.fn_len);
    pm->h.pool = xp->id;
    pm->h.id = x->id;
    comm_send_all(pm);
    msg_free(pm);
    for (int r = 1; r < xp->nranks; r++) {
      if (xp->nodes[r].up != 1) continue;
      uint64_t b, e;
      comm_lock();
      msg *c = deal(x, r, &b, &e) ? chunk_msg(x, b, e) : nomore_msg(x->id);
      comm_unlock();
      if (c) comm_send(r, c);
    }
  }
  pump_local(x); /* rank 0's first ranges */
  return x;
oom:
  snprintf(err, cap, "out of memory for a map of %llu elements", (unsigned long long)s->n);
fail:
  cluster_map_free(x);
  return NULL;
}
