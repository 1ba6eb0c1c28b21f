/*
 * lprobe.c — suiro.probe: measurements for benchmarks and tests. A test build only
 * (build/tests/lua/suiro/probe.so; the specs and benches find it through their cpath): neither
 * the suiro command nor suiro.core carries it.
 *
 *   probe.memcpy_ms(bytes [, rounds])   median ms of one memcpy between warm buffers (the floor
 *                                       the data benchmarks compare against; floor.h)
 *   probe.rss_kb()                      this process's resident set (VmRSS), KiB
 *   probe.shm_usage([prefix])           bytes and count of /dev/shm segments with the prefix
 *                                       (default: this process's and its pools')
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "floor.h"

int luaopen_suiro_probe(lua_State *L);

/* probe.memcpy_ms(bytes, rounds) -> median milliseconds of one memcpy between two warm buffers:
 * the floor the data benchmarks compare against. */
static int l_memcpy_ms(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1);
  int rounds = (int)luaL_optinteger(L, 2, 7);
  if (bytes < 1) return luaL_error(L, "memcpy_ms: bytes must be positive");
  if (rounds < 1 || rounds > 1000) return luaL_error(L, "memcpy_ms: rounds must be in 1..1000");
  double ms = probe_memcpy_ms((size_t)bytes, rounds);
  if (ms < 0) return luaL_error(L, "memcpy_ms: out of memory");
  lua_pushnumber(L, ms);
  return 1;
}

/* probe.shm_usage([prefix]) -> bytes allocated in /dev/shm by segments whose name starts with
 * prefix (default: this process's and its pools': "suiro_<pid hex>_"), and their count. */
static int l_shm_usage(lua_State *L) {
  char def[64];
  snprintf(def, sizeof def, "suiro_%x_", (unsigned)getpid());
  const char *prefix = luaL_optstring(L, 1, def);
  size_t pl = strlen(prefix);
  DIR *d = opendir("/dev/shm");
  lua_Integer bytes = 0, count = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, pl) != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    struct stat sb;
    if (stat(path, &sb) == 0) {
      bytes += (lua_Integer)sb.st_blocks * 512;
      count++;
    }
  }
  if (d) closedir(d);
  lua_pushinteger(L, bytes);
  lua_pushinteger(L, count);
  return 2;
}

/* probe.rss_kb() -> resident set size of this process (VmRSS), in KiB. */
static int l_rss_kb(lua_State *L) {
  FILE *f = fopen("/proc/self/status", "re");
  long kb = -1;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  lua_pushinteger(L, kb);
  return 1;
}

static const luaL_Reg probe_funcs[] = {
  { "memcpy_ms", l_memcpy_ms },
  { "rss_kb", l_rss_kb },
  { "shm_usage", l_shm_usage },
  { NULL, NULL },
};

int luaopen_suiro_probe(lua_State *L) {
  luaL_newlib(L, probe_funcs);
  return 1;
}
