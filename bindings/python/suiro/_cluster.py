"""backend = "mpi" for Python hosts (docs/python.md): the same script on every node of an MPI job.

    mpirun -np 3 python3 script.py      # rank 0 runs the script; ranks 1 and 2 serve

Every rank runs the script up to its first suiro.pool(backend="mpi"); there ranks 1..K-1 serve
(C only: the serving loop of engine/cluster starts the pools from the worker command rank 0
sends) and exit when rank 0 ends the job, so only rank 0 runs the rest. Maps are dealt out in
ranges over every node, rank 0's local pool included; tasks (submit, submit_batch) run on rank
0's local pool. Outside mpirun (or with one rank) the pool is the local pool, one node.

The tier is build/lib/suiro/cluster.so (engine/include/suiro_cluster.h), loaded only here.
"""

import os
import shutil
import sys

from . import _core

_job = None  # (rank, size, node) once MPI is up


def in_job():
    """True inside a job started by Open MPI's mpirun with more than one rank."""
    try:
        return int(os.environ.get("OMPI_COMM_WORLD_SIZE", "")) > 1
    except ValueError:
        return False


def library_path():
    """SUIRO_CLUSTER_SO, the checkout's build/lib/suiro/cluster.so, or the one installed with the
    suiro command on PATH (lib/lua/5.4/suiro/cluster.so of its prefix or rock tree); None when
    none is there."""
    env = os.environ.get("SUIRO_CLUSTER_SO")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.path.join(here, "..", "..", "..", "build", "lib", "suiro", "cluster.so")]
    exe = shutil.which("suiro")
    if exe:  # a checkout's build/bin/suiro, or an installed one (scripts/install, the rock)
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
        places += [os.path.join(prefix, "lib", "suiro", "cluster.so"),
                   os.path.join(prefix, "lib", "lua", "5.4", "suiro", "cluster.so")]
    for p in places:
        if os.path.isfile(p):
            return os.path.normpath(p)
    return None


def _node_name():
    try:
        with open("/proc/sys/kernel/hostname") as f:
            return f.read().strip() or "localhost"
    except OSError:
        return "localhost"


def enter(where):
    """Brings MPI up inside a job (once). Ranks 1.. serve here until rank 0 ends the job, then
    the process exits with the rank's status. Returns this node's name on rank 0."""
    global _job
    if not in_job():
        return _node_name()
    if _job is None:
        path = library_path()
        if path is None:
            raise RuntimeError('%s: backend "mpi": the cluster library is not built (no build/lib/suiro/cluster.so): '
                               'install openmpi-bin and libopenmpi-dev (scripts/setup) and run scripts/build, or set '
                               'SUIRO_CLUSTER_SO' % where)
        _core._cluster_load(path)
        _job = _core._cluster_start()
    rank, _, node = _job
    if rank != 0:
        code = _core._cluster_serve()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return node


def attach(p, kw, where):
    """Makes p (rank 0's local pool) the pool of every node: the serving ranks start the same
    pool from the resolved command (exe, argv, env, sizes)."""
    c = ClusterPool(p)
    if _job is not None and _job[1] > 1:
        spec = {k: kw[k] for k in ("workers", "max_workers", "ring_cap", "slot_size", "result_slots", "result_size",
                                   "respawn", "start_timeout") if kw.get(k) is not None}
        spec["exe"] = kw["exe"]
        if kw.get("argv"):  # else the engine's default command line, as for the local pool
            spec["argv"] = list(kw["argv"])
        spec["env"] = {str(k): str(v) for k, v in kw["env"].items()}
        try:
            c._x = _core._cluster_pool(p, _core.wire_encode(spec), float(kw.get("start_timeout") or 10))
        except BaseException:
            _core.Pool.stop(p, 5.0)
            raise
    p._cluster = c


class ClusterPool:
    """The nodes of an MPI pool (rank 0's side)."""

    def __init__(self, pool):
        self._pool = pool
        self._x = None

    def close(self):
        if self._x is not None:
            _core._cluster_pool_close(self._x)
            self._x = None

    def nodes(self):
        if self._x is None:
            st = _core.Pool.status(self._pool)
            return [{"rank": 0, "node": _node_name(), "pid": os.getpid(), "cpus": len(os.sched_getaffinity(0)),
                     "workers": len(st.get("workers", ()))}]
        return _core._cluster_nodes(self._x)

    def map(self, pool, fn, xs, template, seed, stream):
        if self._x is None:
            return pool._map_new(fn, xs, template=template, seed=seed, stream=stream)
        staged = pool._map_new(fn, xs, template=template, seed=seed, stream=False, prepare=True)
        try:
            x = _core._cluster_map(self._x, pool, staged, seed is not None, 0 if seed is None else seed % 2**64, stream)
        finally:
            staged._free()
        return _MapCore(pool, x, staged.n)


class _MapCore:
    """What suiro.Map drives (the interface of _core.Map) for a map dealt out over the nodes."""

    def __init__(self, pool, x, n):
        self.pool = pool
        self.n = n
        self._x = x
        self.running = True
        self._res = None
        self._gave = False

    def _wait(self, timeout):
        if not self.running:
            return True
        deadline = None if timeout is None else _core.now() + timeout
        while True:
            left = 0.1 if deadline is None else min(0.1, max(0.0, deadline - _core.now()))
            r = _core._cluster_map_wait(self.pool, self._x, left)
            if r != 0:
                self.running = False
                if r < 0:
                    from ._errors import PoolClosed

                    raise PoolClosed("map: its pool was stopped")
                return True
            if deadline is not None and _core.now() >= deadline:
                return False

    def _done(self):
        return _core._cluster_map_done(self._x) if self._x is not None else self.n

    def _results(self):
        if self._res is None:
            self._res = _core._cluster_map_results(self.pool, self._x)
        return self._res

    def _next_range(self):  # streaming: every element once the map ended
        if self.running or self._gave:
            return None
        self._gave = True
        self._results()
        return (0, self.n)

    def _element(self, i):
        r = self._results()
        if hasattr(r, "columns") and hasattr(r, "names"):
            return {k: col[i] for k, col in zip(r.names, r.columns)}
        return r[i]

    def cancel(self):
        if self.running:
            _core._cluster_map_cancel(self.pool, self._x)

    def kill(self):
        self.cancel()

    def _free(self):
        self._x = None
