/* bench_channels.c — channels in C (engine/include/suiro_chan.h), one way between two processes.
 *
 *   build/bin/bench_channels [rounds]      (scripts/bench channels builds it over libsuiro.a)
 *
 * c_chan_msgs_per_s        8-byte messages (an integer), one suiro_chan_send each, from a pool
 *                          worker (this program re-executed) to this process, received with
 *                          suiro_chan_recv_batch (views)
 * c_chan_batch_msgs_per_s  the same sent with suiro_chan_send_batch, 256 messages per call
 *
 * Timed by the receiver from its first message to the sender's close. Medians over rounds; the
 * last line of output is one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suiro.h"
#include "suiro_chan.h"

#define BATCH 256

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what) {
  fprintf(stderr, "bench_channels: %s: %s\n", what, suiro_last_error());
  exit(1);
}

/* The sender, a native task: its argument is a wire list [endpoint, n, batch]. */
static int sender(const void *arg, size_t len, suiro_out *out, void *ud) {
  (void)ud;
  suiro_wire_reader r;
  suiro_wire_item it, in, ib;
  suiro_chan *tx;
  if (suiro_wire_reader_init(&r, arg, len) != WIRE_OK || suiro_wire_next(&r, &it) != WIRE_OK ||
      suiro_wire_next(&r, &it) != WIRE_OK || suiro_wire_next(&r, &in) != WIRE_OK ||
      suiro_wire_next(&r, &ib) != WIRE_OK || suiro_chan_open(&it.ref, &tx) != SUIRO_OK)
    return suiro_out_error(out, "sender: %s", suiro_last_error());
  uint64_t n = (uint64_t)in.i;
  if (!ib.i) {
    for (uint64_t i = 0; i < n; i++)
      if (suiro_chan_send(tx, &i, 8, -1) != SUIRO_OK) return suiro_out_error(out, "send: %s", suiro_last_error());
  } else {
    uint64_t vals[BATCH];
    suiro_chan_iov iov[BATCH];
    for (int k = 0; k < BATCH; k++) iov[k] = (suiro_chan_iov){ &vals[k], 8 };
    for (uint64_t i = 0; i < n; i += BATCH) {
      size_t m = n - i < BATCH ? (size_t)(n - i) : BATCH, sent;
      for (size_t k = 0; k < m; k++) vals[k] = i + k;
      if (suiro_chan_send_batch(tx, iov, m, &sent, -1) != SUIRO_OK)
        return suiro_out_error(out, "send_batch: %s", suiro_last_error());
    }
  }
  suiro_chan_close(tx);
  suiro_chan_free(tx);
  return suiro_out_write(out, &n, 8);
}

static suiro_pool *pool;
static uint64_t sender_fn;

/* One round: messages per second as the receiver saw them. */
static double one_way(uint64_t n, int batch) {
  suiro_chan_opts o;
  suiro_chan_opts_init(&o);
  o.capacity = 4096;
  suiro_chan *tx, *rx;
  if (suiro_chan_create(&o, &tx, &rx) != SUIRO_OK) die("create");
  _Alignas(8) unsigned char stack[256];
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, stack, sizeof stack);
  const void *buf;
  size_t blen;
  suiro_task t;
  if (suiro_wire_put_list(&w, 3) != WIRE_OK || suiro_chan_put(&w, tx) != WIRE_OK ||
      suiro_wire_put_i64(&w, (int64_t)n) != WIRE_OK || suiro_wire_put_i64(&w, batch) != WIRE_OK ||
      suiro_wire_writer_finish(&w, &buf, &blen) != WIRE_OK)
    die("encode");
  if (suiro_submit(pool, sender_fn, buf, blen, &t, -1) != SUIRO_OK) die("submit");
  suiro_wire_writer_free(&w);
  suiro_chan_msg m[1024];
  size_t got = 0, k;
  uint64_t sum = 0, want = n * (n - 1) / 2;
  double t0 = 0;
  for (;;) {
    suiro_status st = suiro_chan_recv_batch(rx, m, 1024, &k, 30);
    if (st == SUIRO_CLOSED) break;
    if (st != SUIRO_OK) die("recv_batch");
    if (got == 0) t0 = suiro_now();
    for (size_t j = 0; j < k; j++) {
      uint64_t v;
      memcpy(&v, m[j].data, 8);
      sum += v;
    }
    got += k;
  }
  double dt = suiro_now() - t0;
  suiro_result res;
  if (suiro_collect(pool, t, &res, 30) != SUIRO_OK || res.kind != SUIRO_RESULT_VALUE) die("collect");
  if (got != n || sum != want) {
    fprintf(stderr, "bench_channels: got %zu messages (sum %llu), expected %llu\n", got, (unsigned long long)sum,
            (unsigned long long)n);
    exit(1);
  }
  suiro_chan_free(tx);
  suiro_chan_free(rx);
  return (double)(n - 1) / dt; /* from the first message on */
}

int main(int argc, char **argv) {
  suiro_register("sender", sender, NULL);
  int rc = suiro_worker_main(argc, argv);
  if (rc >= 0) return rc;
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  sender_fn = suiro_fn_id("sender");
  suiro_pool_opts o;
  suiro_pool_opts_init(&o);
  o.workers = 1;
  if (suiro_pool_create(&o, &pool) != SUIRO_OK) die("pool_create");
  if (rounds < 1) rounds = 1;
  double single[64], batched[64];
  if (rounds > 64) rounds = 64;
  one_way(100000, 1); /* warm up */
  for (int r = 0; r < rounds; r++) {
    single[r] = one_way(2000000, 0);
    batched[r] = one_way(10000000, 1);
  }
  double s = median(single, rounds), b = median(batched, rounds);
  printf("%-28s %14.0f msg/s\n", "c_chan_msgs_per_s", s);
  printf("%-28s %14.0f msg/s   (target >= 10 M/s)\n", "c_chan_batch_msgs_per_s", b);
  printf("{\"bench\":\"channels_c\",\"rounds\":%d,\"c_chan_msgs_per_s\":%.0f,\"c_chan_batch_msgs_per_s\":%.0f}\n", rounds,
         s, b);
  suiro_pool_stop(pool, 5);
  return 0;
}
