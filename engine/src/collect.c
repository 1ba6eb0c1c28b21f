/*
 * collect.c — collecting: waiting for results (spin, then park), handing them out, cancelling,
 * killing and releasing tasks.
 *
 * Memory ordering: a result's data is written before its slot's terminal state (release, by the
 * worker or the monitor); the collector loads the state with acquire before reading the data.
 * Waiting follows wake.c: announce on the submitter's `waiting` word (seq_cst), re-check, park;
 * spinning is bounded by the adaptive budget and by the pool-wide spinner count (park.h).
 * Ownership: only the submitter collects its slots; the handle's scratch buffer and held region
 * are valid until its next collect.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "suiro_bind.h"

/* The task half of check_task, for loops whose caller checked the handle once (POOL_GUARD). */
static inline suiro_status check_task_of(suiro_pool *p, suiro_task t, uint32_t *local, const char *verb) {
  sub_rec *s = &p->subs[p->sub];
  uint32_t rs = task_rs(t);
  if (SUIRO_UNLIKELY(rs < s->result_base || rs >= s->result_base + s->nresults))
    return suiro_set_error(SUIRO_ERR, "%s: task handle %#llx does not belong to this pool handle", verb,
                           (unsigned long long)t);
  uint32_t l = rs - s->result_base;
  if (SUIRO_UNLIKELY(p->outstanding[l] != 1 || p->gen[l] != task_gen(t)))
    return suiro_set_error(SUIRO_ERR, "%s: task handle %#llx is not outstanding (collected or released already)",
                           verb, (unsigned long long)t);
  *local = l;
  return SUIRO_OK;
}

static inline suiro_status check_task(suiro_pool *p, suiro_task t, uint32_t *local, const char *verb) {
  POOL_GUARD(p, verb, SUIRO_ERR); /* NULL, stopped, inherited across fork (handle.c) */
  return check_task_of(p, t, local, verb);
}

static inline int is_done(uint64_t st, uint64_t gen) {
  return rs_gen(st) == gen && rs_terminal(rs_kind(st));
}

/* No worker can run this pending task: every worker is gone and none will come back. */
static int nobody_left(suiro_pool *p, uint64_t st) {
  if (ld_acq(&p->hdr->live) > 0) return 0;
  if (rs_kind(st) != RS_PENDING) return 0;
  if (p->is_host && p->opts.respawn) return 0;
  return 1;
}

static int ensure_scratch(suiro_pool *p, size_t n) {
  if (n <= p->scratch_cap) return 0;
  size_t cap = p->scratch_cap ? p->scratch_cap : 256;
  while (cap < n) cap *= 2;
  unsigned char *b = realloc(p->scratch, cap);
  if (!b) return -1;
  p->scratch = b;
  p->scratch_cap = cap;
  return 0;
}

/* A result that crossed in a region: a value is read where it is, until the next collect; an
 * error message is copied out (and NUL-terminated like the inline ones). */
static __attribute__((noinline, cold)) suiro_status take_spilled(suiro_pool *p, result_slot *r, int in_place,
                                                                size_t len, const void **data) {
  char name[SUIRO_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)result_data(r));
  r->flags = 0;
  if (in_place) {
    suiro_status st = suiro_buf_open(name, len, &p->held);
    if (st != SUIRO_OK) {
      p->held = NULL;
      return st;
    }
    *data = suiro_buf_data(p->held);
    return SUIRO_OK;
  }
  if (ensure_scratch(p, len + 1) != 0) {
    spill_discard(name);
    return suiro_set_error(SUIRO_ERR, "collect: out of memory for %zu bytes", len);
  }
  suiro_status st = spill_read(name, len, p->scratch);
  if (st != SUIRO_OK) return st;
  p->scratch[len] = 0;
  *data = p->scratch;
  return SUIRO_OK;
}

static suiro_status take_result(suiro_pool *p, uint32_t local, suiro_result *res) {
  sub_rec *s = &p->subs[p->sub];
  result_slot *r = pool_result(p, s->result_base + local);
  uint64_t st = ld_acq(&r->state);
  unsigned kind = rs_kind(st);
  size_t len = r->len;
  if (SUIRO_UNLIKELY(p->held != NULL)) { /* the previous collect's data is no longer promised */
    suiro_buf_unref(p->held);
    p->held = NULL;
  }
  const void *data;
  if (SUIRO_UNLIKELY(r->flags & RSF_SPILLED)) {
    suiro_status rst = take_spilled(p, r, kind == RS_VALUE, len, &data);
    if (rst != SUIRO_OK) {
      pool_free_slot(p, local);
      return rst;
    }
  } else {
    if (SUIRO_UNLIKELY(ensure_scratch(p, len + 1) != 0))
      return suiro_set_error(SUIRO_ERR, "collect: out of memory for %zu bytes", len);
    copy_small(p->scratch, result_data(r), len);
    p->scratch[len] = 0; /* messages are handy as C strings */
    data = p->scratch;
  }
  switch (kind) {
  case RS_VALUE: res->kind = SUIRO_RESULT_VALUE; break;
  case RS_ERROR: res->kind = SUIRO_RESULT_ERROR; break;
  case RS_DIED: res->kind = SUIRO_RESULT_DIED; break;
  default: res->kind = SUIRO_RESULT_CANCELLED; break;
  }
  res->data = data;
  res->len = len;
  res->worker_slot = rs_worker(st) == RS_NOWORKER ? -1 : (int)rs_worker(st);
  res->worker_pid = r->pid;
  p->gen[local] = rs_gen(st);
  pool_free_slot(p, local);
  p->collected++;
  return SUIRO_OK;
}

struct done_ctx { suiro_pool *p; const uint32_t *locals; const uint64_t *gens; size_t n; size_t *which; };
static int any_done(void *c) {
  struct done_ctx *x = c;
  sub_rec *s = &x->p->subs[x->p->sub];
  for (size_t i = 0; i < x->n; i++) {
    if (x->locals[i] == UINT32_MAX) continue;
    uint64_t st = ld_acq(&pool_result(x->p, s->result_base + x->locals[i])->state);
    if (is_done(st, x->gens[i])) {
      if (x->which) *x->which = i;
      return 1;
    }
  }
  return 0;
}

/* An awake worker last ran a task on this CPU (worker.c records where): the host's spin would
 * hold the CPU that worker waits for. Relaxed hints; a stale one costs a yield or a late one (a
 * spin past 50 us yields regardless). */
static int shares_cpu(suiro_pool *p, int cpu) {
  pool_hdr *h = p->hdr;
  uint64_t awake = ld_rlx(&h->active_mask) & ~ld_rlx(&h->parked_mask);
  for (; awake; awake &= awake - 1)
    if (ld_rlx(&p->workers[__builtin_ctzll(awake)].cpu) == cpu) return 1;
  return 0;
}

/* Waits until one of the tasks is done (ctx->which tells which). */
static suiro_status wait_any(suiro_pool *p, struct done_ctx *c, uint64_t deadline) {
  if (any_done(c)) return SUIRO_OK;
  if (deadline == 0) return SUIRO_TIMEOUT;
  pool_hdr *h = p->hdr;
  /* Host: the pre-spin (park.h), unless the latest submit woke a worker (that wait is long, and
   * the spin below yields to the woken worker at once). Found here, the wait counts as none. */
  if (p->is_host && p->woke_submitted != p->submitted) {
    for (int i = 0; i < PRESPIN_LOOKS; i++) {
      cpu_relax();
      if (any_done(c)) {
        spin_observe(&p->collect_spin, 0);
        return SUIRO_OK;
      }
    }
  }
  uint64_t t0 = suiro_ns();
  if (!p->is_host) {
    /* A worker waiting on nested results runs its own queued work meanwhile: this is what makes
     * nested fan-out deadlock-free even with one worker (worker.c explains why only its own). */
    for (;;) {
      if (any_done(c)) return SUIRO_OK;
      if (worker_claim_and_run(p, 1)) continue;
      uint64_t now = suiro_ns();
      if (now >= deadline) return SUIRO_TIMEOUT;
      if (ld_acq(&h->closing)) return suiro_set_error(SUIRO_CLOSED, "collect: the pool is stopping");
      uint64_t spin_end = now + spin_budget(&p->collect_spin);
      int spun = 0;
      if (spin_enter(&h->spinners, h->ncpu)) {
        while (suiro_ns() < spin_end) {
          for (int i = 0; i < 32; i++) cpu_relax();
          if (any_done(c)) { spin_leave(&h->spinners); spin_observe(&p->collect_spin, suiro_ns() - t0); return SUIRO_OK; }
          if (taskq_maybe_ready(&p->queues[p->sub])) break;
        }
        spin_leave(&h->spinners);
        spun = 1;
      }
      if (spun && suiro_ns() < spin_end) continue; /* left the spin because work showed up */
      pool_park_for_results(p, deadline, any_done, c);
    }
  }
  /* Host: spin for the adaptive budget while spinning can pay, then park. Awake workers hold CPUs
   * too: spinning beside as many busy workers as there are CPUs would slow the very tasks we wait
   * for. Right after this handle woke a parked worker, the scheduler tends to put that worker on
   * our CPU (the waker's): the spin then yields the CPU instead of holding it, and after a long
   * quiet spell (the worker was deep asleep, the task will take a wake-up at least) we park at
   * once. A worker the kernel put on our CPU while it was awake (another process holding the
   * other CPUs) waits for ours however many CPUs the pool counts: spinning without a break would
   * make every task wait out the whole budget and a park (measured: 2 us apart, 72 us sharing),
   * so a spin that lasts yields every few microseconds when a worker is recorded on our CPU
   * (and after 50 us regardless, for stale records): a yield costs ~0.4 us here, too much to pay
   * on every slow R task (2 us) when nobody waits for our CPU. */
  int woke = t0 - p->woke_at < 200000;
  if (!(woke && p->collect_spin.gap_ns > SPIN_CAP_NS) && !bits_more_than(ld_rlx(&h->awake_mask), h->ncpu - 1) &&
      spin_enter(&h->spinners, h->ncpu)) {
    uint64_t spin_end = t0 + spin_budget(&p->collect_spin);
    uint64_t next_yield = t0 + 2000;
    int yield = woke;
    int my_cpu = sched_getcpu();
    st_rlx(&h->host_cpu, my_cpu); /* for the workers' placement (worker.c) */
    for (;;) {
      for (int i = 0; i < 8; i++) {
        if (any_done(c)) {
          st_rlx(&h->host_cpu, -1);
          spin_leave(&h->spinners);
          spin_observe(&p->collect_spin, suiro_ns() - t0);
          return SUIRO_OK;
        }
        if (SUIRO_UNLIKELY(yield)) sched_yield();
        else cpu_relax();
      }
      uint64_t now = suiro_ns();
      if (now >= spin_end || now >= deadline) break;
      if (SUIRO_UNLIKELY(now >= next_yield)) {
        if (shares_cpu(p, my_cpu) || now - t0 > 50000) sched_yield();
        next_yield = now + 2000;
      }
    }
    st_rlx(&h->host_cpu, -1);
    spin_leave(&h->spinners);
  }
  for (;;) {
    if (any_done(c)) break;
    uint64_t now = suiro_ns();
    if (now >= deadline) return SUIRO_TIMEOUT;
    if (ld_acq(&h->closing)) return suiro_set_error(SUIRO_CLOSED, "collect: the pool is stopping");
    int gone = 1;
    for (size_t i = 0; i < c->n && gone; i++) {
      if (c->locals[i] == UINT32_MAX) continue;
      uint64_t st = ld_acq(&pool_result(p, p->subs[p->sub].result_base + c->locals[i])->state);
      gone = nobody_left(p, st);
    }
    if (gone)
      return suiro_set_error(SUIRO_PEER_GONE, "collect: no live worker is left to run the task");
    pool_park_for_results(p, deadline, any_done, c);
    if (pool_interrupted(p) && !any_done(c)) return suiro_set_error(SUIRO_ERR, "interrupted");
  }
  spin_observe(&p->collect_spin, suiro_ns() - t0);
  return SUIRO_OK;
}

suiro_status suiro_collect(suiro_pool *p, suiro_task t, suiro_result *res, double timeout) {
  uint32_t local;
  if (SUIRO_UNLIKELY(!res)) return suiro_set_error(SUIRO_ERR, "suiro_collect: res (argument 3) is NULL");
  suiro_status st = check_task(p, t, &local, "suiro_collect");
  if (st != SUIRO_OK) return st;
  uint64_t gen = task_gen(t);
  result_slot *r = pool_result(p, task_rs(t));
  if (SUIRO_LIKELY(is_done(ld_acq(&r->state), gen))) return take_result(p, local, res);
  struct done_ctx c = { p, &local, &gen, 1, NULL };
  st = wait_any(p, &c, timeout == 0 ? 0 : deadline_from(timeout));
  if (st != SUIRO_OK) {
    if (st == SUIRO_TIMEOUT) suiro_set_error(SUIRO_TIMEOUT, "collect: timed out");
    return st;
  }
  return take_result(p, local, res);
}

int suiro_task_ready(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "task_ready") != SUIRO_OK) return 0;
  return is_done(ld_acq(&pool_result(p, task_rs(t))->state), task_gen(t));
}

suiro_status suiro_collect_any(suiro_pool *p, const suiro_task *tasks, size_t n, size_t *index,
                               suiro_result *res, double timeout) {
  POOL_GUARD(p, "suiro_collect_any", SUIRO_ERR);
  if (n == 0) return suiro_set_error(SUIRO_ERR, "collect_any: no tasks given");
  if (!tasks || !index || !res)
    return suiro_set_error(SUIRO_ERR, "suiro_collect_any: %s is NULL", !tasks ? "tasks" : !index ? "index" : "res");
  uint32_t stack_l[64];
  uint64_t stack_g[64];
  uint32_t *locals = n <= 64 ? stack_l : malloc(n * sizeof *locals);
  uint64_t *gens = n <= 64 ? stack_g : malloc(n * sizeof *gens);
  suiro_status st = SUIRO_OK;
  if (!locals || !gens) {
    st = suiro_set_error(SUIRO_ERR, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if ((st = check_task_of(p, tasks[i], &locals[i], "collect_any")) != SUIRO_OK) goto out;
    gens[i] = task_gen(tasks[i]);
  }
  size_t which = 0;
  struct done_ctx c = { p, locals, gens, n, &which };
  st = wait_any(p, &c, timeout == 0 ? 0 : deadline_from(timeout));
  if (st == SUIRO_OK) {
    *index = which;
    st = take_result(p, locals[which], res);
  } else if (st == SUIRO_TIMEOUT) {
    suiro_set_error(SUIRO_TIMEOUT, "collect_any: timed out");
  }
out:
  if (locals != stack_l) free(locals);
  if (gens != stack_g) free(gens);
  return st;
}

suiro_status suiro_wait_all(suiro_pool *p, const suiro_task *tasks, size_t n, double timeout) {
  POOL_GUARD(p, "suiro_wait_all", SUIRO_ERR);
  if (n && !tasks) return suiro_set_error(SUIRO_ERR, "suiro_wait_all: tasks is NULL with n = %zu", n);
  uint64_t deadline = timeout == 0 ? 0 : deadline_from(timeout);
  sub_rec *s = &p->subs[p->sub];
  for (size_t i = 0; i < n; i++) {
    uint32_t local;
    suiro_status st = check_task_of(p, tasks[i], &local, "wait_all");
    if (st != SUIRO_OK) return st;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t local = task_rs(tasks[i]) - s->result_base;
    uint64_t gen = task_gen(tasks[i]);
    if (is_done(ld_acq(&pool_result(p, task_rs(tasks[i]))->state), gen)) continue;
    struct done_ctx c = { p, &local, &gen, 1, NULL };
    suiro_status st = wait_any(p, &c, deadline);
    if (st != SUIRO_OK) {
      if (st == SUIRO_TIMEOUT)
        suiro_set_error(SUIRO_TIMEOUT, "timed out with %zu of %zu tasks done", i, n);
      return st;
    }
  }
  return SUIRO_OK;
}

int suiro_task_kind(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "task_kind") != SUIRO_OK) return -1;
  uint64_t st = ld_acq(&pool_result(p, task_rs(t))->state);
  if (!is_done(st, task_gen(t))) return 0;
  switch (rs_kind(st)) {
  case RS_VALUE: return SUIRO_RESULT_VALUE;
  case RS_ERROR: return SUIRO_RESULT_ERROR;
  case RS_DIED: return SUIRO_RESULT_DIED;
  default: return SUIRO_RESULT_CANCELLED;
  }
}

suiro_status suiro_collect_all(suiro_pool *p, const suiro_task *tasks, size_t n,
                               suiro_sink_fn sink, void *ctx, double timeout) {
  /* First wait for every task (a timeout consumes nothing), then hand them over in order. */
  suiro_status st = suiro_wait_all(p, tasks, n, timeout);
  if (st != SUIRO_OK) {
    if (st == SUIRO_TIMEOUT) {
      char msg[200];
      snprintf(msg, sizeof msg, "collect_all: %s", suiro_last_error());
      suiro_set_error(SUIRO_TIMEOUT, "%s", msg);
    }
    return st;
  }
  sub_rec *s = &p->subs[p->sub];
  for (size_t i = 0; i < n; i++) {
    suiro_result res;
    st = take_result(p, task_rs(tasks[i]) - s->result_base, &res);
    if (st != SUIRO_OK) return st;
    if (sink && sink(ctx, i, &res) != 0)
      return suiro_set_error(SUIRO_ERR, "collect_all: the sink stopped at task %zu", i);
  }
  return SUIRO_OK;
}

int suiro_cancel(suiro_pool *p, suiro_task t) {
  uint32_t local;
  if (check_task(p, t, &local, "cancel") != SUIRO_OK) return 0;
  result_slot *r = pool_result(p, task_rs(t));
  uint64_t gen = task_gen(t);
  uint64_t expect = rs_state(gen, RS_NOWORKER, RS_PENDING);
  if (atomic_compare_exchange_strong(&r->state, &expect, rs_state(gen, RS_NOWORKER, RS_CANCELLED))) {
    r->len = 0;
    r->flags = 0;
    return 1;
  }
  /* Already running: tell the task (suiro_cancelled), which may stop early. */
  if (rs_gen(expect) == gen && rs_kind(expect) == RS_RUNNING) st_rlx(&r->cancel, gen);
  return 0;
}

suiro_status suiro_task_kill(suiro_pool *p, suiro_task t) {
  uint32_t local;
  suiro_status st = check_task(p, t, &local, "kill");
  if (st != SUIRO_OK) return st;
  if (!p->is_host) return suiro_set_error(SUIRO_ERR, "kill: only the host can kill its workers");
  if (suiro_cancel(p, t)) return SUIRO_OK; /* had not started: cancelled */
  result_slot *r = pool_result(p, task_rs(t));
  uint64_t gen = task_gen(t);
  pthread_mutex_lock(&p->lock); /* against the monitor: the worker's pid and slot stay put */
  uint64_t s = atomic_load(&r->state);
  if (rs_gen(s) == gen && rs_kind(s) == RS_RUNNING && rs_worker(s) < (unsigned)p->hdr->max_workers) {
    unsigned w = rs_worker(s);
    worker_rec *wr = &p->workers[w];
    atomic_store(&wr->doom, t); /* seq_cst, then the re-read below (see worker_claim_and_run) */
    s = atomic_load(&r->state);
    int pid = ld_rlx(&wr->pid);
    if (rs_gen(s) == gen && rs_kind(s) == RS_RUNNING && rs_worker(s) == w && p->watchfds[w] >= 0 && pid > 0) {
      p->killing[w] = t;
      kill(pid, SIGKILL);
    } else {
      atomic_store(&wr->doom, 0); /* it finished meanwhile: nothing to kill */
    }
  }
  pthread_mutex_unlock(&p->lock);
  return SUIRO_OK;
}

void suiro_task_release(suiro_pool *p, suiro_task t) {
  uint32_t local = 0;
  if (!p || check_task(p, t, &local, "task_release") != SUIRO_OK) return;
  suiro_cancel(p, t); /* nobody wants the result: do not run it if it has not started */
  p->outstanding[local] = 2;
  p->nreleased++;
  if (p->nreleased > 64 && p->nreleased * 4 > p->subs[p->sub].nresults) pool_reclaim_released(p);
}
