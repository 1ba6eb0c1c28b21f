/*
 * serve.c — what ranks 1..K-1 do: serve rank 0, in C only (no language runs here but in the
 * workers). The serving loop runs on the thread that called cluster_serve: it starts the pools
 * rank 0 asks for (from the resolved options rank 0 sends: the same workers, launcher command,
 * environment and sizes as rank 0's pool), publishes the code rank 0 sends into them, keeps
 * copies of the large values rank 0 sends (so each crosses once per host), runs the map ranges
 * dealt to it as plans of their own on its local pool (index_base: the whole map's random
 * streams and element numbers), runs tasks, and sends results back.
 *
 * A host asks for a map's next range when the one it runs is half done, so the answer arrives
 * before its workers run dry and no range waits here long while another host could run it; rank
 * 0 sizes the ranges (lua/lmpi.c).
 *
 * The map range results and failures are built by cluster_chunk_result / cluster_chunk_failure,
 * which rank 0 uses for its own ranges too.
 *
 * Ownership: everything here belongs to the serving thread; messages are the
 * comm thread's until comm_recv returns them and ours after; comm_send takes them back.
 */
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "suiro_face.h"

/* ---- range results (both sides) -------------------------------------------------------------- */

/* The results of range [b, e) of a map from its finished plan m (n = e - b elements): a RESULT
 * message for the map `id`. Typed cells: the output area as laid out by the template (each
 * record field's column, 8-aligned); untyped: offsets[n + 1] then each element's wire buffer
 * (empty when it returned nothing), with references inlined when inline_refs (they name regions
 * of this host). NULL with a message in err. */
msg *cluster_chunk_result(suiro_map *m, uint64_t id, uint64_t b, uint64_t e, int inline_refs, char *err, size_t cap) {
  const suiro_plan *pl = suiro_plan_of(m);
  if (!pl) {
    snprintf(err, cap, "%s", suiro_last_error());
    return NULL;
  }
  uint64_t n = e - b;
  const suiro_template *t = suiro_plan_template(pl);
  const void *out = suiro_map_output(m);
  msg *r;
  if (t) {
    size_t bytes = 0;
    if (t->kind == SUIRO_OUT_RECORD)
      for (int k = 0; k < t->nfields; k++) bytes += align8z((size_t)n * suiro_wire_type_size(t->fields[k].type));
    else
      bytes = (size_t)n * cluster_tpl_elem_bytes(t);
    r = msg_new(MSG_RESULT, bytes);
    if (!r) goto oom;
    unsigned char *p = msg_payload(r);
    if (t->kind == SUIRO_OUT_RECORD) {
      for (int k = 0; k < t->nfields; k++) {
        uint64_t count;
        const void *col = suiro_plan_column(pl, out, k, &count);
        size_t cb = (size_t)n * suiro_wire_type_size(t->fields[k].type);
        memcpy(p, col, cb);
        memset(p + cb, 0, align8z(cb) - cb);
        p += align8z(cb);
      }
    } else if (bytes) {
      memcpy(p, out, bytes);
    }
  } else {
    /* untyped: sizes first (inlining references changes them) */
    void **copies = calloc((size_t)n ? (size_t)n : 1, sizeof *copies);
    size_t *lens = calloc((size_t)n ? (size_t)n : 1, sizeof *lens);
    const void **ptrs = calloc((size_t)n ? (size_t)n : 1, sizeof *ptrs);
    if (!copies || !lens || !ptrs) {
      free(copies), free(lens), free(ptrs);
      goto oom;
    }
    size_t total = 0;
    int bad = 0;
    for (uint64_t i = 0; i < n && !bad; i++) {
      const void *d;
      size_t len;
      if (!suiro_map_result(m, i, &d, &len)) continue;
      ptrs[i] = d;
      lens[i] = len;
      if (inline_refs) {
        void *c;
        size_t cl;
        int rc = xwire_inline_all(d, len, &c, &cl, err, cap);
        if (rc < 0) bad = 1;
        if (rc > 0) {
          copies[i] = c;
          ptrs[i] = c;
          lens[i] = cl;
        }
      }
      total += align8z(lens[i]);
    }
    r = bad ? NULL : msg_new(MSG_RESULT, ((size_t)n + 1) * 8 + total);
    if (r) {
      uint64_t *offs = (uint64_t *)(void *)msg_payload(r);
      unsigned char *data = msg_payload(r) + ((size_t)n + 1) * 8;
      uint64_t at = 0;
      for (uint64_t i = 0; i < n; i++) {
        offs[i] = at;
        if (lens[i]) memcpy(data + at, ptrs[i], lens[i]);
        at += align8z(lens[i]);
      }
      offs[n] = at;
    }
    for (uint64_t i = 0; i < n; i++) free(copies[i]);
    free(copies), free(lens), free(ptrs);
    if (bad) {
      char tmp[300];
      snprintf(tmp, sizeof tmp, "%s", err);
      snprintf(err, cap, "a result cannot cross hosts: %s", tmp);
      return NULL;
    }
    if (!r) goto oom;
  }
  r->h.id = id;
  r->h.a = b;
  r->h.b = e;
  return r;
oom:
  snprintf(err, cap, "out of memory for the results of elements %llu..%llu", (unsigned long long)b + 1,
           (unsigned long long)e);
  return NULL;
}

/* A FAIL message for map `id` from the failure e of range [b, e) (run as a plan with index_base
 * b): the element index and "element k:" of the message name the whole map's element; a dead
 * worker's message names the host. */
msg *cluster_chunk_failure(uint64_t id, const suiro_error_info *e, int kind, uint64_t base, const char *host, int rank) {
  char text[8192];
  size_t tl;
  cluster_fix_element(e->message.ptr ? e->message.ptr : "", e->message.len, base, text, sizeof text, &tl);
  if (host && kind == SUIRO_RESULT_DIED) {
    int n = snprintf(text + tl, sizeof text - tl, " on host %s (rank %d)", host, rank);
    if (n > 0) tl = tl + (size_t)n < sizeof text ? tl + (size_t)n : sizeof text - 1;
  }
  int64_t index = e->index >= 0 ? e->index + (int64_t)base : -1;
  _Alignas(8) unsigned char buf[16384];
  size_t n = suiro_error_encode(buf, sizeof buf, e->cls, (suiro_wire_str){ text, tl }, e->traceback, index);
  msg *m = msg_new(MSG_FAIL, n);
  if (!m) return NULL;
  memcpy(msg_payload(m), buf, n);
  m->h.id = id;
  m->h.a = (uint64_t)kind;
  m->h.b = (uint64_t)(int64_t)e->slot;
  m->h.c = (uint64_t)(int64_t)e->pid;
  return m;
}

/* The kind of result a map failure stands for (error, died, cancelled). */
int cluster_failure_kind(const suiro_error_info *e) {
  if (e->cls.len == strlen(SUIRO_CLASS_WORKER_DIED) && !memcmp(e->cls.ptr, SUIRO_CLASS_WORKER_DIED, e->cls.len))
    return SUIRO_RESULT_DIED;
  if (e->cls.len == strlen(SUIRO_CLASS_CANCELLED) && !memcmp(e->cls.ptr, SUIRO_CLASS_CANCELLED, e->cls.len))
    return SUIRO_RESULT_CANCELLED;
  return SUIRO_RESULT_ERROR;
}

/* ---- serving state ------------------------------------------------------------------------- */

typedef struct spool {
  uint32_t id;
  suiro_pool *p;
  struct spool *next;
} spool;

typedef struct splan {
  uint64_t id;
  spool *pool;
  plan_wire pw;
  unsigned char *fn;   /* the function, its references rewritten to this host's copies */
  size_t fn_len;
  int exhausted;       /* rank 0 has nothing more to deal */
  int ended;           /* rank 0 ended the map: drop what is left */
  int failed;          /* a failure went out: nothing more */
  int inflight;        /* ranges running */
  int asked;           /* NEEDs not answered yet */
  uint64_t reported;   /* elements finished in running ranges, as last sent (MSG_PROGRESS) */
  double reported_at;
  struct splan *next;
} splan;

typedef struct schunk {
  splan *pl;
  uint64_t b, e;
  suiro_map *m;
  struct schunk *next;
} schunk;

typedef struct stask {
  uint64_t id;
  spool *pool;
  suiro_task t;
  msg *waiting;        /* not submitted yet (the ring was full) */
} stask;

typedef struct sregion {
  region_wire id;
  suiro_buf *buf;
  struct sregion *next;
} sregion;

static struct {
  spool *pools;
  splan *plans;
  schunk *chunks;
  stask *tasks;
  size_t ntasks, captasks;
  sregion *regions;
  char host[256];
  int rank;
} S;

static spool *find_pool(uint32_t id) {
  for (spool *p = S.pools; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static splan *find_plan(uint64_t id) {
  for (splan *p = S.plans; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static sregion *find_region(const char *name, size_t nl, uint64_t off, uint64_t len) {
  for (sregion *r = S.regions; r; r = r->next)
    if (r->id.offset == off && r->id.length == len && strlen(r->id.name) == nl && !memcmp(r->id.name, name, nl))
      return r;
  return NULL;
}

/* REF subst: rank 0's region -> this host's copy (sent before the message that names it). Each
 * reference written grants its receiver a reference to the copy; the grants are listed so that
 * a rewrite that fails can take them back. */
typedef struct grants {
  suiro_buf **b;
  size_t n, cap;
  char err[240];
} grants;

static int local_ref(void *ud, const suiro_wire_ref *r, suiro_wire_writer *w) {
  grants *g = ud;
  sregion *rg = find_region(r->name.ptr, r->name.len, r->offset, r->length);
  if (!rg) {
    snprintf(g->err, sizeof g->err, "a large value names region %.*s, which never reached host %.64s",
             (int)(r->name.len > 100 ? 100 : r->name.len), r->name.ptr, S.host);
    return WIRE_ERR;
  }
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 8;
    suiro_buf **nb = realloc(g->b, cap * sizeof *nb);
    if (!nb) return snprintf(g->err, sizeof g->err, "out of memory"), WIRE_ERR;
    g->b = nb;
    g->cap = cap;
  }
  int rc = suiro_zc_put(w, rg->buf, suiro_buf_data(rg->buf), (size_t)r->length, r->type, r->order, r->ndim, r->dims);
  if (rc == WIRE_OK) g->b[g->n++] = rg->buf;
  return rc;
}

/* buf with rank 0's references turned into this host's: a malloc'd copy in *out (or NULL when it
 * had none); -1 with a message in err. */
static int localize(const void *buf, size_t len, unsigned char **out, size_t *outlen, char *err, size_t cap) {
  *out = NULL;
  int nref = xwire_scan(buf, len, NULL, NULL, NULL);
  if (nref < 0) {
    snprintf(err, cap, "a malformed value arrived");
    return -1;
  }
  if (nref == 0) return 0;
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  grants g = { 0 };
  const void *p;
  size_t n;
  int ok = xwire_rewrite(buf, len, &w, local_ref, &g, err, cap) == WIRE_OK && suiro_wire_writer_finish(&w, &p, &n) == WIRE_OK;
  if (ok) {
    *out = malloc(n);
    if (*out) memcpy(*out, p, n);
    else snprintf(err, cap, "out of memory");
    *outlen = n;
  } else if (g.err[0]) {
    snprintf(err, cap, "%s", g.err);
  } else if (w.status != WIRE_OK) {
    snprintf(err, cap, "%s", suiro_wire_writer_error(&w));
  }
  if (!*out)
    for (size_t i = 0; i < g.n; i++) suiro_buf_unsend(g.b[i]);
  free(g.b);
  suiro_wire_writer_free(&w);
  return *out ? 1 : -1;
}

static void send0(msg *m) {
  if (m) comm_send(0, m);
}

static void send_text(uint32_t type, uint32_t pool, uint64_t id, uint64_t a, const char *text) {
  size_t n = strlen(text) + 1;
  msg *m = msg_new(type, n);
  if (!m) return;
  memcpy(msg_payload(m), text, n);
  m->h.pool = pool;
  m->h.id = id;
  m->h.a = a;
  send0(m);
}

/* A failure of map `id` that is not an element's (a range could not start): class remote. */
static void send_map_error(uint64_t id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_map_error(uint64_t id, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  suiro_error_info e;
  memset(&e, 0, sizeof e);
  e.cls = WIRE_CSTR(SUIRO_CLASS_REMOTE);
  e.message = (suiro_wire_str){ text, strlen(text) };
  e.traceback = WIRE_CSTR("");
  e.index = -1;
  e.slot = -1;
  send0(cluster_chunk_failure(id, &e, SUIRO_RESULT_ERROR, 0, NULL, S.rank));
}

/* Asks for the plan's next range once the one running is half done (or none runs): the answer
 * arrives before the workers run dry, and no range is committed to this host long before it can
 * start it (a second range held from the start would unbalance the tail). */
static void maybe_need(splan *pl, const schunk *running) {
  if (pl->exhausted || pl->ended || pl->failed || pl->asked > 0 || pl->inflight > 1) return;
  if (pl->inflight == 1) {
    if (!running) {
      for (running = S.chunks; running && running->pl != pl; running = running->next) {
      }
    }
    if (running && suiro_map_done(running->m) * 2 < running->e - running->b) return;
  }
  msg *m = msg_new(MSG_NEED, 0);
  if (!m) return;
  m->h.id = pl->id;
  send0(m);
  pl->asked++;
}

static void free_plan(splan *pl) {
  for (splan **pp = &S.plans; *pp; pp = &(*pp)->next)
    if (*pp == pl) {
      *pp = pl->next;
      break;
    }
  free(pl->fn);
  free(pl);
}

/* ---- messages -------------------------------------------------------------------------------- */

static void on_plan(msg *m) {
  spool *sp = find_pool(m->h.pool);
  plan_wire pw;
  if (m->h.len < sizeof pw) return;
  memcpy(&pw, msg_payload(m), sizeof pw);
  if (!sp) {
    send_map_error(m->h.id, "host %s (rank %d) has no pool %u for this map", S.host, S.rank, m->h.pool);
    return;
  }
  if (pw.fn_len > m->h.len - sizeof pw) return;
  splan *pl = calloc(1, sizeof *pl);
  if (!pl) return;
  pl->id = m->h.id;
  pl->pool = sp;
  pl->pw = pw;
  const unsigned char *fn = msg_payload(m) + sizeof pw;
  char err[300];
  unsigned char *loc;
  size_t ll;
  int rc = localize(fn, (size_t)pw.fn_len, &loc, &ll, err, sizeof err);
  if (rc < 0) {
    send_map_error(m->h.id, "host %s (rank %d): the map's function: %s", S.host, S.rank, err);
    pl->failed = 1;
  } else if (rc == 0) {
    pl->fn = malloc(pw.fn_len ? (size_t)pw.fn_len : 8);
    if (pl->fn) memcpy(pl->fn, fn, (size_t)pw.fn_len);
    pl->fn_len = (size_t)pw.fn_len;
  } else {
    pl->fn = loc;
    pl->fn_len = ll;
  }
  pl->next = S.plans;
  S.plans = pl;
}

static void on_chunk(msg *m) {
  splan *pl = find_plan(m->h.id);
  if (!pl) return;
  if (pl->asked > 0) pl->asked--;
  if (pl->ended || pl->failed || !pl->fn) return;
  uint64_t b = m->h.a, e = m->h.b, n = e - b;
  if (e < b || e > pl->pw.n) return;
  suiro_plan_spec s;
  suiro_plan_spec_init(&s);
  s.fn = pl->fn;
  s.fn_len = pl->fn_len;
  s.n = n;
  s.in_kind = pl->pw.in_kind;
  s.index_base = b;
  s.seeded = (int)pl->pw.seeded;
  s.seed = pl->pw.seed;
  s.tpl = pl->pw.has_tpl ? &pl->pw.tpl : NULL;
  const unsigned char *p = msg_payload(m);
  size_t len = (size_t)m->h.len;
  switch (pl->pw.in_kind) {
  case SUIRO_IN_ARRAY:
    s.in_type = pl->pw.in_type;
    if (len < (size_t)n * suiro_wire_type_size(pl->pw.in_type)) return;
    s.in_data = p;
    break;
  case SUIRO_IN_RANGE:
    s.start = (int64_t)((uint64_t)pl->pw.start + b * (uint64_t)pl->pw.step);
    s.step = pl->pw.step;
    break;
  case SUIRO_IN_VALUES: {
    if (len < ((size_t)n + 1) * 8) return;
    const uint64_t *offs = (const uint64_t *)(const void *)p;
    if (offs[n] > len - ((size_t)n + 1) * 8) return;
    s.in_offsets = offs;
    s.in_data = p + ((size_t)n + 1) * 8;
    s.in_len = (size_t)offs[n];
    break;
  }
  default: return;
  }
  suiro_map *sm;
  suiro_status st = suiro_plan_create(pl->pool->p, &s, &sm);
  if (st == SUIRO_OK) {
    st = suiro_map_start(sm, 30);
    if (st != SUIRO_OK) suiro_map_free(sm);
  }
  if (st != SUIRO_OK) {
    send_map_error(pl->id, "host %s (rank %d): elements %llu..%llu could not start: %s", S.host, S.rank,
                   (unsigned long long)b + 1, (unsigned long long)e, suiro_last_error());
    pl->failed = 1;
    return;
  }
  schunk *c = calloc(1, sizeof *c);
  if (!c) {
    suiro_map_free(sm);
    send_map_error(pl->id, "host %s (rank %d): out of memory", S.host, S.rank);
    pl->failed = 1;
    return;
  }
  c->pl = pl;
  c->b = b;
  c->e = e;
  c->m = sm;
  c->next = S.chunks;
  S.chunks = c;
  pl->inflight++;
  maybe_need(pl, c);
}

static void on_map_end(msg *m) {
  splan *pl = find_plan(m->h.id);
  if (!pl) return;
  pl->ended = 1;
  for (schunk *c = S.chunks; c; c = c->next) {
    if (c->pl != pl) continue;
    if (m->h.a == 2) suiro_map_kill(c->m);
    else suiro_map_cancel(c->m);
  }
  if (pl->inflight == 0) free_plan(pl);
}

/* Ranges that finished: their results (or the failure) go to rank 0. */
/* Tells rank 0 how far this rank's running ranges of each map are, when that changed, at most
 * every 50 ms, so a map's progress moves before its first range completes. */
static void report_progress(void) {
  double now = suiro_now();
  for (splan *pl = S.plans; pl; pl = pl->next) {
    if (pl->ended || pl->failed || pl->inflight == 0 || now - pl->reported_at < 0.05) continue;
    uint64_t d = 0;
    for (schunk *c = S.chunks; c; c = c->next)
      if (c->pl == pl) d += suiro_map_done(c->m);
    if (d == pl->reported) continue;
    msg *m = msg_new(MSG_PROGRESS, 0);
    if (!m) return;
    m->h.id = pl->id;
    m->h.a = d;
    send0(m);
    pl->reported = d;
    pl->reported_at = now;
  }
}

static int poll_chunks(void) {
  report_progress();
  int busy = 0;
  for (schunk **cp = &S.chunks; *cp;) {
    schunk *c = *cp;
    suiro_status st = suiro_map_wait(c->m, 0);
    if (st == SUIRO_TIMEOUT) {
      maybe_need(c->pl, c); /* half done: the next range is on its way */
      cp = &c->next;
      continue;
    }
    busy = 1;
    splan *pl = c->pl;
    if (!pl->ended && !pl->failed) {
      suiro_error_info e;
      char err[400];
      if (st != SUIRO_OK) {
        send_map_error(pl->id, "host %s (rank %d): %s", S.host, S.rank, suiro_last_error());
        pl->failed = 1;
      } else if (suiro_map_failure(c->m, &e)) {
        send0(cluster_chunk_failure(pl->id, &e, cluster_failure_kind(&e), c->b, S.host, S.rank));
        pl->failed = 1;
      } else {
        msg *r = cluster_chunk_result(c->m, pl->id, c->b, c->e, 1, err, sizeof err);
        if (r) {
          send0(r);
        } else {
          send_map_error(pl->id, "host %s (rank %d): %s", S.host, S.rank, err);
          pl->failed = 1;
        }
      }
    }
    suiro_map_free(c->m);
    *cp = c->next;
    free(c);
    pl->inflight--;
    pl->reported = 0; /* rank 0 zeroes its count with the result */
    if (pl->ended && pl->inflight == 0) free_plan(pl);
    else maybe_need(pl, NULL);
  }
  return busy;
}

static void on_task(msg *m) {
  spool *sp = find_pool(m->h.pool);
  if (!sp) {
    send_text(MSG_TRESULT, m->h.pool, m->h.id, SUIRO_RESULT_ERROR, "the task's pool is not running on this host");
    return;
  }
  if (S.ntasks == S.captasks) {
    size_t cap = S.captasks ? S.captasks * 2 : 64;
    stask *t = realloc(S.tasks, cap * sizeof *t);
    if (!t) {
      send_text(MSG_TRESULT, m->h.pool, m->h.id, SUIRO_RESULT_ERROR, "out of memory");
      return;
    }
    S.tasks = t;
    S.captasks = cap;
  }
  stask *t = &S.tasks[S.ntasks++];
  memset(t, 0, sizeof *t);
  t->id = m->h.id;
  t->pool = sp;
  t->waiting = m; /* submitted by poll_tasks (now, or once the ring has room) */
}

/* A finished task's result, its references inlined; DIED and CANCELLED messages name the host. */
static void send_task_result(stask *t, const suiro_result *r) {
  const void *data = r->data;
  size_t len = r->len;
  void *copy = NULL;
  char text[1024];
  if (r->kind == SUIRO_RESULT_DIED) {
    int n = snprintf(text, sizeof text, "%.*s on host %s (rank %d)", (int)len, (const char *)data, S.host, S.rank);
    data = text;
    len = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
  } else if (r->kind == SUIRO_RESULT_VALUE || r->kind == SUIRO_RESULT_ERROR) {
    char err[300];
    size_t cl;
    int rc = ((uintptr_t)data % 8 == 0 && len % 8 == 0) ? xwire_inline_all(data, len, &copy, &cl, err, sizeof err) : 0;
    if (rc < 0 && r->kind == SUIRO_RESULT_VALUE) {
      snprintf(text, sizeof text, "the task's result cannot go back to rank 0 from host %s: %s", S.host, err);
      _Alignas(8) unsigned char eb[1400];
      size_t en = suiro_error_encode(eb, sizeof eb, WIRE_CSTR(SUIRO_CLASS_REMOTE), (suiro_wire_str){ text, strlen(text) },
                                     WIRE_CSTR(""), -1);
      msg *m = msg_new(MSG_TRESULT, en);
      if (!m) return;
      memcpy(msg_payload(m), eb, en);
      m->h.id = t->id;
      m->h.a = SUIRO_RESULT_ERROR;
      m->h.b = (uint64_t)(int64_t)r->worker_slot;
      m->h.c = (uint64_t)(int64_t)r->worker_pid;
      send0(m);
      return;
    }
    if (rc > 0) {
      data = copy;
      len = cl;
    }
  }
  msg *m = msg_new(MSG_TRESULT, len);
  if (m) {
    if (len) memcpy(msg_payload(m), data, len);
    m->h.id = t->id;
    m->h.a = (uint64_t)r->kind;
    m->h.b = (uint64_t)(int64_t)r->worker_slot;
    m->h.c = (uint64_t)(int64_t)r->worker_pid;
    send0(m);
  }
  free(copy);
}

static void drop_task(size_t i) {
  msg_free(S.tasks[i].waiting);
  S.tasks[i] = S.tasks[--S.ntasks];
}

static int poll_tasks(void) {
  int busy = 0;
  for (size_t i = 0; i < S.ntasks;) {
    stask *t = &S.tasks[i];
    suiro_pool *p = t->pool->p;
    if (t->waiting) {
      msg *m = t->waiting;
      char err[300];
      unsigned char *loc;
      size_t ll;
      int rc = localize(msg_payload(m), (size_t)m->h.len, &loc, &ll, err, sizeof err);
      if (rc < 0) {
        char text[700];
        snprintf(text, sizeof text, "host %s (rank %d): %s", S.host, S.rank, err);
        send_text(MSG_TRESULT, 0, t->id, SUIRO_RESULT_ERROR, text);
        drop_task(i);
        busy = 1;
        continue;
      }
      suiro_status st = suiro_submit(p, SUIRO_FN_BINDING, rc ? loc : msg_payload(m), rc ? ll : (size_t)m->h.len, &t->t, 0);
      if (rc > 0 && st != SUIRO_OK) suiro_zc_revoke(loc, ll);
      free(loc);
      if (st == SUIRO_FULL || st == SUIRO_TIMEOUT) { /* the ring is full: later */
        i++;
        continue;
      }
      busy = 1;
      if (st != SUIRO_OK) {
        char text[400];
        snprintf(text, sizeof text, "host %s (rank %d): the task could not be submitted: %s", S.host, S.rank,
                 suiro_last_error());
        send_text(MSG_TRESULT, 0, t->id, SUIRO_RESULT_ERROR, text);
        drop_task(i);
        continue;
      }
      msg_free(m);
      t->waiting = NULL;
    }
    int kind = suiro_task_kind(p, t->t);
    if (kind <= 0) {
      i++;
      continue;
    }
    suiro_result r;
    if (suiro_collect(p, t->t, &r, 0) == SUIRO_OK) send_task_result(t, &r);
    busy = 1;
    drop_task(i);
  }
  return busy;
}

static stask *find_task(uint64_t id) {
  for (size_t i = 0; i < S.ntasks; i++)
    if (S.tasks[i].id == id) return &S.tasks[i];
  return NULL;
}

static void on_region(msg *m) {
  region_wire id;
  if (m->h.len < sizeof id) return;
  memcpy(&id, msg_payload(m), sizeof id);
  id.name[sizeof id.name - 1] = 0;
  if (m->h.len - sizeof id < id.length) return;
  sregion *g = find_region(id.name, strlen(id.name), id.offset, id.length);
  if (m->h.type == MSG_FORGET) {
    if (!g) return;
    for (sregion **gp = &S.regions; *gp; gp = &(*gp)->next)
      if (*gp == g) {
        *gp = g->next;
        break;
      }
    suiro_buf_unref(g->buf);
    free(g);
    return;
  }
  if (g) return; /* have it */
  suiro_buf *b = suiro_buf_alloc(id.length ? (size_t)id.length : 8);
  if (!b) return; /* the tasks naming it fail, saying so */
  memcpy(suiro_buf_data(b), msg_payload(m) + sizeof id, (size_t)id.length);
  g = calloc(1, sizeof *g);
  if (!g) {
    suiro_buf_unref(b);
    return;
  }
  g->id = id;
  g->buf = b;
  g->next = S.regions;
  S.regions = g;
}

/* ---- pools from rank 0's resolved options ---------------------------------------------------- */

static void on_pool_new(msg *m) {
  /* rank 0's options as every face hands them over (suiro_pool_create_from), with this rank's
   * own SUIRO_MPI_RANK and SUIRO_MPI_HOST over whatever the options' env says */
  char rank[48], host[320], err[600];
  snprintf(rank, sizeof rank, "SUIRO_MPI_RANK=%d", S.rank);
  snprintf(host, sizeof host, "SUIRO_MPI_HOST=%s", S.host);
  const char *const extra[] = { rank, host, NULL };
  suiro_pool *p = NULL;
  spool *sp = calloc(1, sizeof *sp);
  if (!sp) {
    snprintf(err, sizeof err, "out of memory");
  } else if (suiro_pool_create_from_env(msg_payload(m), (size_t)m->h.len, WIRE_LANG_LUA, extra, &p, NULL) != SUIRO_OK) {
    snprintf(err, sizeof err, "%s", suiro_last_error());
    p = NULL;
  }
  if (!p) {
    free(sp);
    send_text(MSG_POOL_UP, m->h.pool, 0, 0, err);
    return;
  }
  sp->id = m->h.pool;
  sp->p = p;
  sp->next = S.pools;
  S.pools = sp;
  suiro_pool_stats st;
  suiro_pool_status(p, &st, NULL, 0);
  msg *r = msg_new(MSG_POOL_UP, 0);
  if (r) {
    r->h.pool = m->h.pool;
    r->h.a = 1;
    r->h.b = (uint64_t)st.workers;
    send0(r);
  }
}

/* Everything of pool sp goes (its ranges and tasks), then the pool itself. */
static void drop_pool(spool *sp) {
  for (schunk **cp = &S.chunks; *cp;) {
    schunk *c = *cp;
    if (c->pl->pool != sp) {
      cp = &c->next;
      continue;
    }
    suiro_map_free(c->m);
    c->pl->inflight--;
    *cp = c->next;
    free(c);
  }
  for (splan *pl = S.plans, *next; pl; pl = next) {
    next = pl->next;
    if (pl->pool == sp) free_plan(pl);
  }
  for (size_t i = 0; i < S.ntasks;) {
    if (S.tasks[i].pool == sp) drop_task(i);
    else i++;
  }
  suiro_pool_stop(sp->p, 5.0); /* as a face's pool stop: 5 s for running tasks, then kill */
  for (spool **pp = &S.pools; *pp; pp = &(*pp)->next)
    if (*pp == sp) {
      *pp = sp->next;
      break;
    }
  free(sp);
}

/* pool:status() of this rank's pool as one value (a LIST of one DICT, as a face encodes a
 * returned value): workers (slot, pid, state, tasks, steals, parks, moves, parked), live and the
 * pool's counters. */
static int encode_status(suiro_pool *p, suiro_wire_writer *w) {
  suiro_pool_stats s;
  suiro_worker_info wk[64];
  int n = suiro_pool_status(p, &s, wk, 64);
  if (n < 0) n = 0;
  suiro_wire_put_list(w, 1);
  suiro_wire_put_dict(w, 14);
  suiro_wire_put_str(w, "workers", 7);
  suiro_wire_put_list(w, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    const char *state = suiro_worker_state_name(wk[i].state);
    suiro_wire_put_dict(w, 8);
    suiro_wire_put_str(w, "slot", 4), suiro_wire_put_i64(w, wk[i].slot);
    suiro_wire_put_str(w, "pid", 3), suiro_wire_put_i64(w, wk[i].pid);
    suiro_wire_put_str(w, "state", 5), suiro_wire_put_str(w, state, strlen(state));
    suiro_wire_put_str(w, "tasks", 5), suiro_wire_put_i64(w, (int64_t)wk[i].tasks);
    suiro_wire_put_str(w, "steals", 6), suiro_wire_put_i64(w, (int64_t)wk[i].steals);
    suiro_wire_put_str(w, "parks", 5), suiro_wire_put_i64(w, (int64_t)wk[i].parks);
    suiro_wire_put_str(w, "moves", 5), suiro_wire_put_i64(w, (int64_t)wk[i].moves);
    suiro_wire_put_str(w, "parked", 6), suiro_wire_put_bool(w, wk[i].parked ? 1 : 0);
  }
#define F(name) suiro_wire_put_str(w, #name, strlen(#name)), suiro_wire_put_i64(w, (int64_t)s.name)
  F(max_workers); F(submitted); F(collected); F(tasks); F(steals); F(parks); F(host_parks);
  F(deaths); F(respawns); F(wakes); F(moves);
#undef F
  suiro_wire_put_str(w, "live", 4), suiro_wire_put_i64(w, s.workers);
  suiro_wire_put_str(w, "region", 6), suiro_wire_put_str(w, suiro_pool_name(p), strlen(suiro_pool_name(p)));
  return w->status;
}

static void on_status(msg *m) {
  spool *sp = find_pool(m->h.pool);
  msg *r = NULL;
  if (sp) {
    _Alignas(8) unsigned char stack[2048];
    suiro_wire_writer w;
    suiro_wire_writer_init(&w, stack, sizeof stack);
    const void *p;
    size_t n;
    if (encode_status(sp->p, &w) == WIRE_OK && suiro_wire_writer_finish(&w, &p, &n) == WIRE_OK &&
        (r = msg_new(MSG_STATUS_REPLY, n)))
      memcpy(msg_payload(r), p, n);
    suiro_wire_writer_free(&w);
  }
  if (!r) r = msg_new(MSG_STATUS_REPLY, 0);
  if (!r) return;
  r->h.pool = m->h.pool;
  r->h.id = m->h.id;
  send0(r);
}

/* Sleeps until a message or a result arrives (at most 20 ms: the pools' event fds fire for task
 * results; the cap is a backstop). */
static void sleep_for_events(void) {
  struct pollfd fds[65];
  nfds_t n = 0;
  fds[n++] = (struct pollfd){ .fd = comm_inbox_fd(), .events = POLLIN };
  for (spool *p = S.pools; p && n < 65; p = p->next)
    fds[n++] = (struct pollfd){ .fd = suiro_pool_eventfd(p->p), .events = POLLIN };
  /* armed now: a result landing after the checks below makes its fd readable */
  if (poll_chunks() || poll_tasks()) return;
  poll(fds, n, S.chunks ? 2 : 20); /* ranges running: look at their progress often */
  for (spool *p = S.pools; p; p = p->next) suiro_pool_event_ack(p->p);
}

int cluster_serve(volatile sig_atomic_t *interrupt) {
  snprintf(S.host, sizeof S.host, "%s", comm_host());
  S.rank = comm_rank();
  cpu_set_t cpus;
  int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  msg *hello = msg_new(MSG_HELLO, strlen(S.host) + 1);
  if (hello) {
    memcpy(msg_payload(hello), S.host, strlen(S.host) + 1);
    hello->h.a = (uint64_t)getpid();
    hello->h.b = (uint64_t)ncpu;
    send0(hello);
  }
  int exit_asked = 0;
  while (!exit_asked && !comm_lost() && !*interrupt) {
    int busy = 0;
    msg *m;
    while (!exit_asked && (m = comm_recv())) {
      busy = 1;
      switch (m->h.type) {
      case MSG_EXIT: exit_asked = 1; break;
      case MSG_POOL_NEW: on_pool_new(m); break;
      case MSG_POOL_STOP: {
        spool *sp = find_pool(m->h.pool);
        if (sp) drop_pool(sp);
        break;
      }
      case MSG_BLOB: {
        spool *sp = find_pool(m->h.pool);
        if (sp) suiro_fn_publish(sp->p, m->h.a, msg_payload(m), (size_t)m->h.len);
        break;
      }
      case MSG_REGION:
      case MSG_FORGET: on_region(m); break;
      case MSG_PLAN: on_plan(m); break;
      case MSG_CHUNK: on_chunk(m); break;
      case MSG_NOMORE: {
        splan *pl = find_plan(m->h.id);
        if (pl) {
          pl->exhausted = 1;
          pl->asked = 0;
        }
        break;
      }
      case MSG_MAP_END: on_map_end(m); break;
      case MSG_TASK: on_task(m); m = NULL; break; /* kept until submitted */
      case MSG_TCANCEL: {
        stask *t = find_task(m->h.id);
        int ok = 0;
        if (t && t->waiting) { /* not submitted yet: it never runs */
          suiro_result r = { .kind = SUIRO_RESULT_CANCELLED, .data = "cancelled before it started",
                             .len = strlen("cancelled before it started"), .worker_slot = -1 };
          send_task_result(t, &r);
          drop_task((size_t)(t - S.tasks));
          ok = 1;
        } else if (t) {
          ok = suiro_cancel(t->pool->p, t->t);
        }
        msg *r = msg_new(MSG_TCANCEL_ACK, 0);
        if (r) {
          r->h.id = m->h.id;
          r->h.a = (uint64_t)ok;
          send0(r);
        }
        break;
      }
      case MSG_TKILL: {
        stask *t = find_task(m->h.id);
        if (t && !t->waiting) suiro_task_kill(t->pool->p, t->t);
        break;
      }
      case MSG_STATUS: on_status(m); break;
      default: break;
      }
      msg_free(m);
    }
    busy |= poll_chunks();
    busy |= poll_tasks();
    comm_set_eager(S.chunks != NULL || S.ntasks > 0);
    if (!busy && !exit_asked) sleep_for_events();
  }
  while (S.pools) drop_pool(S.pools);
  while (S.regions) {
    sregion *g = S.regions;
    S.regions = g->next;
    suiro_buf_unref(g->buf);
    free(g);
  }
  return exit_asked ? 0 : 1;
}
