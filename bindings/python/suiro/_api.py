"""suiro's Python API: pools, launchers, maps, config scripts."""

import collections.abc as _abc
import os
import sys

from . import _core, _values

__all__ = ["Pool", "Map", "PreparedMap", "Launcher", "pool", "python", "lua", "r", "open", "current_pool",
           "Pools"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _lua_dir():
    """Where suiro/parse.lua and suiro/config.lua are: copies in the package (made at build time),
    else the checkout's engine/conf/ (the config readers' home)."""
    d = os.path.join(_HERE, "lua")
    if os.path.exists(os.path.join(d, "suiro", "config.lua")):
        return d
    d = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "engine", "conf"))
    if os.path.exists(os.path.join(d, "suiro", "config.lua")):
        return d
    raise RuntimeError("suiro: the Lua readers (suiro/config.lua, parse.lua) are missing from the package; "
                       "rebuild it (scripts/build, or pip install bindings/python)")


def worker_script():
    """The Python worker's entry script (python3 -I <this> --suiro-worker TOKEN)."""
    return os.path.join(_HERE, "_worker.py")


def _checkout(*parts):
    """A path in the checkout this package sits in (bindings/python/suiro), or None."""
    return os.path.normpath(os.path.join(_HERE, "..", "..", "..", *parts))


def _host_info(kind, pool_env):
    """What this host knows of itself for suiro.config.launch, which builds every kind's worker
    command by the one rule of all hosts (the launcher's options, then SUIRO_WORKER_EXE,
    SUIRO_PY_WORKER, SUIRO_R_LIBS, then these, then what is installed)."""
    h = {"lang": "python", "pool_env": pool_env or {}}
    if kind == "python":
        exe = sys.executable
        if exe and os.path.isfile(exe) and os.access(exe, os.X_OK):
            h["python"] = exe
        h["py_worker"] = worker_script()
        paths = [os.getcwd() if p == "" else p for p in sys.path]
        h["pythonpath"] = os.pathsep.join(p for p in paths if p)
        h["cwd"] = os.getcwd()
    elif kind == "lua":
        exe = _checkout("build", "bin", "suiro")
        if os.access(exe, os.X_OK):
            h["worker_exe"] = exe
    elif kind == "r":
        lib = _checkout("build", "R-lib")
        if os.path.isfile(os.path.join(lib, "suiro", "DESCRIPTION")):
            h["r_libs"] = lib
    return h


class Launcher:
    """How a pool's workers start: suiro.python(...), suiro.lua(...), suiro.r(...)."""

    __slots__ = ("kind", "opts")

    def __init__(self, kind, **opts):
        self.kind = kind
        self.opts = {k: v for k, v in opts.items() if v is not None}

    def _wire(self):
        d = {"kind": self.kind}
        d.update(self.opts)
        return d

    def __repr__(self):
        return "suiro.%s(%s)" % (self.kind, ", ".join("%s=%r" % kv for kv in self.opts.items()))


def python(python=None, *, env=None, exe=None, argv=None):
    """Python workers (the default): `python` is the interpreter (default: this one)."""
    return Launcher("python", python=python, env=env, exe=exe, argv=argv)


def lua(*, exe=None, argv=None, env=None):
    """Lua workers: the suiro binary of the checkout (or exe=)."""
    return Launcher("lua", exe=exe, argv=argv, env=env)


def r(rscript=None, *, env=None, exe=None, argv=None):
    """R workers (need suiro's R binding)."""
    return Launcher("r", rscript=rscript, env=env, exe=exe, argv=argv)


def _launcher_wire(l, where):
    if l is None:
        return {"kind": "python"}
    if isinstance(l, Launcher):
        return l._wire()
    if isinstance(l, str):
        return {"kind": l} if l in ("python", "lua", "r") else l
    if isinstance(l, dict):
        return l
    raise TypeError("%s: launcher must be suiro.python(), suiro.lua(), suiro.r() or \"python\"/\"lua\"/\"r\", "
                    "got %s" % (where, type(l).__name__))


_POOL_KEYS = ("workers", "max_workers", "timeout", "start_timeout", "env", "respawn", "ring_cap", "slot_size",
              "result_slots", "result_size", "name", "backend")


def _normalise(opts, where):
    """Pool options checked and normalised by the Lua face's suiro.config (the same messages)."""
    try:
        return _core.embed_pool_options(opts, where)
    except ValueError as e:
        raise ValueError(str(e)) from None


def _start(o, where, p=None):
    mpi = o.get("backend") == "mpi" and not _core.in_worker()  # pools inside workers are local
    node = None
    if mpi:
        from . import _cluster

        node = _cluster.enter(where)  # ranks 1.. of an MPI job serve here and exit
    l = o["launcher"]
    kind = l["kind"]
    try:
        cmd = _core.embed_launch(kind, l, _host_info(kind, o.get("env")))
    except RuntimeError as e:
        raise RuntimeError("%s: %s" % (where, e)) from None
    exe, argv, env = cmd["exe"], cmd.get("argv"), cmd["env"]
    # the normalised options with the worker command, read and checked by the engine
    # (suiro_pool_create_from); the launcher stays out: its argv list would go as a back-reference
    kw = {k: v for k, v in o.items() if k != "launcher"}
    kw.update(exe=exe, argv=list(argv) if argv else None, env=env, lang=kind)
    if node is not None:
        env["SUIRO_MPI_RANK"], env["SUIRO_MPI_HOST"] = "0", node
    if p is None:
        p = Pool.__new__(Pool)
    _core.Pool.__init__(p, kw)
    p._launcher = kind
    if mpi:
        _cluster.attach(p, kw, where)
    return p


def pool(workers=None, *, launcher=None, **options):
    """A pool of worker processes (Python workers unless launcher= says otherwise).

        with suiro.pool(workers=4) as p:
            p.submit(pow, 2, 16).collect(timeout=5)          # 65536

    Options (as in Lua config scripts): workers, max_workers, launcher, timeout, start_timeout
    ("10s" or seconds), env (dict), respawn, ring_cap, slot_size, result_slots, result_size, name.
    """
    return _start(_pool_options(workers, launcher, options, "suiro.pool"), "suiro.pool")


def _pool_options(workers, launcher, options, where):
    for k in options:
        if k not in _POOL_KEYS:
            raise TypeError("%s: unknown option %r (options: %s)" % (where, k, ", ".join(("launcher",) + _POOL_KEYS)))
    opts = {k: v for k, v in options.items() if v is not None}
    if workers is not None:
        opts["workers"] = workers
    opts["launcher"] = _launcher_wire(launcher, where)
    if "env" in opts and not isinstance(opts["env"], dict):
        raise TypeError("%s: env must be a dict of str, got %s" % (where, type(opts["env"]).__name__))
    return _normalise(opts, where)


class Pool(_core.Pool):
    """A pool of worker processes. Make one with suiro.pool(); use it as a context manager."""

    _launcher = "python"
    _cluster = None  # backend = "mpi" inside an MPI job: the pool on every node (suiro._cluster)

    def __init__(self, workers=None, *, launcher=None, **options):
        # suiro.Pool(...) is suiro.pool(...): the options checked, the launcher's command built
        # (the engine's own constructor alone started workers with no command)
        _start(_pool_options(workers, launcher, options, "suiro.Pool"), "suiro.Pool", self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __reduce__(self):
        # pickling a function that captured its pool fails here, with the way out
        raise TypeError("a suiro pool cannot be sent to a worker (inside a task, suiro.current_pool() is "
                        "the worker's own pool)")

    def close(self, timeout=5.0):
        self.stop(timeout)

    def stop(self, /, timeout=None):
        """Stops the workers (waiting up to timeout seconds, 5 by default, for them to end).
        Tasks and maps awaited in an event loop raise PoolClosed."""
        aio = sys.modules.get("suiro._aio")
        if aio is not None and not self.closed:
            aio.pool_stopping(self)  # before the engine closes the eventfd the loops watch
        if self._cluster is not None:
            self._cluster.close()
        _core.Pool.stop(self, 5.0 if timeout is None else timeout)

    def status(self):
        """Workers and totals; with backend = "mpi" also nodes: one dict per node of the job
        (rank, node, pid, cpus, workers), rank 0 first."""
        st = _core.Pool.status(self)
        if self._cluster is not None:
            st["nodes"] = self._cluster.nodes()
            st["backend"] = "mpi"
        return st

    def __repr__(self):
        if self.closed:
            return "<suiro.Pool stopped>"
        return "<suiro.Pool %s (%s workers)>" % (self.name, self.lang)

    def map(self, fn, xs, *, template=None, seed=None, progress=False, stream=False, timeout=None):
        """Maps fn over xs on the pool; returns a Map (collect() it, or iterate it).

        xs: a range, a 1-d numpy array, a list; template: "f64", "i32[3]", "{mean: f64, n: i64}"
        (results in typed arrays), else a list of values; seed: per-element random streams
        (suiro.random); stream=True: iterate (index, value) as elements finish.
        """
        timeout = _check_map_opts(progress, timeout, "map")
        if self._cluster is not None:  # backend = "mpi": dealt out over every node
            m = self._cluster.map(self, fn, xs, template, seed, bool(stream))
            return Map(m, progress, timeout, bool(stream))
        m = self._map_new(fn, xs, template=template, seed=seed, stream=bool(stream))
        return Map(m, progress, timeout, bool(stream))

    def map_prepare(self, fn, xs, *, template=None, seed=None, progress=False, timeout=None):
        """Stages fn and xs once; pm.run() runs the map (again), pm.run(new_xs) over a new input
        of the same type and length."""
        timeout = _check_map_opts(progress, timeout, "map_prepare")
        m = self._map_new(fn, xs, template=template, seed=seed, stream=False, prepare=True)
        return PreparedMap(m, progress, timeout)

    def executor(self):
        """A concurrent.futures.Executor over this pool (the pool stays open at shutdown)."""
        from ._executor import PoolExecutor

        return PoolExecutor(pool=self)


def _seconds(v, verb):
    """A timeout argument in seconds, or None for forever: a number >= 0 or a duration string
    ("250ms", "2s", "1m30s", "inf"), the rule of the Lua and R faces."""
    if v is None:
        return None
    if isinstance(v, str):
        try:
            t = _core.duration(v)
        except ValueError as e:
            raise ValueError("%s: timeout: %s" % (verb, e)) from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        t = float(v)
    else:
        raise TypeError("%s: timeout must be a number of seconds, a duration such as \"250ms\", or None, got %s"
                        % (verb, type(v).__name__))
    if t != t or t < 0:
        raise ValueError("%s: timeout must be >= 0 seconds or None, got %r" % (verb, v))
    return float("inf") if t >= 1e12 else t  # inf: forever, whatever the default


def _check_map_opts(progress, timeout, verb):
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError("%s: progress must be True or a function(done, n), got %s" % (verb, type(progress).__name__))
    return _seconds(timeout, verb)


_GRACE = 1.0  # seconds a cancelled map's elements in flight get before their workers are killed


def _end_later(core, grace, free):
    """In a thread of its own: waits up to grace for a cancelled run to end, then kills the workers
    still running it (an element stuck in a loop never looks at the cancel flag); frees the map
    when asked (nobody else holds it)."""
    def run():
        try:
            if core.running and not core._wait(grace):
                core.kill()
                core._wait(30)
        except Exception:
            pass  # freed or its pool stopped meanwhile: nothing left to stop
        if free:
            try:
                core._free()
            except Exception:
                pass

    import threading

    threading.Thread(target=run, name="suiro-map-cancel", daemon=True).start()


class Map:
    """A running map: collect(timeout=None) for the results, iterate for (index, value) pairs
    (as they finish when stream=True), await it in asyncio, cancel() it."""

    def __init__(self, core, progress, timeout, stream):
        self._m = core
        self._progress = progress
        self._timeout = timeout
        self._stream = stream
        self._t0 = _core.now()
        self._last_draw = 0.0
        self._results = None
        self._collected = False

    @property
    def n(self):
        return self._m.n

    def __len__(self):
        return self._m.n

    def done(self):
        return not self._m.running or self._m._wait(0)

    def progress(self):
        """(elements finished, elements)"""
        return (self._m._done(), self._m.n)

    def cancel(self, grace=_GRACE):
        """Stops the run: no element starts any more; elements in flight get `grace` seconds to
        end, then the workers still running them are killed and replaced (an element stuck in a
        loop is stopped too). collect() then raises CancelledError. Does not wait."""
        m = self._m
        if not m.running or m.pool.closed:
            return
        m.cancel()
        if grace is not None and not m._wait(0):
            _end_later(m, grace, False)

    def kill(self):
        """Kills the workers running the map now (they are replaced); collect() then raises
        CancelledError."""
        m = self._m
        if m.running and not m.pool.closed:
            m.kill()

    def _draw(self, final):
        p = self._progress
        if not p:
            return
        done, n = self._m._done(), self._m.n
        if callable(p) and not isinstance(p, bool):
            p(done, n)
            return
        if not sys.stderr.isatty():
            return
        now = _core.now()
        if not final and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        el = now - self._t0
        rate = done / el if el > 0 else 0
        frac = done / n if n else 1
        bar = "#" * int(frac * 30) + "-" * (30 - int(frac * 30))
        if final:
            sys.stderr.write("\r[%s] %3.0f%% %d/%d in %.1fs (%.0f/s)\033[K\n" % (bar, frac * 100, done, n, el, rate))
        else:
            eta = (n - done) / rate if rate > 0 else 0.0
            sys.stderr.write("\r[%s] %3.0f%% %d/%d %.0f/s ETA %.1fs\033[K" % (bar, frac * 100, done, n, rate, eta))
        sys.stderr.flush()

    def _finish(self, timeout):
        """Waits for the run; TimeoutError (the map keeps running) when it has not ended."""
        timeout = _seconds(timeout, "collect")
        if timeout is None:
            timeout = self._timeout
        if timeout is None:
            timeout = self._m.pool.timeout  # the pool's timeout, as in Lua
        deadline = None if timeout is None or timeout == float("inf") else _core.now() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - _core.now())
            slice_ = left
            if self._progress:
                slice_ = 0.1 if left is None else min(0.1, left)
            if self._m._wait(slice_):
                break
            self._draw(False)
            if deadline is not None and _core.now() >= deadline:
                raise TimeoutError("map: not done after %g s" % timeout)
        self._draw(True)

    def collect(self, timeout=None):
        """The results: a numpy array (or suiro.Frame for a record template) with a template,
        else a list; raises the first failing element's error (its .index says which)."""
        if self._collected:
            return self._results
        self._finish(timeout)
        try:
            self._results = self._m._results()
        finally:
            self._collected = True
            self._m._free()
        return self._results

    result = collect

    def __iter__(self):
        if not self._stream:
            res = self.collect()
            if isinstance(res, _values.Frame):
                res = [dict(zip(res.names, row)) for row in zip(*res.columns)]
            return iter(enumerate(res))
        return self._stream_iter()

    def _stream_iter(self):
        m = self._m
        try:
            while True:
                r = m._next_range()
                if r is not None:
                    for i in range(r[0], r[1]):
                        yield i, m._element(i)
                    continue
                if not m.running:
                    r = m._next_range()
                    if r is not None:
                        for i in range(r[0], r[1]):
                            yield i, m._element(i)
                        continue
                    m._results()  # raises the failure, if any
                    return
                m._wait(0.001)
                self._draw(False)
        finally:
            self._collected = True
            m._free()

    def __await__(self):
        from ._aio import await_map

        return await_map(self).__await__()

    def __aiter__(self):
        from ._aio import aiter_map

        return aiter_map(self)


class PreparedMap(Map):
    """A staged map: run() runs it and returns its results; run(new_xs) swaps the input first."""

    def __init__(self, core, progress, timeout):
        super().__init__(core, progress, timeout, False)

    def run(self, new_xs=None, timeout=None):
        self._m._start(new_xs)
        self._t0 = _core.now()
        self._finish(timeout)
        return self._m._results()

    def collect(self, timeout=None):
        self._finish(timeout)
        return self._m._results()

    def close(self):
        self._m._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def current_pool():
    """Inside a worker: its own pool, for nested tasks and maps (waiting on them runs other
    work meanwhile, so nesting never deadlocks). None in a host."""
    return _core.current_pool()


class Pools(_abc.Mapping):
    """The pools of a config script, a read-only mapping of names to pools: each is created on
    first use (pools.name or pools["name"]); `in`, len(), keys() and iteration give the names
    without starting anything; all are stopped by close() or at the end of a with block."""

    def __init__(self, path, specs):
        self._path = path
        self._specs = specs
        self._made = {}

    def names(self):
        return sorted(self._specs)

    def __iter__(self):
        return iter(self.names())

    def __len__(self):
        return len(self._specs)

    def __contains__(self, name):
        return name in self._specs

    def __repr__(self):
        return "<suiro.Pools of %s: %s>" % (self._path, ", ".join(self.names()))

    def __getitem__(self, name):
        p = self._made.get(name)
        if p is not None:
            return p
        o = self._specs.get(name)
        if o is None:
            raise KeyError('no pool "%s" in %s (pools: %s)' % (name, self._path, ", ".join(sorted(self._specs))))
        where = '%s: pool "%s"' % (self._path, name)
        try:
            p = _start(o, where)
        except Exception as e:  # the file and pool named once
            raise type(e)(str(e) if str(e).startswith(where) else "%s: %s" % (where, e)) from None
        self._made[name] = p
        return p

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(e.args[0]) from None

    def options(self, name):
        """The normalised options of a pool (as the Lua face reads them)."""
        return dict(self._specs[name])

    def close(self):
        for p in reversed(list(self._made.values())):
            p.stop()
        self._made.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open(path):
    """The pools of a Lua config script, read with the Lua face's own reader (the same files,
    checks and messages): suiro.open("pools.lua").parse.submit(...)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("suiro.open: argument 1 must be a file name, got %s" % type(path).__name__)
    try:
        specs = _core.embed_config(os.fspath(path))
    except ValueError as e:
        raise ValueError("suiro.open: %s" % e) from None
    return Pools(os.fspath(path), specs)
