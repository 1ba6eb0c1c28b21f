"""bench_interop.py — the Python-host half of `scripts/bench interop`: suiro with R workers against a
CSV hand-off (files and a new Rscript), and heavy R tasks on 1, 2 and 4 R workers against serial R.
The R-host half, with reticulate, is bench/bench_interop.R.

    scripts/bench interop [rounds]      (scripts/python bench/bench_interop.py [rounds])

C  Python -> R -> Python of 32 doubles (identity there): suiro_ms per call; csv_ms: the vector
   written, Rscript reads and writes it back, Python reads it
D  an R quantile (stats::quantile, probs .25/.5/.75) of 32 doubles from Python: per call
E  32 tasks of a ~50 ms R function on 1, 2 and 4 R workers; the speed-up over the same 32 calls run
   one after another in one R process (E_serial_ms)

Setup: suiro_r_setup_ms (suiro.pool with one R worker to its first result).
Medians over rounds; the last line of output is one JSON object.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import suiro

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
RSCRIPT = os.environ.get("SUIRO_BENCH_RSCRIPT", "Rscript")
HEAVY = "s <- 0; for (i in seq_len(n)) s <- s + sqrt(i); s"  # ~50 ms with n calibrated below


def clock_ms(f):
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1e3


def csv_roundtrip(tmp, v):
    f_in, f_out = os.path.join(tmp, "c_in.csv"), os.path.join(tmp, "c_out.csv")
    np.savetxt(f_in, v)
    subprocess.run([RSCRIPT, "-e", "a <- commandArgs(TRUE); write(scan(a[1], quiet = TRUE), a[2], ncolumns = 1)",
                    f_in, f_out], check=True, capture_output=True)
    back = np.loadtxt(f_out)
    assert back.shape == v.shape
    return back


def main():
    v = np.arange(32.0)
    rows = {k: [] for k in ("suiro_r_setup_ms", "C_py_r_py_suiro_ms", "C_py_r_py_csv_ms", "D_quantile_suiro_ms",
                            "D_quantile_csv_ms", "E_serial_ms", "E_1w_ms", "E_2w_ms", "E_4w_ms")}
    pools = {w: suiro.pool(workers=w, launcher=suiro.r()) for w in (1, 2, 4)}
    p1 = pools[1]
    p1.submit(suiro.call(source="1")).collect(timeout=60)
    # calibrate the heavy task to ~50 ms on one worker
    n = 200_000
    for _ in range(6):
        ms = clock_ms(lambda: p1.submit(suiro.call(source=HEAVY, n=n)).collect(timeout=120))
        if 40 <= ms <= 60:
            break
        n = max(1000, int(n * 50 / max(ms, 0.1)))
    for p in pools.values():  # every worker started and warm
        for t in [p.submit(suiro.call(source=HEAVY, n=1000)) for _ in range(8)]:
            t.collect(timeout=60)
    serial_src = "for (k in 1:32) { s <- 0; for (i in seq_len(n)) s <- s + sqrt(i) }; s"
    q_expect = None
    with tempfile.TemporaryDirectory(prefix="suiro-interop-") as tmp:
        for r in range(ROUNDS):
            t_round = time.perf_counter()

            def setup():
                with suiro.pool(workers=1, launcher=suiro.r()) as ps:
                    ps.submit(suiro.call(source="1")).collect(timeout=60)
            rows["suiro_r_setup_ms"].append(clock_ms(setup))
            rows["C_py_r_py_suiro_ms"].append(clock_ms(
                lambda: [p1.submit(suiro.call("base::identity", v)).collect() for _ in range(1000)]) / 1000)
            rows["C_py_r_py_csv_ms"].append(clock_ms(lambda: [csv_roundtrip(tmp, v) for _ in range(3)]) / 3)
            q = suiro.call("stats::quantile", v, probs=np.array([0.25, 0.5, 0.75]), names=False)
            rows["D_quantile_suiro_ms"].append(clock_ms(lambda: [p1.submit(q).collect() for _ in range(1000)]) / 1000)

            def csv_quantile():
                f_in, f_out = os.path.join(tmp, "q_in.csv"), os.path.join(tmp, "q_out.csv")
                np.savetxt(f_in, v)
                subprocess.run([RSCRIPT, "-e", "a <- commandArgs(TRUE); write(quantile(scan(a[1], quiet = TRUE), "
                                "c(.25, .5, .75), names = FALSE), a[2], ncolumns = 1)", f_in, f_out],
                               check=True, capture_output=True)
                return np.loadtxt(f_out)
            rows["D_quantile_csv_ms"].append(clock_ms(lambda: [csv_quantile() for _ in range(3)]) / 3)
            q_expect = csv_quantile()
            rows["E_serial_ms"].append(clock_ms(
                lambda: p1.submit(suiro.call(source=serial_src, n=n)).collect(timeout=600)))
            for w, p in pools.items():
                rows["E_%dw_ms" % w].append(clock_ms(
                    lambda: [t.collect(timeout=600) for t in [p.submit(suiro.call(source=HEAVY, n=n)) for _ in range(32)]]))
            print("round %d/%d done (%.0f s)" % (r + 1, ROUNDS, time.perf_counter() - t_round), file=sys.stderr)
    # the answers agree
    np.testing.assert_array_equal(np.asarray(p1.submit(suiro.call("base::identity", v)).collect()), v)
    got = np.asarray(p1.submit(suiro.call("stats::quantile", v, probs=np.array([0.25, 0.5, 0.75]), names=False)).collect())
    np.testing.assert_allclose(got, q_expect)
    for p in pools.values():
        p.stop()

    s = {k: statistics.median(x) for k, x in rows.items()}
    for w in (1, 2, 4):
        s["E_%dw_speedup" % w] = s["E_serial_ms"] / s["E_%dw_ms" % w]
    s["E_task_n"] = n
    print("\nPython host: suiro (R workers) against a CSV hand-off, medians of %d rounds\n" % ROUNDS)
    print("  %-40s %12s %12s" % ("test", "csv", "suiro"))
    print("  %-40s %9.3f ms %9.4f ms" % ("C Python -> R -> Python, 32 doubles", s["C_py_r_py_csv_ms"], s["C_py_r_py_suiro_ms"]))
    print("  %-40s %9.3f ms %9.4f ms" % ("D R quantile from Python", s["D_quantile_csv_ms"], s["D_quantile_suiro_ms"]))
    print("  E 32 x ~50 ms R tasks: serial %.0f ms; 1 worker %.0f ms (%.2f x), 2 workers %.0f ms (%.2f x), "
          "4 workers %.0f ms (%.2f x)" % (s["E_serial_ms"], s["E_1w_ms"], s["E_1w_speedup"], s["E_2w_ms"],
                                          s["E_2w_speedup"], s["E_4w_ms"], s["E_4w_speedup"]))
    print("  setup: suiro pool of one R worker %.1f ms" % s["suiro_r_setup_ms"])
    s = {k: round(x, 6) for k, x in s.items()}
    print(json.dumps(dict(bench="interop_py", rounds=ROUNDS, **s,
                          date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), separators=(",", ":")))


if __name__ == "__main__":
    main()
