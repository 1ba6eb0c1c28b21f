#!/usr/bin/env bash
# tests/mpi/netns.sh — two hosts that stand in for a cluster: two network namespaces joined by a
# veth pair, each process tree with its own host name (a UTS namespace), mpirun in the first
# reaching the second through a plm_rsh_agent that runs `ip netns exec` (instead of ssh), MPI
# over TCP between them (--mca btl tcp,self on the veth addresses only).
#
#   tests/mpi/netns.sh OUTDIR    (as root; prints "ok ..." / "FAIL ..." lines and, last,
#                                 "netns: N passed, M failed")
# The namespaces, the veth pair and every process in them are removed when it ends, whatever
# happens (trap), and that removal is checked.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:-$(mktemp -d /tmp/suiro-netns.XXXXXX)}
mkdir -p "$out"
pass=0
fail=0
ok() { echo "ok   netns.$1"; pass=$((pass + 1)); }
bad() { echo "FAIL netns.$1: $2"; fail=$((fail + 1)); }
finish() { echo "netns: $pass passed, $fail failed"; exit $((fail > 0)); }

if [[ $(id -u) -ne 0 ]]; then bad setup "needs root (network namespaces)"; finish; fi
for tool in ip unshare mpirun timeout; do
  command -v "$tool" >/dev/null || { bad setup "$tool is missing (scripts/setup installs iproute2, util-linux, openmpi-bin)"; finish; }
done

tag=$$
ns_a="suiro_a_$tag" ns_b="suiro_b_$tag"
veth_a="sa$tag" veth_b="sb$tag" # at most 15 characters
net="10.213.$((tag % 200 + 20))"
addr_a="$net.1" addr_b="$net.2"

kill_ns() { # every process in a namespace, then the namespace
  local ns=$1 pids
  ip netns list 2>/dev/null | grep -qw "$ns" || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -z "$pids" ]] && break
    kill -9 $pids 2>/dev/null
    sleep 0.2
  done
  ip netns del "$ns" 2>/dev/null
}
cleanup() {
  kill_ns "$ns_a"
  kill_ns "$ns_b"
  ip link del "$veth_a" 2>/dev/null
  ip link del "$veth_b" 2>/dev/null
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

if ! { ip netns add "$ns_a" && ip netns add "$ns_b" &&
       ip link add "$veth_a" type veth peer name "$veth_b" &&
       ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b" &&
       ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a" && ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b" &&
       ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
       ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up; } 2>"$out/setup.err"; then
  bad setup "cannot make the namespaces: $(head -c 300 "$out/setup.err")"
  finish
fi
ok setup

# mpirun's remote shell: runs the command line it is given inside the second namespace, under the
# second host name (as ssh would run it on that host)
agent="$out/agent.sh"
cat >"$agent" <<EOF
#!/bin/sh
shift # the host name mpirun asked for: there is only one other host
exec ip netns exec $ns_b unshare --uts sh -c "hostname suiro-host-b; \$*"
EOF
chmod +x "$agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run2() { # script args... -> runs it on the two hosts (rank 0 on a, rank 1 on b)
  timeout -k 5 120 ip netns exec "$ns_a" unshare --uts sh -c 'hostname suiro-host-a; exec "$@"' sh \
    mpirun --host "$addr_a:1,$addr_b:1" -np 2 --bind-to none --mca plm_rsh_agent "$agent" \
    --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
    "$root/build/bin/suiro" run "$@"
}

cat >"$out/hosts.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi", workers = 2 }
local st = pool:status()
for _, h in ipairs(st.hosts) do print("host", h.rank, h.host, #h.workers) end
local r = pool:map(function() return os.getenv("SUIRO_MPI_HOST") end, suiro.range(1, 4000)):collect()
local by = {}
for i = 1, #r do by[r[i]] = (by[r[i]] or 0) + 1 end
print("ran on a", by["suiro-host-a"] ~= nil, "ran on b", by["suiro-host-b"] ~= nil)
EOF

if run2 "$out/hosts.lua" >"$out/hosts.out" 2>"$out/hosts.err"; then
  if grep -q "^host	0	suiro-host-a	2$" "$out/hosts.out" && grep -q "^host	1	suiro-host-b	2$" "$out/hosts.out"; then
    ok two_host_names
  else
    bad two_host_names "status().hosts: $(tr '\n' ' ' <"$out/hosts.out")"
  fi
  if grep -q "^ran on a	true	ran on b	true$" "$out/hosts.out"; then ok map_ran_on_both; else bad map_ran_on_both "$(tail -1 "$out/hosts.out")"; fi
else
  bad two_host_names "mpirun failed: $(tail -5 "$out/hosts.err" | tr '\n' ' ')"
fi

# the same maps as on one host, byte for byte (templates, seeds, errors with their index, nested)
"$root/build/bin/suiro" run "$root/tests/mpi/same.lua" local >"$out/same.local" 2>&1
if run2 "$root/tests/mpi/same.lua" mpi >"$out/same.two" 2>"$out/same.err" && cmp -s "$out/same.local" "$out/same.two"; then
  ok same_results_as_one_host
else
  bad same_results_as_one_host "$(diff "$out/same.local" "$out/same.two" | head -5 | tr '\n' ' ') $(tail -3 "$out/same.err" | tr '\n' ' ')"
fi

# cleanup leaves nothing: no process in either namespace, no namespace, no veth
cleanup
left=""
ip netns list | grep -qw "$ns_a" && left="$left $ns_a"
ip netns list | grep -qw "$ns_b" && left="$left $ns_b"
ip link show "$veth_a" >/dev/null 2>&1 && left="$left $veth_a"
ip link show "$veth_b" >/dev/null 2>&1 && left="$left $veth_b"
if pgrep -f "$out/hosts.lua" >/dev/null || pgrep -f "$ns_b" >/dev/null; then left="$left processes"; fi
if [[ -z "$left" ]]; then ok nothing_left_behind; else bad nothing_left_behind "left:$left"; fi
finish
