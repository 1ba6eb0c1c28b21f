"""CPython's own executor test suite (Lib/test/test_concurrent_futures.py, from Debian's
libpython3.11-testsuite) run against suiro.PoolExecutor.

The suite's test classes are built here from its mixins, with PoolExecutor as the executor, the
way the suite builds its ThreadPool/ProcessPool variants. A few tests are adapted, each for a
stated reason:
  - tests that start a subprocess with `from concurrent.futures import <executor>` import
    suiro.PoolExecutor instead;
  - a dead worker fails only the futures it was running (the issue's contract), where
    ProcessPoolExecutor breaks the whole pool: test_killed_child checks that;
  - errors while reading a task or a result are the task's own error, raised precisely
    (UnpicklingError, SystemExit), where ProcessPoolExecutor breaks the pool.
Not run (they test ProcessPoolExecutor's insides or multiprocessing objects that only child
processes of multiprocessing can share): ProcessPoolShutdownTest (_call_queue, executor
manager internals), test_saturation and test_ressources_gced_in_workers (multiprocessing
Semaphore/Manager objects sent to workers), test_idle_process_reuse_* (workers start with the
pool, not on demand), the ThreadPool-only tests.
"""

import importlib
import os
import pickle
import sys
import time

from suiro._executor import PoolExecutor

cf_test = importlib.import_module("test.test_concurrent_futures")  # libpython3.11-testsuite
from concurrent.futures.process import BrokenProcessPool  # noqa: E402
from test.support.script_helper import assert_python_ok  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYPATH = os.pathsep.join([os.path.join(ROOT, "bindings", "python")] + [p for p in sys.path if p])


class SuiroMixin(cf_test.ExecutorMixin):
    executor_type = PoolExecutor


def make(name, *bases, **attrs):
    cls = type(name, bases + (SuiroMixin, cf_test.BaseTestCase), attrs)
    cls.__module__ = __name__
    globals()[name] = cls
    return cls


def run_subprocess(code):
    return assert_python_ok("-c", code, __isolated=False, PYTHONPATH=PYPATH)


make("SuiroInitializerTest", cf_test.InitializerMixin)
make("SuiroFailingInitializerTest", cf_test.FailingInitializerMixin)


class ShutdownAdapted(cf_test.ExecutorShutdownTest):
    def test_interpreter_shutdown(self):
        rc, out, err = run_subprocess("""if 1:
            from suiro import PoolExecutor
            from test.test_concurrent_futures import sleep_and_print
            if __name__ == "__main__":
                t = PoolExecutor(5)
                t.submit(sleep_and_print, 1.0, "apple")
            """)
        self.assertFalse(err)
        self.assertEqual(out.strip(), b"apple")

    def test_submit_after_interpreter_shutdown(self):
        rc, out, err = run_subprocess("""if 1:
            import atexit
            @atexit.register
            def run_last():
                try:
                    t.submit(id, None)
                except RuntimeError:
                    print("runtime-error")
                    raise
            from suiro import PoolExecutor
            if __name__ == "__main__":
                t = PoolExecutor(5)
                t.submit(id, 42).result()
            """)
        self.assertIn("RuntimeError: cannot schedule new futures", err.decode())
        self.assertEqual(out.strip(), b"runtime-error")

    def test_hang_gh83386(self):
        rc, out, err = run_subprocess("""if True:
            from suiro import PoolExecutor
            from test.test_concurrent_futures import sleep_and_print
            if __name__ == "__main__":
                t = PoolExecutor(max_workers=3)
                t.submit(sleep_and_print, 1.0, "apple")
                t.shutdown(wait=False)
            """)
        self.assertFalse(err)
        self.assertEqual(out.strip(), b"apple")


make("SuiroShutdownTest", ShutdownAdapted)
make("SuiroWaitTest", cf_test.WaitTests)
make("SuiroAsCompletedTest", cf_test.AsCompletedTests)


class ExecutorAdapted(cf_test.ExecutorTest):
    """ExecutorTest, plus ProcessPoolExecutorTest's tests that apply to any process pool."""

    test_map_chunksize = cf_test.ProcessPoolExecutorTest.test_map_chunksize
    _test_traceback = cf_test.ProcessPoolExecutorTest._test_traceback
    test_traceback = cf_test.ProcessPoolExecutorTest.test_traceback
    test_max_tasks_early_shutdown = cf_test.ProcessPoolExecutorTest.test_max_tasks_early_shutdown
    test_max_tasks_per_child = cf_test.ProcessPoolExecutorTest.test_max_tasks_per_child
    test_max_tasks_per_child_defaults_to_spawn_context = \
        cf_test.ProcessPoolExecutorTest.test_max_tasks_per_child_defaults_to_spawn_context

    def get_context(self):
        import multiprocessing

        return multiprocessing.get_context("spawn")

    def test_killed_child(self):
        # Only the future the dead worker was running fails; the pool goes on.
        fs = [self.executor.submit(time.sleep, 3)]
        deadline = time.monotonic() + 10
        while not any(w["state"] == "busy" for w in self.executor.pool.status()["workers"]):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        busy = [w["pid"] for w in self.executor.pool.status()["workers"] if w["state"] == "busy"]
        self.executor._processes[busy[0]].terminate()
        for fut in fs:
            self.assertRaises(BrokenProcessPool, fut.result, 10)
        self.assertEqual(self.executor.submit(pow, 2, 8).result(10), 256)


make("SuiroExecutorTest", ExecutorAdapted)


class DeadlockAdapted(cf_test.ExecutorDeadlockTest):
    def get_context(self):
        import multiprocessing

        return multiprocessing.get_context("spawn")

    # a task or result that cannot be read is that task's own error here, raised precisely
    def test_error_at_task_unpickle(self):
        self._check_crash(pickle.UnpicklingError, id, cf_test.ErrorAtUnpickle())

    def test_error_during_result_unpickle_in_result_handler(self):
        self._check_crash(pickle.UnpicklingError, cf_test._return_instance, cf_test.ErrorAtUnpickle,
                          ignore_stderr=True)

    def test_exit_during_result_unpickle_in_result_handler(self):
        self._check_crash(SystemExit, cf_test._return_instance, cf_test.ExitAtUnpickle)


make("SuiroDeadlockTest", DeadlockAdapted)


class SuiroFutureTests(cf_test.FutureTests):
    """The Future tests of the suite (PoolExecutor returns these very Futures)."""
