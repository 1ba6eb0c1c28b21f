/*
 * map.c — parallel maps: n elements staged once in a shared region, one runner task per worker,
 * ranges handed out by a shared cursor (cursor.c).
 *
 * Region layout (one suiro_buf, recycled warm between maps):
 *   map_hdr | description (the binding's: function and input) | typed output area |
 *   result slots (one per element, untyped results) | heap (untyped results, error messages) |
 *   stream rings (one SPSC spsc per runner: completed ranges, in completion order)
 *
 * Ownership
 *   - The creator (host or a worker, for a nested map) writes the description and starts a run;
 *     runners only read it. Each element index is claimed exactly once (the cursor), and only its
 *     claimer writes its output cell or result slot. Heap space is handed out in chunks by a
 *     shared bump pointer; a runner owns the chunks it took.
 *   - A run has a generation: result slots carry the generation that wrote them, so a recycled
 *     region needs no clearing.
 * Memory ordering
 *   - The description is written before the runner tasks are published (release through the
 *     task queue); the results are written before the runner's task result is published
 *     (release), and the creator reads them after collecting every runner (acquire).
 *   - Streaming: a range is pushed to the runner's SPSC ring (spsc.c, release publication) after
 *     its results are written.
 *   - cancel, err_index and done are atomics; err_index is claimed by CAS (the first failure wins)
 *     and its message is written before the runner finishes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cursor.h"
#include "pool.h"
#include "spsc.h"
#include "suiro_bind.h"

#define MAP_MAGIC 0x70616d6f72697573ull /* "suiromap" */
#define NO_ERROR UINT64_MAX
#define HEAP_CHUNK ((size_t)64 << 10)
#define STREAM_CAP 256u
#define STREAM_SLOT 64u
#define MAP_MAX_N (UINT64_C(1) << 48) /* elements of one map: beyond any run, and every n * cell fits */

typedef struct map_hdr {
  uint64_t magic;
  uint64_t n;
  uint64_t desc_off, desc_bytes;
  uint64_t out_off, out_bytes;
  uint64_t slots_off;          /* 0: no slots */
  uint64_t heap_off, heap_bytes;
  uint64_t rings_off;          /* 0: not streaming */
  uint32_t runners;
  uint32_t gen;                /* current run */
  SUIRO_ALIGNED _Atomic uint64_t cursor;
  SUIRO_ALIGNED _Atomic uint64_t done;
  SUIRO_ALIGNED _Atomic uint32_t cancel;
  SUIRO_ALIGNED _Atomic uint64_t err_index;
  uint64_t err_off, err_len;
  SUIRO_ALIGNED _Atomic uint64_t heap_top;
  /* per runner, one cache line each: the element it is running (read after its worker died) */
  /* and its notes (suiro_map_note): heap offset + 1 of the last one written, 0 for none */
  struct { SUIRO_ALIGNED _Atomic uint64_t current; _Atomic uint64_t notes; } runner[POOL_MAX_WORKERS];
} map_hdr;

typedef struct map_slot {
  _Atomic uint32_t gen;  /* the run that wrote it */
  uint32_t len;
  uint64_t off;          /* in the heap */
} map_slot;

/* The layout as this process knows it: computed by the creator, checked against the mapped
 * region by a runner, and never re-read from shared memory afterwards. */
typedef struct map_layout {
  uint64_t n;
  size_t desc_off, desc_bytes, out_off, out_bytes, slots_off, heap_off, heap_bytes, rings_off;
  uint32_t runners;
} map_layout;

struct suiro_map {
  handle_live live;      /* first: checked at every entry (handle.c) */
  suiro_pool *pool;      /* creator side; NULL once the pool stopped (map_pool_stopped) */
  suiro_map *prev, *next; /* the creator pool's maps */
  int orphaned_running;  /* the pool stopped while a run was in flight */
  struct suiro_plan *plan; /* plan.c's validated copy of the plan, made on first use */
  suiro_buf *buf;
  map_hdr *h;
  char *base;
  map_layout lay;
  /* creator side */
  suiro_task *tasks;     /* runner tasks of the run in flight (0: collected) */
  int ntasks;            /* runners of the run in flight, 0 when none */
  int nleft;             /* of those, not collected yet */
  int died;              /* 1 a runner's worker died, 2 a runner failed to start, 3 killed */
  int killed;            /* suiro_map_kill was called for this run */
  int user_cancel;       /* suiro_map_cancel was called while it ran */
  uint64_t died_index;   /* element the dead runner was on (UINT64_MAX: unknown) */
  int died_slot, died_pid;
  char died_msg[200];
  spsc_consumer *streams;
  unsigned next_stream;
  /* runner side */
  unsigned runner;
  cursor_claimer claimer;
  uint64_t chunk, chunk_end; /* heap chunk owned by this runner */
  spsc_producer stream;
};

static int map_readable(const suiro_map *m, const char *fn);
static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

void suiro_map_opts_init(suiro_map_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

static int live_workers(suiro_pool *p) {
  int n = 0;
  for (int i = 0; i < p->hdr->max_workers; i++) {
    int s = ld_rlx(&p->workers[i].state);
    if (s == SUIRO_WORKER_IDLE || s == SUIRO_WORKER_BUSY || s == SUIRO_WORKER_STARTING) n++;
  }
  return n;
}

/* Lays out the region for o: 0, or -1 when a size overflows. */
static int plan_layout(const suiro_map_opts *o, uint32_t runners, map_layout *l, size_t *total) {
  uint64_t off = align64(sizeof(map_hdr)), b;
  memset(l, 0, sizeof *l);
  l->n = o->n;
  l->runners = runners;
#define ADD(field, bytes)                                                                    \
  do {                                                                                       \
    l->field = off;                                                                          \
    if (__builtin_add_overflow(off, (uint64_t)(bytes), &off) || off > UINT64_MAX - 64) return -1; \
    off = align64(off);                                                                      \
  } while (0)
  ADD(desc_off, o->desc_bytes);
  l->desc_bytes = o->desc_bytes;
  ADD(out_off, o->out_bytes);
  l->out_bytes = o->out_bytes;
  if (o->slots) {
    if (__builtin_mul_overflow(o->n, (uint64_t)sizeof(map_slot), &b)) return -1;
    ADD(slots_off, b);
  }
  ADD(heap_off, o->heap_bytes);
  l->heap_bytes = o->heap_bytes;
  if (o->stream) ADD(rings_off, align64(spsc_bytes(STREAM_CAP, STREAM_SLOT)) * runners);
#undef ADD
  if (off > (uint64_t)SIZE_MAX / 2) return -1;
  *total = (size_t)off;
  return 0;
}

suiro_status suiro_map_create(suiro_pool *p, const suiro_map_opts *o, suiro_map **out) {
  if (!out) return suiro_set_error(SUIRO_ERR, "suiro_map_create: out (argument 3) is NULL");
  *out = NULL;
  POOL_GUARD(p, "suiro_map_create", SUIRO_ERR);
  if (!o || o->size != sizeof *o) return suiro_set_error(SUIRO_ERR, "map: options not initialised with suiro_map_opts_init");
  if (o->n > MAP_MAX_N)
    return suiro_set_error(SUIRO_ERR, "suiro_map_create: n must be at most 2^48, got %llu", (unsigned long long)o->n);
  if (o->runners < 0 || o->runners > POOL_MAX_WORKERS)
    return suiro_set_error(SUIRO_ERR, "suiro_map_create: runners must be in 0..%d (0: one per worker), got %d",
                           POOL_MAX_WORKERS, o->runners);
  if ((o->slots != 0 && o->slots != 1) || (o->stream != 0 && o->stream != 1))
    return suiro_set_error(SUIRO_ERR, "suiro_map_create: slots and stream must be 0 or 1, got %d and %d", o->slots,
                           o->stream);
  /* the dense parts are written in full: they must fit the memory budget (the heap is sparse) */
  uint64_t dense = 0;
  if (__builtin_add_overflow((uint64_t)o->desc_bytes, (uint64_t)o->out_bytes, &dense) ||
      (o->slots && __builtin_add_overflow(dense, o->n * (uint64_t)sizeof(map_slot), &dense)))
    dense = UINT64_MAX;
  if (suiro_budget_check("suiro_map_create: the map's description, output and result slots", 1, dense) != SUIRO_OK)
    return SUIRO_ERR;
  if (ld_rlx(&p->hdr->closing)) return suiro_set_error(SUIRO_CLOSED, "map: the pool is stopping");
  int runners = o->runners > 0 ? o->runners : live_workers(p);
  if (runners < 1) runners = 1;
  if ((uint64_t)runners > o->n && o->n > 0) runners = (int)o->n;
  if (runners > POOL_MAX_WORKERS) runners = POOL_MAX_WORKERS;
  map_layout lay;
  size_t total;
  if (plan_layout(o, (uint32_t)runners, &lay, &total) != 0)
    return suiro_set_error(SUIRO_ERR, "map: %llu elements do not fit in memory (sizes overflow)", (unsigned long long)o->n);
  suiro_map *m = calloc(1, sizeof *m);
  if (!m) return suiro_set_error(SUIRO_ERR, "out of memory");
  handle_init(&m->live, HANDLE_MAP);
  m->buf = suiro_buf_alloc(total);
  if (!m->buf) {
    handle_retire(m, sizeof *m);
    return SUIRO_ERR;
  }
  m->pool = p;
  m->next = p->maps;
  if (p->maps) p->maps->prev = m;
  p->maps = m;
  m->lay = lay;
  m->base = suiro_buf_data(m->buf);
  m->h = (map_hdr *)m->base;
  map_hdr *h = m->h;
  uint32_t gen = h->magic == MAP_MAGIC ? h->gen : 0; /* a recycled region keeps counting */
  memset(h, 0, sizeof *h);
  h->magic = MAP_MAGIC;
  h->gen = gen;
  st_rlx(&h->err_index, NO_ERROR); /* no failure before a run: a prepared map has none */
  h->n = lay.n;
  h->desc_off = lay.desc_off;
  h->desc_bytes = lay.desc_bytes;
  h->out_off = lay.out_off;
  h->out_bytes = lay.out_bytes;
  h->slots_off = lay.slots_off;
  h->heap_off = lay.heap_off;
  h->heap_bytes = lay.heap_bytes;
  h->rings_off = lay.rings_off;
  h->runners = lay.runners;
  m->tasks = calloc((size_t)runners, sizeof *m->tasks);
  if (o->stream) m->streams = calloc((size_t)runners, sizeof *m->streams);
  if (!m->tasks || (o->stream && !m->streams)) {
    suiro_map_free(m);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  *out = m;
  return SUIRO_OK;
}

char *map_region_parts(suiro_map *m, size_t *desc_bytes, size_t *out_bytes, uint64_t *n) {
  *desc_bytes = *out_bytes = 0;
  *n = 0;
  if (!map_readable(m, "suiro_plan_of")) return NULL;
  *desc_bytes = m->lay.desc_bytes;
  *out_bytes = m->lay.out_bytes;
  *n = m->lay.n;
  return m->base + m->lay.desc_off;
}

struct suiro_plan **map_plan_slot(suiro_map *m) { return map_readable(m, "suiro_plan_of") ? &m->plan : NULL; }

/* Accessors of a map inherited across fork still read (its region is mapped here too); what runs,
 * waits or frees refuses it (MAP_GUARD). */
static int map_readable(const suiro_map *m, const char *fn) {
  int s = handle_state(m, HANDLE_MAP);
  if (s == HS_OK || s == HS_FOREIGN) return 1;
  handle_check(m, HANDLE_MAP, fn);
  return 0;
}
void *suiro_map_desc(suiro_map *m) { return map_readable(m, "suiro_map_desc") ? m->base + m->lay.desc_off : NULL; }
size_t suiro_map_desc_bytes(suiro_map *m) { return map_readable(m, "suiro_map_desc_bytes") ? m->lay.desc_bytes : 0; }
void *suiro_map_output(suiro_map *m) { return map_readable(m, "suiro_map_output") ? m->base + m->lay.out_off : NULL; }
uint64_t suiro_map_size(suiro_map *m) { return map_readable(m, "suiro_map_size") ? m->lay.n : 0; }
uint64_t suiro_map_done(suiro_map *m) { return map_readable(m, "suiro_map_done") ? ld_rlx(&m->h->done) : 0; }
void suiro_map_cancel(suiro_map *m) {
  MAP_GUARD(m, "suiro_map_cancel", );
  if (m->ntasks) m->user_cancel = 1;
  atomic_store(&m->h->cancel, 1);
}
int suiro_map_cancelled(suiro_map *m) {
  MAP_GUARD(m, "suiro_map_cancelled", 1);
  return ld_rlx(&m->h->cancel) != 0;
}

void map_pool_stopped(suiro_pool *p) {
  for (suiro_map *m = p->maps, *next; m; m = next) {
    next = m->next;
    if (m->ntasks) m->orphaned_running = 1;
    m->ntasks = m->nleft = 0;
    m->pool = NULL;
    m->prev = m->next = NULL;
  }
  p->maps = NULL;
}

static void unlink_map(suiro_map *m) {
  if (!m->pool) return;
  if (m->prev) m->prev->next = m->next;
  else m->pool->maps = m->next;
  if (m->next) m->next->prev = m->prev;
  m->prev = m->next = NULL;
}

suiro_status suiro_map_start(suiro_map *m, double timeout) {
  MAP_GUARD(m, "suiro_map_start", SUIRO_ERR);
  map_hdr *h = m->h;
  const map_layout *l = &m->lay;
  if (!m->pool) return suiro_set_error(SUIRO_CLOSED, "map: its pool was stopped");
  if (m->ntasks) return suiro_set_error(SUIRO_ERR, "map: a run is still in progress");
  m->orphaned_running = 0;
  m->user_cancel = 0;
  m->killed = 0;
  h->gen++;
  if (h->gen == 0) h->gen = 1;
  st_rlx(&h->cursor, 0);
  st_rlx(&h->done, 0);
  st_rlx(&h->cancel, 0);
  st_rlx(&h->err_index, NO_ERROR);
  h->err_off = h->err_len = 0;
  st_rlx(&h->heap_top, 0);
  for (uint32_t r = 0; r < l->runners; r++) {
    st_rlx(&h->runner[r].current, NO_ERROR);
    st_rlx(&h->runner[r].notes, 0);
  }
  m->died = 0;
  m->died_msg[0] = 0;
  m->died_index = UINT64_MAX;
  m->died_slot = -1;
  m->died_pid = 0;
  if (l->rings_off) {
    size_t stride = align64(spsc_bytes(STREAM_CAP, STREAM_SLOT));
    for (uint32_t r = 0; r < l->runners; r++) {
      void *mem = m->base + l->rings_off + stride * r;
      memset(mem, 0, sizeof(spsc));
      spsc_consumer_init(&m->streams[r], mem, STREAM_CAP, STREAM_SLOT);
    }
    m->next_stream = 0;
  }
  const char *name = suiro_buf_name(m->buf);
  if (!name) return suiro_set_error(SUIRO_ERR, "map: its region lost its name");
  /* runner payload: u32 runner index, then the region name */
  struct { uint32_t runner; char name[SUIRO_NAME_MAX]; } arg;
  size_t len = sizeof arg.runner + strlen(name) + 1;
  memcpy(arg.name, name, strlen(name) + 1);
  for (uint32_t r = 0; r < l->runners; r++) {
    arg.runner = r;
    suiro_buf_ref(m->buf); /* the runner's reference, taken over when it attaches */
    suiro_status st = suiro_submit(m->pool, SUIRO_FN_MAP, &arg, len, &m->tasks[r], timeout);
    if (st != SUIRO_OK) {
      suiro_buf_unsend(m->buf);
      atomic_store(&m->h->cancel, 1); /* the others stop at their next claim */
      m->ntasks = (int)r;
      m->nleft = (int)r;
      char msg[300];
      snprintf(msg, sizeof msg, "%s", suiro_last_error());
      suiro_map_wait(m, -1);
      return suiro_set_error(st, "map: %s", msg);
    }
  }
  m->ntasks = (int)l->runners;
  m->nleft = m->ntasks;
  return SUIRO_OK;
}

/* A runner's task result: a death or a failure outside any element cancels the rest at once. */
static void runner_done(suiro_map *m, unsigned r, const suiro_result *res) {
  if (res->kind == SUIRO_RESULT_DIED && !m->died) {
    m->died = 1;
    snprintf(m->died_msg, sizeof m->died_msg, "%.*s", (int)res->len, (const char *)res->data);
    m->died_slot = res->worker_slot;
    m->died_pid = res->worker_pid;
    /* the element the runner was on when its worker died */
    if (r < m->lay.runners) m->died_index = ld_acq(&m->h->runner[r].current);
    if (m->died_index >= m->lay.n) m->died_index = UINT64_MAX;
    atomic_store(&m->h->cancel, 1); /* the others stop at their next claim */
  } else if (res->kind == SUIRO_RESULT_CANCELLED && !m->died && m->killed) {
    m->died = 3;
    snprintf(m->died_msg, sizeof m->died_msg, "the map was killed (map:kill()); its workers were replaced");
    atomic_store(&m->h->cancel, 1); /* the others stop at their next claim */
  } else if (res->kind == SUIRO_RESULT_ERROR && !m->died && ld_acq(&m->h->err_index) == NO_ERROR) {
    /* a runner that failed outside any element (its binding could not start it) */
    m->died = 2;
    snprintf(m->died_msg, sizeof m->died_msg, "%.*s", (int)res->len, (const char *)res->data);
    atomic_store(&m->h->cancel, 1); /* the others stop at their next claim */
  }
}

/* Collects runners as they finish, so a death is seen (and the map cancelled) at once rather than
 * after every survivor has run out of work. A timeout consumes nothing more. */
suiro_status suiro_map_wait(suiro_map *m, double timeout) {
  MAP_GUARD(m, "suiro_map_wait", SUIRO_ERR);
  if (timeout != timeout) timeout = 0;
  if (m->orphaned_running) return suiro_set_error(SUIRO_CLOSED, "map: its pool was stopped while it ran");
  if (!m->ntasks) return SUIRO_OK;
  uint64_t deadline = timeout < 0 ? UINT64_MAX : suiro_ns() + (timeout > 1e9 ? (uint64_t)1e18 : (uint64_t)(timeout * 1e9));
  while (m->nleft > 0) {
    suiro_task left[POOL_MAX_WORKERS];
    unsigned who[POOL_MAX_WORKERS];
    int k = 0;
    for (int r = 0; r < m->ntasks; r++)
      if (m->tasks[r]) {
        left[k] = m->tasks[r];
        who[k++] = (unsigned)r;
      }
    uint64_t now = suiro_ns();
    double t = deadline == UINT64_MAX ? -1 : now >= deadline ? 0 : (double)(deadline - now) * 1e-9;
    size_t i;
    suiro_result res;
    suiro_status st = suiro_collect_any(m->pool, left, (size_t)k, &i, &res, t);
    if (st != SUIRO_OK) return st;
    runner_done(m, who[i], &res);
    m->tasks[who[i]] = 0;
    m->nleft--;
  }
  m->ntasks = 0;
  return SUIRO_OK;
}

suiro_status suiro_map_kill(suiro_map *m) {
  MAP_GUARD(m, "suiro_map_kill", SUIRO_ERR);
  if (!m->pool) return suiro_set_error(SUIRO_CLOSED, "map: its pool was stopped");
  if (!m->ntasks) return SUIRO_OK;
  m->killed = 1;
  atomic_store(&m->h->cancel, 1);
  for (int r = 0; r < m->ntasks; r++)
    if (m->tasks[r]) {
      suiro_status st = suiro_task_kill(m->pool, m->tasks[r]);
      if (st != SUIRO_OK) return st;
    }
  return SUIRO_OK;
}

int suiro_map_error(suiro_map *m, uint64_t *index, const void **data, size_t *len, int *kind) {
  if (!map_readable(m, "suiro_map_error")) return 0;
  if (!index || !data || !len || !kind) {
    suiro_set_error(SUIRO_ERR, "suiro_map_error: an output argument is NULL");
    return 0;
  }
  uint64_t e = ld_acq(&m->h->err_index);
  if (e != NO_ERROR) {
    /* the message as the failing runner wrote it, inside the heap as this process knows it */
    uint64_t off = m->h->err_off, n = m->h->err_len;
    *index = e < m->lay.n ? e : UINT64_MAX;
    if (off > m->lay.heap_bytes || n > m->lay.heap_bytes - off) off = n = 0;
    *data = m->base + m->lay.heap_off + off;
    *len = (size_t)n;
    *kind = SUIRO_RESULT_ERROR;
    return 1;
  }
  if (!m->died && m->user_cancel && ld_acq(&m->h->done) < m->lay.n) {
    snprintf(m->died_msg, sizeof m->died_msg, "the map was cancelled with %llu of %llu elements done",
             (unsigned long long)ld_acq(&m->h->done), (unsigned long long)m->lay.n);
    *index = UINT64_MAX;
    *data = m->died_msg;
    *len = strlen(m->died_msg);
    *kind = SUIRO_RESULT_CANCELLED;
    return 1;
  }
  if (m->died) {
    *index = m->died_index;
    *data = m->died_msg;
    *len = strlen(m->died_msg);
    *kind = m->died == 1 ? SUIRO_RESULT_DIED : m->died == 3 ? SUIRO_RESULT_CANCELLED : SUIRO_RESULT_ERROR;
    return 1;
  }
  return 0;
}

int suiro_map_failure(suiro_map *m, suiro_error_info *info) {
  uint64_t index;
  const void *data;
  size_t len;
  int kind;
  if (!info) return 0;
  if (!suiro_map_error(m, &index, &data, &len, &kind)) return 0;
  suiro_error_read(kind, data, len, info);
  if (index != UINT64_MAX) info->index = (int64_t)index;
  else if (info->index >= 0 && (uint64_t)info->index >= m->lay.n) info->index = -1;
  if (m->died == 1 || m->died == 3) {
    info->slot = m->died_slot;
    info->pid = m->died_pid;
  }
  return 1;
}

int suiro_map_result(suiro_map *m, uint64_t i, const void **data, size_t *len) {
  if (!map_readable(m, "suiro_map_result") || !data || !len) return 0;
  const map_layout *l = &m->lay;
  if (!l->slots_off || i >= l->n) return 0;
  map_slot *s = (map_slot *)(m->base + l->slots_off) + i;
  if (ld_acq(&s->gen) != m->h->gen) return 0;
  uint64_t off = s->off, n = s->len;
  if (off > l->heap_bytes || n > l->heap_bytes - off) return 0; /* damaged: no result */
  *data = m->base + l->heap_off + off;
  *len = (size_t)n;
  return 1;
}

int suiro_map_next_range(suiro_map *m, uint64_t *begin, uint64_t *end) {
  MAP_GUARD(m, "suiro_map_next_range", 0);
  if (!begin || !end) return 0;
  const map_layout *l = &m->lay;
  if (!l->rings_off) return 0;
  for (uint32_t k = 0; k < l->runners; k++) {
    uint32_t r = (m->next_stream + k) % l->runners;
    const spsc_slot *s = spsc_peek(&m->streams[r]);
    if (!s) continue;
    uint64_t v[2];
    memcpy(v, s->data, sizeof v);
    spsc_pop(&m->streams[r]);
    spsc_release(&m->streams[r]);
    m->next_stream = r + 1;
    if (v[0] > v[1] || v[1] > l->n) continue; /* damaged: skip it */
    *begin = v[0];
    *end = v[1];
    return 1;
  }
  return 0;
}

void suiro_map_free(suiro_map *m) {
  if (!m) return;
  /* a double free reads the dead word; a map inherited across fork is the parent's to free */
  MAP_GUARD(m, "suiro_map_free", );
  if (m->ntasks && m->pool) { /* abandoned mid-run: stop the runners and wait for them */
    atomic_store(&m->h->cancel, 1); /* the others stop at their next claim */
    suiro_map_wait(m, -1);
  }
  unlink_map(m);
  if (m->buf) suiro_buf_unref(m->buf);
  plan_free(m->plan);
  free(m->tasks);
  free(m->streams);
  handle_retire(m, sizeof *m);
}

/* ---- runner side ----------------------------------------------------------------------------- */

suiro_status suiro_map_attach(const void *arg, size_t len, suiro_map **out, unsigned *runner) {
  if (!out || !runner) return suiro_set_error(SUIRO_ERR, "suiro_map_attach: %s is NULL", !out ? "out" : "runner");
  *out = NULL;
  if (!arg) return suiro_set_error(SUIRO_ERR, "suiro_map_attach: arg is NULL");
  uint32_t r;
  if (len < sizeof r + 2) return suiro_set_error(SUIRO_ERR, "map runner: malformed payload");
  memcpy(&r, arg, sizeof r);
  char name[SUIRO_NAME_MAX];
  size_t nl = len - sizeof r;
  if (nl > sizeof name) return suiro_set_error(SUIRO_ERR, "map runner: malformed payload");
  memcpy(name, (const char *)arg + sizeof r, nl);
  name[nl - 1] = 0;
  suiro_buf *b;
  suiro_status st = suiro_buf_open(name, 0, &b);
  if (st != SUIRO_OK) return st;
  suiro_map *m = calloc(1, sizeof *m);
  if (!m) {
    suiro_buf_unref(b);
    return suiro_set_error(SUIRO_ERR, "out of memory");
  }
  handle_init(&m->live, HANDLE_MAP);
  m->buf = b;
  m->base = suiro_buf_data(b);
  m->h = (map_hdr *)m->base;
  /* The layout, checked against the region as mapped here; never re-read afterwards. */
  size_t mapped = buf_mapped_bytes(b);
  const map_hdr *h = m->h;
  map_layout l = { h->n, h->desc_off, h->desc_bytes, h->out_off, h->out_bytes, h->slots_off,
                   h->heap_off, h->heap_bytes, h->rings_off, h->runners };
  int ok = mapped >= sizeof(map_hdr) && h->magic == MAP_MAGIC && l.runners >= 1 && l.runners <= POOL_MAX_WORKERS &&
           r < l.runners;
#define INSIDE(off, bytes) ((off) >= sizeof(map_hdr) && (off) <= mapped && (bytes) <= mapped - (off))
  ok = ok && INSIDE(l.desc_off, l.desc_bytes) && INSIDE(l.out_off, l.out_bytes) && INSIDE(l.heap_off, l.heap_bytes);
  if (ok && l.slots_off) ok = l.n <= mapped / sizeof(map_slot) && INSIDE(l.slots_off, l.n * sizeof(map_slot));
  if (ok && l.rings_off) ok = INSIDE(l.rings_off, align64(spsc_bytes(STREAM_CAP, STREAM_SLOT)) * l.runners);
#undef INSIDE
  if (!ok) {
    suiro_map_detach(m);
    return suiro_set_error(SUIRO_ERR, "map runner: %s is not a map region (or its layout is damaged)", name);
  }
  m->lay = l;
  m->runner = r;
  if (l.rings_off) {
    size_t stride = align64(spsc_bytes(STREAM_CAP, STREAM_SLOT));
    spsc_producer_init(&m->stream, m->base + l.rings_off + stride * r, STREAM_CAP, STREAM_SLOT);
  }
  *runner = r;
  *out = m;
  return SUIRO_OK;
}

int suiro_map_claim(suiro_map *m, uint64_t *begin, uint64_t *end) {
  MAP_GUARD(m, "suiro_map_claim", 0);
  if (ld_rlx(&m->h->cancel)) return 0;
  worker_placement_tick(); /* a runner runs for the whole map: keep it off a shared CPU */
  return cursor_claim(&m->h->cursor, m->lay.n, m->lay.runners, &m->claimer, begin, end);
}

void map_runner_at(suiro_map *m, uint64_t i) { st_rlx(&m->h->runner[m->runner].current, i); }

void map_runner_fast(suiro_map *m, runner_fast *f) {
  f->cancel = &m->h->cancel;
  f->at = &m->h->runner[m->runner].current;
}

void suiro_map_completed(suiro_map *m, uint64_t begin, uint64_t end) {
  MAP_GUARD(m, "suiro_map_completed", );
  if (begin > end || end > m->lay.n) {
    suiro_set_error(SUIRO_ERR, "suiro_map_completed: range [%llu, %llu) is not inside the map's %llu elements",
                    (unsigned long long)begin, (unsigned long long)end, (unsigned long long)m->lay.n);
    return;
  }
  atomic_fetch_add_explicit(&m->h->done, end - begin, memory_order_relaxed);
  if (!m->lay.rings_off) return;
  uint64_t v[2] = { begin, end };
  /* The creator drains as it streams; if it stops reading, cancelling the map frees us. */
  uint64_t spins = 0;
  while (spsc_push(&m->stream, v, sizeof v, 0) != 0) {
    if (ld_rlx(&m->h->cancel)) return;
    if (++spins > 1000) {
      struct timespec ts = { 0, 50000 };
      nanosleep(&ts, NULL);
    } else {
      cpu_relax();
    }
  }
}

static void *heap_alloc(suiro_map *m, size_t n, uint64_t *off) {
  map_hdr *h = m->h;
  const uint64_t cap = m->lay.heap_bytes;
  if (n > cap) return NULL;
  n = (n + 7) & ~(size_t)7;
  if (m->chunk + n > m->chunk_end) {
    uint64_t want = n > HEAP_CHUNK ? n : HEAP_CHUNK;
    uint64_t top = ld_rlx(&h->heap_top);
    if (top < cap && want > cap - top && n <= cap - top) want = n; /* near the end: just what is needed */
    uint64_t at = atomic_fetch_add_explicit(&h->heap_top, want, memory_order_relaxed);
    if (at > cap || want > cap - at) return NULL;
    m->chunk = at;
    m->chunk_end = at + want;
  }
  *off = m->chunk;
  m->chunk += n;
  return m->base + m->lay.heap_off + *off;
}

int suiro_map_put(suiro_map *m, uint64_t i, const void *data, size_t len) {
  MAP_GUARD(m, "suiro_map_put", -1);
  const map_layout *l = &m->lay;
  if (!l->slots_off || i >= l->n || len > UINT32_MAX || (!data && len)) return -1;
  uint64_t off;
  void *dst = heap_alloc(m, len, &off);
  if (!dst) return -1;
  memcpy(dst, data, len);
  map_slot *s = (map_slot *)(m->base + l->slots_off) + i;
  s->len = (uint32_t)len;
  s->off = off;
  st_rel(&s->gen, m->h->gen);
  return 0;
}

/* A note is a heap record: index, length, the offset + 1 of the runner's previous note (0: none),
 * then the face's bytes. A runner's notes are linked newest first from runner[r].notes; each is
 * written before the link to it is published (release), and a runner's heap only grows, so a
 * previous note always lies at a lower offset (a reader follows only decreasing links). */
typedef struct map_note {
  uint64_t index, len, prev;
} map_note;

int suiro_map_note(suiro_map *m, uint64_t i, const void *data, size_t len) {
  MAP_GUARD(m, "suiro_map_note", -1);
  if (i >= m->lay.n || (!data && len) || len > SIZE_MAX - sizeof(map_note) - 8) return -1;
  uint64_t off;
  char *dst = heap_alloc(m, sizeof(map_note) + len, &off);
  if (!dst) return -1;
  _Atomic uint64_t *head = &m->h->runner[m->runner].notes;
  map_note nt = { i, len, ld_rlx(head) };
  memcpy(dst, &nt, sizeof nt);
  if (len) memcpy(dst + sizeof nt, data, len);
  st_rel(head, off + 1);
  return 0;
}

typedef struct note_ref {
  uint64_t index;
  const char *data;
  size_t len;
} note_ref;

static int note_cmp(const void *a, const void *b) {
  const note_ref *x = a, *y = b;
  return x->index < y->index ? -1 : x->index > y->index;
}

size_t suiro_map_notes(suiro_map *m, uint64_t begin, uint64_t end, void (*fn)(void *ctx, uint64_t i, const void *data, size_t len),
                       void *ctx) {
  if (!map_readable(m, "suiro_map_notes") || !fn) return 0;
  const map_layout *l = &m->lay;
  const char *heap = m->base + l->heap_off;
  note_ref *v = NULL;
  size_t n = 0, cap = 0;
  for (uint32_t r = 0; r < l->runners; r++) {
    uint64_t at = ld_acq(&m->h->runner[r].notes), last = UINT64_MAX;
    while (at && at - 1 < last) { /* links only go down: a damaged chain still ends */
      uint64_t off = at - 1;
      map_note nt;
      if (off > l->heap_bytes || l->heap_bytes - off < sizeof nt) break;
      memcpy(&nt, heap + off, sizeof nt);
      if (nt.len > l->heap_bytes - off - sizeof nt) break; /* damaged: no more of this runner */
      if (nt.index >= begin && nt.index < end) {
        if (n == cap) {
          size_t nc = cap ? cap * 2 : 16;
          note_ref *g = realloc(v, nc * sizeof *v);
          if (!g) break;
          v = g;
          cap = nc;
        }
        v[n++] = (note_ref){ nt.index, heap + off + sizeof nt, (size_t)nt.len };
      }
      last = off;
      at = nt.prev;
    }
  }
  if (n > 1) qsort(v, n, sizeof *v, note_cmp);
  for (size_t k = 0; k < n; k++) fn(ctx, v[k].index, v[k].data, v[k].len);
  free(v);
  return n;
}

int suiro_map_fail(suiro_map *m, uint64_t index, const void *err, size_t len) {
  MAP_GUARD(m, "suiro_map_fail", 0);
  if (!err) len = 0;
  map_hdr *h = m->h;
  uint64_t none = NO_ERROR;
  if (!atomic_compare_exchange_strong(&h->err_index, &none, index)) return 0; /* someone was first */
  uint64_t off = 0;
  void *dst = heap_alloc(m, len, &off);
  if (!dst) { /* no room for the message: keep the index */
    h->err_off = 0;
    h->err_len = 0;
  } else {
    memcpy(dst, err, len);
    h->err_off = off;
    h->err_len = len;
  }
  atomic_store(&h->cancel, 1);
  return 1;
}

void *suiro_map_runner_output(suiro_map *m) {
  return map_readable(m, "suiro_map_runner_output") ? m->base + m->lay.out_off : NULL;
}
const void *suiro_map_runner_desc(suiro_map *m) {
  return map_readable(m, "suiro_map_runner_desc") ? m->base + m->lay.desc_off : NULL;
}
uint64_t suiro_map_runner_size(suiro_map *m) { return map_readable(m, "suiro_map_runner_size") ? m->lay.n : 0; }

void suiro_map_detach(suiro_map *m) {
  if (!m) return;
  MAP_GUARD(m, "suiro_map_detach", );
  plan_free(m->plan);
  if (m->buf) suiro_buf_unref(m->buf);
  handle_retire(m, sizeof *m);
}
