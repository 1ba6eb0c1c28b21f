#!/usr/bin/env bash
# tests/mpi/run.sh — the MPI tier's suite (scripts/test runs it as "mpi"):
#   - the same maps and tasks (templates, seeds, errors with their index, nested maps, streams)
#     on a local pool, on an MPI pool without mpirun and under mpirun -np 3: identical output;
#   - examples/cluster_map.lua prints the same on one host and on three ranks, and so do
#     examples/cluster_map.py and .R (Python and R hosts, backend = "mpi"), the same as Lua;
#   - tests/mpi/cluster.lua under mpirun -np 3: hosts, workers killed on other ranks, code and
#     large values once per host, a million elements, cancel/kill, timeouts, collect_any/all;
#   - a lost rank: mpirun ends the job and rank 0 says what happened; nothing is left;
#   - a rogue rank's results are refused (tests/mpi/rogue.c); jobs whose map or script fails
#     always end, every rank finalized (tests/mpi/stress.sh);
#   - engine/cluster calls no face and only the engine entry points of engine/include;
#   - suiro run --hosts, suiro doctor's MPI line;
#   - two hosts in network namespaces (tests/mpi/netns.sh).
# MPI that cannot run is a failure, never a skip. Prints "mpi: N passed, M failed" last.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="$(mktemp -d /tmp/suiro-mpi-test.XXXXXX)"
trap 'rm -rf "$out"' EXIT
pass=0
fail=0
ok() { echo "ok   mpi.$1"; pass=$((pass + 1)); }
bad() {
  echo "FAIL mpi.$1: $2"
  fail=$((fail + 1))
}
finish() { echo "mpi: $pass passed, $fail failed"; exit $((fail > 0)); }

suiro="$root/build/bin/suiro"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one machine: ranks talk TCP over the loopback only (what other interfaces there are is not ours)
local_mca=(--bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
mpirun3() { timeout -k 5 "${MPI_TEST_TIMEOUT:-150}" mpirun --oversubscribe -np 3 "${local_mca[@]}" "$suiro" run "$@"; }

command -v mpirun >/dev/null || { bad prerequisites "mpirun is missing (scripts/setup installs openmpi-bin)"; finish; }
[[ -x "$suiro" ]] || { bad prerequisites "$suiro is not built"; finish; }
[[ -f build/lib/suiro/mpi.so ]] || { bad prerequisites "build/lib/suiro/mpi.so is not built (libopenmpi-dev, scripts/build)"; finish; }

# Waits (at most 10 s) until none of the pids lives; prints those left.
gone() {
  local left=""
  for _ in $(seq 1 50); do
    left=""
    for p in "$@"; do
      [[ -d /proc/$p ]] && [[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]] && left="$left $p"
    done
    [[ -z "$left" ]] && return 0
    sleep 0.2
  done
  echo "$left"
  return 1
}

# 1. the same results everywhere
"$suiro" run tests/mpi/same.lua local >"$out/same.local" 2>&1 || bad same_local_runs "$(tail -3 "$out/same.local")"
if "$suiro" run tests/mpi/same.lua mpi >"$out/same.one" 2>&1 && cmp -s "$out/same.local" "$out/same.one"; then
  ok same_without_mpirun
else
  bad same_without_mpirun "$(diff "$out/same.local" "$out/same.one" | head -5 | tr '\n' ' ')"
fi
if mpirun3 tests/mpi/same.lua mpi >"$out/same.three" 2>"$out/same.err" && cmp -s "$out/same.local" "$out/same.three"; then
  ok same_on_three_ranks
else
  bad same_on_three_ranks "$(diff "$out/same.local" "$out/same.three" | head -5 | tr '\n' ' ') $(tail -3 "$out/same.err" | tr '\n' ' ')"
fi
# seeded maps bitwise identical (the seed lines of same.lua, checked apart so a failure says so)
if [[ $(grep -c '^seed' "$out/same.local") -ge 5 ]] && diff <(grep '^seed' "$out/same.local") <(grep '^seed' "$out/same.three") >/dev/null; then
  ok seeded_bitwise_identical
else
  bad seeded_bitwise_identical "$(diff <(grep '^seed' "$out/same.local") <(grep '^seed' "$out/same.three") | head -4 | tr '\n' ' ')"
fi

# 2. the example
"$suiro" run examples/cluster_map.lua >"$out/example.one" 2>"$out/example.one.err"
if mpirun3 examples/cluster_map.lua >"$out/example.three" 2>"$out/example.err" && [[ -s "$out/example.one" ]] &&
   cmp -s "$out/example.one" "$out/example.three"; then
  ok example_prints_the_same
else
  bad example_prints_the_same "$(diff "$out/example.one" "$out/example.three" | head -5 | tr '\n' ' ') $(tail -3 "$out/example.err" | tr '\n' ' ')"
fi
grep -q "3 hosts" "$out/example.err" && ok example_on_three_hosts || bad example_on_three_hosts "$(head -2 "$out/example.err")"

# 2b. the same example from a Python host and an R host (backend = "mpi" of those faces): the
# same output as the Lua script, on one host and on three ranks
export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}" R_LIBS="$root/build/R-lib${R_LIBS:+:$R_LIBS}"
mpirun3x() { timeout -k 5 "${MPI_TEST_TIMEOUT:-150}" mpirun -x PYTHONPATH -x R_LIBS --oversubscribe -np 3 "${local_mca[@]}" "$@"; }
for face in python r; do
  if [[ $face == python ]]; then host=(/usr/bin/python3 examples/cluster_map.py); else host=(Rscript examples/cluster_map.R); fi
  "${host[@]}" >"$out/example.$face.one" 2>"$out/example.$face.one.err"
  if [[ -s "$out/example.one" ]] && cmp -s "$out/example.one" "$out/example.$face.one"; then
    ok "example_${face}_host_one_node_prints_as_lua"
  else
    bad "example_${face}_host_one_node_prints_as_lua" "$(diff "$out/example.one" "$out/example.$face.one" | head -5 | tr '\n' ' ') $(tail -3 "$out/example.$face.one.err" | tr '\n' ' ')"
  fi
  if mpirun3x "${host[@]}" >"$out/example.$face.three" 2>"$out/example.$face.err" && [[ -s "$out/example.one" ]] &&
     cmp -s "$out/example.one" "$out/example.$face.three" && grep -q "3 hosts" "$out/example.$face.err"; then
    ok "example_${face}_host_three_ranks_prints_as_lua"
  else
    bad "example_${face}_host_three_ranks_prints_as_lua" "$(diff "$out/example.one" "$out/example.$face.three" | head -5 | tr '\n' ' ') $(tail -3 "$out/example.$face.err" | tr '\n' ' ')"
  fi
done
# every node runs ranges of a Python host's and an R host's map (rank 0 deals one to each at once)
cat >"$out/nodes.py" <<'EOF2'
import os, suiro
with suiro.pool(workers=1, backend="mpi") as p:
    r = p.map(lambda x: int(os.environ["SUIRO_MPI_RANK"]), range(3000), template="i64").collect()
    print("ranks", *sorted(set(int(v) for v in r)), "nodes", len(p.status()["nodes"]))
EOF2
cat >"$out/nodes.R" <<'EOF2'
library(suiro)
p <- suiro_pool(workers = 1, backend = "mpi")
r <- suiro_collect(suiro_map(p, 1:3000, function(x) as.integer(Sys.getenv("SUIRO_MPI_RANK")), .template = "i32"))
cat("ranks", sort(unique(r)), "nodes", nrow(suiro_pool_nodes(p)), "\n")
suiro_pool_stop(p)
EOF2
if mpirun3x /usr/bin/python3 "$out/nodes.py" >"$out/nodes.py.out" 2>&1 && grep -q "^ranks 0 1 2 nodes 3$" "$out/nodes.py.out"; then
  ok python_host_map_runs_on_every_node
else
  bad python_host_map_runs_on_every_node "$(tail -3 "$out/nodes.py.out" | tr '\n' ' ')"
fi
if mpirun3x Rscript "$out/nodes.R" >"$out/nodes.R.out" 2>&1 && grep -q "^ranks 0 1 2 nodes 3 *$" "$out/nodes.R.out"; then
  ok r_host_map_runs_on_every_node
else
  bad r_host_map_runs_on_every_node "$(tail -3 "$out/nodes.R.out" | tr '\n' ' ')"
fi

# a Python and an R host with Lua workers on every node (the resolved command goes to each rank)
cat >"$out/luaw.py" <<'EOF2'
import suiro
with suiro.pool(workers=1, launcher=suiro.lua(exe="build/bin/suiro"), backend="mpi") as p:
    print("ranks", *sorted(set(p.map("os.getenv", ["SUIRO_MPI_RANK"] * 3000).collect())))
EOF2
cat >"$out/luaw.R" <<'EOF2'
library(suiro)
p <- suiro_pool(1, launcher = suiro_lua(exe = "build/bin/suiro"), backend = "mpi")
cat("ranks", sort(unique(unlist(suiro_collect(suiro_map(p, rep("SUIRO_MPI_RANK", 3000), "os.getenv"))))), "\n")
suiro_pool_stop(p)
EOF2
for face in python r; do
  if [[ $face == python ]]; then host=(/usr/bin/python3 "$out/luaw.py"); else host=(Rscript "$out/luaw.R"); fi
  if mpirun3x "${host[@]}" >"$out/luaw.$face" 2>&1 && grep -q "^ranks 0 1 2 *$" "$out/luaw.$face"; then
    ok "${face}_host_lua_workers_on_every_node"
  else
    bad "${face}_host_lua_workers_on_every_node" "$(tail -3 "$out/luaw.$face" | tr '\n' ' ')"
  fi
done

# 3. the cluster checks
mpirun3 tests/mpi/cluster.lua >"$out/cluster.out" 2>"$out/cluster.err"
rc=$?
grep -E '^(ok|FAIL)' "$out/cluster.out" | sed 's/^/  /'
line=$(grep -E '^cluster: [0-9]+ passed, [0-9]+ failed$' "$out/cluster.out" | tail -1)
if [[ -n "$line" ]]; then
  [[ "$line" =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]
  pass=$((pass + BASH_REMATCH[1]))
  fail=$((fail + BASH_REMATCH[2]))
  ((rc == 0)) && ok cluster_job_ends_cleanly || bad cluster_job_ends_cleanly "mpirun exit $rc: $(tail -3 "$out/cluster.err" | tr '\n' ' ')"
else
  bad cluster "no summary (mpirun exit $rc): $(tail -5 "$out/cluster.err" | tr '\n' ' ')"
fi
pids=$(grep '^pids ' "$out/cluster.out" | cut -d' ' -f2-)
if [[ -n "$pids" ]] && left=$(gone $pids); then ok cluster_leaves_no_process; else bad cluster_leaves_no_process "alive:$left"; fi

# 4. a rank lost: Open MPI ends the job; rank 0 says so; nothing is left
cat >"$out/lost.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi", workers = 1 }
local pids = {}
for _, h in ipairs(pool:status().hosts) do
  pids[#pids + 1] = h.pid
  for _, w in ipairs(h.workers) do pids[#pids + 1] = w.pid end
end
io.stderr:write("pids ", table.concat(pids, " "), "\n")
io.stderr:flush()
local m = pool:map(function(x)
  if os.getenv("SUIRO_MPI_RANK") == "1" then -- the serving process of rank 1 dies
    local f = io.open("/proc/self/stat")
    local ppid = f:read("a"):match("^%d+ %b() %S+ (%d+)")
    f:close()
    os.execute("kill -9 " .. ppid)
  end
  local t = os.clock()
  while os.clock() - t < 0.002 do end
  return x
end, suiro.range(1, 4000), { template = "f64" })
local ok, err = pcall(m.collect, m, 60) -- the script can catch what the wait says
print("caught", ok, tostring(err))
io.stdout:flush()
if ok then print("not reached") end
EOF
t0=$(date +%s)
MPI_TEST_TIMEOUT=60 mpirun3 "$out/lost.lua" >"$out/lost.out" 2>"$out/lost.err"
rc=$?
t1=$(date +%s)
if ((rc != 0 && rc != 124 && t1 - t0 < 40)) && ! grep -q "not reached" "$out/lost.out" &&
   grep -q "Open MPI is ending the job" "$out/lost.err" && grep -q "rank 1" "$out/lost.err"; then
  ok lost_rank_is_named
else
  bad lost_rank_is_named "exit $rc after $((t1 - t0)) s: $(grep -v '^pids' "$out/lost.err" | head -8 | tr '\n' ' ')"
fi
# the wait's own message reaches the script, which can catch it (not a bare "terminated" raised
# by the command's signal hook as pcall returns)
if grep -q "^caught	false	terminated: Open MPI is ending the job" "$out/lost.out" &&
   ! grep -qE '^suiro: .*: terminated$' "$out/lost.err"; then
  ok lost_rank_error_is_catchable
else
  bad lost_rank_error_is_catchable "$(cat "$out/lost.out") $(grep -E 'terminated' "$out/lost.err" | head -3 | tr '\n' ' ')"
fi
pids=$(grep '^pids ' "$out/lost.err" | cut -d' ' -f2-)
if [[ -n "$pids" ]] && left=$(gone $pids); then ok lost_rank_leaves_no_process; else bad lost_rank_leaves_no_process "alive:$left"; fi

# 4b. Open MPI's vader segments that a killed job left (/dev/shm/vader_segment.<node>.*) go at the
# next start; one that a live process maps, or of another node, stays. The job uses the vader
# transport here (no --mca btl), as jobs do by default.
node=$(hostname)
stale=/dev/shm/vader_segment.$node.0.5a1e0001.0
live=/dev/shm/vader_segment.$node.0.5a1e0002.0
elsewhere=/dev/shm/vader_segment.not-$node.0.5a1e0003.0
head -c 4096 /dev/zero >"$stale"; head -c 4096 /dev/zero >"$live"; head -c 4096 /dev/zero >"$elsewhere"
mkfifo "$out/holder.fifo"
/usr/bin/python3 -c "
import mmap, sys
f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 4096)
print('mapped', flush=True); sys.stdin.read()" "$live" <"$out/holder.fifo" >"$out/holder.out" &
holder=$!
exec 8>"$out/holder.fifo" # the holder lives until this closes
for _ in $(seq 1 100); do grep -q mapped "$out/holder.out" 2>/dev/null && break; sleep 0.05; done
cat >"$out/vader.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi" }
print("hosts " .. #pool:status().hosts)
EOF
timeout -k 5 60 mpirun --oversubscribe -np 2 --bind-to none "$suiro" run "$out/vader.lua" >"$out/vader.out" 2>&1
if grep -q mapped "$out/holder.out" && grep -q "^hosts 2" "$out/vader.out" && [[ ! -e $stale && -e $live && -e $elsewhere ]]; then
  ok stale_vader_segments_are_removed
else
  bad stale_vader_segments_are_removed "stale $([[ -e $stale ]] && echo left || echo gone), live $([[ -e $live ]] && echo kept || echo removed), other node's $([[ -e $elsewhere ]] && echo kept || echo removed): $(tail -3 "$out/vader.out" | tr '\n' ' ')"
fi
exec 8>&-
wait "$holder" 2>/dev/null
rm -f "$stale" "$live" "$elsewhere"

# 5. suiro run --hosts calls mpirun; suiro doctor reports MPI
cat >"$out/hosts.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi" }
print("hosts " .. #pool:status().hosts, select("#", ...), ...)
EOF
if SUIRO_MPIRUN="timeout -k 5 60 mpirun --oversubscribe ${local_mca[*]}" "$suiro" run --hosts localhost,localhost \
     "$out/hosts.lua" a b >"$out/hosts.out" 2>&1 && grep -q "^hosts 2	2	a	b$" "$out/hosts.out"; then
  ok run_hosts
else
  bad run_hosts "$(tail -3 "$out/hosts.out" | tr '\n' ' ')"
fi
"$suiro" run --hosts ",x" "$out/hosts.lua" >"$out/hosts.bad" 2>&1
[[ $? -eq 2 ]] && grep -q "comma-separated" "$out/hosts.bad" && ok run_hosts_refuses_bad_lists || bad run_hosts_refuses_bad_lists "$(cat "$out/hosts.bad")"
if "$suiro" doctor >"$out/doctor.out" 2>&1; grep -qE '^ok +mpi +Open MPI' "$out/doctor.out"; then
  ok doctor_reports_mpi
else
  bad doctor_reports_mpi "$(grep mpi "$out/doctor.out" || tail -3 "$out/doctor.out")"
fi

# 6. stock lua5.4 under mpirun (require "suiro" brings MPI up), and Python workers on every host
if LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;;" LUA_CPATH="$root/build/lib/?.so;;" \
     timeout -k 5 60 mpirun -x LUA_PATH -x LUA_CPATH --oversubscribe -np 3 "${local_mca[@]}" lua5.4 "$out/hosts.lua" x \
     >"$out/stock.out" 2>&1 && grep -q "^hosts 3	1	x$" "$out/stock.out"; then
  ok stock_lua
else
  bad stock_lua "$(tail -3 "$out/stock.out" | tr '\n' ' ')"
fi
cat >"$out/python.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi", workers = 1, launcher = suiro.python {} }
local tasks = {}
for i = 1, 6 do tasks[i] = pool:submit(suiro.call { "operator.mul", i, 10 }) end
print("python " .. table.concat(pool:collect_all(tasks, 60), " ") .. " on " .. #pool:status().hosts)
EOF
if mpirun3 "$out/python.lua" >"$out/python.out" 2>&1 && grep -q "^python 10 20 30 40 50 60 on 3$" "$out/python.out"; then
  ok python_workers_on_every_host
else
  bad python_workers_on_every_host "$(tail -3 "$out/python.out" | tr '\n' ' ')"
fi

# 7. a rogue rank (tests/mpi/rogue.c: speaks the protocol, breaks it): rank 0 takes a range's
# results only from the rank it dealt that range to, once and complete, a task's only from the
# rank running it; anything else fails the map (or task) naming the rogue rank
if mpicc -std=gnu11 -D_GNU_SOURCE -Iengine/cluster -Iengine/include tests/mpi/rogue.c -o "$out/rogue" \
     >"$out/rogue.build" 2>&1; then
  declare -A want=(
    [other]="for elements 1\.\.[0-9]* were refused: that range was dealt to host .* (rank 1)"
    [inflate]="for elements [0-9]*\.\.30000 were refused: no range of that extent was dealt"
    [twice]="were refused: they came twice"
    [short]="were refused: [0-9]* bytes of cells, not the [0-9]* of [0-9]* elements"
    [offsets]="were refused: their offsets do not describe [0-9]* results"
    [task]="host rogue (rank 2) sent a result for a task that runs on host .* (rank 1)"
    [empty]="cannot decode"
  )
  for mode in other inflate twice short offsets task empty; do
    timeout -k 5 60 mpirun --oversubscribe "${local_mca[@]}" -np 2 "$suiro" run tests/mpi/rogue.lua "$mode" : \
      -np 1 "$out/rogue" "$mode" >"$out/rogue.$mode" 2>&1
    rc=$?
    if ((rc == 0)) && grep -q "^rogue $mode: .*${want[$mode]}" "$out/rogue.$mode"; then
      ok "rogue_rank_$mode"
    else
      bad "rogue_rank_$mode" "exit $rc: $(grep -v '^ *$' "$out/rogue.$mode" | tail -3 | tr '\n' ' ')"
    fi
  done
else
  bad rogue_rank "tests/mpi/rogue.c does not build: $(tail -3 "$out/rogue.build" | tr '\n' ' ')"
fi

# 8. jobs whose map (or script) fails always end, every rank finalized, nothing left
# (tests/mpi/stress.sh; 10 runs here, SUIRO_MPI_STRESS_RUNS=100 for the acceptance figure)
tests/mpi/stress.sh "${SUIRO_MPI_STRESS_RUNS:-10}" >"$out/stress.out" 2>&1
if [[ $? -eq 0 ]]; then
  ok "failing_maps_end ($(tail -1 "$out/stress.out" | sed 's/^stress: //'))"
else
  bad failing_maps_end "$(grep -v '^stress' "$out/stress.out" | head -3 | tr '\n' ' ') $(tail -1 "$out/stress.out")"
fi

# 8b. the same from a Python host and an R host (5 runs each here; the acceptance figure with
# SUIRO_MPI_STRESS_RUNS=100)
for face in python r; do
  tests/mpi/stress.sh "${SUIRO_MPI_STRESS_RUNS_FACES:-5}" $face >"$out/stress.$face" 2>&1
  if [[ $? -eq 0 ]]; then
    ok "failing_maps_end_${face}_host ($(tail -1 "$out/stress.$face" | sed 's/^stress: //'))"
  else
    bad "failing_maps_end_${face}_host" "$(grep -v '^stress' "$out/stress.$face" | head -3 | tr '\n' ' ') $(tail -1 "$out/stress.$face")"
  fi
done

# 9. engine/cluster is language-neutral: its objects call no Lua (nor any face), and of the engine
# only entry points declared in engine/include (suiro_*)
objs=(build/obj/release/suiro_mpi/{comm,xwire,serve,deal,reap}.o build/obj/release/suiro_cluster/api.o)
if ls "${objs[@]}" >/dev/null 2>&1; then
  defined=$(nm --defined-only "${objs[@]}" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u)
  used=$(nm -u "${objs[@]}" 2>/dev/null | awk 'NF == 2 {print $2}' | sort -u | comm -23 - <(echo "$defined"))
  face=$(echo "$used" | grep -E '^(lua|luaL|lcodec|lpool|lmap|lerror|lbuf|larray|lembed|lsuiro|lvalues|Py|R_|Rf_)' | tr '\n' ' ')
  private=""
  for f in $(echo "$used" | grep '^suiro_'); do
    grep -qw "$f" engine/include/*.h || private="$private $f"
  done
  if [[ -z "$face" && -z "$private" && -n "$used" ]]; then
    ok cluster_uses_only_public_engine_calls
  else
    bad cluster_uses_only_public_engine_calls "face symbols: ${face:-none}; engine symbols not in engine/include:${private:- none}"
  fi
else
  bad cluster_uses_only_public_engine_calls "no objects in build/obj/release/suiro_mpi (scripts/build release)"
fi

# 10. two hosts in network namespaces
tests/mpi/netns.sh "$out/netns" >"$out/netns.out" 2>&1
sed 's/^/  /' "$out/netns.out" | grep -E '^  (ok|FAIL)'
line=$(grep -E '^netns: [0-9]+ passed, [0-9]+ failed$' "$out/netns.out" | tail -1)
if [[ "$line" =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
  pass=$((pass + BASH_REMATCH[1]))
  fail=$((fail + BASH_REMATCH[2]))
else
  bad netns "no summary: $(tail -5 "$out/netns.out" | tr '\n' ' ')"
fi
finish
