/*
 * comm.c — the communication thread of the MPI tier: the only thread of a process that
 * calls MPI (MPI_Init_thread with MPI_THREAD_FUNNELED, in this thread, through MPI_Finalize).
 *
 * The rest of the process (rank 0's face, a serving rank's loop) hands it messages through the outbox and takes what arrived from the inbox; an
 * eventfd is readable while the inbox is not empty, so that side can sleep on it together
 * with its pools' event fds. On rank 0 a hook lets this thread answer some messages itself
 * (lua/lmpi.c deals map ranges here, so hosts get work while the script is busy elsewhere).
 *
 * Sending: every message is an MPI_Isend of header + payload (parts of at most 256 MiB, since
 * MPI counts are ints); the thread keeps testing while sends are in flight, so large transfers
 * keep moving, and sleeps (backing off from 10 us after each message to 1 ms on rank 0 and
 * 2 ms on the serving ranks, whose requests come unannounced, or to 400 us while the other side
 * has work in flight and waits for replies) only when nothing is in flight and nothing arrived:
 * spinning in MPI calls would take a CPU from the workers (a 50 us cap cost a third of a CPU
 * per process here).
 * Receiving: MPI_Iprobe(any source, any tag) then MPI_Recv; one tag sequence per sender, so
 * messages from one rank arrive in the order it sent them (MPI's non-overtaking rule), which
 * the protocol relies on (a function's code before the task that names it).
 *
 * The end (comm_stop) is a handshake, described in cluster.h: a rank finalizes only once its sends
 * have completed and, on rank 0, once every serving rank said BYE, its last message; until then
 * the thread keeps receiving, dropping what arrives. A send nobody receives never completes (a
 * large result of a failed map, sent just as rank 0 stopped reading, kept a serving rank from
 * ever finalizing), and a rank that finalizes before the others hold back the job.
 *
 * Ownership and ordering: outbox and inbox are linked lists under `q_lock`; a message belongs to
 * whoever holds it (the queue, then this thread until its sends complete, or the receiver after
 * comm_recv). `state_lock` (comm_lock) is the lock rank 0's dealer shares with its face side. The
 * inbox eventfd is written after the message is linked (both under q_lock), and drained by
 * comm_recv when the inbox becomes empty, so a reader that sees it readable finds a message.
 */
#include <errno.h>
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"

#define TAG_HEAD 1
#define TAG_PART 2
#define PART_MAX ((size_t)256 << 20)
#define PROBE_BURST 8     /* probes before deciding nothing arrived */
#define IDLE_MIN_US 10
#define IDLE_MAX_US 1000  /* rank 0, nothing expected: a message waits at most this long */
#define SERVE_MAX_US 2000 /* ranks 1..K-1, quiet for a few ms: rank 0 may call at any time */
#define EAGER_MAX_US 400  /* replies expected (work in flight): the backoff restarts at 10 us
                             after every message, so a reply soon after is seen soon; while
                             none comes, 2500 wake-ups a second cost the workers little */

typedef struct pending {
  MPI_Request req;
  msg *m;
} pending;

/* A message being received in parts from one rank. */
typedef struct partial {
  msg *m;
  size_t have; /* bytes of header + payload received */
} partial;

static struct {
  pthread_t th;
  int started, ready, failed, stop, done;
  int abandon; /* stop without MPI_Finalize (the job is ending: a peer is gone) */
  double stop_deadline;    /* CLOCK_MONOTONIC seconds: the end's handshake gives up then */
  int byes;                /* rank 0: serving ranks that said BYE (comm thread only) */
  unsigned char *bye_from; /* [size], comm thread only */
  int rank, size;
  char host[MPI_MAX_PROCESSOR_NAME + 1];
  char err[512];
  char lost[512];
  char version[256];
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;
  msg *out_head, *out_tail;
  msg *in_head, *in_tail;
  int wake_fd;  /* wakes this thread: outbox, stop */
  int in_fd;    /* readable while the inbox holds messages */
  int (*intercept)(msg *m);
  _Atomic int eager;      /* set by the other side while it has work in flight */
  uint64_t *sent, *recvd; /* per rank */
} C = { .q_lock = PTHREAD_MUTEX_INITIALIZER, .q_cond = PTHREAD_COND_INITIALIZER, .wake_fd = -1, .in_fd = -1 };

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
void comm_lock(void) { pthread_mutex_lock(&state_lock); }
void comm_unlock(void) { pthread_mutex_unlock(&state_lock); }

msg *msg_new(uint32_t type, size_t payload) {
  if (payload > ((size_t)1 << 46)) return NULL;
  msg *m = malloc(sizeof *m + align8z(payload));
  if (!m) return NULL;
  memset(m, 0, sizeof *m);
  m->h.type = type;
  m->h.len = payload;
  return m;
}

msg *msg_new_ext(uint32_t type, size_t inline_len, const void *ext, size_t ext_len, suiro_buf *b) {
  if (inline_len % 8) return NULL;
  msg *m = msg_new(type, inline_len);
  if (!m) return NULL;
  m->h.len = inline_len + ext_len;
  m->ext = ext;
  m->ext_len = ext_len;
  m->ext_buf = b;
  if (b) suiro_buf_hold(b);
  return m;
}

void msg_free(msg *m) {
  if (m && m->ext_buf) suiro_buf_unref(m->ext_buf);
  free(m);
}

int comm_started(void) { return C.ready; }
int comm_rank(void) { return C.rank; }
int comm_size(void) { return C.size; }
const char *comm_host(void) { return C.host; }
const char *comm_version(void) { return C.version; }
const char *comm_lost(void) { return C.lost[0] ? C.lost : NULL; }
int comm_inbox_fd(void) { return C.in_fd; }
void comm_set_intercept(int (*hook)(msg *m)) { C.intercept = hook; }
void comm_set_eager(int on) { atomic_store_explicit(&C.eager, on ? 1 : 0, memory_order_relaxed); }

void comm_traffic(int peer, uint64_t *sent, uint64_t *received) {
  *sent = *received = 0;
  if (peer < 0 || peer >= C.size || !C.sent) return;
  pthread_mutex_lock(&C.q_lock);
  *sent = C.sent[peer];
  *received = C.recvd[peer];
  pthread_mutex_unlock(&C.q_lock);
}

static void wake_thread(void) {
  uint64_t one = 1;
  if (write(C.wake_fd, &one, sizeof one) < 0) { /* counter saturated: it is awake anyway */ }
}

void comm_send(int peer, msg *m) {
  m->peer = peer;
  m->next = NULL;
  pthread_mutex_lock(&C.q_lock);
  if (C.stop) { /* the end's handshake has begun: nothing more goes out (cluster.h) */
    pthread_mutex_unlock(&C.q_lock);
    msg_free(m);
    return;
  }
  if (C.out_tail) C.out_tail->next = m;
  else C.out_head = m;
  C.out_tail = m;
  pthread_mutex_unlock(&C.q_lock);
  wake_thread();
}

void comm_send_all(const msg *m) {
  size_t bytes = sizeof *m + align8z(m->h.len - m->ext_len);
  for (int r = 0; r < C.size; r++) {
    if (r == C.rank) continue;
    msg *c = malloc(bytes);
    if (!c) continue; /* out of memory: that host will time out its wait */
    memcpy(c, m, bytes);
    if (c->ext_buf) suiro_buf_hold(c->ext_buf);
    comm_send(r, c);
  }
}

/* Inbox: link, then make the fd readable (both under q_lock; comm_recv drains it when the list
 * becomes empty, also under q_lock, so fd state and list agree). */
static void inbox_push(msg *m) {
  m->next = NULL;
  pthread_mutex_lock(&C.q_lock);
  if (C.in_tail) C.in_tail->next = m;
  else C.in_head = m;
  C.in_tail = m;
  uint64_t one = 1;
  if (write(C.in_fd, &one, sizeof one) < 0) { /* saturated: readable anyway */ }
  pthread_cond_broadcast(&C.q_cond);
  pthread_mutex_unlock(&C.q_lock);
}

msg *comm_recv(void) {
  pthread_mutex_lock(&C.q_lock);
  msg *m = C.in_head;
  if (m) {
    C.in_head = m->next;
    if (!C.in_head) {
      C.in_tail = NULL;
      uint64_t v;
      if (read(C.in_fd, &v, sizeof v) < 0) { /* already drained */ }
    }
  }
  pthread_mutex_unlock(&C.q_lock);
  return m;
}

/* An MPI call failed: with MPI_ERRORS_RETURN set we get here instead of an abort, name what
 * happened and tell the other side (Open MPI's runtime usually ends the job right after). */
static void mpi_failed(const char *what, int rc, int peer) {
  if (C.lost[0]) return;
  char es[MPI_MAX_ERROR_STRING];
  int el = 0;
  if (MPI_Error_string(rc, es, &el) != MPI_SUCCESS) snprintf(es, sizeof es, "error %d", rc);
  pthread_mutex_lock(&C.q_lock);
  snprintf(C.lost, sizeof C.lost,
           "MPI: %s %s rank %d failed (%s): a host of the job was lost; Open MPI 4.1 ends the whole "
           "job when one rank dies", what, peer >= 0 ? "with" : "on", peer >= 0 ? peer : C.rank, es);
  pthread_mutex_unlock(&C.q_lock);
  msg *m = msg_new(MSG_LOST, strlen(C.lost) + 1);
  if (m) {
    memcpy(msg_payload(m), C.lost, strlen(C.lost) + 1);
    m->peer = peer;
    inbox_push(m);
  }
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A message received in full. BYE is counted here; once stopping, what arrives is dropped (the
 * other side may still have sent it before it saw our end). */
static void dispatch(msg *m, int stopping) {
  if (m->h.type == MSG_BYE) {
    if (C.bye_from && m->peer > 0 && m->peer < C.size && !C.bye_from[m->peer]) {
      C.bye_from[m->peer] = 1;
      C.byes++;
    }
    free(m);
    return;
  }
  if (stopping) {
    free(m);
    return;
  }
  if (C.intercept && C.intercept(m)) return;
  inbox_push(m);
}

static void *comm_main(void *arg) {
  (void)arg;
  /* our sleeps are the latency of every message: the default 50 us timer slack would double them */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  int provided = 0;
  int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) {
    pthread_mutex_lock(&C.q_lock);
    snprintf(C.err, sizeof C.err, "MPI_Init_thread failed (error %d)", rc);
    C.failed = 1;
    pthread_cond_broadcast(&C.q_cond);
    pthread_mutex_unlock(&C.q_lock);
    return NULL;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1, hl = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[MPI_MAX_PROCESSOR_NAME + 1] = { 0 };
  MPI_Get_processor_name(host, &hl);
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int vl = 0;
  MPI_Get_library_version(ver, &vl);
  ver[vl > 0 && vl < (int)sizeof ver ? vl : 0] = 0;
  char *nl = strchr(ver, ',');
  if (nl) *nl = 0;
  uint64_t *sent = calloc((size_t)size, sizeof *sent), *recvd = calloc((size_t)size, sizeof *recvd);
  C.bye_from = calloc((size_t)size, 1);
  pthread_mutex_lock(&C.q_lock);
  C.rank = rank;
  C.size = size;
  snprintf(C.host, sizeof C.host, "%s", host);
  snprintf(C.version, sizeof C.version, "%s", ver);
  C.sent = sent;
  C.recvd = recvd;
  C.ready = 1;
  pthread_cond_broadcast(&C.q_cond);
  pthread_mutex_unlock(&C.q_lock);

  size_t npend = 0, cappend = 64;
  pending *pend = malloc(cappend * sizeof *pend);
  partial *parts = calloc((size_t)size, sizeof *parts);
  unsigned idle_us = 0;
  for (;;) {
    int busy = 0;
    /* 1. post what the other side queued */
    pthread_mutex_lock(&C.q_lock);
    msg *out = C.out_head;
    C.out_head = C.out_tail = NULL;
    int stop = C.stop;
    pthread_mutex_unlock(&C.q_lock);
    while (out) {
      msg *m = out;
      out = out->next;
      busy = 1;
      size_t total = sizeof(msg_hdr) + align8z(m->h.len);
      if (m->peer < 0 || m->peer >= size || C.lost[0]) {
        msg_free(m);
        continue;
      }
      /* what travels: header + inline payload, then the external tail and its padding, each cut
       * into parts of at most PART_MAX (the first part is the head) */
      static const unsigned char zeros[8];
      struct { const unsigned char *p; size_t n; } seg[3] = {
        { (const unsigned char *)&m->h, sizeof(msg_hdr) + (size_t)m->h.len - m->ext_len },
        { m->ext, m->ext_len },
        { zeros, align8z(m->ext_len) - m->ext_len },
      };
      if (!m->ext) seg[0].n = total;
      size_t nparts = 0;
      for (int g = 0; g < 3; g++) nparts += (seg[g].n + PART_MAX - 1) / PART_MAX;
      if (npend + nparts > cappend) {
        while (npend + nparts > cappend) cappend *= 2;
        pend = realloc(pend, cappend * sizeof *pend); /* small; failure here is fatal anyway */
      }
      int posted = 0, ok = 1;
      for (int g = 0; g < 3 && ok; g++) {
        for (size_t off = 0; off < seg[g].n && ok; off += PART_MAX) {
          size_t n = seg[g].n - off < PART_MAX ? seg[g].n - off : PART_MAX;
          rc = MPI_Isend((void *)(seg[g].p + off), (int)n, MPI_BYTE, m->peer, posted ? TAG_PART : TAG_HEAD,
                         MPI_COMM_WORLD, &pend[npend].req);
          if (rc != MPI_SUCCESS) {
            mpi_failed("a send", rc, m->peer);
            ok = 0;
            break;
          }
          pend[npend++].m = m;
          posted++;
        }
      }
      m->parts_left = posted; /* counted down as the sends complete */
      pthread_mutex_lock(&C.q_lock);
      sent[m->peer] += total;
      pthread_mutex_unlock(&C.q_lock);
      if (m->parts_left == 0) msg_free(m);
    }
    /* 2. sends that completed */
    for (size_t i = 0; i < npend;) {
      int flag = 0;
      rc = MPI_Test(&pend[i].req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        mpi_failed("a send", rc, pend[i].m->peer);
        flag = 1;
      }
      if (flag) {
        if (--pend[i].m->parts_left == 0) msg_free(pend[i].m);
        pend[i] = pend[--npend];
        busy = 1;
      } else {
        i++;
      }
    }
    /* 3. what arrived. Open MPI polls its sockets only every few progress calls, so a burst of
     * probes before sleeping sees a message that has arrived (one probe per wake-up would add
     * several sleeps to every hop). */
    for (int k = 0, misses = 0; k < 64 && !C.lost[0]; k++) {
      int flag = 0;
      MPI_Status stt;
      rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &stt);
      if (rc != MPI_SUCCESS) {
        mpi_failed("a probe", rc, -1);
        break;
      }
      if (!flag) {
        if (++misses >= PROBE_BURST) break;
        continue;
      }
      busy = 1;
      int count = 0;
      MPI_Get_count(&stt, MPI_BYTE, &count);
      int src = stt.MPI_SOURCE;
      partial *pp = &parts[src];
      if (stt.MPI_TAG == TAG_PART && pp->m) { /* the next part of a large message */
        size_t total = sizeof(msg_hdr) + align8z(pp->m->h.len);
        if ((size_t)count > total - pp->have) count = (int)(total - pp->have);
        rc = MPI_Recv((unsigned char *)&pp->m->h + pp->have, count, MPI_BYTE, src, TAG_PART, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
          mpi_failed("a receive", rc, src);
          break;
        }
        pp->have += (size_t)count;
        if (pp->have == total) {
          msg *m = pp->m;
          pp->m = NULL;
          pthread_mutex_lock(&C.q_lock);
          recvd[src] += total;
          pthread_mutex_unlock(&C.q_lock);
          dispatch(m, stop);
        }
        continue;
      }
      /* a header and the first part: received in place, grown when more parts follow */
      size_t first = (size_t)count;
      msg *m = malloc(sizeof *m + (first > sizeof(msg_hdr) ? first - sizeof(msg_hdr) : 0));
      if (!m) {
        mpi_failed("a receive (out of memory)", MPI_ERR_NO_MEM, src);
        break;
      }
      memset(m, 0, sizeof *m);
      rc = MPI_Recv(&m->h, count, MPI_BYTE, src, stt.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        free(m);
        mpi_failed("a receive", rc, src);
        break;
      }
      size_t total = sizeof(msg_hdr) + align8z(m->h.len);
      if (first < sizeof(msg_hdr) || stt.MPI_TAG != TAG_HEAD || m->h.type == 0 || m->h.type >= MSG_TYPE_MAX ||
          m->h.len > ((uint64_t)1 << 46) || first > total) { /* not one of ours: drop it */
        free(m);
        continue;
      }
      m->peer = src;
      if (first < total) { /* more parts follow, in order */
        msg *g = realloc(m, sizeof *m + align8z(m->h.len));
        if (!g) {
          free(m);
          mpi_failed("a receive (out of memory)", MPI_ERR_NO_MEM, src);
          break;
        }
        parts[src].m = g;
        parts[src].have = first;
        continue;
      }
      pthread_mutex_lock(&C.q_lock);
      recvd[src] += total;
      pthread_mutex_unlock(&C.q_lock);
      dispatch(m, stop);
    }
    if (stop) {
      pthread_mutex_lock(&C.q_lock);
      int empty = C.out_head == NULL, abandon = C.abandon;
      double deadline = C.stop_deadline;
      pthread_mutex_unlock(&C.q_lock);
      /* every send completed and, on rank 0, every serving rank's last message is in: finalize */
      if (empty && npend == 0 && (rank != 0 || C.byes >= size - 1 || abandon)) break;
      if (C.lost[0] || mono_now() > deadline) { /* a peer is gone or hangs: leave, mpirun ends the job */
        pthread_mutex_lock(&C.q_lock);
        C.abandon = 1;
        pthread_mutex_unlock(&C.q_lock);
        break;
      }
    }
    if (busy) {
      idle_us = 0;
      continue;
    }
    if (npend) { /* a transfer in flight needs our progress calls */
      sched_yield();
      continue;
    }
    unsigned cap = atomic_load_explicit(&C.eager, memory_order_relaxed) ? EAGER_MAX_US
                   : rank == 0                                            ? IDLE_MAX_US
                                                                          : SERVE_MAX_US;
    idle_us = idle_us ? (idle_us * 2 > cap ? cap : idle_us * 2) : IDLE_MIN_US;
    struct pollfd pfd = { .fd = C.wake_fd, .events = POLLIN };
    struct timespec ts = { 0, (long)idle_us * 1000 };
    if (ppoll(&pfd, 1, &ts, NULL) > 0) {
      uint64_t v;
      if (read(C.wake_fd, &v, sizeof v) < 0) { /* drained already */ }
      idle_us = 0;
    }
  }
  free(pend); /* sends still pending (abandoned) point into messages never freed: we leave */
  for (int r = 0; r < size; r++) free(parts[r].m);
  free(parts);
  pthread_mutex_lock(&C.q_lock);
  int finalize = !C.lost[0] && !C.abandon;
  pthread_mutex_unlock(&C.q_lock);
  if (finalize) MPI_Finalize();
  pthread_mutex_lock(&C.q_lock);
  C.done = 1;
  pthread_cond_broadcast(&C.q_cond);
  pthread_mutex_unlock(&C.q_lock);
  return NULL;
}

int comm_start(char *err, size_t cap) {
  if (C.started) {
    if (C.failed) {
      snprintf(err, cap, "%s", C.err);
      return -1;
    }
    return 0;
  }
  C.started = 1;
  C.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  C.in_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (C.wake_fd < 0 || C.in_fd < 0) {
    snprintf(C.err, sizeof C.err, "eventfd: %s", strerror(errno));
    C.failed = 1;
    snprintf(err, cap, "%s", C.err);
    return -1;
  }
  if (pthread_create(&C.th, NULL, comm_main, NULL) != 0) {
    snprintf(C.err, sizeof C.err, "cannot start the MPI communication thread");
    C.failed = 1;
    snprintf(err, cap, "%s", C.err);
    return -1;
  }
  pthread_mutex_lock(&C.q_lock);
  while (!C.ready && !C.failed) pthread_cond_wait(&C.q_cond, &C.q_lock);
  pthread_mutex_unlock(&C.q_lock);
  if (C.failed) {
    pthread_join(C.th, NULL);
    snprintf(err, cap, "%s", C.err);
    return -1;
  }
  cluster_reap_vader(); /* what killed jobs left on this node (this job's segments are mapped now) */
  return 0;
}

void comm_stop(double timeout, int ending) {
  if (!C.ready || C.stop) return;
  if (C.rank != 0) { /* a serving rank's last message */
    msg *bye = msg_new(MSG_BYE, 0);
    if (bye) comm_send(0, bye);
  }
  pthread_mutex_lock(&C.q_lock);
  C.stop = 1;
  if (ending || C.lost[0]) { /* the job is being torn down: finalizing would wait for the dead */
    C.abandon = 1;
    if (timeout > 0.5) timeout = 0.5;
  }
  C.stop_deadline = mono_now() + timeout;
  pthread_mutex_unlock(&C.q_lock);
  wake_thread();
  timeout += 2; /* the thread gives up at its deadline; this wait only backs that up */
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  long ns = dl.tv_nsec + (long)((timeout - (double)(time_t)timeout) * 1e9);
  dl.tv_sec += (time_t)timeout + ns / 1000000000L;
  dl.tv_nsec = ns % 1000000000L;
  pthread_mutex_lock(&C.q_lock);
  int rc = 0;
  while (!C.done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&C.q_cond, &C.q_lock, &dl);
  int done = C.done;
  pthread_mutex_unlock(&C.q_lock);
  if (done) pthread_join(C.th, NULL);
  /* else: a peer never finalized; the process exits and the runtime cleans up */
}
