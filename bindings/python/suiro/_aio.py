"""asyncio: `await task`, `await m`, `async for i, v in pool.map(..., stream=True)`.

Each (event loop, pool) pair has one watcher on the pool's eventfd (loop.add_reader), so a burst
of completions is one wake-up and nothing polls while tasks run. The protocol is the engine's
(suiro_pool_event_ack): arm the eventfd, check what is ready, then wait; on a wake-up acknowledge
(which drains and re-arms), then check again. Inside a worker there is no eventfd: awaiting there
checks every millisecond.
"""

import asyncio
import weakref

_watchers = weakref.WeakKeyDictionary()  # loop -> {pool: _Watcher}
_by_pool = weakref.WeakKeyDictionary()   # pool -> WeakSet of _Watcher (each loop's watcher of it)
_stats = {"wakeups": 0}


def stats():
    """Counters for tests: wake-ups of the watchers so far."""
    return dict(_stats)


class _Watcher:
    def __init__(self, loop, pool):
        self.loop = loop
        self.pool = pool
        self.tasks = {}  # task -> [future, ...]
        self.maps = {}   # core map -> [future, ...]
        self.fd = -1

    def _arm(self):
        fd = self.pool._eventfd()
        if fd >= 0 and self.fd < 0:
            self.fd = fd
            self.loop.add_reader(fd, self._wake)
        return fd

    def _disarm(self):
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.fd = -1

    def add_task(self, task, fut):
        self.tasks.setdefault(task, []).append(fut)
        if self._arm() < 0:
            self.loop.call_later(0.001, self._check)
        self._check()

    def add_map(self, m, fut):
        self.maps.setdefault(m, []).append(fut)
        if self._arm() < 0:
            self.loop.call_later(0.001, self._check)
        self._check()

    def _wake(self):
        _stats["wakeups"] += 1
        if self.pool.closed:
            self._fail_all()
            return
        self.pool._event_ack()
        self._check()

    def _fail_all(self):
        from ._errors import PoolClosed

        for futs in list(self.tasks.values()) + list(self.maps.values()):
            for f in futs:
                if not f.done():
                    f.set_exception(PoolClosed("the pool was stopped while awaited"))
        self.tasks.clear()
        self.maps.clear()
        self._disarm()
        self._forget()

    def _forget(self):
        """Idle: out of the registries (a watcher holds its loop and pool; kept, it would keep
        them alive for good)."""
        per_loop = _watchers.get(self.loop)
        if per_loop is not None and per_loop.get(self.pool) is self:
            del per_loop[self.pool]
            if not per_loop:
                _watchers.pop(self.loop, None)
        ws = _by_pool.get(self.pool)
        if ws is not None:
            ws.discard(self)

    def _check(self):
        if self.pool.closed:
            self._fail_all()
            return
        if self.tasks:
            tasks = list(self.tasks)
            for i in self.pool._ready(tasks):
                t = tasks[i]
                futs = self.tasks.pop(t)
                try:
                    v = t.collect(0)
                except BaseException as e:  # the task's own error goes to its awaiters
                    for f in futs:
                        if not f.done():
                            f.set_exception(e)
                else:
                    for f in futs:
                        if not f.done():
                            f.set_result(v)
        for m in [m for m in self.maps if not m.running or m._wait(0)]:
            for f in self.maps.pop(m):
                if not f.done():
                    f.set_result(None)
        if not self.tasks and not self.maps:
            self._disarm()
            self._forget()
        elif self.fd < 0:
            self.loop.call_later(0.001, self._check)


def _watcher(pool):
    loop = asyncio.get_running_loop()
    per_loop = _watchers.get(loop)
    if per_loop is None:
        per_loop = _watchers[loop] = {}
    w = per_loop.get(pool)
    if w is None:
        w = per_loop[pool] = _Watcher(loop, pool)
        _by_pool.setdefault(pool, weakref.WeakSet()).add(w)
    return w


def pool_stopping(pool):
    """Pool.stop() calls this before the engine closes the pool's eventfd: each loop's watcher of
    the pool stops watching the descriptor and fails its awaiters with PoolClosed (in its loop's
    thread; at once when that is this thread, so the reader is gone before the descriptor is)."""
    ws = _by_pool.pop(pool, None)
    if not ws:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    for w in list(ws):
        if w.loop is running:
            w._fail_all()
        elif not w.loop.is_closed():
            try:
                w.loop.call_soon_threadsafe(w._fail_all)
            except RuntimeError:  # closed meanwhile
                pass


async def await_task(task):
    if task._state != 0:
        return task.collect(0)
    fut = asyncio.get_running_loop().create_future()
    _watcher(task.pool).add_task(task, fut)
    return await fut


async def _map_finished(m):
    core = m._m
    if not core.running or core._wait(0):
        return
    fut = asyncio.get_running_loop().create_future()
    _watcher(core.pool).add_map(core, fut)
    await fut


async def await_map(m):
    await _map_finished(m)
    return m.collect(0)


class aiter_map:
    """async for i, v in pool.map(f, xs, stream=True): elements as they finish (index order for
    maps without stream)."""

    def __init__(self, m):
        self.m = m
        self.pending = iter(())
        self.done = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        m = self.m
        core = m._m
        while True:
            for item in self.pending:
                return item
            if self.done:
                raise StopAsyncIteration
            if not m._stream:
                await _map_finished(m)
                self.pending = iter(list(enumerate(m.collect(0))))
                self.done = True
                continue
            r = core._next_range()
            if r is not None:
                self.pending = iter([(i, core._element(i)) for i in range(r[0], r[1])])
                continue
            if not core.running or core._wait(0):
                r = core._next_range()
                if r is not None:
                    self.pending = iter([(i, core._element(i)) for i in range(r[0], r[1])])
                    continue
                try:
                    core._results()  # raises the failure, if any
                finally:
                    core._free()
                self.done = True
                continue
            # ranges finish without an event of their own: wake on the runners' events, and
            # look again after a short while
            try:
                await asyncio.wait_for(_map_finished(m), 0.005)
            except asyncio.TimeoutError:
                pass
