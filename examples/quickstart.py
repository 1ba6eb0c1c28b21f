"""quickstart.py — the quickstart pipeline from Python, on Python workers.

    scripts/python examples/quickstart.py

Word statistics over a generated corpus: split the work in chunks, count in parallel, merge,
and show what the pool did (the same steps as examples/quickstart.lua).
"""
import collections
import re
import time

import suiro


def count(chunk):
    """Counts the words of a list of lines. It runs in a worker: a function of __main__ travels
    by value, pickled once per pool and fetched once per worker."""
    return dict(collections.Counter(w for line in chunk for w in re.findall(r"[a-z]+", line)))


def fail():
    raise LookupError("no such canal")


def main():
    with suiro.pool(workers=2) as pool:
        # 1. a trivial task
        print("1 + 2 =", pool.submit(lambda x, y: x + y, 1, 2).collect(timeout=30))

        # 2. a corpus, generated deterministically (the Lua example's generator)
        words = ["water", "way", "river", "canal", "lock", "weir", "stream", "flow", "bank", "ford"]
        lines, seed = [], 42
        for _ in range(20000):
            line = []
            for _ in range(8):
                seed = (seed * 1103515245 + 12345) % 2147483648
                line.append(words[seed % len(words)])
            lines.append(" ".join(line))

        # 3. count words per chunk on the workers
        size = 2500
        chunks = [lines[i:i + size] for i in range(0, len(lines), size)]
        t0 = time.perf_counter()
        partial = pool.collect_all(pool.submit_batch(count, [(c,) for c in chunks]), timeout=60)

        # 4. merge on the host
        total = collections.Counter()
        for counts in partial:
            total.update(counts)
        top = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        print("counted %d lines in %d chunks in %.1f ms" % (len(lines), len(chunks), (time.perf_counter() - t0) * 1e3))
        for w, n in top:
            print("  %-8s %d" % (w, n))

        # 5. errors come back as the worker's own exception, its traceback chained
        try:
            pool.submit(fail).collect(timeout=30)
        except LookupError as e:
            print("error caught:", type(e).__name__, e, "(worker traceback attached: %s)" % (e.__cause__ is not None))

        # 6. what the pool did
        for w in pool.status()["workers"]:
            print("worker %d (pid %d): %s, %d tasks" % (w["slot"], w["pid"], w["state"], w["tasks"]))


if __name__ == "__main__":
    main()
