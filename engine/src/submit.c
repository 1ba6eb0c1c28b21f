/*
 * submit.c — submitting: the submitter's result-slot allocator, its queue's producer end, and
 * suiro_submit / suiro_submit_batch.
 *
 * Ownership: a submitter's result slots and queue entries are its own (one producer; pool.c):
 * the allocator is a private free stack plus a high-water mark, needing no atomics; a slot of a
 * released task comes back once its state is terminal (pool_reclaim_released).
 * Memory ordering: the slot's PENDING(gen) store (relaxed) precedes the entry's READY release
 * store (taskq_publish), so a claimer that acquires the entry sees PENDING; the tail mirror is
 * relaxed (read by an adopter only after this process is gone). Then wake.c decides on wake-ups.
 */
#include <stdio.h>
#include <string.h>

#include "pool.h"

void pool_reclaim_released(suiro_pool *p) {
  sub_rec *s = &p->subs[p->sub];
  for (uint32_t i = 0; i < s->nresults && p->nreleased; i++) {
    if (p->outstanding[i] != 2) continue;
    result_slot *r = pool_result(p, s->result_base + i);
    uint64_t st = ld_acq(&r->state);
    if (!rs_terminal(rs_kind(st))) continue;
    if (r->flags & RSF_SPILLED) {
      char name[SUIRO_NAME_MAX];
      snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, (const char *)result_data(r));
      spill_discard(name);
    }
    p->gen[i] = rs_gen(st);
    p->outstanding[i] = 0;
    p->nreleased--;
    p->free_stack[p->nfree++] = i;
  }
}

/* 0 with a slot; -1 when none is free; -2 when there is no room for never-used ones (error set). */
static inline int alloc_slot(suiro_pool *p, uint32_t *local) {
  if (SUIRO_UNLIKELY(p->nfree == 0)) {
    sub_rec *s = &p->subs[p->sub];
    if (p->fresh < s->nresults) {
      if (SUIRO_UNLIKELY(p->fresh >= p->reserved_to) && pool_reserve_slots(p) != SUIRO_OK) return -2;
      *local = p->fresh++;
      st_rlx(&s->hiwater, p->fresh);
      return 0;
    }
    if (p->nreleased) pool_reclaim_released(p);
    if (p->nfree == 0) return -1;
  }
  *local = p->free_stack[--p->nfree];
  return 0;
}

uint32_t suiro_free_slots(suiro_pool *p, uint32_t *total) {
  if (total) *total = 0;
  POOL_GUARD(p, "suiro_free_slots", 0);
  uint32_t n = p->subs[p->sub].nresults;
  if (total) *total = n;
  return p->nfree + (n - p->fresh);
}



struct slot_ready_ctx { suiro_pool *p; const taskq_view *q; uint64_t pos; };
static int queue_slot_free(void *c) {
  struct slot_ready_ctx *x = c;
  return taskq_reserve(x->q, x->pos) != NULL;
}

/* Every slot is taken: if some belong to released tasks still running, wait (up to the deadline)
 * for one of them to finish, then take its slot. Returns 0 with a slot, -1 without. */
static int released_finished(void *c) {
  suiro_pool *p = c;
  pool_reclaim_released(p);
  return p->nfree > 0;
}
static int wait_released_slot(suiro_pool *p, uint32_t *local, uint64_t deadline) {
  while (p->nreleased) {
    if (released_finished(p)) return alloc_slot(p, local);
    if (suiro_ns() >= deadline || ld_acq(&p->hdr->closing)) return -1;
    pool_park_for_results(p, deadline, released_finished, p);
    if (pool_interrupted(p)) return -1;
  }
  return -1;
}

/* Reserves the producer's next queue entry, waiting up to the deadline for room (the caller has
 * found the ring full at p->tail: taskq_reserve). */
static SUIRO_COLD taskq_entry *reserve_entry(suiro_pool *p, uint64_t deadline) {
  const taskq_view *q = &p->queues[p->sub];
  taskq_entry *e;
  struct slot_ready_ctx c = { p, q, p->tail };
  uint64_t spin_until = suiro_ns() + 20000;
  for (;;) {
    if (ld_acq(&p->hdr->closing)) return NULL;
    if ((e = taskq_reserve(q, p->tail)) != NULL) return e;
    uint64_t now = suiro_ns();
    if (now >= deadline) return NULL;
    if (!p->is_host) {
      /* A worker whose own queue is full runs one of its queued tasks itself. */
      if (worker_claim_and_run(p, 1)) continue;
    }
    if (now < spin_until) {
      cpu_relax();
      continue;
    }
    /* Ring full: entries free up as workers claim tasks, and claimed tasks end in results, so
     * sleeping until the next result (bounded) cannot miss progress. */
    pool_park_for_results(p, deadline, queue_slot_free, &c);
    if (pool_interrupted(p)) return NULL;
  }
}

static suiro_status fill_entry(suiro_pool *p, taskq_entry *e, suiro_task t, uint64_t fn,
                               const void *arg, size_t len) {
  e->task = t;
  e->fn = fn;
  size_t cap = taskq_payload_cap(p->hdr->slot_size);
  unsigned char *payload = (unsigned char *)(e + 1);
  if (len <= cap) {
    copy_small(payload, arg, len);
    e->len = (uint32_t)len;
    e->flags = 0;
    return SUIRO_OK;
  }
  if (len > UINT32_MAX) return suiro_set_error(SUIRO_ERR, "submit: argument of %zu bytes is too large", len);
  suiro_status st = spill_write(p, arg, len, (char *)payload, cap);
  if (st != SUIRO_OK) return st;
  e->len = (uint32_t)len;
  e->flags = TQ_SPILLED;
  return SUIRO_OK;
}

static inline suiro_status check_open(suiro_pool *p, const char *verb) {
  POOL_GUARD(p, verb, SUIRO_ERR); /* NULL, stopped, inherited across fork (handle.c) */
  if (SUIRO_UNLIKELY(ld_rlx(&p->hdr->closing)))
    return suiro_set_error(SUIRO_CLOSED, "%s: the pool is stopping", verb);
  return SUIRO_OK;
}

suiro_status suiro_submit(suiro_pool *p, uint64_t fn, const void *arg, size_t len,
                          suiro_task *out, double timeout) {
  suiro_status st = check_open(p, "suiro_submit");
  if (st != SUIRO_OK) return st;
  if (SUIRO_UNLIKELY(!out)) return suiro_set_error(SUIRO_ERR, "suiro_submit: out (argument 5) is NULL");
  if (SUIRO_UNLIKELY(!arg && len)) return suiro_set_error(SUIRO_ERR, "suiro_submit: arg is NULL with len %zu", len);
  uint32_t local;
  int got = alloc_slot(p, &local);
  if (SUIRO_UNLIKELY(got == -2)) return SUIRO_ERR; /* no room for new result slots (error set) */
  if (SUIRO_UNLIKELY(got != 0) &&
      wait_released_slot(p, &local, timeout == 0 ? 0 : deadline_from(timeout)) != 0)
    return pool_interrupted(p) ? suiro_set_error(SUIRO_ERR, "interrupted") : suiro_set_error(SUIRO_FULL, "submit: all %u result slots hold uncollected tasks; collect or release some",
                           p->subs[p->sub].nresults);
  sub_rec *s = &p->subs[p->sub];
  uint32_t rs = s->result_base + local;
  uint64_t gen = (p->gen[local] + 1) & GEN_MASK;
  if (gen == 0) gen = 1;
  suiro_task t = task_make(rs, gen);
  const taskq_view *q = &p->queues[p->sub];
  taskq_entry *e = taskq_reserve(q, p->tail);
  if (SUIRO_UNLIKELY(!e)) e = reserve_entry(p, timeout == 0 ? 0 : deadline_from(timeout));
  if (SUIRO_UNLIKELY(!e)) {
    p->free_stack[p->nfree++] = local;
    if (ld_rlx(&p->hdr->closing)) return suiro_set_error(SUIRO_CLOSED, "submit: the pool is stopping");
    if (pool_interrupted(p)) return suiro_set_error(SUIRO_ERR, "interrupted");
    return suiro_set_error(SUIRO_FULL, "submit: the task ring is full (%u tasks waiting)", p->hdr->ring_cap);
  }
  st = fill_entry(p, e, t, fn, arg, len);
  if (SUIRO_UNLIKELY(st != SUIRO_OK)) {
    p->free_stack[p->nfree++] = local;
    return st;
  }
  p->gen[local] = gen;
  p->outstanding[local] = 1;
  st_rlx(&pool_result(p, rs)->state, rs_state(gen, RS_NOWORKER, RS_PENDING));
  taskq_publish(q, e, p->tail);
  p->tail++;
  taskq_set_tail(q, p->tail);
  p->submitted++;
  pool_maybe_wake(p, q, p->tail);
  *out = t;
  return SUIRO_OK;
}

suiro_status suiro_submit_batch(suiro_pool *p, const suiro_task_spec *specs, size_t n,
                                suiro_task *out, size_t *accepted, double timeout) {
  size_t done = 0;
  if (accepted) *accepted = 0;
  suiro_status st = check_open(p, "suiro_submit_batch");
  if (st != SUIRO_OK) return st;
  if (n && (!specs || !out))
    return suiro_set_error(SUIRO_ERR, "suiro_submit_batch: %s is NULL with n = %zu", !specs ? "specs" : "out", n);
  for (size_t i = 0; i < n; i++)
    if (!specs[i].arg && specs[i].len)
      return suiro_set_error(SUIRO_ERR, "suiro_submit_batch: specs[%zu].arg is NULL with len %zu", i, specs[i].len);
  const taskq_view *q = &p->queues[p->sub];
  sub_rec *s = &p->subs[p->sub];
  uint64_t deadline = timeout == 0 ? 0 : deadline_from(timeout);
  while (done < n) {
    /* Fill as many free entries as there are, then publish them with one wake decision. */
    size_t run = 0;
    while (done + run < n) {
      uint32_t local;
      taskq_entry *e = taskq_reserve(q, p->tail);
      if (!e) break;
      int got = alloc_slot(p, &local);
      if (got != 0) {
        if (run) break;
        if (got == -2) {
          st = SUIRO_ERR; /* no room for new result slots (error set) */
          goto out;
        } /* count and announce the tasks of this run first, then wait with none pending */
        if (wait_released_slot(p, &local, deadline) != 0) {
          st = suiro_set_error(SUIRO_FULL, "submit_batch: all %u result slots hold uncollected tasks", s->nresults);
          goto out;
        }
      }
      const suiro_task_spec *sp = &specs[done + run];
      uint32_t rs = s->result_base + local;
      uint64_t gen = (p->gen[local] + 1) & GEN_MASK;
      if (gen == 0) gen = 1;
      suiro_task t = task_make(rs, gen);
      st = fill_entry(p, e, t, sp->fn, sp->arg, sp->len);
      if (st != SUIRO_OK) {
        p->free_stack[p->nfree++] = local;
        if (run) { /* the tasks this run published before the failing one are submitted */
          done += run;
          p->submitted += run;
          taskq_set_tail(q, p->tail);
          pool_maybe_wake(p, q, p->tail);
        }
        goto out;
      }
      p->gen[local] = gen;
      p->outstanding[local] = 1;
      st_rlx(&pool_result(p, rs)->state, rs_state(gen, RS_NOWORKER, RS_PENDING));
      taskq_publish(q, e, p->tail);
      p->tail++;
      out[done + run] = t;
      run++;
    }
    if (run) {
      done += run;
      if (accepted) *accepted = done;
      p->submitted += run;
      taskq_set_tail(q, p->tail);
      pool_maybe_wake(p, q, p->tail);
      continue;
    }
    /* Ring full: wait for room like a single submit would. */
    taskq_entry *e = taskq_reserve(q, p->tail);
    if (!e) e = reserve_entry(p, deadline);
    if (!e) {
      if (ld_rlx(&p->hdr->closing)) st = suiro_set_error(SUIRO_CLOSED, "submit_batch: the pool is stopping");
      else st = suiro_set_error(timeout == 0 ? SUIRO_FULL : SUIRO_TIMEOUT,
                                "submit_batch: the task ring stayed full; %zu of %zu tasks submitted", done, n);
      goto out;
    }
  }
out:
  if (accepted) *accepted = done;
  return done == n ? SUIRO_OK : st;
}
