#!/usr/bin/env bash
# tests/install/run.sh — installs suiro into a temporary prefix and uses it as an embedder and a
# Lua user would: examples/embed built with pkg-config against the shared and the static library,
# the installed CLI, and stock lua5.4 with the installed modules. Prints "install: N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$(mktemp -d /tmp/suiro-install.XXXXXX)"
rocktree="$(mktemp -d /tmp/suiro-rock.XXXXXX)"
away="$(mktemp -d /tmp/suiro-away.XXXXXX)" # a directory outside the checkout
trap 'rm -rf "$prefix" "$rocktree" "$away"' EXIT
suite=install
. "$root/tests/install/check.sh"
if ! "$root/scripts/install" "$prefix" >/dev/null 2>&1; then
  echo "FAIL install.scripts_install"
  echo "install: 0 passed, 1 failed"
  exit 1
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
check pkg_config "-lsuiro" pkg-config --cflags --libs suiro
# shared: the soname resolves through the installed symlink
check embed_shared_build "" cc -std=gnu11 -O2 "$root/examples/embed/embed.c" -o "$prefix/embed_shared" \
  $(pkg-config --cflags --libs suiro) -lm
check embed_shared_soname "libsuiro.so.0" readelf -d "$prefix/embed_shared"
check embed_shared_runs "sum of sqrt(1..100000) = 21082008.974" env LD_LIBRARY_PATH="$prefix/lib" "$prefix/embed_shared"
# the installed libraries define only suiro_ symbols: the engine's internals are local in the
# archive (one object, hidden symbols localized) and not exported by the shared library
only_suiro() { # nm-options... library
  local syms bad
  syms=$(nm "$@" | awk 'NF == 3 { print $3 }')
  bad=$(grep -v '^suiro_' <<<"$syms" | head -5 | tr '\n' ' ')
  if [[ -z "$bad" ]] && grep -q '^suiro_pool_create$' <<<"$syms"; then
    echo "only suiro_ symbols ($(wc -l <<<"$syms") of them)"
  else
    echo "symbols without the suiro_ prefix (or no suiro_pool_create): $bad"
  fi
}
check lib_static_symbols "only suiro_ symbols" only_suiro -g --defined-only "$prefix/lib/libsuiro.a"
check lib_shared_symbols "only suiro_ symbols" only_suiro -D --defined-only "$prefix/lib/libsuiro.so.0"
# the engine writes no stdio stream and exits no process itself (suiro_diag, suiro_exit_now): what
# R CMD check refuses in a package's compiled code, and what an embedder's process owns
no_stdio_exit() { # library
  local bad
  bad=$(nm -u "$1" | awk '{ print $2 }' | grep -E '^(stderr|stdout|_exit|exit|abort|printf|puts|putchar|fprintf|vfprintf|perror|fputs|fwrite|__assert_fail)(@|$)' | sort -u | tr '\n' ' ')
  if [[ -z "$bad" ]]; then echo "no stdio or exit calls"; else echo "the engine calls: $bad"; fi
}
check lib_no_stdio_exit "no stdio or exit calls" no_stdio_exit "$prefix/lib/libsuiro.a"
# static
check embed_static_build "" cc -std=gnu11 -O2 "$root/examples/embed/embed.c" -o "$prefix/embed_static" \
  -I"$prefix/include/suiro" "$prefix/lib/libsuiro.a" -pthread -lm
check embed_static_runs "part 4: 7388808" "$prefix/embed_static"
# the installed CLI finds its Lua sources and runs the quickstart
check cli_runs "suiro $(sed -n 's/^#define SUIRO_VERSION_MAJOR \([0-9]*\)$/\1/p' "$root/engine/include/suiro.h")." \
  "$prefix/bin/suiro" version
check cli_script "21" "$prefix/bin/suiro" run - <<<'local s = require "suiro"; local p <close> = s.pool { workers = 2 }
print(p:submit(function(a, b) return a * b end, 3, 7):collect(10))'

# stock lua5.4 with the installed modules finds the installed worker binary
check stock_lua "7" env LUA_PATH="$prefix/share/suiro/lua/?.lua;$prefix/share/suiro/lua/?/init.lua;;" \
  LUA_CPATH="$prefix/lib/lua/5.4/?.so;;" lua5.4 -e \
  'local s = require "suiro"; local p <close> = s.pool { workers = 1 }; print(p:submit(function() return 7 end):collect(10))'
# the MPI tier: installed next to core.so and found by the installed CLI (scripts/test builds it)
check mpi_module "$prefix/lib/lua/5.4/suiro/mpi.so" "$prefix/bin/suiro" run - <<<'print(require("suiro.mpi").module_path())'
# the same tier for Python and R hosts, next to it (their faces find it from bin/suiro on PATH)
if [[ -f "$root/build/lib/suiro/cluster.so" ]]; then
  check cluster_module "suiro_cluster" nm -D --defined-only "$prefix/lib/lua/5.4/suiro/cluster.so"
fi
# The rock: `luarocks make` of the checkout's rockspec into a temporary tree, then used from a
# directory outside the checkout with no SUIRO_* variables, as a LuaRocks user would.
rockspec=$(ls "$root"/suiro-*.rockspec | head -1)
check rock_make "suiro $(basename "$rockspec" .rockspec | sed 's/^suiro-//') is now installed" \
  bash -c 'cd "$1" && luarocks --lua-version=5.4 make --tree="$2" "$3"' _ "$root" "$rocktree" "$rockspec"
rock_env=(env -u SUIRO_WORKER_EXE -u SUIRO_LUA_DIR -u SUIRO_LUA_PATH -u SUIRO_LUA_CPATH -u SUIRO_MPI_SO
  LUA_PATH="$rocktree/share/lua/5.4/?.lua;$rocktree/share/lua/5.4/?/init.lua;;"
  LUA_CPATH="$rocktree/lib/lua/5.4/?.so;;")
check rock_stock_lua "7 $rocktree/bin/suiro" bash -c 'cd "$1" && shift && "$@"' _ "$away" "${rock_env[@]}" lua5.4 -e \
  'local s = require "suiro"; local p <close> = s.pool { workers = 1 }
   print(p:submit(function() return 7 end):collect(10) .. " " .. require("suiro.core").worker_exe())'
check rock_cli "21" bash -c 'cd "$1" && env -u SUIRO_WORKER_EXE -u SUIRO_LUA_DIR -u LUA_PATH -u LUA_CPATH "$2" run - <<<"$3"' _ \
  "$away" "$rocktree/bin/suiro" 'local s = require "suiro"; local p <close> = s.pool { workers = 2 }
print(p:submit(function(a, b) return a * b end, 3, 7):collect(10))'
if [[ -f "$root/build/lib/suiro/mpi.so" ]]; then
  check rock_mpi_module "$rocktree/lib/lua/5.4/suiro/mpi.so" bash -c 'cd "$1" && "$2" run - <<<"$3"' _ "$away" \
    "$rocktree/bin/suiro" 'print(require("suiro.mpi").module_path())'
fi
echo "install: $pass passed, $fail failed"
((fail == 0))
