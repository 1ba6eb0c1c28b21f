#!/usr/bin/env bash
# tests/mpi/run.sh — the MPI tier's suite (scripts/test runs it as "mpi"):
#   - the same maps and tasks (templates, seeds, errors with their index, nested maps, streams)
#     on a local pool, on an MPI pool without mpirun and under mpirun -np 3: identical output;
#   - examples/cluster_map.lua prints the same on one host and on three ranks;
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
m:collect(60)
print("not reached")
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
pids=$(grep '^pids ' "$out/lost.err" | cut -d' ' -f2-)
if [[ -n "$pids" ]] && left=$(gone $pids); then ok lost_rank_leaves_no_process; else bad lost_rank_leaves_no_process "alive:$left"; fi

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

# 9. engine/cluster is language-neutral: its objects call no Lua (nor any face), and of the engine
# only entry points declared in engine/include (suiro_*)
objs=(build/obj/release/suiro_mpi/{comm,xwire,serve,deal}.o)
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
