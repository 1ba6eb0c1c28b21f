/*
 * suiro_cli.c — the `suiro` command: Lua 5.4 with the engine and LPeg built in.
 *
 *   suiro run FILE [args]   run a script (arg table as in lua5.4)
 *   suiro run --hosts h1,h2 FILE [args]   the same under mpirun, one rank per host
 *   suiro doctor            report which launchers work on this machine
 *   suiro version           print versions
 *   suiro --help            usage
 *
 * Exit status: 0 on success, 1 when the script fails (the error is printed), 2 on usage errors.
 * The same binary is the Lua worker: the engine starts it with "--suiro-worker TOKEN".
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua-lpeg.h>
#include <lualib.h>

#include "lsuiro.h"

static const char usage[] =
  "usage: suiro <command> [args]\n"
  "\n"
  "commands:\n"
  "  run FILE [args]   run a Lua script with suiro loaded (args in the global `arg`)\n"
  "  run --hosts h1,h2 FILE [args]\n"
  "                    the same on several hosts (mpirun; suiro.pool { backend = \"mpi\" })\n"
  "  doctor            check which worker launchers work on this machine\n"
  "  version           print the suiro, Lua and LPeg versions\n"
  "  help, --help      show this message\n";

/* Where suiro's Lua sources are: <prefix>/share/suiro/lua for an installed suiro (bin/suiro
 * under prefix), <tree>/share/lua/5.4 for a LuaRocks tree (bin/suiro of the tree), <checkout>/lua
 * for a build (build/bin/suiro). */
static void find_lua_dir(char *out, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  out[0] = 0;
  if (n <= 0) return;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = 0; /* .../bin */
  static const char *const up[] = { "/../share/suiro/lua", "/../share/lua/5.4", "/../../lua", "/../lua" };
  for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s%s/suiro/init.lua", exe, up[i]);
    if (access(probe, R_OK) == 0) {
      snprintf(out, cap, "%s%s", exe, up[i]);
      return;
    }
  }
}

/* package.path/cpath: the host's (passed to workers as SUIRO_LUA_PATH) or ours plus the defaults,
 * with the suiro Lua sources first. */
static void set_paths(lua_State *L) {
  char dir[PATH_MAX];
  find_lua_dir(dir, sizeof dir);
  const char *env_dir = getenv("SUIRO_LUA_DIR");
  if (env_dir) snprintf(dir, sizeof dir, "%s", env_dir);
  lua_getglobal(L, "package");
  const char *inherited = getenv("SUIRO_LUA_PATH");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, inherited ? inherited : lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  const char *inherited_c = getenv("SUIRO_LUA_CPATH");
  if (inherited_c) {
    lua_pushstring(L, inherited_c);
    lua_setfield(L, -2, "cpath");
  }
  /* built in: LPeg and the engine module */
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_lpeg);
  lua_setfield(L, -2, "lpeg");
  lua_pushcfunction(L, luaopen_suiro_core);
  lua_setfield(L, -2, "suiro.core");
  lua_pop(L, 2);
}

static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "suiro: cannot create a Lua state (out of memory)\n");
    exit(1);
  }
  luaL_openlibs(L);
  set_paths(L);
  return L;
}

/* Runs `chunk` (already on the stack) with nargs arguments under a traceback handler. */
static int docall(lua_State *L, int nargs) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  int st = lua_pcall(L, nargs, 0, base);
  lua_remove(L, base);
  return st;
}

/* Ctrl-C and SIGTERM become a Lua error, as in lua5.4, so a script's <close> variables and pools
 * are closed on the way out; a second signal kills at once (its workers clean up after it). */
static lua_State *signal_L;

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "%s", lpool_signal == SIGTERM ? "terminated" : "interrupted!");
}

static void on_signal(int sig) {
  signal(sig, SIG_DFL);
  lpool_signal = sig;
  /* the waits in C see lpool_signal; Lua code sees the hook at its next instruction */
  if (signal_L) lua_sethook(signal_L, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* suiro run --hosts h1,h2 FILE [args]: the same run under mpirun, one rank per host named, not
 * bound to a core (SUIRO_MPIRUN overrides the command, e.g. "mpirun --oversubscribe"). */
static int run_hosts(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "suiro run --hosts: usage: suiro run --hosts h1,h2,... FILE [args]\n");
    return 2;
  }
  const char *hosts = argv[3];
  int n = 1;
  for (const char *p = hosts; *p; p++) n += *p == ',';
  if (!hosts[0] || hosts[0] == ',' || hosts[strlen(hosts) - 1] == ',' || strstr(hosts, ",,")) {
    fprintf(stderr, "suiro run --hosts: a comma-separated list of host names, got \"%s\"\n", hosts);
    return 2;
  }
  char exe[PATH_MAX];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (el <= 0) {
    fprintf(stderr, "suiro run --hosts: cannot find this program's path\n");
    return 1;
  }
  exe[el] = 0;
  const char *cmd = getenv("SUIRO_MPIRUN");
  char cmdbuf[1024];
  snprintf(cmdbuf, sizeof cmdbuf, "%s", cmd && cmd[0] ? cmd : "mpirun");
  char **av = calloc((size_t)argc + 64, sizeof *av);
  if (!av) return 1;
  int k = 0;
  for (char *tok = strtok(cmdbuf, " "); tok && k < 40; tok = strtok(NULL, " ")) av[k++] = tok;
  char np[16];
  snprintf(np, sizeof np, "%d", n);
  av[k++] = "--host";
  av[k++] = (char *)hosts;
  av[k++] = "--bind-to"; /* one rank per host: its workers use every core, not the rank's one */
  av[k++] = "none";
  av[k++] = "-np";
  av[k++] = np;
  av[k++] = exe;
  av[k++] = "run";
  for (int i = 4; i < argc; i++) av[k++] = argv[i];
  av[k] = NULL;
  execvp(av[0], av);
  fprintf(stderr, "suiro run --hosts: cannot run %s (Open MPI's mpirun: apt-get install openmpi-bin): %s\n", av[0],
          strerror(errno));
  free(av);
  return 1;
}

/* Inside an MPI job of more than one rank, before the script: rank 0 brings MPI up, every other
 * rank serves rank 0 instead of running the script (lua/suiro/mpi.lua). Returns -1 to go on with
 * the script, else the exit status. */
static int mpi_prologue(lua_State *L) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size || atoi(size) < 2) return -1;
  if (luaL_loadstring(L, "return require('suiro.mpi').cli_main()") != LUA_OK) return 1;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, -2);
  if (lua_pcall(L, 0, 1, -2) != LUA_OK) {
    fprintf(stderr, "suiro: %s\n", lua_tostring(L, -1));
    return 1;
  }
  int rc = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : -1;
  lua_pop(L, 2);
  return rc;
}

static int run_file(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[2], "--hosts")) return run_hosts(argc, argv);
  if (argc < 3) {
    fprintf(stderr, "suiro run: missing FILE\n\n%s", usage);
    return 2;
  }
  const char *file = argv[2];
  lua_State *L = new_state();
  signal_L = L;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  int mrc = mpi_prologue(L);
  if (mrc >= 0) {
    lua_close(L);
    return mrc;
  }
  /* arg: arg[0] = script, arg[1..] = its arguments, arg[-1] = "run", arg[-2] = the binary */
  lua_createtable(L, argc - 3, 3);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 2);
  }
  lua_setglobal(L, "arg");
  int st = luaL_loadfile(L, strcmp(file, "-") == 0 ? NULL : file);
  if (st == LUA_OK) {
    int n = 0;
    for (int i = 3; i < argc; i++, n++) lua_pushstring(L, argv[i]);
    st = docall(L, n);
  }
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "suiro: %s\n", msg ? msg : "(error object is not a string)");
  }
  lua_close(L); /* closes what the script left open: its pools stop */
  signal_L = NULL;
  if (lpool_signal) return 128 + lpool_signal;
  return st == LUA_OK ? 0 : 1;
}

static int run_lua_snippet(const char *code) {
  lua_State *L = new_state();
  int st = luaL_loadstring(L, code);
  if (st == LUA_OK) st = docall(L, 0);
  if (st != LUA_OK) {
    fprintf(stderr, "suiro: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_close(L);
  return 0;
}

int main(int argc, char **argv) {
  lpool_is_cli = 1;
  const char *token = suiro_worker_token(argc, argv);
  if (token) {
    lua_State *L = new_state();
    int rc = lworker_run(L, token);
    lua_close(L);
    return rc;
  }
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "run")) return run_file(argc, argv);
  if (!strcmp(cmd, "doctor")) return run_lua_snippet("os.exit(require('suiro').doctor() and 0 or 1)");
  if (!strcmp(cmd, "version")) {
    printf("suiro %s (%s, LPeg %s)\n", suiro_version(), LUA_RELEASE, "1.0.2");
    return 0;
  }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage, stdout);
    return 0;
  }
  fprintf(stderr, "suiro: unknown command '%s'\n\n%s", cmd, usage);
  return 2;
}
