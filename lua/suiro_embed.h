/*
 * suiro_embed.h — the Lua face's readers, for the other faces: config scripts, templates,
 * durations and sizes are read by the one implementation in lua/suiro/{config,parse}.lua, run in
 * a private Lua state, so every language accepts the same strings and gives the same messages.
 *
 *   suiro_embed *e = suiro_embed_open("/path/to/lua", err, sizeof err); // holds suiro/parse.lua
 *   suiro_embed_config(e, "pools.lua", &buf, &len, err, sizeof err);     // wire DICT of pools
 *   suiro_embed_template(e, "{mean: f64, sd: f64}", &tpl, err, sizeof err);
 *
 * Link: lua/lembed.c with -llua5.4 -llua5.4-lpeg. A state is used by one thread at a time.
 */
#ifndef SUIRO_EMBED_H
#define SUIRO_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "suiro_bind.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct suiro_embed suiro_embed;

/* A Lua state that finds suiro/parse.lua and suiro/config.lua under lua_dir. NULL (with a message
 * in err) when Lua or LPeg cannot start or the modules are not there. */
suiro_embed *suiro_embed_open(const char *lua_dir, char *err, size_t errcap);
void suiro_embed_close(suiro_embed *e);

/* Runs a config script and returns its pools, checked and normalised by suiro.config.load, as one
 * wire buffer (malloc'd: free it): a DICT pool name -> DICT of options, names sorted; durations
 * are f64 seconds, sizes i64 bytes, env a DICT of strings, launcher a DICT with "kind". 0, or -1
 * with the Lua face's message ("pools.lua: pool "ingest": timeout: bad duration ..."). */
int suiro_embed_config(suiro_embed *e, const char *path, void **buf, size_t *len, char *err, size_t errcap);
/* Checks and normalises one pool's options given as a wire DICT (as a face would build them from
 * keyword arguments); returns the normalised DICT like suiro_embed_config's entries. */
int suiro_embed_pool_options(suiro_embed *e, const void *opts, size_t opts_len, const char *where, void **buf,
                             size_t *len, char *err, size_t errcap);
/* A result template ("f64", "i32[2,3]", "{mean: f64, n: i64}") as the engine's description. */
int suiro_embed_template(suiro_embed *e, const char *spec, suiro_template *t, char *err, size_t errcap);
/* A duration ("250ms", "1m30s", "inf") in seconds; a size ("256KiB") in bytes. */
int suiro_embed_duration(suiro_embed *e, const char *s, double *seconds, char *err, size_t errcap);
int suiro_embed_size(suiro_embed *e, const char *s, int64_t *bytes, char *err, size_t errcap);
/* A function reference ("stats::quantile", "numpy.mean"): 0 when well formed, else -1 and why. */
int suiro_embed_fnref(suiro_embed *e, const char *s, char *err, size_t errcap);

#ifdef __cplusplus
}
#endif
#endif
