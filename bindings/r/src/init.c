/*
 * init.c — registers the package's .Call entry points and ALTREP classes (R_init_suiro).
 */
#include <R_ext/Visibility.h>

#include "rsuiro.h"

void rs_pool_init(void);
void rs_func_init(void);
void rs_worker_init(void);
void rs_map_init(void);

SEXP C_async_add(SEXP pool, SEXP x, SEXP resolve, SEXP reject);
SEXP C_async_counts(void);
SEXP C_chan_new(SEXP capacity, SEXP bytes);
SEXP C_chan_send(SEXP tx, SEXP value, SEXP timeout);
SEXP C_chan_send_batch(SEXP tx, SEXP values, SEXP timeout);
SEXP C_chan_recv(SEXP rx, SEXP timeout);
SEXP C_chan_recv_batch(SEXP rx, SEXP max, SEXP timeout);
SEXP C_chan_close(SEXP x);
SEXP C_chan_status(SEXP x);
SEXP C_chan_side(SEXP x);
SEXP C_chan_async_arm(SEXP x, SEXP npending);
SEXP C_chan_async_count(SEXP x, SEXP npending);
SEXP C_chan_async_env(SEXP x);
SEXP C_chan_async_counts(void);
SEXP C_wire_encode(SEXP x, SEXP rich);
SEXP C_wire_decode(SEXP raw, SEXP describe, SEXP trusted);
SEXP C_embed_set_dir(SEXP dir);
SEXP C_config_load(SEXP path);
SEXP C_pool_options(SEXP wire, SEXP where);
SEXP C_worker_env(SEXP kind);
SEXP C_launch(SEXP kind, SEXP opts, SEXP host);
SEXP C_duration(SEXP s);
SEXP C_template_check(SEXP s);
SEXP C_fnref_check(SEXP s);
SEXP C_call_new(SEXP name, SEXP args, SEXP source);
SEXP C_run(SEXP pool, SEXP fn, SEXP args, SEXP timeout);
SEXP C_map_new(SEXP pool, SEXP x, SEXP f, SEXP extras, SEXP proto, SEXP seed, SEXP stream, SEXP prepare, SEXP timeout);
/* rcluster.c: backend = "mpi" */
SEXP C_cluster_load(SEXP), C_cluster_start(void), C_cluster_serve(void), C_cluster_shutdown(void);
SEXP C_cluster_pool(SEXP, SEXP, SEXP), C_cluster_pool_close(SEXP), C_cluster_nodes(SEXP);
SEXP C_cluster_map(SEXP, SEXP, SEXP, SEXP, SEXP), C_cluster_map_wait(SEXP, SEXP), C_cluster_map_done(SEXP);
SEXP C_cluster_map_cancel(SEXP), C_cluster_map_results(SEXP, SEXP);
SEXP C_map_collect(SEXP self, SEXP timeout);
SEXP C_map_next(SEXP self, SEXP timeout);
SEXP C_map_run(SEXP self, SEXP x, SEXP timeout);
SEXP C_map_cancel(SEXP self);
SEXP C_map_progress(SEXP self);
SEXP C_map_ready(SEXP self);
SEXP C_map_info(SEXP self);
SEXP C_map_pool(SEXP self);
SEXP C_sentinel(SEXP which);
SEXP C_is_sentinel(SEXP x);
SEXP C_pool_new(SEXP spec, SEXP info);
SEXP C_pool_stop(SEXP pool, SEXP timeout);
SEXP C_pool_alive(SEXP pool);
SEXP C_pool_lang(SEXP pool);
SEXP C_pool_status(SEXP pool);
SEXP C_pool_spawn(SEXP pool, SEXP n);
SEXP C_pool_retire(SEXP pool, SEXP slot, SEXP timeout);
SEXP C_task_pool(SEXP task);
SEXP C_collect(SEXP task, SEXP timeout);
SEXP C_task_ready(SEXP task);
SEXP C_task_cancel(SEXP task);
SEXP C_task_state(SEXP task);
SEXP C_collect_any(SEXP tasks, SEXP timeout);
SEXP C_collect_all(SEXP tasks, SEXP timeout);
SEXP C_submit(SEXP pool, SEXP fn, SEXP args, SEXP timeout);
SEXP C_submit_batch(SEXP pool, SEXP fn, SEXP arglists, SEXP timeout);
SEXP C_pool_info(SEXP pool);
SEXP C_pool_addr(SEXP pool);
SEXP C_zc_active(void);
SEXP C_now(void);
SEXP C_random(SEXP m, SEXP n);
SEXP C_rng_draws(SEXP seed, SEXP index, SEXP kind, SEXP count, SEXP lo, SEXP hi);
SEXP C_is_view(SEXP x);
SEXP C_view_stats(void);
SEXP C_view_region(SEXP x);
SEXP C_view_poke(SEXP x, SEXP i, SEXP value);
SEXP C_worker_set_handler(SEXP h);
SEXP C_worker_note_error(SEXP cond, SEXP calls);
SEXP C_worker_set_relay(SEXP h);
SEXP C_worker_note_condition(SEXP cond);
SEXP C_worker_run(SEXP token);
SEXP C_current_pool(void);
SEXP C_worker_slot(void);

#define CALLDEF(name, n) { #name, (DL_FUNC)(void (*)(void))&name, n }
static const R_CallMethodDef calls[] = {
  CALLDEF(C_async_add, 4),
  CALLDEF(C_async_counts, 0),
  CALLDEF(C_chan_new, 2),
  CALLDEF(C_chan_send, 3),
  CALLDEF(C_chan_send_batch, 3),
  CALLDEF(C_chan_recv, 2),
  CALLDEF(C_chan_recv_batch, 3),
  CALLDEF(C_chan_close, 1),
  CALLDEF(C_chan_status, 1),
  CALLDEF(C_chan_side, 1),
  CALLDEF(C_chan_async_arm, 2),
  CALLDEF(C_chan_async_count, 2),
  CALLDEF(C_chan_async_env, 1),
  CALLDEF(C_chan_async_counts, 0),
  CALLDEF(C_wire_encode, 2),
  CALLDEF(C_wire_decode, 3),
  CALLDEF(C_embed_set_dir, 1),
  CALLDEF(C_config_load, 1),
  CALLDEF(C_pool_options, 2),
  CALLDEF(C_worker_env, 1),
  CALLDEF(C_launch, 3),
  CALLDEF(C_duration, 1),
  CALLDEF(C_template_check, 1),
  CALLDEF(C_fnref_check, 1),
  CALLDEF(C_call_new, 3),
  CALLDEF(C_run, 4),
  CALLDEF(C_map_new, 9),
  CALLDEF(C_cluster_load, 1), CALLDEF(C_cluster_start, 0), CALLDEF(C_cluster_serve, 0),
  CALLDEF(C_cluster_shutdown, 0), CALLDEF(C_cluster_pool, 3), CALLDEF(C_cluster_pool_close, 1),
  CALLDEF(C_cluster_nodes, 1), CALLDEF(C_cluster_map, 5), CALLDEF(C_cluster_map_wait, 2),
  CALLDEF(C_cluster_map_done, 1), CALLDEF(C_cluster_map_cancel, 1), CALLDEF(C_cluster_map_results, 2),
  CALLDEF(C_map_collect, 2),
  CALLDEF(C_map_next, 2),
  CALLDEF(C_map_run, 3),
  CALLDEF(C_map_cancel, 1),
  CALLDEF(C_map_progress, 1),
  CALLDEF(C_map_ready, 1),
  CALLDEF(C_map_info, 1),
  CALLDEF(C_map_pool, 1),
  CALLDEF(C_sentinel, 1),
  CALLDEF(C_is_sentinel, 1),
  CALLDEF(C_pool_new, 2),
  CALLDEF(C_pool_stop, 2),
  CALLDEF(C_pool_alive, 1),
  CALLDEF(C_pool_lang, 1),
  CALLDEF(C_pool_status, 1),
  CALLDEF(C_pool_spawn, 2),
  CALLDEF(C_pool_retire, 3),
  CALLDEF(C_task_pool, 1),
  CALLDEF(C_collect, 2),
  CALLDEF(C_task_ready, 1),
  CALLDEF(C_task_cancel, 1),
  CALLDEF(C_task_state, 1),
  CALLDEF(C_collect_any, 2),
  CALLDEF(C_collect_all, 2),
  CALLDEF(C_submit, 4),
  CALLDEF(C_submit_batch, 4),
  CALLDEF(C_pool_info, 1),
  CALLDEF(C_pool_addr, 1),
  CALLDEF(C_zc_active, 0),
  CALLDEF(C_now, 0),
  CALLDEF(C_random, 2),
  CALLDEF(C_rng_draws, 6),
  CALLDEF(C_is_view, 1),
  CALLDEF(C_view_stats, 0),
  CALLDEF(C_view_region, 1),
  CALLDEF(C_view_poke, 3),
  CALLDEF(C_worker_set_handler, 1),
  CALLDEF(C_worker_note_error, 2),
  CALLDEF(C_worker_set_relay, 1),
  CALLDEF(C_worker_note_condition, 1),
  CALLDEF(C_worker_run, 1),
  CALLDEF(C_current_pool, 0),
  CALLDEF(C_worker_slot, 0),
  { NULL, NULL, 0 }
};

/* The engine's diagnostics (a worker that cannot join its pool says why) through R's error
 * stream, as R CMD check wants of compiled code. */
static void rs_diag(void *ud, const char *msg, size_t len) {
  REprintf("%.*s\n", (int)len, msg);
}

/* The package is compiled with hidden visibility (Makevars: $(C_VISIBILITY)): R finds only this. */
void attribute_visible R_init_suiro(DllInfo *dll) {
  R_registerRoutines(dll, NULL, calls, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
  suiro_set_diag(rs_diag, NULL);
  rs_class_init();
  rs_pool_init();
  rs_func_init();
  rs_worker_init();
  rs_map_init();
  rs_chan_init();
  rs_views_init(dll);
}
