/* test_chan.c — channels (suiro_chan.h): FIFO and nothing lost between two processes, full and
 * empty rings (also between two threads, for ThreadSanitizer), close, peer death at random
 * moments, timeouts, the event fd, endpoints crossing as wire values, bad inputs, and nothing
 * left in /dev/shm. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_bind.h"
#include "suiro_chan.h"
#include "suiro_face.h"

void buf_set_worker(const char *pool_name); /* buf.c: this process joins the family of a name */

static _Thread_local uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* The /dev/shm prefix of this process's names. */
static void own_prefix(char *out, size_t cap) { snprintf(out, cap, "suiro_%x_", (unsigned)getpid()); }

static suiro_chan *make(uint32_t cap, size_t bytes, suiro_chan **rx) {
  suiro_chan_opts o;
  suiro_chan_opts_init(&o);
  o.capacity = cap;
  if (bytes) o.bytes = bytes;
  suiro_chan *tx = NULL;
  CHECK_OK(suiro_chan_create(&o, &tx, rx));
  return tx;
}

/* A child of the test that takes an endpoint over (as a worker of the family would). */
static suiro_chan *child_import(const suiro_chan_ref *ref) {
  buf_set_worker(ref->name);
  suiro_chan *ch = NULL;
  if (suiro_chan_import(ref, &ch) != SUIRO_OK) {
    fprintf(stderr, "child: %s\n", suiro_last_error());
    _exit(3);
  }
  return ch;
}

static uint64_t recv_from(suiro_chan *rx, uint64_t next, suiro_status *end, double timeout);
#define recv_counting(rx, end, timeout) recv_from((rx), 0, (end), (timeout))

/* Waits (bounded) until the peer of ch has an owner: a child killed before it claimed its end
 * would leave the end between owners, which is not a death. */
static void wait_claimed(suiro_chan *ch) {
  double t0 = suiro_now();
  suiro_chan_stats s;
  do {
    CHECK_OK(suiro_chan_status(ch, &s));
    if (s.peer != SUIRO_CHAN_PEER_MOVING) return;
    usleep(1000);
  } while (suiro_now() - t0 < 20);
  CHECK(!"the child never claimed its end");
}

/* Sends 0..n-1 as u64 in random batches of 1..64, then closes. */
static void send_counting(suiro_chan *tx, uint64_t n, int close_it) {
  uint64_t buf[64][3] = { { 0 } }; /* a message is 8, 16 or 24 bytes: the count, then zeros */
  suiro_chan_iov iov[64];
  uint64_t i = 0;
  while (i < n) {
    size_t k = 1 + rnd() % 64;
    if (k > n - i) k = (size_t)(n - i);
    for (size_t j = 0; j < k; j++) {
      buf[j][0] = i + j;
      iov[j].data = buf[j];
      iov[j].len = 8 + (size_t)((i + j) % 3) * 8; /* sizes vary: wrap-around skips happen */
    }
    size_t sent = 0;
    suiro_status st = suiro_chan_send_batch(tx, iov, k, &sent, -1);
    if (st != SUIRO_OK) {
      fprintf(stderr, "send_batch: %s (%s)\n", suiro_status_name(st), suiro_last_error());
      _exit(4);
    }
    i += k;
  }
  if (close_it) suiro_chan_close(tx);
}

/* Receives in random batches until not OK; checks 0, 1, 2, ...; returns the count, *end the outcome. */
static uint64_t recv_from(suiro_chan *rx, uint64_t next, suiro_status *end, double timeout) {
  suiro_chan_msg m[100];
  for (;;) {
    size_t n = 0;
    suiro_status st = suiro_chan_recv_batch(rx, m, 1 + rnd() % 100, &n, timeout);
    if (st != SUIRO_OK) {
      *end = st;
      return next;
    }
    for (size_t j = 0; j < n; j++) {
      uint64_t v;
      CHECK_EQ(m[j].len, 8 + (next % 3) * 8);
      CHECK(((uintptr_t)m[j].data & 7) == 0);
      memcpy(&v, m[j].data, 8);
      CHECK_EQ(v, next);
      next++;
    }
  }
}

TEST_T(fifo_nothing_lost_over_a_million_messages_between_processes, 120) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  suiro_chan *rx, *tx = make(256, 0, &rx);
  suiro_chan_ref ref;
  CHECK_OK(suiro_chan_export(tx, &ref));
  pid_t c = fork();
  if (c == 0) {
    rng_state ^= 0x1234567;
    suiro_chan *t = child_import(&ref);
    send_counting(t, 1000000, 1);
    suiro_chan_free(t);
    _exit(0);
  }
  suiro_status end;
  CHECK_EQ(recv_counting(rx, &end, 30), 1000000);
  CHECK_EQ(end, SUIRO_CLOSED);
  suiro_chan_stats s;
  CHECK_OK(suiro_chan_status(rx, &s));
  CHECK_EQ(s.received, 1000000);
  CHECK_EQ(s.sent, 1000000);
  CHECK_EQ(s.queued, 0);
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_CLOSED);
  int ws;
  CHECK(waitpid(c, &ws, 0) == c && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  CHECK_EQ(shm_count(pre), 0);
}

struct thr { suiro_chan *tx; uint64_t n; };
static void *producer(void *arg) {
  struct thr *t = arg;
  send_counting(t->tx, t->n, 1);
  return NULL;
}

/* Two threads of one process, a ring of 4 messages: it is full and empty all the time
 * (ThreadSanitizer checks every access of the ring and its words). */
TEST_T(full_and_empty_rings_between_threads, 120) {
  suiro_chan *rx, *tx = make(4, 64, &rx);
  struct thr t = { tx, 50000 };
  pthread_t th;
  CHECK(pthread_create(&th, NULL, producer, &t) == 0);
  suiro_status end;
  CHECK_EQ(recv_counting(rx, &end, 30), t.n);
  CHECK_EQ(end, SUIRO_CLOSED);
  pthread_join(th, NULL);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

TEST(full_and_empty_outcomes) {
  suiro_chan *rx, *tx = make(4, 64, &rx);
  uint64_t v = 7;
  char out[64];
  size_t len;
  CHECK_EQ(suiro_chan_recv(rx, out, sizeof out, &len, 0), SUIRO_TIMEOUT); /* empty */
  for (int i = 0; i < 4; i++) CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 0), SUIRO_FULL); /* capacity in messages */
  double t0 = suiro_now();
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 0.05), SUIRO_TIMEOUT);
  CHECK(suiro_now() - t0 >= 0.04);
  suiro_chan_stats s;
  CHECK_OK(suiro_chan_status(tx, &s));
  CHECK_EQ(s.queued, 4);
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_OPEN);
  for (int i = 0; i < 4; i++) CHECK_OK(suiro_chan_recv(rx, out, sizeof out, &len, 0));
  CHECK_EQ(suiro_chan_recv(rx, out, sizeof out, &len, 0), SUIRO_TIMEOUT);
  /* the byte cap: 64-byte messages fill a ring of 256 bytes before 4 messages */
  char big[64] = { 1 };
  int n = 0;
  while (suiro_chan_send(tx, big, sizeof big, 0) == SUIRO_OK) n++;
  CHECK(n >= 1 && n < 4);
  /* a batch larger than the room: what fits is published, the rest times out */
  suiro_chan_iov iov[8];
  for (int i = 0; i < 8; i++) iov[i] = (suiro_chan_iov){ &v, 8 };
  size_t sent = 99;
  CHECK_EQ(suiro_chan_send_batch(tx, iov, 8, &sent, 0), SUIRO_FULL);
  CHECK(sent < 8);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

TEST(recv_waits_and_times_out) {
  suiro_chan *rx, *tx = make(8, 0, &rx);
  char out[8];
  size_t len;
  double t0 = suiro_now();
  CHECK_EQ(suiro_chan_recv(rx, out, sizeof out, &len, 0.1), SUIRO_TIMEOUT);
  double dt = suiro_now() - t0;
  CHECK(dt >= 0.09 && dt < 2);
  suiro_chan_msg m;
  size_t n;
  CHECK_EQ(suiro_chan_recv_batch(rx, &m, 1, &n, 0.02), SUIRO_TIMEOUT);
  CHECK_EQ(n, 0);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

TEST(close_from_either_side) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  suiro_chan *rx, *tx = make(16, 0, &rx);
  for (uint64_t i = 0; i < 10; i++) CHECK_OK(suiro_chan_send(tx, &i, 8, 0));
  CHECK_OK(suiro_chan_close(tx));
  CHECK_OK(suiro_chan_close(tx)); /* idempotent */
  uint64_t v;
  size_t len;
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "closed"));
  for (uint64_t i = 0; i < 10; i++) {
    CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1));
    CHECK_EQ(v, i);
  }
  CHECK_EQ(suiro_chan_recv(rx, &v, 8, &len, 1), SUIRO_CLOSED);
  CHECK_EQ(suiro_chan_recv(rx, &v, 8, &len, -1), SUIRO_CLOSED); /* never blocks */
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  /* the receiver closes: the sender gets CLOSED, also while it waits for room */
  tx = make(2, 0, &rx);
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  suiro_chan_ref ref;
  CHECK_OK(suiro_chan_export(rx, &ref));
  pid_t c = fork();
  if (c == 0) {
    suiro_chan *r = child_import(&ref);
    usleep(50000);
    suiro_chan_close(r);
    suiro_chan_free(r);
    _exit(0);
  }
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 10), SUIRO_CLOSED);
  int ws;
  CHECK(waitpid(c, &ws, 0) == c && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  suiro_chan_stats s;
  CHECK_OK(suiro_chan_status(tx, &s));
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_CLOSED);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  CHECK_EQ(shm_count(pre), 0);
}

/* The sender dies at a random moment: every message it published arrives, in order, then
 * PEER_GONE; nothing stays in /dev/shm once the survivor frees its end. */
TEST_T(sender_death_at_random_moments, 120) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  for (int round = 0; round < 6; round++) {
    suiro_chan *rx, *tx = make(64, 0, &rx);
    suiro_chan_ref ref;
    CHECK_OK(suiro_chan_export(tx, &ref));
    pid_t c = fork();
    if (c == 0) {
      rng_state += (uint64_t)round * 7919;
      suiro_chan *t = child_import(&ref);
      send_counting(t, UINT64_MAX / 2, 0); /* until killed */
      _exit(0);
    }
    wait_claimed(rx);
    usleep((useconds_t)(rnd() % 30000));
    suiro_status end;
    uint64_t got = 0;
    if (round % 2) { /* killed while the receiver is still reading */
      kill(c, SIGKILL);
      got = recv_counting(rx, &end, 30);
    } else { /* killed while the receiver waits for more */
      suiro_chan_msg m[4];
      size_t n;
      CHECK_OK(suiro_chan_recv_batch(rx, m, 4, &n, 10));
      kill(c, SIGKILL);
      for (size_t j = 0; j < n; j++) {
        uint64_t v;
        memcpy(&v, m[j].data, 8);
        CHECK_EQ(v, j);
      }
      got = recv_from(rx, n, &end, 30);
    }
    CHECK_EQ(end, SUIRO_PEER_GONE);
    CHECK(got > 0);
    int ws;
    CHECK(waitpid(c, &ws, 0) == c && WIFSIGNALED(ws));
    suiro_chan_stats s;
    CHECK_OK(suiro_chan_status(rx, &s));
    CHECK_EQ(s.peer, SUIRO_CHAN_PEER_DIED);
    CHECK_EQ(s.queued, 0);
    suiro_chan_free(tx);
    suiro_chan_free(rx);
    CHECK_EQ(shm_count(pre), 0);
  }
}

/* The receiver dies: the sender fills the ring, then gets PEER_GONE. */
TEST_T(receiver_death_at_random_moments, 120) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  for (int round = 0; round < 4; round++) {
    suiro_chan *rx, *tx = make(32, 0, &rx);
    suiro_chan_ref ref;
    CHECK_OK(suiro_chan_export(rx, &ref));
    pid_t c = fork();
    if (c == 0) {
      suiro_chan *r = child_import(&ref);
      suiro_status end;
      recv_counting(r, &end, -1);
      _exit(0);
    }
    wait_claimed(tx);
    usleep((useconds_t)(rnd() % 20000));
    kill(c, SIGKILL);
    uint64_t i = 0, msg[3] = { 0 };
    suiro_status st;
    while ((msg[0] = i, st = suiro_chan_send(tx, msg, 8 + (i % 3) * 8, 10)) == SUIRO_OK) i++;
    CHECK_EQ(st, SUIRO_PEER_GONE);
    int ws;
    CHECK(waitpid(c, &ws, 0) == c && WIFSIGNALED(ws));
    suiro_chan_free(tx);
    suiro_chan_free(rx);
    CHECK_EQ(shm_count(pre), 0);
  }
}

static int readable(int fd, int ms) {
  struct pollfd p = { fd, POLLIN, 0 };
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

TEST(event_fd_wakes_on_messages_close_and_death) {
  suiro_chan *rx, *tx = make(8, 0, &rx);
  CHECK_EQ(suiro_chan_eventfd(tx), -1);
  CHECK(strstr(suiro_last_error(), "sending end"));
  int fd = suiro_chan_eventfd(rx);
  CHECK(fd >= 0);
  CHECK(!readable(fd, 0));
  uint64_t v = 1;
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  CHECK(readable(fd, 1000));
  suiro_chan_event_ack(rx);
  CHECK(!readable(fd, 0)); /* drained, re-armed: the message is still queued for recv */
  size_t len;
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 0));
  CHECK_OK(suiro_chan_close(tx));
  CHECK(readable(fd, 1000));
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  /* the sender's owner dies without a word: its pidfd wakes the fd */
  tx = make(8, 0, &rx);
  suiro_chan_ref ref;
  CHECK_OK(suiro_chan_export(tx, &ref));
  fd = suiro_chan_eventfd(rx);
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t c = fork();
  if (c == 0) {
    close(p[0]);
    suiro_chan *t = child_import(&ref);
    (void)t;
    char b = 1;
    if (write(p[1], &b, 1) != 1) _exit(5);
    pause();
    _exit(0);
  }
  close(p[1]);
  char b;
  CHECK(read(p[0], &b, 1) == 1);
  CHECK(readable(fd, 1000)); /* the claim moved the owner */
  suiro_chan_event_ack(rx);  /* follows the new owner */
  CHECK(!readable(fd, 0));
  kill(c, SIGKILL);
  CHECK(readable(fd, 5000));
  int ws;
  CHECK(waitpid(c, &ws, 0) == c);
  CHECK_EQ(suiro_chan_recv(rx, &v, 8, &len, 5), SUIRO_PEER_GONE);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

/* A receiving end that armed its event fd and is freed before its sender: the sender's next
 * wake-up (a send, a close, its free) wrote a FIFO with no reader, and SIGPIPE (default action:
 * death; R made it an error jumping out of the engine) came with it. */
TEST(a_sender_outliving_an_armed_receiver_gets_no_sigpipe) {
  struct sigaction dfl = { .sa_handler = SIG_DFL }, old;
  sigemptyset(&dfl.sa_mask);
  CHECK(sigaction(SIGPIPE, &dfl, &old) == 0); /* as a process that never touched it has */
  suiro_chan *rx, *tx = make(8, 0, &rx);
  int fd = suiro_chan_eventfd(rx);
  CHECK(fd >= 0);
  uint64_t v = 1;
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0)); /* the sender opens the FIFO and wakes it */
  CHECK(readable(fd, 1000));
  suiro_chan_event_ack(rx); /* armed again */
  suiro_chan_free(rx);      /* its FIFO fd closed, still armed */
  suiro_status st = suiro_chan_send(tx, &v, 8, 0);
  CHECK(st == SUIRO_OK || st == SUIRO_CLOSED);
  (void)suiro_chan_close(tx);
  suiro_chan_free(tx);
  CHECK(sigaction(SIGPIPE, &old, NULL) == 0); /* alive here: no SIGPIPE was raised */
}

TEST(an_endpoint_crosses_as_a_wire_value) {
  suiro_chan *rx, *tx = make(8, 0, &rx);
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_chan_put(&w, tx), WIRE_OK);
  const void *buf;
  size_t blen;
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &blen), WIRE_OK);
  uint64_t v = 5;
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 0), SUIRO_ERR); /* given away */
  CHECK(strstr(suiro_last_error(), "sent to another process"));
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, buf, blen), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(it.tag, WIRE_REF);
  CHECK_EQ(it.ref.type, WIRE_REF_CHAN);
  /* a face that does not bind channels refuses it by name */
  suiro_view view;
  CHECK_EQ(suiro_zc_open(&it.ref, &view), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "channel endpoint"));
  suiro_chan *t2 = NULL;
  CHECK_OK(suiro_chan_open(&it.ref, &t2));
  CHECK_OK(suiro_chan_send(t2, &v, 8, 0));
  suiro_chan *t3 = NULL;
  CHECK_EQ(suiro_chan_open(&it.ref, &t3), SUIRO_ERR); /* one owner at a time */
  CHECK(strstr(suiro_last_error(), "already holds"));
  size_t len;
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1));
  CHECK_EQ(v, 5);
  /* forged: the right name without the token */
  suiro_wire_ref forged = it.ref;
  forged.flags ^= 1;
  CHECK_EQ(suiro_chan_open(&forged, &t3), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "forged"));
  /* another family's name, a name that does not exist */
  suiro_chan_ref bad;
  memset(&bad, 0, sizeof bad);
  snprintf(bad.name, sizeof bad.name, "/suiro_1_2_c3");
  CHECK_EQ(suiro_chan_import(&bad, &t3), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "another pool family"));
  int pid;
  (void)pid;
  snprintf(bad.name, sizeof bad.name, "%.*sc0", (int)(strchr(strchr(strchr(it.ref.name.ptr + 1, '_') + 1, '_') + 1, '_') + 1 - it.ref.name.ptr),
           it.ref.name.ptr);
  CHECK_EQ(suiro_chan_import(&bad, &t3), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "does not exist"));
  bad.side = 5;
  CHECK_EQ(suiro_chan_import(&bad, &t3), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "side 5"));
  suiro_wire_writer_free(&w);
  suiro_chan_free(t2);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

TEST(a_second_process_cannot_use_an_endpoint) {
  suiro_chan *rx, *tx = make(8, 0, &rx);
  pid_t c = fork();
  if (c == 0) { /* the parent's handle, copied by fork: refused */
    uint64_t v = 1;
    int ok = suiro_chan_send(tx, &v, 8, 0) == SUIRO_ERR && strstr(suiro_last_error(), "belongs to process");
    if (!ok) fprintf(stderr, "child: %s\n", suiro_last_error());
    _exit(ok ? 0 : 1);
  }
  int ws;
  CHECK(waitpid(c, &ws, 0) == c && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  /* an end claimed by a live process is refused to another */
  suiro_chan_ref ref;
  CHECK_OK(suiro_chan_export(rx, &ref));
  suiro_chan *r2;
  CHECK_OK(suiro_chan_import(&ref, &r2));
  c = fork();
  if (c == 0) {
    buf_set_worker(ref.name);
    suiro_chan *r3 = NULL;
    int ok = suiro_chan_import(&ref, &r3) == SUIRO_ERR && strstr(suiro_last_error(), "owned by process");
    if (!ok) fprintf(stderr, "child: %s\n", suiro_last_error());
    _exit(ok ? 0 : 1);
  }
  CHECK(waitpid(c, &ws, 0) == c && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  suiro_chan_free(r2);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

TEST(bad_inputs_are_refused_by_name) {
  suiro_chan_opts o;
  suiro_chan *tx = NULL, *rx = NULL;
  suiro_chan_opts_init(&o);
  o.capacity = 0;
  CHECK_EQ(suiro_chan_create(&o, &tx, &rx), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "capacity must be 1..16777216 messages, got 0"));
  o.capacity = SUIRO_CHAN_MAX_CAPACITY + 1;
  CHECK_EQ(suiro_chan_create(&o, &tx, &rx), SUIRO_ERR);
  suiro_chan_opts_init(&o);
  o.bytes = 10;
  CHECK_EQ(suiro_chan_create(&o, &tx, &rx), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "bytes (the byte cap)"));
  o.bytes = SUIRO_CHAN_MAX_BYTES + 1;
  CHECK_EQ(suiro_chan_create(&o, &tx, &rx), SUIRO_ERR);
  suiro_chan_opts_init(&o);
  o.size = 3;
  CHECK_EQ(suiro_chan_create(&o, &tx, &rx), SUIRO_ERR);
  CHECK_EQ(suiro_chan_create(NULL, NULL, &rx), SUIRO_ERR);
  tx = make(8, 100, &rx);
  char big[200] = { 0 };
  CHECK_EQ(suiro_chan_send(tx, big, 101, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "101 bytes is larger than the channel's byte cap (100 bytes)"));
  suiro_chan_iov iov[2] = { { big, 8 }, { big, 150 } };
  size_t sent = 9;
  CHECK_EQ(suiro_chan_send_batch(tx, iov, 2, &sent, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "message 2 of 150 bytes"));
  CHECK_EQ(sent, 0);
  CHECK_EQ(suiro_chan_send(rx, big, 8, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "receiving end"));
  size_t len;
  CHECK_EQ(suiro_chan_recv(tx, big, 8, &len, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "sending end"));
  CHECK_OK(suiro_chan_send(tx, big, 64, 0));
  CHECK_EQ(suiro_chan_recv(rx, big, 8, &len, 0), SUIRO_ERR); /* too small: left queued */
  CHECK_EQ(len, 64);
  CHECK_OK(suiro_chan_recv(rx, big, sizeof big, &len, 0));
  CHECK_EQ(suiro_chan_send(NULL, big, 8, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "NULL") || strstr(suiro_last_error(), "null"));
  suiro_chan_free(NULL);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
}

/* An endpoint written into a message that never goes comes back to its sender: the message freed
 * (a refused submit, an encode error later in the arguments), or its bytes revoked (a batch's
 * refused tasks). One that was claimed meanwhile is left alone. */
TEST(a_message_that_never_goes_gives_its_endpoint_back) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  suiro_chan *rx, *tx = make(8, 0, &rx);
  uint64_t v = 7;
  size_t len;
  _Alignas(8) unsigned char stack[256];
  suiro_msg m;
  suiro_msg_init(&m, stack, sizeof stack);
  CHECK_EQ(suiro_wire_put_list(suiro_msg_writer(&m), 2), WIRE_OK);
  CHECK_EQ(suiro_chan_put(suiro_msg_writer(&m), tx), WIRE_OK);
  CHECK(suiro_chan_given(tx));
  CHECK_EQ(suiro_chan_send(tx, &v, 8, 0), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "sent to another process"));
  suiro_msg_free(&m); /* the list's second item never came: the message is dropped */
  CHECK(!suiro_chan_given(tx));
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1));
  CHECK_EQ(v, 7);

  /* revoked bytes, as a batch's refused tasks are */
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_chan_put(&w, rx), WIRE_OK);
  const void *buf;
  size_t blen;
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &blen), WIRE_OK);
  CHECK(suiro_chan_given(rx));
  suiro_zc_revoke(buf, blen);
  CHECK(!suiro_chan_given(rx));
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1));

  /* claimed since (the message went): revoking its bytes takes nothing back */
  CHECK_EQ(suiro_chan_put(&w, tx), WIRE_ERR); /* after the top-level value: refused */
  suiro_wire_writer_free(&w);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK(!suiro_chan_given(tx)); /* the put on a finished writer failed and gave it back */
  CHECK_EQ(suiro_chan_put(&w, tx), WIRE_OK);
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &blen), WIRE_OK);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, buf, blen), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  suiro_chan *t2 = NULL;
  CHECK_OK(suiro_chan_open(&it.ref, &t2));
  suiro_zc_revoke(buf, blen);
  CHECK(suiro_chan_given(tx));
  CHECK_EQ(suiro_chan_unexport(tx), SUIRO_ERR);
  CHECK(strstr(suiro_last_error(), "claimed by another process"));
  CHECK_OK(suiro_chan_send(t2, &v, 8, 0));
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1));
  suiro_wire_writer_free(&w);
  suiro_chan_free(t2);
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  CHECK_EQ(shm_count(pre), 0);
}

/* An endpoint in transit that nobody will claim is dropped: when the sender no longer holds its
 * handle, revoking the message frees the end (its peer sees CLOSED after what was queued), and a
 * channel whose last end goes drops the endpoints in its unread messages. Nothing stays in
 * /dev/shm. */
TEST(an_endpoint_nobody_claims_is_dropped) {
  char pre[64];
  own_prefix(pre, sizeof pre);
  suiro_chan *rx, *tx = make(8, 0, &rx);
  uint64_t v = 3;
  size_t len;
  CHECK_OK(suiro_chan_send(tx, &v, 8, 0));
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_chan_put(&w, tx), WIRE_OK);
  const void *buf;
  size_t blen;
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &blen), WIRE_OK);
  suiro_chan_free(tx); /* given away: this only unmaps */
  suiro_chan_stats s;
  CHECK_OK(suiro_chan_status(rx, &s));
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_MOVING);
  suiro_zc_revoke(buf, blen); /* refused: but the handle is gone, so nothing comes back */
  CHECK_OK(suiro_chan_status(rx, &s));
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_MOVING);
  suiro_chan_revoke_refs(buf, blen); /* the message is dropped unread */
  CHECK_OK(suiro_chan_recv(rx, &v, 8, &len, 1)); /* what was queued first */
  CHECK_EQ(v, 3);
  CHECK_EQ(suiro_chan_recv(rx, &v, 8, &len, 5), SUIRO_CLOSED);
  suiro_chan *t3 = NULL;
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK_EQ(suiro_wire_reader_init(&r, buf, blen), WIRE_OK);
  CHECK_EQ(suiro_wire_next(&r, &it), WIRE_OK);
  CHECK_EQ(suiro_chan_open(&it.ref, &t3), SUIRO_ERR); /* the dropped end cannot be claimed */
  CHECK(strstr(suiro_last_error(), "freed") || strstr(suiro_last_error(), "dropped"));
  suiro_wire_writer_free(&w);
  suiro_chan_free(rx);
  CHECK_EQ(shm_count(pre), 0);

  /* an endpoint queued in a channel whose ends both go unread */
  suiro_chan *rxa, *txa = make(8, 0, &rxa);
  suiro_chan *rxb, *txb = make(8, 0, &rxb);
  suiro_wire_writer_init(&w, NULL, 0);
  CHECK_EQ(suiro_wire_put_list(&w, 2), WIRE_OK);
  CHECK_EQ(suiro_wire_put_i64(&w, 1), WIRE_OK);
  CHECK_EQ(suiro_chan_put(&w, txb), WIRE_OK);
  CHECK_EQ(suiro_wire_writer_finish(&w, &buf, &blen), WIRE_OK);
  CHECK_OK(suiro_chan_send(txa, buf, blen, 0));
  suiro_wire_writer_free(&w);
  suiro_chan_free(txb);
  suiro_chan_free(txa);
  CHECK_OK(suiro_chan_status(rxb, &s));
  CHECK_EQ(s.peer, SUIRO_CHAN_PEER_MOVING);
  suiro_chan_free(rxa); /* the last end of a: its unread message's endpoint is dropped */
  CHECK_EQ(suiro_chan_recv(rxb, &v, 8, &len, 5), SUIRO_CLOSED);
  suiro_chan_free(rxb);
  CHECK_EQ(shm_count(pre), 0);
}
