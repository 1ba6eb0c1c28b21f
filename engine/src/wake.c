/*
 * wake.c — who wakes whom: parked workers, submitters waiting for results, the event fd.
 *
 * Memory ordering: the announce / re-check / park protocol of park.c. A worker announces itself in
 * parked_mask (seq_cst RMW) before its last look at the queues; a publisher fences (seq_cst) after
 * publishing and only then reads parked_mask, so either the worker sees the task or the publisher
 * sees the worker. A woken worker is moved from parked_mask to waking_mask by the waker (the
 * fetch_and tells exactly one waker it won) until it runs. Result notification is the same
 * protocol on the submitter's `waiting` word. No system call happens unless somebody sleeps.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"

void pool_wake_all(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  for (int w = 0; w < h->max_workers; w++) {
    atomic_fetch_add_explicit(&p->workers[w].park, 1, memory_order_release);
    park_wake(&p->workers[w].park, -1);
  }
}

/* Directed wake: take a worker off the parked set (the CAS-free fetch_and tells whether it was
 * still there), count it as waking until it runs, bump its own word and wake it. */
int pool_wake_one(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  uint64_t m = ld_acq(&h->parked_mask);
  while (m) {
    int w = __builtin_ctzll(m);
    uint64_t bit = 1ull << w;
    uint64_t old = atomic_fetch_and(&h->parked_mask, ~bit);
    if (old & bit) {
      atomic_fetch_or(&h->waking_mask, bit);
      atomic_fetch_add(&h->wakes, 1);
      atomic_fetch_add_explicit(&p->workers[w].park, 1, memory_order_release);
      park_wake(&p->workers[w].park, 1);
      return 1;
    }
    m = old & ~bit;
  }
  return 0;
}

/* Wake policy, after tasks were published into queue q (producer position `tail`):
 *   - nobody parked: nothing to do (no system call, one load);
 *   - idle spinners and workers already being woken cover the backlog: nothing;
 *   - as many workers awake as CPUs: waking more would only time-slice them against each other,
 *     so the host's monitor is asked to watch instead; it wakes a sleeper when the awake workers
 *     stop making progress (tasks that block or run long), see pool_backlog_tick;
 *   - else wake one parked worker. A woken worker that finds more queued work repeats the
 *     decision (chain wake), so a burst ramps up one wake at a time, never a thundering herd.
 * Lost wake-ups are impossible: a worker announces itself in parked_mask (seq_cst RMW) before
 * its last look at the queues, and a publisher fences before reading parked_mask. */
static void request_monitor(suiro_pool *p) {
  pool_hdr *h = p->hdr;
  if (ld_rlx(&h->monitor_ticking)) return;
  uint32_t zero = 0;
  if (!atomic_compare_exchange_strong(&h->monitor_ticking, &zero, 1)) return;
  uint64_t one = 1;
  ssize_t w = write(p->monitor_ctl, &one, sizeof one);
  (void)w;
}

void pool_maybe_wake(suiro_pool *p, const taskq_view *q, uint64_t tail) {
  pool_hdr *h = p->hdr;
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t parked = ld_rlx(&h->parked_mask);
  if (SUIRO_LIKELY(parked == 0)) return;
  int waking = __builtin_popcountll(ld_rlx(&h->waking_mask));
  if (pool_awake(h) + waking >= h->ncpu) {
    if (p->is_host && !ld_rlx(&h->monitor_ticking)) request_monitor(p);
    return;
  }
  int64_t backlog = (int64_t)(tail - ld_rlx(&q->q->head));
  if (backlog <= (int64_t)ld_rlx(&h->idle_spinners) + waking) return; /* they will find it */
  if (pool_wake_one(p)) {
    p->woke_at = suiro_ns();
    p->woke_submitted = p->submitted;
  }
}

/* Is the process sleeping or waiting (not running or runnable)? */
static int proc_blocked(int pid) {
  suiro_proc_info pi;
  return suiro_proc_stat(pid, &pi) == 0 && (pi.state == 'S' || pi.state == 'D');
}

int pool_backlog_tick(suiro_pool *p, uint64_t *last_tasks) {
  pool_hdr *h = p->hdr;
  int64_t backlog = 0;
  for (int i = 0; i < h->nsubs; i++) {
    const taskq_view *q = &p->queues[i];
    if (taskq_maybe_ready(q)) backlog += (int64_t)(ld_rlx(&q->q->tail) + 1 - ld_rlx(&q->q->head));
  }
  if (backlog <= 0 || ld_rlx(&h->parked_mask) == 0 || ld_acq(&h->closing)) {
    st_rlx(&h->monitor_ticking, 0);
    return 0;
  }
  /* A worker busy on the same task since the last tick is either blocked (sleeping, waiting for
   * I/O) or merely preempted. Only a blocked one frees its CPU, so only it makes room for another
   * worker; the kernel tells which (the state letter in /proc/<pid>/stat). */
  int stuck = 0;
  for (int i = 0; i < h->max_workers; i++) {
    uint64_t t = ld_rlx(&p->workers[i].tasks);
    if (ld_rlx(&p->workers[i].state) == SUIRO_WORKER_BUSY && t == last_tasks[i] &&
        proc_blocked(ld_rlx(&p->workers[i].pid)))
      stuck++;
    last_tasks[i] = t;
  }
  if (ld_rlx(&h->waking_mask) == 0 && pool_awake(h) - stuck < h->ncpu) pool_wake_one(p);
  return 1;
}

void pool_notify_result(suiro_pool *p, int sub) {
  sub_rec *s = &p->subs[sub];
  atomic_thread_fence(memory_order_seq_cst);
  if (ld_rlx(&s->waiting)) {
    atomic_fetch_add_explicit(&s->result_seq, 1, memory_order_release);
    park_wake(&s->result_seq, -1);
  }
  if (sub == 0 && ld_rlx(&s->ev_armed) &&
      atomic_exchange_explicit(&s->ev_armed, 0, memory_order_acq_rel)) {
    uint64_t one = 1;
    ssize_t w = write(p->hdr->evfd, &one, sizeof one);
    (void)w;
  }
}
