#!/usr/bin/env bash
# tests/install/cross.sh — each face installed the way its ecosystem installs things (the rock with
# luarocks into a tree, the Python face with pip into a venv, the R package with R CMD INSTALL
# into a library), then, from a directory outside the checkout and with no SUIRO_* variables:
# a Lua host with Python and R workers, a Python host with Lua and R workers, an R host with Lua
# and Python workers. Each finds the others as its ecosystem finds things: PATH for the suiro
# command, the interpreter's import path for the Python package, .libPaths() (R_LIBS) for the R
# package. Prints "install-cross: N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d /tmp/suiro-cross.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
suite=install-cross
check_dir="$tmp/away"
. "$root/tests/install/check.sh"
mkdir -p "$tmp/away" "$tmp/rlib"
rockspec=$(ls "$root"/suiro-*.rockspec | head -1)
check rock_installs "is now installed" bash -c 'cd "$1" && luarocks --lua-version=5.4 make --tree="$2" "$3"' _ \
  "$root" "$tmp/rock" "$rockspec"
check venv_made "" /usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
check pip_installs "" "$tmp/venv/bin/python" -m pip install --no-index -q "$root/bindings/python"
check r_installs "DONE (suiro)" R CMD INSTALL --no-docs --no-html --no-multiarch -l "$tmp/rlib" "$root/bindings/r"

# a clean environment: no SUIRO_* variable, the rock's bin and the venv's bin on PATH
py="$tmp/venv/bin/python"
clean=(env -i HOME="$HOME" LANG=C.UTF-8 PATH="$tmp/rock/bin:$tmp/venv/bin:/usr/bin:/bin" R_LIBS="$tmp/rlib"
  LUA_PATH="$tmp/rock/share/lua/5.4/?.lua;$tmp/rock/share/lua/5.4/?/init.lua;;"
  LUA_CPATH="$tmp/rock/lib/lua/5.4/?.so;;")

check lua_host_python_workers "py 6.0" "${clean[@]}" lua5.4 -e "
  local s = require 'suiro'
  local p <close> = s.pool { workers = 1, launcher = s.python { python = '$py' }, timeout = '60s' }
  print('py ' .. p:submit(s.call { source = 'float(sum(v))', v = s.f64 { 1, 2, 3 } }):collect())"
check lua_host_r_workers "r 6" "${clean[@]}" lua5.4 -e "
  local s = require 'suiro'
  local p <close> = s.pool { workers = 1, launcher = s.r {}, timeout = '60s' }
  print('r ' .. p:submit(s.call { source = 'sum(v)', v = s.f64 { 1, 2, 3 } }):collect())"
check python_host_lua_workers "lua 6" "${clean[@]}" "$py" -c "
import suiro
with suiro.pool(workers=1, launcher=suiro.lua()) as p:
    print('lua', p.submit(suiro.call(source='return a + b + c', a=1, b=2, c=3)).collect(timeout=60))"
check python_host_r_workers "r 6.0" "${clean[@]}" "$py" -c "
import numpy, suiro
with suiro.pool(workers=1, launcher=suiro.r()) as p:
    print('r', p.submit(suiro.call(source='sum(v)', v=numpy.array([1.0, 2.0, 3.0]))).collect(timeout=60))"
check r_host_lua_workers "lua 6" "${clean[@]}" Rscript -e "
  library(suiro); p <- suiro_pool(1, launcher = suiro_lua())
  cat('lua', suiro_collect(suiro_submit(p, suiro_call(.source = 'return a + b + c', a = 1, b = 2, c = 3)), timeout = 60), '\n')
  suiro_pool_stop(p)"
check r_host_python_workers "py 6" "${clean[@]}" Rscript -e "
  library(suiro); p <- suiro_pool(1, launcher = suiro_python(python = '$py'))
  cat('py', suiro_collect(suiro_submit(p, suiro_call(.source = 'float(sum(v))', v = c(1, 2, 3))), timeout = 60), '\n')
  suiro_pool_stop(p)"
# backend = "mpi" from the installed Python and R packages: the cluster tier is found next to the
# rock's suiro command on PATH (lib/lua/5.4/suiro/cluster.so); two ranks, every node mapped
if [[ -f "$root/build/lib/suiro/cluster.so" ]]; then
  mpi_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  mpi=(timeout -k 5 90 mpirun --oversubscribe -np 2 --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo
    --mca oob_tcp_if_include lo)
  printf '%s\n' 'import os, suiro' 'with suiro.pool(workers=1, backend="mpi") as p:' \
    '    r = p.map(lambda x: int(os.environ["SUIRO_MPI_RANK"]), range(2000), template="i64").collect()' \
    '    print("mpi ranks", *sorted(set(int(v) for v in r)))' >"$tmp/away/mpi.py"
  check python_host_mpi_backend "mpi ranks 0 1" "${clean[@]}" "${mpi_env[@]}" "${mpi[@]}" "$py" "$tmp/away/mpi.py"
  printf '%s\n' 'library(suiro); p <- suiro_pool(1, backend = "mpi")' \
    'r <- suiro_collect(suiro_map(p, 1:2000, function(x) as.integer(Sys.getenv("SUIRO_MPI_RANK")), .template = "i32"))' \
    'cat("mpi ranks", sort(unique(r)), "\n"); suiro_pool_stop(p)' >"$tmp/away/mpi.R"
  check r_host_mpi_backend "mpi ranks 0 1" "${clean[@]}" "${mpi_env[@]}" "${mpi[@]}" -x R_LIBS Rscript "$tmp/away/mpi.R"
fi
# a missing package is named: a Lua host asking for Python workers of an interpreter without suiro
check lua_host_names_missing_python_package "needs suiro's Python package for /usr/bin/python3" \
  env -i HOME="$HOME" PATH="/usr/bin:/bin" LUA_PATH="$tmp/rock/share/lua/5.4/?.lua;$tmp/rock/share/lua/5.4/?/init.lua;;" \
  LUA_CPATH="$tmp/rock/lib/lua/5.4/?.so;;" PYTHONNOUSERSITE=1 lua5.4 -e "
  local s = require 'suiro'
  print(select(2, pcall(s.pool, { workers = 1, launcher = s.python { python = '/usr/bin/python3' } })))"
echo "install-cross: $pass passed, $fail failed"
((fail == 0))
