/* test_queues.c — the SPSC spsc and the task queue under real concurrency (threads, so that
 * ThreadSanitizer sees every access; the same code runs across processes in pools). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "harness.h"
#include "spsc.h"
#include "taskq.h"

static void *aligned_zero(size_t n) {
  void *p = NULL;
  CHECK(posix_memalign(&p, 64, n) == 0);
  memset(p, 0, n);
  return p;
}

/* ---- spsc ---------------------------------------------------------------------------------- */

TEST(spsc_fifo_and_full) {
  void *mem = aligned_zero(spsc_bytes(8, 64));
  spsc_producer p;
  spsc_consumer c;
  spsc_producer_init(&p, mem, 8, 64);
  spsc_consumer_init(&c, mem, 8, 64);
  CHECK(spsc_peek(&c) == NULL);
  for (uint32_t i = 0; i < 8; i++) CHECK_EQ(spsc_push(&p, &i, sizeof i, i), 0);
  uint32_t x = 99;
  CHECK_EQ(spsc_push(&p, &x, sizeof x, 0), -1); /* full */
  char big[100] = { 0 };
  for (uint32_t i = 0; i < 3; i++) {
    const spsc_slot *s = spsc_peek(&c);
    CHECK(s != NULL);
    CHECK_EQ(s->len, 4);
    uint32_t v;
    memcpy(&v, s->data, 4);
    CHECK_EQ(v, i);
    CHECK_EQ(s->flags, i);
    spsc_pop(&c);
  }
  CHECK_EQ(spsc_push(&p, &x, sizeof x, 0), -1); /* not released yet: still full */
  spsc_release(&c);
  CHECK_EQ(spsc_push(&p, &x, sizeof x, 0), 0);
  CHECK_EQ(spsc_push(&p, big, sizeof big, 0), -1); /* larger than a slot */
  CHECK_EQ(spsc_available(&c), 6);
  free(mem);
}

struct spsc_ctx { void *mem; uint64_t n; uint64_t sum; };

static void *spsc_producer_thread(void *arg) {
  struct spsc_ctx *x = arg;
  spsc_producer p;
  spsc_producer_init(&p, x->mem, 64, 64);
  uint64_t i = 0;
  while (i < x->n) {
    /* batches of up to 7, one publication each */
    int k = 0;
    spsc_slot *s;
    while (k < 7 && i < x->n && (s = spsc_reserve(&p)) != NULL) {
      s->len = 8;
      s->flags = 0;
      memcpy(s->data, &i, 8);
      spsc_push_commit(&p);
      i++;
      k++;
    }
    spsc_publish(&p);
  }
  return NULL;
}

TEST(spsc_threads_in_order) {
  /* 300k items wrap the 64-slot ring ~4,700 times; 2M under ThreadSanitizer on a loaded 2-vCPU
   * machine ran past the 60 s bound with both threads spinning */
  struct spsc_ctx x = { aligned_zero(spsc_bytes(64, 64)), 300000, 0 };
  pthread_t th;
  pthread_create(&th, NULL, spsc_producer_thread, &x);
  spsc_consumer c;
  spsc_consumer_init(&c, x.mem, 64, 64);
  uint64_t expect = 0;
  while (expect < x.n) {
    const spsc_slot *s;
    int k = 0;
    while ((s = spsc_peek(&c)) != NULL && k < 5) {
      uint64_t v;
      memcpy(&v, s->data, 8);
      CHECK_EQ(v, expect);
      expect++;
      spsc_pop(&c);
      k++;
    }
    spsc_release(&c);
  }
  pthread_join(th, NULL);
  free(x.mem);
}

/* ---- task queue ----------------------------------------------------------------------------- */

enum { TQ_CAP = 256, TQ_SLOT = 64, TQ_N = 400000, TQ_CLAIMERS = 3 };

struct tq_ctx {
  taskq_view v;
  _Atomic uint64_t claimed_total;
  _Atomic int done;
  _Atomic uint8_t *seen; /* each task id exactly once */
};

static void *claimer_thread(void *arg) {
  struct tq_ctx *x = arg;
  static _Atomic unsigned next_id = 1;
  unsigned me = atomic_fetch_add(&next_id, 1);
  for (;;) {
    uint64_t pos;
    taskq_entry *e = taskq_claim(&x->v, me, &pos);
    if (!e) {
      if (atomic_load(&x->done) && !taskq_maybe_ready(&x->v)) {
        /* one more look: the producer may have published after our miss */
        e = taskq_claim(&x->v, me, &pos);
        if (!e) break;
      } else {
        continue;
      }
    }
    uint64_t id = e->task;
    CHECK_EQ(e->fn, id * 3);
    taskq_release(&x->v, e, pos);
    CHECK(id < TQ_N);
    CHECK_EQ(atomic_fetch_add(&x->seen[id], 1), 0);
    atomic_fetch_add(&x->claimed_total, 1);
  }
  return NULL;
}

TEST(taskq_many_claimers_exactly_once) {
  struct tq_ctx x;
  memset(&x, 0, sizeof x);
  taskq_init_view(&x.v, aligned_zero(taskq_bytes(TQ_CAP, TQ_SLOT)), TQ_CAP, TQ_SLOT);
  x.seen = calloc(TQ_N, 1);
  pthread_t th[TQ_CLAIMERS];
  for (int i = 0; i < TQ_CLAIMERS; i++) pthread_create(&th[i], NULL, claimer_thread, &x);
  uint64_t tail = 0;
  for (uint64_t id = 0; id < TQ_N; id++) {
    taskq_entry *e;
    while ((e = taskq_reserve(&x.v, tail)) == NULL) {
      /* full: the owner helps itself, as a worker does with its own queue */
      uint64_t pos;
      taskq_entry *mine = taskq_claim_newest(&x.v, 0, tail, 8, &pos);
      if (mine) {
        uint64_t mid = mine->task;
        taskq_release(&x.v, mine, pos);
        CHECK_EQ(atomic_fetch_add(&x.seen[mid], 1), 0);
        atomic_fetch_add(&x.claimed_total, 1);
      }
    }
    e->task = id;
    e->fn = id * 3;
    e->len = 0;
    e->flags = 0;
    taskq_publish(&x.v, e, tail);
    tail++;
    taskq_set_tail(&x.v, tail);
  }
  atomic_store(&x.done, 1);
  for (int i = 0; i < TQ_CLAIMERS; i++) pthread_join(th[i], NULL);
  CHECK_EQ(atomic_load(&x.claimed_total), TQ_N);
  for (uint64_t id = 0; id < TQ_N; id++) CHECK_EQ(x.seen[id], 1);
  free(x.seen);
  free(x.v.q);
}

TEST(taskq_states_and_laps) {
  taskq_view v;
  taskq_init_view(&v, aligned_zero(taskq_bytes(4, 64)), 4, 64);
  uint64_t pos;
  CHECK(taskq_claim(&v, 1, &pos) == NULL);
  CHECK(!taskq_maybe_ready(&v));
  for (uint64_t lap = 0; lap < 3; lap++) {
    for (uint64_t i = 0; i < 4; i++) {
      uint64_t at = lap * 4 + i;
      taskq_entry *e = taskq_reserve(&v, at);
      CHECK(e != NULL);
      e->task = at;
      taskq_publish(&v, e, at);
    }
    CHECK(taskq_reserve(&v, lap * 4 + 4) == NULL); /* full for the next lap */
    /* the owner takes the newest, a thief the oldest */
    taskq_entry *n = taskq_claim_newest(&v, 1, lap * 4 + 4, 4, &pos);
    CHECK(n && n->task == lap * 4 + 3 && pos == lap * 4 + 3);
    CHECK_EQ(tq_claimer(atomic_load(&n->state)), 1);
    taskq_release(&v, n, pos);
    for (uint64_t i = 0; i < 3; i++) {
      taskq_entry *e = taskq_claim(&v, 2, &pos);
      CHECK(e && e->task == lap * 4 + i);
      taskq_release(&v, e, pos);
    }
    CHECK(taskq_claim(&v, 2, &pos) == NULL); /* skips the hole the owner left */
  }
  free(v.q);
}
