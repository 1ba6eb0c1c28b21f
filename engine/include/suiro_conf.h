/*
 * suiro_conf.h — the config readers every face links: config scripts, templates, durations and
 * sizes are read by the one implementation in engine/conf/suiro/{config,parse}.lua (which the
 * Lua face loads as its modules suiro.config and suiro.parse), run in a private Lua state, so every language accepts the same strings and gives the same
 * messages.
 *
 *   suiro_conf *e = suiro_conf_open("/path/to/engine/conf", err, sizeof err); // holds suiro/parse.lua
 *   suiro_conf_config(e, "pools.lua", &buf, &len, err, sizeof err);     // wire DICT of pools
 *   suiro_conf_template(e, "{mean: f64, sd: f64}", &tpl, err, sizeof err);
 *
 * Link: engine/conf/conf.c with -llua5.4 -llua5.4-lpeg (not part of libsuiro). A state is used by
 * one thread at a time. suiro_conf.h keeps the former names suiro_conf_* for one release.
 */
#ifndef SUIRO_CONF_H
#define SUIRO_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "suiro_bind.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct suiro_conf suiro_conf;

/* A Lua state that finds suiro/parse.lua and suiro/config.lua under lua_dir. NULL (with a message
 * in err) when Lua or LPeg cannot start or the modules are not there. */
suiro_conf *suiro_conf_open(const char *lua_dir, char *err, size_t errcap);
void suiro_conf_close(suiro_conf *e);

/* Runs a config script and returns its pools, checked and normalised by suiro.config.load, as one
 * wire buffer (malloc'd: free it): a DICT pool name -> DICT of options, names sorted; durations
 * are f64 seconds, sizes i64 bytes, env a DICT of strings, launcher a DICT with "kind". 0, or -1
 * with the Lua face's message ("pools.lua: pool "ingest": timeout: bad duration ..."). */
int suiro_conf_config(suiro_conf *e, const char *path, void **buf, size_t *len, char *err, size_t errcap);
/* Checks and normalises one pool's options given as a wire DICT (as a face would build them from
 * keyword arguments); returns the normalised DICT like suiro_conf_config's entries. */
int suiro_conf_pool_options(suiro_conf *e, const void *opts, size_t opts_len, const char *where, void **buf,
                             size_t *len, char *err, size_t errcap);
/* The environment every face gives workers of a launcher kind ("lua", "python", "r") by default
 * (suiro.config.worker_env: one thread per numeric library, R's locale), as a wire DICT of strings
 * (malloc'd). The launcher's and the pool's env override it. */
int suiro_conf_worker_env(suiro_conf *e, const char *kind, void **buf, size_t *len, char *err, size_t errcap);
/* The command and environment of workers of a launcher kind (suiro.config.launch, the one rule of
 * where workers live: the launcher's options, then SUIRO_WORKER_EXE / SUIRO_PY_WORKER /
 * SUIRO_R_LIBS, then what the host knows of itself, then what is installed). opts: the launcher's
 * options as a wire DICT ("kind" ignored; NULL for none); host: a DICT with "lang" ("lua",
 * "python", "r") and what the host knows: "worker_exe", "py_worker", "python", "r_libs",
 * "r_lib_path", "rscript", "pythonpath", "cwd", "lua_path", "lua_cpath", "pool_env" (a DICT).
 * Out: a DICT { exe = str, argv = LIST of str (absent: exe alone), env = DICT of str } (malloc'd).
 * 0, or -1 with why ("the python launcher needs suiro's Python package for ..."). */
int suiro_conf_launch(suiro_conf *e, const char *kind, const void *opts, size_t opts_len, const void *host,
                      size_t host_len, void **buf, size_t *len, char *err, size_t errcap);
/* A result template ("f64", "i32[2,3]", "{mean: f64, n: i64}") as the engine's description. */
int suiro_conf_template(suiro_conf *e, const char *spec, suiro_template *t, char *err, size_t errcap);
/* A duration ("250ms", "1m30s", "inf") in seconds; a size ("256KiB") in bytes. */
int suiro_conf_duration(suiro_conf *e, const char *s, double *seconds, char *err, size_t errcap);
int suiro_conf_size(suiro_conf *e, const char *s, int64_t *bytes, char *err, size_t errcap);
/* A function reference ("stats::quantile", "numpy.mean"): 0 when well formed, else -1 and why. */
int suiro_conf_fnref(suiro_conf *e, const char *s, char *err, size_t errcap);


/* For the Lua face (its maps read templates parsed in its own state): the parsed template at idx
 * of L (suiro.parse.template's table) as the engine's description. 0, or -1 with a message. */
struct lua_State;
int suiro_conf_template_read(struct lua_State *L, int idx, suiro_template *t, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
