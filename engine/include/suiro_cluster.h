/* suiro_cluster.h — the MPI tier as a face sees it: one table of verbs over engine/cluster
 * (build/lib/suiro/cluster.so). The library links Open MPI; libsuiro, the faces' modules and the
 * workers never do: a face that is asked for backend = "mpi" loads it with dlopen (after making
 * its own engine symbols global, so that the one engine of the process serves both) and reads
 * the table with dlsym(h, "suiro_cluster"). The Lua face has its own module over the same tier
 * (build/lib/suiro/mpi.so, lua/lmpi.c); Python and R bind this table.
 *
 * 1. Jobs. Under mpirun every rank runs the host script; start() brings MPI up (once per process;
 *    rank 0 waits until every rank said hello). Ranks 1..K-1 then call serve(): the serving loop
 *    is C only (serve.c) and starts the pools from the resolved worker command rank 0 sends; it
 *    returns once rank 0 ends the job, with the process's exit status. Rank 0 ends the job with
 *    shutdown() (also at exit).
 * 2. Pools. pool_new() starts the same pool on every rank from `spec`, a wire DICT of the
 *    resolved pool (workers, max_workers, ring_cap, slot_size, result_slots, result_size, respawn,
 *    start_timeout, exe, argv (list of str), env (dict of str)). Rank 0's own share runs on the
 *    face's local pool, which the tier reads through `*local` (NULL once the face stopped it).
 * 3. Maps. A face stages a map as it would for its local pool (suiro_plan_create on that pool,
 *    never started) and hands the plan to map_new(), which deals ranges of it over every node,
 *    rank 0 included; the face may free its staged plan right after. Results: typed maps in
 *    columns (map_column: field k of a record, else k = 0, laid out as the local plan's output),
 *    untyped maps one wire value (LIST [value]) per element (map_result).
 * 4. Threads: every verb is called on one thread of the face (the one that holds the pool);
 *    the communication thread is the tier's own. map_wait() pumps messages and sleeps at most
 *    `timeout` seconds (a face waits in slices to check for interrupts).
 */
#ifndef SUIRO_CLUSTER_API_H
#define SUIRO_CLUSTER_API_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "suiro.h"
#include "suiro_bind.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUIRO_CLUSTER_VERSION 1

typedef struct suiro_cluster_node {
  int rank;
  int up;              /* its pool: 1 started, -1 failed, 0 starting */
  int workers;
  int pid, cpus;
  const char *name;    /* the node's host name (valid while the job runs) */
  const char *error;   /* why its pool did not start, or NULL */
} suiro_cluster_node;

typedef struct suiro_cluster_api {
  int version;                                      /* SUIRO_CLUSTER_VERSION */
  /* 1. jobs */
  int (*in_job)(void);                              /* started by mpirun with more than one rank */
  int (*start)(volatile sig_atomic_t *interrupt, char *err, size_t cap); /* 0, or -1 and a message */
  int (*rank)(void);
  int (*size)(void);
  const char *(*node_name)(int rank);
  const char *(*mpi_version)(void);
  int (*serve)(void);                               /* ranks 1..K-1: the exit status of the rank */
  void (*shutdown)(int ending);
  const char *(*lost)(void);                        /* why the job is ending (a rank lost), or NULL */
  /* 2. pools */
  void *(*pool_new)(suiro_pool *const *local, const double *timeout, const void *spec, size_t len,
                    double start_timeout, char *err, size_t cap);
  void (*pool_close)(void *xp);
  int (*pool_nodes)(void *xp);                      /* nodes, rank 0's included */
  int (*pool_node)(void *xp, int rank, suiro_cluster_node *out); /* 0, -1 for no such rank */
  /* 3. maps */
  void *(*map_new)(void *xp, suiro_map *staged, int seeded, uint64_t seed, int stream, char *err, size_t cap);
  int (*map_wait)(void *xm, double timeout);        /* 1 ended, 0 still running, -1 its pool stopped */
  uint64_t (*map_size)(void *xm);                   /* elements */
  uint64_t (*map_done)(void *xm);                   /* elements finished (any node), monotonic */
  int (*map_nodes)(void *xm);                       /* nodes taking part */
  int (*map_failure)(void *xm, suiro_error_info *e);/* 1 and the first failure, after the end */
  const suiro_template *(*map_template)(void *xm);  /* NULL: untyped results */
  const void *(*map_column)(void *xm, int k, uint64_t *count);
  int (*map_result)(void *xm, uint64_t i, const void **data, size_t *len); /* 0: none */
  void (*map_cancel)(void *xm);
  void (*map_free)(void *xm);
} suiro_cluster_api;

/* The table (dlsym name "suiro_cluster"). */
const suiro_cluster_api *suiro_cluster(void);

#ifdef __cplusplus
}
#endif
#endif /* SUIRO_CLUSTER_API_H */
