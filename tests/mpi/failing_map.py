"""tests/mpi/failing_map.py K: tests/mpi/failing_map.lua from a Python host (tests/mpi/stress.sh
python): a 3-rank job whose map fails at an element that depends on K; untyped results for even
K, typed cells for odd K; for K divisible by 3 the script itself fails with its map running.
Prints "pids <node pids and rank 0's worker pids>" to stderr first."""
import sys

import suiro

k = int(sys.argv[1]) if len(sys.argv) > 1 else 1
pool = suiro.pool(workers=2, backend="mpi")
st = pool.status()
pids = [n["pid"] for n in st["nodes"]] + [w["pid"] for w in st["workers"]]
print("pids " + " ".join(str(p) for p in pids), file=sys.stderr, flush=True)
n = 60000
bad = 1 + (k * 7919) % n


def f(x):
    if x == bad:
        raise ValueError("element %d fails on purpose" % x)
    return x if k % 2 == 1 else [x, str(x)]


m = pool.map(f, range(1, n + 1), template="f64" if k % 2 == 1 else None)
if k % 3 == 0:
    raise RuntimeError("the script fails on purpose with its map running")
m.collect(30)
print("not reached")
