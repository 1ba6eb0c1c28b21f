/*
 * api.c — the table of suiro_cluster.h (build/lib/suiro/cluster.so): the tier's verbs for the
 * Python and R faces, over deal.c (rank 0) and serve.c (ranks 1..K-1).
 *
 * A face stages a map for its local pool (suiro_plan_create, never started); map_new reads that
 * staged plan back through the seam's read-only accessors (suiro_plan_of, suiro_plan_elem, ...)
 * into the suiro_plan_spec that deal.c deals out, so no face writes a second staging path for
 * the cluster. Ownership: everything here runs on the face's thread that holds the pool; the
 * communication thread touches only what comm_lock guards in deal.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "suiro_cluster.h"

#define R cluster_r0

static int a_in_job(void) {
  const char *s = getenv("OMPI_COMM_WORLD_SIZE");
  return s && atoi(s) > 1;
}

static volatile sig_atomic_t a_signal; /* the serving ranks' (and a face without one's) flag */
static volatile sig_atomic_t *a_flag = &a_signal;

static void a_shutdown(int ending) { cluster_shutdown(ending || *a_flag != 0); }
static void a_atexit(void) { a_shutdown(0); }

static int a_start(volatile sig_atomic_t *interrupt, char *err, size_t cap) {
  if (R.started) return 0;
  if (interrupt) a_flag = interrupt;
  static int registered;
  if (!registered) atexit(a_atexit); /* a host that exits without shutdown still ends the job cleanly */
  registered = 1;
  return cluster_start(a_flag, err, cap);
}

static int a_rank(void) { return R.started ? R.rank : 0; }
static int a_size(void) { return R.started ? R.size : 1; }
static const char *a_node_name(int rank) { return R.started ? cluster_node_name(rank) : comm_host(); }
static const char *a_mpi_version(void) { return comm_version(); }
static const char *a_lost(void) { return R.lost[0] ? R.lost : comm_lost(); }

static void on_signal(int sig) { a_signal = sig; }

/* Ranks 1..K-1: serve until rank 0 says EXIT (0), MPI fails (1) or a signal ends the job. */
static int a_serve(void) {
  if (!R.started) return 1;
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  a_flag = &a_signal;
  int rc = cluster_serve(&a_signal);
  R.exited = 1;
  comm_stop(8, a_signal != 0); /* bounded: the job ends within seconds even when a rank hangs */
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (a_signal) return a_signal == SIGTERM ? 143 : 130;
  if (rc != 0 && comm_lost()) fprintf(stderr, "suiro (rank %d, node %s): %s\n", R.rank, comm_host(), comm_lost());
  return rc == 0 ? 0 : 1;
}

/* ---- pools ------------------------------------------------------------------------------------ */

static void *a_pool_new(suiro_pool *const *local, const double *timeout, const void *spec, size_t len,
                        double start_timeout, char *err, size_t cap) {
  if (!local || !*local) return snprintf(err, cap, "the local pool is not running"), NULL;
  return cluster_pool_new(local, timeout, spec, len, start_timeout, err, cap);
}

static void a_pool_close(void *xp) {
  if (xp) cluster_pool_close(xp);
}

static int a_pool_nodes(void *xp) { return xp ? ((xpool *)xp)->nranks : 1; }

static int a_pool_node(void *xp, int rank, suiro_cluster_node *o) {
  xpool *x = xp;
  if (!x || rank < 0 || rank >= x->nranks) return -1;
  memset(o, 0, sizeof *o);
  o->rank = rank;
  o->up = x->nodes[rank].up;
  o->workers = x->nodes[rank].workers;
  o->pid = R.pids ? R.pids[rank] : 0;
  o->cpus = R.cpus ? R.cpus[rank] : cluster_cpus();
  o->name = a_node_name(rank);
  o->error = x->nodes[rank].up < 0 ? x->nodes[rank].err : NULL;
  return 0;
}

/* ---- maps ------------------------------------------------------------------------------------- */

/* The spec of a staged plan, read back through the seam: RANGE start and step from its first
 * two elements, VALUES element buffers into one block of 8-aligned offsets (*data, *offs are
 * the caller's to free). */
static int spec_of(suiro_map *m, int seeded, uint64_t seed, int stream, suiro_plan_spec *s, const suiro_template **tpl,
                   unsigned char **data, uint64_t **offs, char *err, size_t cap) {
  const suiro_plan *pl = suiro_plan_of(m);
  if (!pl) return snprintf(err, cap, "%s", suiro_last_error()), -1;
  suiro_plan_spec_init(s);
  suiro_plan_fn(pl, &s->fn, &s->fn_len);
  s->n = suiro_plan_size(pl);
  s->in_kind = suiro_plan_in_kind(pl);
  s->seeded = seeded;
  s->seed = seed;
  s->stream = stream;
  *tpl = suiro_plan_template(pl);
  *data = NULL;
  *offs = NULL;
  suiro_elem e;
  if (s->in_kind == SUIRO_IN_ARRAY) {
    s->in_type = suiro_plan_in_type(pl);
    s->in_data = suiro_plan_in_data(pl);
  } else if (s->in_kind == SUIRO_IN_RANGE) {
    if (s->n > 0) {
      if (suiro_plan_elem(pl, 0, &e) != 0 || e.kind != 'i') return snprintf(err, cap, "a damaged range"), -1;
      s->start = e.i;
      s->step = 1;
      if (s->n > 1) {
        int64_t first = e.i;
        if (suiro_plan_elem(pl, 1, &e) != 0 || e.kind != 'i') return snprintf(err, cap, "a damaged range"), -1;
        s->step = (int64_t)((uint64_t)e.i - (uint64_t)first);
      }
    }
  } else if (s->in_kind == SUIRO_IN_VALUES) {
    if (s->n >= SIZE_MAX / 16) return snprintf(err, cap, "%llu elements are too many", (unsigned long long)s->n), -1;
    uint64_t *o = malloc(((size_t)s->n + 1) * sizeof *o);
    size_t have = 0, room = 64;
    unsigned char *d = malloc(room);
    if (!o || !d) {
      free(o), free(d);
      return snprintf(err, cap, "out of memory"), -1;
    }
    for (uint64_t i = 0; i < s->n; i++) {
      if (suiro_plan_elem(pl, i, &e) != 0 || e.kind != 'v') {
        free(o), free(d);
        return snprintf(err, cap, "element %llu: %s", (unsigned long long)i + 1, suiro_last_error()), -1;
      }
      size_t need = align8z(e.len);
      if (need < e.len || need > SIZE_MAX / 4 - have) {
        free(o), free(d);
        return snprintf(err, cap, "out of memory"), -1;
      }
      while (room - have < need) room *= 2;
      unsigned char *nd = realloc(d, room);
      if (!nd) {
        free(o), free(d);
        return snprintf(err, cap, "out of memory"), -1;
      }
      d = nd;
      o[i] = have;
      if (e.len) memcpy(d + have, e.buf, e.len);
      memset(d + have + e.len, 0, need - e.len);
      have += need;
    }
    o[s->n] = have;
    s->in_data = d;
    s->in_len = have;
    s->in_offsets = o;
    *data = d;
    *offs = o;
  } else {
    return snprintf(err, cap, "a plan of unknown input kind %d", s->in_kind), -1;
  }
  return 0;
}

static void *a_map_new(void *xp, suiro_map *staged, int seeded, uint64_t seed, int stream, char *err, size_t cap) {
  xpool *x = xp;
  if (!x || x->closed) return snprintf(err, cap, "its pool was stopped"), NULL;
  suiro_plan_spec s;
  const suiro_template *tpl;
  unsigned char *data;
  uint64_t *offs;
  if (spec_of(staged, seeded, seed, stream, &s, &tpl, &data, &offs, err, cap) != 0) return NULL;
  xmap *m = cluster_map_new(x, &s, tpl, stream, err, cap);
  free(data);
  free(offs);
  return m;
}

static int a_map_wait(void *xm, double timeout) {
  xmap *x = xm;
  double deadline = timeout < 0 ? -1 : suiro_now() + timeout;
  for (;;) {
    cluster_pump();
    if (x->closed) return -1;
    if (x->finished) return 1;
    double left = deadline < 0 ? 0.1 : deadline - suiro_now();
    if (left <= 0) return 0;
    cluster_sleep(left);
  }
}

static uint64_t a_map_done(void *xm) { return cluster_map_progress(xm); }

static uint64_t a_map_size(void *xm) { return ((xmap *)xm)->n; }

static int a_map_nodes(void *xm) { return ((xmap *)xm)->nodes; }

static int a_map_failure(void *xm, suiro_error_info *e) {
  xmap *x = xm;
  if (!x->fail.kind) return 0;
  memset(e, 0, sizeof *e);
  e->cls = (suiro_wire_str){ x->fail.cls, strlen(x->fail.cls) };
  e->message = (suiro_wire_str){ x->fail.msg ? x->fail.msg : "", x->fail.msg ? strlen(x->fail.msg) : 0 };
  e->traceback = (suiro_wire_str){ x->fail.tb ? x->fail.tb : "", x->fail.tb ? strlen(x->fail.tb) : 0 };
  e->index = x->fail.index;
  e->slot = x->fail.slot;
  e->pid = x->fail.pid;
  return 1;
}

static const suiro_template *a_map_template(void *xm) {
  xmap *x = xm;
  return x->pw.has_tpl ? &x->pw.tpl : NULL;
}

static const void *a_map_column(void *xm, int k, uint64_t *count) {
  xmap *x = xm;
  if (!x->pw.has_tpl || !x->out) return NULL;
  const suiro_template *t = &x->pw.tpl;
  if (t->kind == SUIRO_OUT_RECORD) {
    if (k < 0 || k >= t->nfields) return NULL;
    if (count) *count = x->n;
    return x->out + x->col_off[k];
  }
  if (count) *count = x->n * x->width;
  return k == 0 ? x->out : NULL;
}

static int a_map_result(void *xm, uint64_t i, const void **data, size_t *len) {
  xmap *x = xm;
  if (!x->slots || i >= x->n || !x->slots[i].p || !x->slots[i].len) return 0;
  *data = x->slots[i].p;
  *len = (size_t)x->slots[i].len;
  return 1;
}

static void a_map_cancel(void *xm) {
  xmap *x = xm;
  if (x->finished || x->closed) return;
  cluster_pump();
  char text[160];
  snprintf(text, sizeof text, "the map was cancelled with %llu of %llu elements done", (unsigned long long)x->done,
           (unsigned long long)x->n);
  x->user_cancel = 1;
  cluster_map_fail(x, SUIRO_RESULT_CANCELLED, SUIRO_CLASS_CANCELLED, text, 1);
}

static void a_map_free(void *xm) {
  if (xm) cluster_map_free(xm);
}

static const suiro_cluster_api api = {
  SUIRO_CLUSTER_VERSION,
  a_in_job, a_start, a_rank, a_size, a_node_name, a_mpi_version, a_serve, a_shutdown, a_lost,
  a_pool_new, a_pool_close, a_pool_nodes, a_pool_node,
  a_map_new, a_map_wait, a_map_size, a_map_done, a_map_nodes, a_map_failure, a_map_template, a_map_column, a_map_result, a_map_cancel,
  a_map_free,
};

__attribute__((visibility("default"))) const suiro_cluster_api *suiro_cluster(void) { return &api; }
