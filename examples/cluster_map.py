"""examples/cluster_map.py: examples/cluster_map.lua from a Python host. One script for one host
or a cluster; only the command changes, and what it prints does not:

    scripts/python examples/cluster_map.py                                   # this host
    mpirun --oversubscribe -np 3 scripts/python examples/cluster_map.py      # 3 nodes

Every map below is dealt out in ranges over the nodes (each runs its ranges on its own
workers). Tasks run on rank 0's pool.
"""
import math
import struct
import sys

import suiro

with suiro.pool(workers=2, backend="mpi") as pool:
    nodes = pool.status()["nodes"]
    print("cluster_map: %d host%s (%s), 2 workers each" % (len(nodes), "" if len(nodes) == 1 else "s",
          ", ".join(n["node"] for n in nodes)), file=sys.stderr)

    # 1. a typed template: 100000 squares into one f64 array
    sq = pool.map(lambda x: x * x, range(1, 100001), template="f64").collect()
    print("squares: %d elements, sum %.0f, last %.0f" % (len(sq), sq.sum(), sq[-1]))

    # 2. a seeded Monte Carlo estimate of pi: each element draws from its own stream, so the
    #    estimate is bitwise the same whichever node ran which element
    def darts(_):
        h = 0
        for _ in range(500):
            x, y = suiro.random(), suiro.random()
            if x * x + y * y <= 1:
                h += 1
        return h

    hits = pool.map(darts, range(1, 4001), template="i64", seed=42).collect()
    print("pi ~ %.8f from %d seeded draws" % (4 * int(hits.sum()) / (4000 * 500), 4000 * 500 * 2))

    # 3. seeded floats, checked bit for bit: a hash of every element's 64 bits
    u = pool.map(lambda i: suiro.random() + i, range(1, 20001), template="f64", seed=7).collect()
    h = 0
    for v in u:
        h = (h * 31 + struct.unpack("<q", struct.pack("<d", v))[0]) & 0xFFFFFFFFFFFF
    print("seeded floats: hash %012x" % h)

    # 4. a record template: a frame with one column per field
    f = pool.map(lambda i: {"i": i, "root": math.sqrt(i), "even": i % 2 == 0}, range(1, 1001),
                 template="{i: i64, root: f64, even: bool}").collect()
    print("frame: %d rows, sum of roots %.6f, %d even" % (len(f["i"]), sum(f["root"]), sum(bool(e) for e in f["even"])))

    # 5. no template: any value comes back, in input order
    words = pool.map(lambda w: [w.upper(), len(w)],
                     ["suiro", "waterway", "host", "rank", "range", "worker", "pool", "map"]).collect()
    print("words: " + " ".join("%s/%d" % (w, n) for w, n in words))

    # 6. nested maps stay on the node running the element
    def part_sum(part):
        return float(suiro.current_pool().map(math.sqrt, part, template="f64").collect().sum())

    sums = pool.map(part_sum, [range(1, 25001), range(25001, 50001), range(50001, 75001)], template="f64").collect()
    print("nested: %.4f %.4f %.4f" % tuple(sums))

    # 7. a failing element fails the map and names its index (printed 1-based, as in Lua)
    def unlucky(x):
        if x == 7777:
            raise ValueError("no luck with %d" % x)
        return x

    try:
        pool.map(unlucky, range(1, 10001), template="i64").collect()
        ok, err = True, None
    except Exception as e:
        ok, err = False, e
    print("error: ok=%s element=%d message=%s" % (str(ok).lower(), err.index + 1, err.args[0]))

    # 8. tasks; their results come back to this script
    tasks = pool.submit_batch(lambda a, b: a * b, [(6, 7), (8, 9), (10, 11), (12, 13)])
    print("tasks: " + " ".join(str(v) for v in pool.collect_all(tasks)))
