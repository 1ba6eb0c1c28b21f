#!/usr/bin/python3
"""bench/report.py — turn bench/results/*.json into the README's benchmark table and PNG figures.

    /usr/bin/python3 bench/report.py              # table + figures + README block
    /usr/bin/python3 bench/report.py --print      # also print the markdown to stdout
    /usr/bin/python3 bench/report.py --no-readme  # leave README.md alone
    /usr/bin/python3 bench/report.py --no-figures # table only (no matplotlib needed)

Every benchmark prints one JSON object as its last line; scripts/bench keeps it in
bench/results/NAME.json. This script reads whichever of those files exist; rows and bars whose file
or key is missing are skipped, and numeric keys that no row names still get a generic row, so a new
benchmark shows up before anyone describes it here. To describe a figure, add a Row to ROWS (the
table) and a Bar to a Panel in FIGURES (the plots).

The README block sits between `<!-- bench:begin -->` and `<!-- bench:end -->`; the first run puts
the markers in place of the table under "## Benchmarks".
"""

import argparse
import datetime as _dt
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE = "2 vCPU KVM guest"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
FILE_ORDER = ["core", "lua", "data", "map"]  # other files follow in name order
TABLE_FILES = ("core", "lua", "data", "map")  # the rows of the README's main table
IGNORED_KEYS = {"bench", "rounds", "machine", "version"}


# ---------------------------------------------------------------------------------------------
# What the table says: one Row per line.
#   unit:   "ns" | "us" | "ms" (times), "per_s" (rates), "x" (a plain ratio), "count", "ns_per_elt"
#   base:   the baseline measured in the same run (same file unless base_file says otherwise)
#   mode:   "times" -> "1.9× floor" (value / baseline); "faster" -> "suiro 9.8× faster"
#           (baseline / value); "speedup" -> "3.1× speedup" (baseline / value)
#   ratio_key: the ratio as the benchmark itself computed it (used when present)
#   target: Target(op, number, on) checked against the value ("value", in the row's raw unit) or
#           against the ratio ("ratio"); note: free text for the target column when there is none.


@dataclass
class Target:
    op: str  # "<=" or ">="
    number: float
    on: str = "value"  # "value" or "ratio"


@dataclass
class Row:
    label: str
    file: str
    key: str
    unit: str
    base: Optional[str] = None
    base_name: str = ""
    base_file: Optional[str] = None
    mode: str = "times"
    ratio_key: Optional[str] = None
    target: Optional[Target] = None
    note: str = ""
    base_note: str = ""  # baseline column text when the row has no baseline
    expand: bool = False  # the key may be a dict {size: value} or several keys KEY_<size>


FLOOR = "cross-process spin hand-off round trip (the floor)"

ROWS = [
    # core.json — build/bin/bench_core
    Row(FLOOR + ", core run", "core", "floor_rt_ns", "ns",
        base_note="is the baseline for the core rows"),
    Row("C pool round trip, trivial native task", "core", "pool_rt_ns", "ns",
        base="floor_rt_ns", base_name="floor", ratio_key="pool_rt_vs_floor",
        target=Target("<=", 3, "ratio")),
    Row("C pipelined tasks, 1 worker", "core", "pipelined_tasks_per_s", "per_s",
        target=Target(">=", 3e6)),
    Row("C batched tasks (submit_batch + collect_all)", "core", "batched_tasks_per_s", "per_s",
        target=Target(">=", 10e6)),
    Row("round trip to a parked worker", "core", "wake_rt_ns", "ns",
        base="floor_rt_ns", base_name="floor", note="idle-vCPU wake-up on this VM"),
    Row("worker parks during the core run", "core", "worker_parks", "count"),
    # lua.json — build/bin/suiro run bench/bench_lua.lua
    Row(FLOOR + ", Lua run", "lua", "floor_rt_ns", "ns",
        base_note="is the baseline for the Lua rows"),
    Row("Lua round trip, trivial function", "lua", "lua_rt_ns", "ns",
        base="floor_rt_ns", base_name="floor", ratio_key="lua_rt_vs_floor",
        target=Target("<=", 6, "ratio")),
    Row("Lua pipelined tasks, 1 worker", "lua", "lua_pipelined_tasks_per_s", "per_s"),
    Row("Lua batched tasks, 1 worker", "lua", "lua_batched_tasks_per_s", "per_s",
        target=Target(">=", 2.5e6)),
    Row("same Lua task: suiro vs luv work queue (thread pool)", "lua", "lua_rt_ns", "ns",
        base="luv_rt_ns", base_name="luv", mode="faster", ratio_key="luv_vs_lua",
        target=Target(">=", 50, "ratio"),
        note="50× needs a Lua round trip of luv/50: luv measured 7 µs on one machine (under the floor then) and 22-24 µs here"),
    Row("same Lua task: suiro vs pipe pool of forked Lua workers", "lua", "lua_rt_ns", "ns",
        base="pipe_pool_rt_ns", base_name="pipe pool", mode="faster", ratio_key="pipe_vs_lua",
        target=Target(">=", 10, "ratio")),
    Row("Lua worker start (create to first result)", "lua", "worker_start_ms", "ms",
        target=Target("<=", 5)),
    # data.json — large values through the region
    Row("80 MB memcpy (the floor for large values)", "data", "memcpy_80mb_ms", "ms",
        base_note="is the baseline for the 80 MB rows"),
    Row("80 MB f64 array made fresh, x * 2 in a worker, sum of the view", "data", "fresh_80mb_ms", "ms",
        base="memcpy_80mb_ms", base_name="memcpy", ratio_key="fresh_vs_memcpy",
        target=Target("<=", 4, "ratio")),
    Row("the same with the input already a view", "data", "reuse_80mb_ms", "ms",
        base="memcpy_80mb_ms", base_name="memcpy", ratio_key="reuse_vs_memcpy",
        target=Target("<=", 3, "ratio")),
    Row("a view sent to a worker and returned", "data", "view_resend_us", "us", expand=True,
        target=Target("<=", 50)),
    Row("small value round trip", "data", "small_value_rt_ns", "ns",
        base="floor_rt_ns", base_name="floor"),
    # map.json — map over many elements against a serial loop
    Row("identity map, serial loop (per element)", "map", "serial_identity_ns_per_elt", "ns_per_elt",
        base_note="is the baseline for the identity map"),
    Row("identity map, pool map (per element)", "map", "map_identity_ns_per_elt", "ns_per_elt",
        base="serial_identity_ns_per_elt", base_name="serial", mode="speedup",
        target=Target("<=", 150)),
    Row("10 µs tasks, serial loop (total)", "map", "serial_10us_ms", "ms",
        base_note="is the baseline for the 10 µs map"),
    Row("10 µs tasks, pool map (total)", "map", "map_10us_ms", "ms",
        base="serial_10us_ms", base_name="serial", mode="speedup", ratio_key="map_10us_speedup",
        target=Target(">=", 1.7, "ratio")),
]


# ---------------------------------------------------------------------------------------------
# What the figures show: one Figure per family, drawn when at least one of its bars has data.
#   kind: "floor" (grey), "suiro" (blue), "other" (orange: another system measured in the same run)
#   note: the text under the value ("ratio" -> the ratio to base in the bar's own run)
#   target: as in Row; drawn as a dashed line across the bar


@dataclass
class Bar:
    label: str
    file: str
    key: str
    kind: str = "suiro"
    base: Optional[str] = None
    base_name: str = ""
    mode: str = "times"
    ratio_key: Optional[str] = None
    target: Optional[Target] = None


@dataclass
class Panel:
    title: str
    unit: str  # "time" (auto ns/µs/ms, value in ns), "ms", "per_s", "ns_per_elt", "us"
    bars: list
    log: bool = False
    expand: Optional[str] = None  # "file:key" whose dict / prefixed keys become one bar each


@dataclass
class Figure:
    name: str
    title: str
    panels: list
    files: list = field(default_factory=list)  # filled in at draw time


FIGURES = [
    Figure("latency", "Round trip of one trivial task (lower is better)", [
        Panel("median round trip, log scale", "time", log=True, bars=[
            Bar("floor\n(core run)", "core", "floor_rt_ns", "floor"),
            Bar("C pool\nround trip", "core", "pool_rt_ns", "suiro", base="floor_rt_ns",
                base_name="floor", ratio_key="pool_rt_vs_floor", target=Target("<=", 3, "ratio")),
            Bar("floor\n(Lua run)", "lua", "floor_rt_ns", "floor"),
            Bar("Lua\nround trip", "lua", "lua_rt_ns", "suiro", base="floor_rt_ns", base_name="floor",
                ratio_key="lua_rt_vs_floor", target=Target("<=", 6, "ratio")),
            Bar("luv work\nqueue", "lua", "luv_rt_ns", "other", base="lua_rt_ns",
                base_name="suiro Lua", ratio_key="luv_vs_lua"),
            Bar("pipe pool\n(forked Lua)", "lua", "pipe_pool_rt_ns", "other", base="lua_rt_ns",
                base_name="suiro Lua", ratio_key="pipe_vs_lua"),
        ]),
    ]),
    Figure("throughput", "Tasks per second through one worker (higher is better)", [
        Panel("C native tasks", "per_s", bars=[
            Bar("C pipelined\n(256 in flight)", "core", "pipelined_tasks_per_s", target=Target(">=", 3e6)),
            Bar("C batched\n(submit_batch)", "core", "batched_tasks_per_s", target=Target(">=", 10e6)),
        ]),
        Panel("Lua tasks", "per_s", bars=[
            Bar("Lua pipelined\n(256 in flight)", "lua", "lua_pipelined_tasks_per_s"),
            Bar("Lua batched\n(submit_batch)", "lua", "lua_batched_tasks_per_s",
                target=Target(">=", 2.5e6)),
        ]),
    ]),
    Figure("data", "Large values through the shared region (lower is better)", [
        Panel("one 80 MB value", "ms", bars=[
            Bar("memcpy 80 MB\n(floor)", "data", "memcpy_80mb_ms", "floor"),
            Bar("fresh\nallocation", "data", "fresh_80mb_ms", base="memcpy_80mb_ms", base_name="memcpy"),
            Bar("reused\nbuffer", "data", "reuse_80mb_ms", base="memcpy_80mb_ms", base_name="memcpy"),
        ]),
        Panel("re-send of a view, by size", "us", log=True, bars=[], expand="data:view_resend_us"),
    ]),
    Figure("map", "map over many elements vs a serial loop (lower is better)", [
        Panel("identity function, per element", "ns_per_elt", log=True, bars=[
            Bar("serial\nloop", "map", "serial_identity_ns_per_elt", "floor"),
            Bar("pool\nmap", "map", "map_identity_ns_per_elt", base="serial_identity_ns_per_elt",
                base_name="serial", mode="speedup"),
        ]),
        Panel("10 µs tasks, total", "ms", bars=[
            Bar("serial\nloop", "map", "serial_10us_ms", "floor"),
            Bar("pool\nmap", "map", "map_10us_ms", base="serial_10us_ms", base_name="serial",
                mode="speedup", ratio_key="map_10us_speedup"),
        ]),
    ]),
]


# ---------------------------------------------------------------------------------------------
# Results


class Results:
    def __init__(self, directory):
        self.dir = directory
        self.data = {}  # name -> dict
        self.mtime = {}  # name -> datetime (UTC)
        if not os.path.isdir(directory):
            return
        names = [f[:-5] for f in os.listdir(directory) if f.endswith(".json")]
        order = {n: i for i, n in enumerate(FILE_ORDER)}
        for name in sorted(names, key=lambda n: (order.get(n, len(order)), n)):
            path = os.path.join(directory, name + ".json")
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read().strip()
                obj = json.loads(text.splitlines()[-1]) if text else None
            except (OSError, ValueError, IndexError) as e:
                print(f"report: skipping {path}: {e}", file=sys.stderr)
                continue
            if not isinstance(obj, dict):
                print(f"report: skipping {path}: not a JSON object", file=sys.stderr)
                continue
            self.data[name] = obj
            self.mtime[name] = _dt.datetime.fromtimestamp(os.path.getmtime(path), _dt.timezone.utc)

    def get(self, file, key):
        v = self.data.get(file, {}).get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        return float(v)

    def expand(self, file, key):
        """A key that is a number, a dict {size: number} or several keys KEY_<size>: [(suffix, value)]."""
        obj = self.data.get(file, {})
        out = []
        v = obj.get(key)
        if isinstance(v, dict):
            out = [(str(k), float(x)) for k, x in v.items() if isinstance(x, (int, float))
                   and not isinstance(x, bool)]
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out = [("", float(v))]
        for k, x in obj.items():
            if k.startswith(key + "_") and isinstance(x, (int, float)) and not isinstance(x, bool):
                out.append((k[len(key) + 1:], float(x)))
        return sorted(out, key=lambda kv: size_order(kv[0]))

    def stamp(self, file):
        t = self.mtime.get(file)
        return t.strftime("%Y-%m-%d %H:%M UTC") if t else "?"

    def machine(self, file):
        return self.data.get(file, {}).get("machine") or MACHINE


def size_order(text):
    """Sort key for size suffixes: "64B" < "4kb" < "1MB" < "80_mb"; anything else after them."""
    m = re.fullmatch(r"\s*([\d.]+)[\s_]*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        return (1, 0.0, text)
    return (0, float(m.group(1)) * 1024 ** ("kmgt".find(m.group(2)) + 1 if m.group(2) else 0), text)


def size_label(text):
    m = re.fullmatch(r"\s*([\d.]+)[\s_]*([kmgt]?)(i?b?)\s*", text, re.I)
    if not m:
        return text.replace("_", " ")
    return f"{m.group(1)} {m.group(2).upper()}B".replace("  ", " ")


# ---------------------------------------------------------------------------------------------
# Formatting


def fmt_num(x, digits=3):
    """Three significant digits, no exponent: 0.268, 5.14, 13.3, 514, 38700."""
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    dec = max(0, digits - 1 - mag)
    return f"{x:,.{dec}f}".replace(",", " ") if abs(x) >= 10000 else f"{x:.{dec}f}"


def fmt_time_ns(ns):
    if ns < 1e3:
        return f"{fmt_num(ns)} ns"
    if ns < 1e6:
        return f"{fmt_num(ns / 1e3)} µs"
    if ns < 1e9:
        return f"{fmt_num(ns / 1e6)} ms"
    return f"{fmt_num(ns / 1e9)} s"


TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def fmt_value(x, unit):
    if unit in TO_NS:
        return fmt_time_ns(x * TO_NS[unit])
    if unit == "time":
        return fmt_time_ns(x)
    if unit == "per_s":
        if x >= 1e6:
            return f"{fmt_num(x / 1e6)} M/s"
        if x >= 1e3:
            return f"{fmt_num(x / 1e3)} k/s"
        return f"{fmt_num(x)} /s"
    if unit == "ns_per_elt":
        return f"{fmt_time_ns(x)}/elt"
    if unit == "x":
        return f"{fmt_num(x)}×"
    if unit == "count":
        return f"{x:.0f}"
    return fmt_num(x)


def guess_unit(key):
    for suffix, unit in (("_ns_per_elt", "ns_per_elt"), ("_ns", "ns"), ("_us", "us"), ("_ms", "ms"),
                         ("_per_s", "per_s"), ("_speedup", "x")):
        if key.endswith(suffix):
            return unit
    if "_vs_" in key:
        return "x"
    return ""


def ratio_of(res, file, value, base, mode, ratio_key):
    """The ratio to the baseline as (number, phrase), or None."""
    r = res.get(file, ratio_key) if ratio_key else None
    b = res.get(file, base) if base else None
    if r is None and b is not None and value:
        r = value / b if mode == "times" else b / value
    return r


def ratio_text(r, mode, base_name):
    if r is None:
        return ""
    if mode == "times":
        return f"{r:.2g}× {base_name}" if r < 10 else f"{r:.0f}× {base_name}"
    n = f"{r:.2g}" if r < 10 else f"{r:.0f}"
    if mode == "faster":
        return f"suiro {n}× faster"
    return f"{n}× speedup"


def short(x):
    """3 -> "3", 2.5 -> "2.5", 0.25 -> "0.25"."""
    return f"{x:g}"


def target_text(t, unit, base_name):
    op = {"<=": "≤", ">=": "≥"}[t.op]
    if t.on == "ratio":
        return f"{op} {short(t.number)}× {base_name}"
    x = t.number
    if unit == "per_s":
        return f"{op} {short(x / 1e6)} M/s" if x >= 1e6 else f"{op} {short(x)}/s"
    if unit in TO_NS:
        return f"{op} {short(x)} {'µs' if unit == 'us' else unit}"
    return f"{op} {short(x)}"


def target_met(t, value, ratio):
    x = ratio if t.on == "ratio" else value
    if x is None:
        return None
    return x <= t.number if t.op == "<=" else x >= t.number


# ---------------------------------------------------------------------------------------------
# The table


def table_rows(res):
    """[(label, suiro, baseline, target)] for every row with data, plus generic rows for new keys."""
    out, covered = [], set()
    for row in ROWS:
        bf = row.base_file or row.file
        for key in (row.key, row.base, row.ratio_key):
            if key:
                covered.add((row.file if key != row.base else bf, key))
        if row.expand:
            items = res.expand(row.file, row.key)
            for suffix, v in items:
                covered.add((row.file, row.key + ("_" + suffix if suffix else "")))
                label = f"{row.label}, {size_label(suffix)}" if suffix else row.label
                out.append((label, fmt_value(v, row.unit), "—", row.note or "—"))
            continue
        v = res.get(row.file, row.key)
        if v is None:
            continue
        b = res.get(bf, row.base) if row.base else None
        r = ratio_of(res, row.file, v, row.base, row.mode, row.ratio_key) if row.base else None
        if row.base and b is not None:
            if row.mode == "times":
                base_col = f"{ratio_text(r, row.mode, row.base_name)} ({row.base_name} {fmt_value(b, row.unit)})"
            else:
                base_col = f"{row.base_name} {fmt_value(b, row.unit)}: {ratio_text(r, row.mode, row.base_name)}"
        else:
            base_col = row.base_note or "—"
        if row.target:
            ok = target_met(row.target, v, r)
            mark = {True: " ✓", False: " ✗ missed", None: ""}[ok]
            tgt = "target " + target_text(row.target, row.unit, row.base_name) + mark
            if row.note:
                tgt += f"; {row.note}"
        else:
            tgt = row.note or "—"
        out.append((row.label, fmt_value(v, row.unit), base_col, tgt))
    # keys nobody described yet (of the files this table covers: python, r and mpi have their own
    # README sections and figures, written from their own results)
    for file, obj in res.data.items():
        if file not in TABLE_FILES:
            continue
        for key, v in obj.items():
            if key in IGNORED_KEYS or (file, key) in covered:
                continue
            if isinstance(v, dict):
                for sub, x in v.items():
                    if isinstance(x, (int, float)) and not isinstance(x, bool):
                        out.append((f"{file}: {key} [{sub}]", fmt_value(float(x), guess_unit(key)), "—", "—"))
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append((f"{file}: {key}", fmt_value(float(v), guess_unit(key)), "—", "—"))
    return out


def markdown(res, figures, figdir="bench/figures"):
    lines = ["| figure | suiro | baseline measured in the same run / ratio | target |",
             "|---|---|---|---|"]
    rows = table_rows(res)
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    if not rows:
        lines.append("| (no results yet: run `scripts/bench all`) | — | — | — |")
    lines.append("")
    srcs = []
    for name, obj in res.data.items():
        if name not in TABLE_FILES:
            continue
        rounds = obj.get("rounds")
        r = f", {rounds} rounds" if isinstance(rounds, int) else ""
        srcs.append(f"`{name}.json` ({res.stamp(name)}{r})")
    if srcs:
        lines.append(f"Medians on a {MACHINE}, from " + ", ".join(srcs) +
                     "; table and figures written by `scripts/report`.")
        lines.append("")
    for name, title in figures:
        lines.append(f"![{title}]({figdir}/{name}.png)")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# Figures

COLORS = {"floor": "#9a9a9a", "suiro": "#2b6cb0", "other": "#dd7a22"}
KIND_LABEL = {"floor": "baseline (same run)", "suiro": "suiro", "other": "other system (same run)"}


def panel_values(res, panel):
    """[(bar, value_in_panel_units, note, target_value)] for bars with data."""
    out = []
    bars = list(panel.bars)
    if panel.expand:
        file, key = panel.expand.split(":", 1)
        for suffix, v in res.expand(file, key):
            bars.append(Bar(size_label(suffix) if suffix else key.replace("_", " "), file,
                            key + ("_" + suffix if suffix else ""), "suiro"))
            bars[-1]._value = v
    for bar in bars:
        v = getattr(bar, "_value", None)
        if v is None:
            v = res.get(bar.file, bar.key)
        if v is None:
            continue
        note, tv = "", None
        r = ratio_of(res, bar.file, v, bar.base, bar.mode, bar.ratio_key) if bar.base else None
        if r is not None:
            note = ratio_text(r, bar.mode, bar.base_name)
        if bar.target:
            if bar.target.on == "ratio":
                b = res.get(bar.file, bar.base)
                tv = bar.target.number * b if b is not None else None
            else:
                tv = bar.target.number
        out.append((bar, v, note, tv))
    return out


def draw_figures(res, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "figure.titlesize": 13,
                         "axes.spines.top": False, "axes.spines.right": False})
    os.makedirs(outdir, exist_ok=True)
    made = []
    for fig_spec in FIGURES:
        panels = [(p, panel_values(res, p)) for p in fig_spec.panels]
        panels = [(p, vals) for p, vals in panels if vals]
        path = os.path.join(outdir, fig_spec.name + ".png")
        if not panels:
            continue
        widths = [max(2, len(vals)) for _, vals in panels]
        fig, axes = plt.subplots(1, len(panels), figsize=(max(6.5, 1.45 * sum(widths) + 1.5), 4.8),
                                 gridspec_kw={"width_ratios": widths}, squeeze=False)
        files, kinds = [], set()
        for ax, (panel, vals) in zip(axes[0], panels):
            draw_panel(ax, panel, vals)
            for bar, *_ in vals:
                kinds.add(bar.kind)
                if bar.file not in files:
                    files.append(bar.file)
        fig.suptitle(fig_spec.title, fontweight="bold")
        handles = [Patch(color=COLORS[k], label=KIND_LABEL[k]) for k in ("floor", "suiro", "other")
                   if k in kinds]
        if any(tv is not None for _, vals in panels for *_, tv in vals):
            from matplotlib.lines import Line2D
            handles.append(Line2D([], [], color="#c53030", ls="--", lw=1.6, label="target"))
        if len(handles) > 1:
            fig.legend(handles=handles, loc="upper right", ncol=len(handles), frameon=False,
                       bbox_to_anchor=(0.99, 0.935), fontsize=9)
        rounds = []
        for f in files:
            n = res.data.get(f, {}).get("rounds")
            rounds.append(f"{f}.json {res.stamp(f)}" + (f", medians of {n} rounds" if n else ""))
        machines = sorted({res.machine(f) for f in files})
        import textwrap
        foot = " · ".join(machines) + "  |  " + "; ".join(rounds)
        width_chars = int(fig.get_figwidth() * 17)  # about 17 characters of 8 pt text per inch
        foot_lines = textwrap.wrap(foot, width_chars)
        fig.text(0.01, 0.012, "\n".join(foot_lines), fontsize=8, color="#555555", ha="left",
                 va="bottom")
        fig.tight_layout(rect=(0, 0.015 + 0.03 * len(foot_lines), 1, 0.91))
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
        made.append((fig_spec.name, fig_spec.title))
    return made


def panel_scale(panel, vals):
    """(divisor, axis unit) so the bars read in one unit."""
    if panel.unit == "per_s":
        top = max(v for _, v, *_ in vals)
        return (1e6, "M tasks/s") if top >= 1e6 else ((1e3, "k tasks/s") if top >= 1e3 else (1, "tasks/s"))
    if panel.unit in ("time", "ns_per_elt"):
        return 1, "ns" if panel.unit == "time" else "ns per element"
    return 1, {"us": "µs", "ms": "ms"}.get(panel.unit, panel.unit)


def draw_panel(ax, panel, vals):
    from matplotlib.ticker import FuncFormatter
    from matplotlib.transforms import blended_transform_factory

    div, unit = panel_scale(panel, vals)
    xs = range(len(vals))
    ys = [v / div for _, v, *_ in vals]
    ax.bar(xs, ys, width=0.62, color=[COLORS[b.kind] for b, *_ in vals], zorder=2)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([b.label for b, *_ in vals])
    ax.set_xlim(-0.6, len(vals) - 0.4)
    ax.set_title(panel.title)
    ax.grid(axis="y", color="#e2e2e2", zorder=0, which="major")
    tvs = [tv / div for *_, tv in vals if tv is not None]
    top = max(ys + tvs)
    timeish = panel.unit in ("time", "ns_per_elt")
    if panel.log:
        ax.set_yscale("log")
        ax.set_ylim(10 ** math.floor(math.log10(min(ys)) - 0.15), top * 4)
        ax.yaxis.set_major_formatter(FuncFormatter(
            lambda y, _: fmt_time_ns(y).replace(".00 ", " ").replace(".0 ", " ") if timeish
            else short(y)))
        ax.set_ylabel(("median, log scale" if timeish else unit + ", log scale")
                      + (" (per element)" if panel.unit == "ns_per_elt" else ""))
    else:
        ax.set_ylim(0, top * 1.2)
        ax.set_ylabel(unit)
    # Positions in axes fractions, so labels can dodge the target lines on any scale.
    to_frac = lambda y: (ax.transScale + ax.transLimits).transform((0, y))[1]
    xy = blended_transform_factory(ax.transData, ax.transAxes)
    for i, (bar, v, note, tv) in enumerate(vals):
        text = fmt_value(v, "ns" if timeish else panel.unit)
        if panel.unit == "ns_per_elt":
            text = fmt_time_ns(v)
        label = text + (f"\n{note}" if note else "")
        need = 0.075 * (2 if note else 1)
        yf = to_frac(v / div) + 0.012
        tf = to_frac(tv / div) if tv is not None else None
        if tf is not None and tf - 0.015 <= yf + need and yf <= tf + 0.065:
            yf = tf + 0.07  # the target line and its text would cross the label: lift the label
        ax.text(i, yf, label, transform=xy, ha="center", va="bottom", fontsize=9, fontweight="bold",
                color="#222222", zorder=4, linespacing=1.15)
        if tv is not None:
            ax.hlines(tv / div, i - 0.42, i + 0.42, colors="#c53030", linestyles="--", lw=1.6, zorder=3)
            tt = "target " + target_text(bar.target, {"time": "ns"}.get(panel.unit, panel.unit),
                                         bar.base_name)
            ax.text(i, tf + 0.008, tt, transform=xy, ha="center", va="bottom", fontsize=8,
                    color="#c53030", zorder=4,
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85))


# ---------------------------------------------------------------------------------------------
# README


def rewrite_readme(path, block):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new_block = f"{BEGIN}\n{block.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        a = text.index(BEGIN)
        b = text.index(END, a) + len(END)
        out = text[:a] + new_block + text[b:]
    else:
        # First run: the table right under "## Benchmarks" becomes the marked block.
        lines = text.split("\n")
        try:
            h = next(i for i, l in enumerate(lines) if l.strip() == "## Benchmarks")
        except StopIteration:
            raise SystemExit(f"report: {path} has neither {BEGIN} markers nor a '## Benchmarks' section")
        end_sec = next((i for i in range(h + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        t0 = next((i for i in range(h + 1, end_sec) if lines[i].lstrip().startswith("|")), None)
        if t0 is None:  # no table: put the block at the end of the section
            t0 = t1 = end_sec
            while t0 > h + 1 and not lines[t0 - 1].strip():
                t0 -= 1
            t1 = t0
            lines[t0:t1] = ["", new_block]
        else:
            t1 = t0
            while t1 < end_sec and lines[t1].lstrip().startswith("|"):
                t1 += 1
            lines[t0:t1] = [new_block]
        out = "\n".join(lines)
    if out != text:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(out)
        return True
    return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--figures", default=os.path.join(ROOT, "bench", "figures"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    ap.add_argument("--no-figures", action="store_true", help="skip the PNGs (and their links)")
    ap.add_argument("--print", action="store_true", help="print the markdown block to stdout")
    args = ap.parse_args(argv)

    res = Results(args.results)
    if not res.data:
        print(f"report: no results in {args.results} (run scripts/bench all)", file=sys.stderr)
    figures = []
    if not args.no_figures:
        try:
            figures = draw_figures(res, args.figures)
        except ImportError as e:
            print(f"report: no figures ({e}); install python3-matplotlib (scripts/setup)", file=sys.stderr)
    figdir = os.path.relpath(os.path.abspath(args.figures),
                             os.path.dirname(os.path.abspath(args.readme))).replace(os.sep, "/")
    block = markdown(res, figures, figdir)
    if args.print:
        sys.stdout.write(block)
    for name, _ in figures:
        print(f"report: wrote {os.path.relpath(os.path.join(args.figures, name + '.png'), ROOT)}",
              file=sys.stderr)
    if not args.no_readme:
        changed = rewrite_readme(args.readme, block)
        print(f"report: {os.path.relpath(args.readme, ROOT)} "
              f"{'updated' if changed else 'unchanged'} between the bench markers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
