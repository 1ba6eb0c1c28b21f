#!/usr/bin/env bash
# tests/mpi/stress.sh [RUNS [HOST]] — RUNS (default 100) 3-rank jobs whose map fails
# (tests/mpi/failing_map.lua K for K = 1..RUNS; HOST python or r: failing_map.py or .R run by a
# Python or an R host, backend = "mpi" of those faces). Each must end within 10 s, with a non-zero exit,
# the map's error on stderr, every rank finalized (mpirun names one that did not), no process of
# the job left and nothing of its ranks in /dev/shm.
# Prints one line per failed run, "stress: N passed, M failed" and the slowest run last.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
runs=${1:-100}
host=${2:-lua}
case $host in
  lua) cmd=(build/bin/suiro run tests/mpi/failing_map.lua) ;;
  python) cmd=(/usr/bin/python3 tests/mpi/failing_map.py) ;;
  r) cmd=(Rscript tests/mpi/failing_map.R) ;;
  *) echo "stress: HOST must be lua, python or r, got $host"; exit 2 ;;
esac
export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}" R_LIBS="$root/build/R-lib${R_LIBS:+:$R_LIBS}"
out="$(mktemp -d /tmp/suiro-mpi-stress.XXXXXX)"
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
local_mca=(--bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
pass=0 fail=0 slowest=0
for k in $(seq 1 "$runs"); do
  t0=$(date +%s%N)
  timeout -k 1 10 mpirun -x PYTHONPATH -x R_LIBS --oversubscribe -np 3 "${local_mca[@]}" "${cmd[@]}" "$k" \
    >"$out/out" 2>"$out/err"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  ((ms > slowest)) && slowest=$ms
  why=""
  ((rc == 124 || rc == 137)) && why="did not end within 10 s"
  [[ -z "$why" ]] && ((rc == 0)) && why="exit 0"
  [[ -z "$why" ]] && ! grep -q "fails on purpose" "$out/err" && why="no map error: $(tail -3 "$out/err" | tr '\n' ' ')"
  [[ -z "$why" ]] && grep -q "not reached" "$out/out" && why="the map did not fail"
  # every rank finalized: mpirun names a rank that exited without MPI_Finalize
  [[ -z "$why" ]] && grep -qE 'exiting improperly|without calling "finalize"' "$out/err" &&
    why="a rank did not finalize: $(grep -m1 -E 'exiting improperly|finalize' "$out/err")"
  pids=$(grep '^pids ' "$out/err" | head -1 | cut -d' ' -f2-)
  [[ -z "$why" && -z "$pids" ]] && why="no pids line: $(head -3 "$out/err" | tr '\n' ' ')"
  # every process of the job gone (2 s grace: mpirun returns as its ranks exit)
  left=""
  for _ in $(seq 1 20); do
    left=""
    for p in $pids; do [[ -d /proc/$p ]] && [[ "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" != Z ]] && left="$left $p"; done
    [[ -z "$left" ]] && break
    sleep 0.1
  done
  [[ -z "$why" && -n "$left" ]] && why="processes left:$left"
  # nothing of the job's ranks in /dev/shm (names start /suiro_<hex pid>_)
  shm=""
  for p in $pids; do
    hex=$(printf '%x' "$p")
    for f in /dev/shm/suiro_"${hex}"_*; do [[ -e "$f" ]] && shm="$shm ${f##*/}"; done
  done
  [[ -z "$why" && -n "$shm" ]] && why="left in /dev/shm:$shm"
  if [[ -z "$why" ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL run $k (exit $rc, $ms ms): $why"
  fi
done
echo "stress: $pass passed, $fail failed (slowest run $slowest ms)"
exit $((fail > 0))
