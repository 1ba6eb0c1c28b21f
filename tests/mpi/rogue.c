/*
 * tests/mpi/rogue.c — a rank that speaks the MPI tier's protocol (engine/cluster/cluster.h) but breaks it, to test
 * that rank 0 accepts a range's results only from the rank it dealt that range to, once and
 * complete, and a task's result only from the rank running it. Run as the last rank of an MPMD
 * job: mpirun -np 2 suiro run tests/mpi/rogue.lua MODE : -np 1 rogue MODE
 *
 *   other   answers its first range with the results of the range dealt to rank 1
 *   inflate answers its first range with results for it and everything after it
 *   twice   answers its first range twice
 *   short   answers its first range with half its cells
 *   offsets answers its first range (untyped) with offsets that run backwards
 *   task    answers the task sent to it with a result for the task sent to rank 1
 *   empty   (or any other mode) answers the tasks sent to it with an empty result
 *
 * Other ranges get correct-looking answers (typed: x; untyped: nil), so only the fault named
 * can fail the map. Single-threaded: MPI_THREAD_SINGLE. Ends on EXIT (BYE, then MPI_Finalize).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"

static void send_msg(uint32_t type, uint32_t pool, uint64_t id, uint64_t a, uint64_t b, const void *payload, size_t len) {
  size_t total = sizeof(msg_hdr) + align8z(len);
  unsigned char *buf = calloc(1, total);
  msg_hdr *h = (msg_hdr *)(void *)buf;
  h->type = type;
  h->pool = pool;
  h->id = id;
  h->a = a;
  h->b = b;
  h->len = len;
  if (len) memcpy(buf + sizeof *h, payload, len);
  MPI_Send(buf, (int)total, MPI_BYTE, 0, 1, MPI_COMM_WORLD); /* TAG_HEAD, one part */
  free(buf);
}

static plan_wire plan;
static int have_plan;

/* Results of [b, e) as this rank answers them; `cells`: how many of the elements to fill. */
static void send_result(uint64_t id, uint64_t b, uint64_t e, uint64_t cells, int backwards) {
  uint64_t n = e - b;
  if (have_plan && plan.has_tpl) { /* tests use template f64: 8 bytes an element */
    double *v = calloc(cells ? cells : 1, 8);
    for (uint64_t i = 0; i < cells; i++) v[i] = (double)(b + i + 1);
    send_msg(MSG_RESULT, 0, id, b, e, v, cells * 8);
    free(v);
    return;
  }
  uint64_t *offs = calloc(n + 1, 8); /* untyped: every element returned nothing */
  if (backwards && n > 1) offs[1] = 16, offs[n] = 8;
  send_msg(MSG_RESULT, 0, id, b, e, offs, (n + 1) * 8 + (backwards ? 16 : 0));
  free(offs);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "other";
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[MPI_MAX_PROCESSOR_NAME + 1] = "rogue";
  send_msg(MSG_HELLO, 0, 0, (uint64_t)getpid(), 1, host, strlen(host) + 1);
  int chunks = 0;
  for (;;) {
    MPI_Status st;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    int count;
    MPI_Get_count(&st, MPI_BYTE, &count);
    unsigned char *buf = malloc((size_t)count + 8);
    MPI_Recv(buf, count, MPI_BYTE, 0, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    msg_hdr h;
    memcpy(&h, buf, sizeof h);
    unsigned char *p = buf + sizeof h;
    switch (h.type) {
    case MSG_POOL_NEW: send_msg(MSG_POOL_UP, h.pool, 0, 1, 1, NULL, 0); break;
    case MSG_PLAN:
      memcpy(&plan, p, sizeof plan);
      have_plan = 1;
      break;
    case MSG_CHUNK: {
      uint64_t id = h.id, b = h.a, e = h.b;
      if (chunks++ == 0) {
        if (!strcmp(mode, "other")) send_result(id, 0, b, b, 0); /* rank 1 got [0, b) first */
        else if (!strcmp(mode, "inflate")) send_result(id, b, plan.n, plan.n - b, 0);
        else if (!strcmp(mode, "twice")) send_result(id, b, e, e - b, 0), send_result(id, b, e, e - b, 0);
        else if (!strcmp(mode, "short")) send_result(id, b, e, (e - b) / 2, 0);
        else if (!strcmp(mode, "offsets")) send_result(id, b, e, e - b, 1);
        else send_result(id, b, e, e - b, 0);
      } else {
        send_result(id, b, e, e - b, 0);
      }
      send_msg(MSG_NEED, 0, id, 0, 0, NULL, 0);
      break;
    }
    case MSG_TASK: {
      /* task ids count up from 1 over the remote tasks: rank 1 got the one before ours */
      _Alignas(8) unsigned char nil[16] = { 0 };
      send_msg(MSG_TRESULT, 0, !strcmp(mode, "task") ? h.id - 1 : h.id, 1 /* VALUE */, (uint64_t)-1, nil, 0);
      break;
    }
    case MSG_STATUS: send_msg(MSG_STATUS_REPLY, h.pool, h.id, 0, 0, NULL, 0); break;
    case MSG_EXIT:
      free(buf);
      send_msg(MSG_BYE, 0, 0, 0, 0, NULL, 0);
      MPI_Finalize();
      return 0;
    default: break;
    }
    free(buf);
  }
}
