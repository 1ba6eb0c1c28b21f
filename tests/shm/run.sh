#!/usr/bin/env bash
# tests/shm/run.sh — suiro at the edges of /dev/shm (issue 17, items 1 and 6), for the Lua, Python
# and R hosts. Runs itself again in a private mount namespace (unshare -m; needs root) with a 64 MB
# tmpfs on /dev/shm, as Docker gives containers, and checks that:
#   - a 100 MB array crosses to a worker and back, correct, with the regions that do not fit put in
#     the fallback directory (SUIRO_SHM_DIR, here a fresh directory) and removed afterwards;
#   - with /dev/shm full (a file takes all of it), the same still works through the fallback;
#   - with /dev/shm full and no fallback (SUIRO_SHM_DIR=off), the host gets a clear error naming
#     SUIRO_SHM_DIR and exits normally: never a signal (SIGBUS was exit 135);
#   - a worker whose 100 MB result does not fit reports an error and the pool goes on;
#   - another user who creates the predictable anchor name of a process (/suiro_<pid>_<start>_o,
#     pid and start time from /proc) before it makes its first pool does not block it.
# Every case runs under `timeout`. The last line is "shm: N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

if [[ "${SUIRO_SHM_TEST_INSIDE:-}" != 1 ]]; then
  if ! unshare -m true 2>/dev/null; then
    echo "shm: unshare -m is not permitted here (needs root)"
    echo "shm: 0 passed, 1 failed"
    exit 1
  fi
  exec unshare -m env SUIRO_SHM_TEST_INSIDE=1 bash -c \
    'mount --make-rprivate / && mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0"' "$0"
fi

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [[ -n "${2:-}" ]] && echo "$2" | tail -15 | sed 's/^/     /'; }

work=$(mktemp -d /var/tmp/suiro-shm-test.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
fb="$work/fallback"
mkdir -p "$fb"

export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export R_LIBS="$root/build/R-lib${R_LIBS:+:$R_LIBS}"
export SUIRO_WORKER_EXE="${SUIRO_WORKER_EXE:-$root/build/bin/suiro}"
export SUIRO_PY_WORKER="${SUIRO_PY_WORKER:-$root/bindings/python/suiro/_worker.py}"

# ---- the programs, one per host: "ok" lines on stdout, errors on stderr ------------------------

cat > "$work/roundtrip.lua" <<'EOF'
local suiro = require "suiro"
local pool <close> = suiro.pool { workers = 1 }
local n = 100 * 1024 * 1024 // 8
local a = suiro.array("f64", n)
for i = 1, n, 4096 do a[i] = i end
a[n] = 0.5
local b = pool:submit(function(x) return x * 2 end, a):collect(120)
assert(#b == n and b[1] == 2 and b[4097] == 8194 and b[n] == 1.0, "wrong values")
print("ok")
EOF
cat > "$work/roundtrip.py" <<'EOF'
import numpy as np, suiro
with suiro.pool(1) as p:
    a = np.arange(100 * 2**20 // 8, dtype=np.float64)
    b = p.submit(np.multiply, a, 2.0).collect(120)
    assert b.shape == a.shape and b[-1] == 2 * a[-1] and b.sum() == 2 * a.sum(), "wrong values"
print("ok")
EOF
cat > "$work/roundtrip.R" <<'EOF'
library(suiro)
p <- suiro_pool(1)
n <- 100 * 2^20 / 8
x <- as.numeric(seq_len(n))
y <- suiro_collect(suiro_submit(p, function(v) v * 2, x), timeout = 120)
stopifnot(length(y) == n, y[1] == 2, y[n] == 2 * n, sum(y) == 2 * sum(x))
suiro_pool_stop(p)
cat("ok\n")
EOF

# With no room anywhere: the send fails with an error; a small task still runs; a worker whose
# big result does not fit reports it; the program ends normally.
cat > "$work/full.lua" <<'EOF'
local suiro = require "suiro"
local okp, pool = pcall(suiro.pool, { workers = 1 })
if not okp then io.stderr:write(tostring(pool), "\n"); print("pool-error"); return end
local n = 100 * 1024 * 1024 // 8
local ok, err = pcall(function() return pool:submit(function(x) return x end, suiro.array("f64", n)):collect(60) end)
if ok then print("sent?") else io.stderr:write(tostring(err), "\n"); print("send-error") end
print("small " .. pool:submit(function(x) return x + 1 end, 41):collect(30))
ok, err = pcall(function() return pool:submit(function(k) return suiro.array("f64", k) end, n):collect(60) end)
if ok then print("result?") else io.stderr:write(tostring(err), "\n"); print("result-error") end
print("small " .. pool:submit(function(x) return x + 1 end, 1):collect(30))
pool:stop()
EOF
cat > "$work/full.py" <<'EOF'
import sys, numpy as np, suiro
try:
    p = suiro.pool(1)
except Exception as e:
    sys.stderr.write(str(e) + "\n"); print("pool-error"); sys.exit(0)
n = 100 * 2**20 // 8
try:
    p.submit(np.sum, np.ones(n)).collect(60); print("sent?")
except Exception as e:
    sys.stderr.write(str(e) + "\n"); print("send-error")
print("small", p.submit(int, "42").collect(30))
try:
    p.submit(np.ones, n).collect(60); print("result?")
except Exception as e:
    sys.stderr.write(str(e) + "\n"); print("result-error")
print("small", p.submit(int, "2").collect(30))
p.stop()
EOF
cat > "$work/full.R" <<'EOF'
library(suiro)
p <- tryCatch(suiro_pool(1), error = function(e) { message(conditionMessage(e)); NULL })
if (is.null(p)) { cat("pool-error\n"); quit(status = 0) }
n <- 100 * 2^20 / 8
r <- tryCatch({ suiro_collect(suiro_submit(p, function(v) sum(v), rep(1, n)), timeout = 60); "sent?" },
              error = function(e) { message(conditionMessage(e)); "send-error" })
cat(r, "\n")
cat("small", suiro_collect(suiro_submit(p, function(x) x + 1, 41), timeout = 30), "\n")
r <- tryCatch({ v <- suiro_collect(suiro_submit(p, function(k) rep(1, k), n), timeout = 60)
                if (inherits(v, "suiro_error") || inherits(v, "condition")) { message(format(v)); "result-error" } else "result?" },
              error = function(e) { message(conditionMessage(e)); "result-error" })
cat(r, "\n")
cat("small", suiro_collect(suiro_submit(p, function(x) x + 1, 1), timeout = 30), "\n")
suiro_pool_stop(p)
EOF

run_host() { # host program -> command line
  case $1 in
    lua) echo "$root/build/bin/suiro run $2.lua" ;;
    python) echo "/usr/bin/python3 $2.py" ;;
    r) echo "Rscript $2.R" ;;
  esac
}

fill_shm() { # leaves /dev/shm with no free block
  rm -f /dev/shm/filler
  local avail
  avail=$(($(stat -f -c '%a*%S' /dev/shm)))
  ((avail > 0)) && fallocate -l "$avail" /dev/shm/filler
}

leftovers() { # files of suiro left in /dev/shm and the fallback directory
  find /dev/shm "$fb" -maxdepth 1 -name 'suiro_*' 2>/dev/null | wc -l
}

hosts=(lua python)
if command -v Rscript >/dev/null 2>&1 && [[ -d "$root/build/R-lib/suiro" ]]; then hosts+=(r); else bad "r: the R package is not built"; fi

for h in "${hosts[@]}"; do
  # 1. a 64 MB /dev/shm: the 100 MB array crosses through the fallback directory
  rm -f /dev/shm/filler
  out=$(SUIRO_SHM_DIR="$fb" timeout 300 $(run_host "$h" "$work/roundtrip") 2>&1); rc=$?
  if [[ $rc -eq 0 && "$out" == *ok* ]]; then ok "$h: 100 MB round trip with a 64 MB /dev/shm"; else bad "$h: 100 MB round trip with a 64 MB /dev/shm (exit $rc)" "$out"; fi
  n=$(leftovers)
  if [[ $n -eq 0 ]]; then ok "$h: nothing left in /dev/shm or the fallback directory"; else bad "$h: $n files left" "$(ls -la /dev/shm "$fb")"; fi

  # 2. a full /dev/shm with the fallback: everything goes there, and works
  fill_shm
  out=$(SUIRO_SHM_DIR="$fb" timeout 300 $(run_host "$h" "$work/roundtrip") 2>&1); rc=$?
  if [[ $rc -eq 0 && "$out" == *ok* ]]; then ok "$h: 100 MB round trip with /dev/shm full, through SUIRO_SHM_DIR"; else bad "$h: round trip with /dev/shm full (exit $rc)" "$out"; fi

  # 3. a full /dev/shm without a fallback: a clear error, never a signal
  out=$(SUIRO_SHM_DIR=off timeout 120 $(run_host "$h" "$work/full") 2>&1); rc=$?
  if [[ $rc -lt 128 && "$out" == *pool-error* && "$out" == *SUIRO_SHM_DIR* && "$out" == *"0 B free"* ]]; then
    ok "$h: a full /dev/shm is an error naming SUIRO_SHM_DIR (exit $rc)"
  else
    bad "$h: a full /dev/shm without a fallback (exit $rc)" "$out"
  fi

  # 4. room for the pool and the argument but not for the worker's result: errors, no signal
  rm -f /dev/shm/filler
  avail=$(($(stat -f -c '%a*%S' /dev/shm)))
  fallocate -l $((avail - 8 * 1024 * 1024)) /dev/shm/filler
  out=$(SUIRO_SHM_DIR=off timeout 120 $(run_host "$h" "$work/full") 2>&1); rc=$?
  if [[ $rc -eq 0 && "$out" == *send-error* && "$out" == *result-error* && "$out" == *"small 42"* && "$out" == *"small 2"* &&
        "$out" == *SUIRO_SHM_DIR* ]]; then
    ok "$h: sends and results that do not fit are errors; the pool goes on"
  else
    bad "$h: sends and results that do not fit (exit $rc)" "$out"
  fi
  rm -f /dev/shm/filler
  n=$(leftovers)
  if [[ $n -eq 0 ]]; then ok "$h: nothing left after the failures"; else bad "$h: $n files left after the failures" "$(ls -la /dev/shm "$fb")"; fi
done

# 5. a squatted anchor name (item 6): another user creates /dev/shm/suiro_<pid>_<start>_o, as the
# names were before, for a process that is about to make its first pool; the pool is made anyway.
if id nobody >/dev/null 2>&1 && id daemon >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; then
  chmod 1777 /dev/shm
  mkfifo -m 644 "$work/go"
  # the host runs as daemon, who may not read the checkout (CI and fresh machines clone it under
  # /root): it runs copies of the CLI with its Lua sources and of the Python package instead
  app="$work/app"
  mkdir -p "$app/bin" "$app/lua" "$app/py"
  cp "$root/build/bin/suiro" "$app/bin/"
  cp -r "$root/lua/suiro" "$app/lua/"
  cp "$root"/engine/conf/suiro/*.lua "$app/lua/suiro/" # the config readers, as installed
  cp -r "$root/bindings/python/suiro" "$app/py/"
  chmod 755 "$work"
  chmod -R a+rX "$app"
  for h in lua python; do
    prog="$work/roundtrip"
    [[ $h == python ]] && prog="$work/small" && printf 'import suiro\nwith suiro.pool(1) as p:\n    assert p.submit(int, "5").collect(30) == 5\nprint("ok")\n' > "$work/small.py"
    [[ $h == lua ]] && prog="$work/small" && printf 'local suiro = require "suiro"\nlocal p <close> = suiro.pool { workers = 1 }\nassert(p:submit(function(x) return x end, 5):collect(30) == 5)\nprint("ok")\n' > "$work/small.lua"
    cmd="env -u SUIRO_WORKER_EXE -u SUIRO_LUA_DIR $app/bin/suiro run $prog.lua"
    [[ $h == python ]] && cmd="env -u SUIRO_WORKER_EXE -u SUIRO_PY_WORKER PYTHONPATH=$app/py /usr/bin/python3 $prog.py"
    # the child waits on the fifo before it execs the host: same pid, same start time
    # as a user without root's power to replace another user's file in a sticky directory
    setpriv --reuid=daemon --regid=daemon --clear-groups env HOME="$work" \
      bash -c 'read -r _ < "$1"; shift; exec "$@"' _ "$work/go" $cmd > "$work/squat.out" 2>&1 &
    child=$!
    (sleep 90; kill -9 "$child" 2>/dev/null) & # a bound, should the host hang
    watchdog=$!
    start=$(awk '{print $22}' "/proc/$child/stat")
    name=$(printf 'suiro_%x_%x_o' "$child" "$start")
    setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c "umask 022; : > /dev/shm/$name; : > /dev/shm/.suiro-anchor-$(printf %x "$child")-0" 2>/dev/null
    owner=$(stat -c %U "/dev/shm/$name" 2>/dev/null)
    echo go > "$work/go"
    wait "$child"; rc=$?
    kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
    out=$(cat "$work/squat.out")
    if [[ "$owner" == nobody && $rc -eq 0 && "$out" == *ok* ]]; then
      ok "$h: another user's file at the old anchor name does not block a pool"
    else
      bad "$h: squatted anchor name (owner ${owner:-none}, exit $rc)" "$out"
    fi
    rm -f "/dev/shm/$name" /dev/shm/.suiro-anchor-*
  done
else
  bad "squatted names: needs the users nobody and daemon, and setpriv"
fi

echo "shm: $pass passed, $fail failed"
((fail == 0))
