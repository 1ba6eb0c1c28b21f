"""How failures travel: a Python worker's exception re-raises as its own type with the remote
traceback as __cause__; what cannot be rebuilt, and failures of Lua workers, raise RemoteError."""

import pytest

import suiro
import pyfuncs


@pytest.mark.parametrize("kind,exc", [("value", ValueError), ("key", KeyError), ("zero", ZeroDivisionError),
                                      ("type", TypeError), ("runtime", RuntimeError), ("my", pyfuncs.MyError)])
def test_original_exception_type(pool, kind, exc):
    with pytest.raises(exc) as e:
        pool.submit(pyfuncs.raise_, kind, "boom").collect(timeout=5)
    err = e.value
    if kind != "zero":
        assert err.args == ("boom",)
    cause = err.__cause__
    assert isinstance(cause, suiro.RemoteTraceback)
    assert "raise_" in cause.tb and "pyfuncs.py" in cause.tb  # the worker's frames
    assert err.remote_traceback == cause.tb


def test_deep_traceback_lists_every_frame(pool):
    with pytest.raises(ValueError, match="at the bottom") as e:
        pool.submit(pyfuncs.deep_raise, 5).collect(timeout=5)
    assert e.value.__cause__.tb.count("deep_raise") >= 6


def test_exception_travels_whole_between_python_processes(pool):
    with pytest.raises(pyfuncs.TwoArgError) as e:
        pool.submit(pyfuncs.raise_, "two", "x").collect(timeout=5)
    assert e.value.args == ("x", 2)  # args of any kind, as pickled
    assert "TwoArgError" in e.value.__cause__.tb and "suiro-pickle" not in e.value.__cause__.tb


def test_exception_that_cannot_be_rebuilt(pool):
    with pytest.raises(suiro.RemoteError) as e:
        pool.submit(pyfuncs.raise_, "local", "x").collect(timeout=5)
    assert e.value.remote_class == "pyfuncs.raise_.<locals>.LocalError"
    assert e.value.message == "x" and e.value.index is None
    assert "LocalError" in e.value.traceback


def test_lambda_exception(pool):
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).collect(timeout=5)


def test_collect_any_raises_the_task_error(pool):
    t = [pool.submit(pyfuncs.raise_, "value", "any")]
    with pytest.raises(ValueError, match="any"):
        pool.collect_any(t, timeout=5)


def test_map_element_error_has_index(pool):
    def f(x):
        if x == 7:
            raise ValueError("seven")
        return x

    with pytest.raises(ValueError, match="seven") as e:
        pool.map(f, range(20)).collect(timeout=10)
    assert e.value.index == 7


def test_template_mismatch_names_element(pool):
    with pytest.raises(ValueError, match="element 3: template i32 cannot hold 3000000000") as e:
        pool.map(lambda x: 3000000000 if x == 3 else x, range(10), template="i32").collect(timeout=10)
    assert e.value.index == 3


def test_unpicklable_result_fails_the_task(pool):
    with pytest.raises(TypeError, match="task result: result: generator cannot be sent"):
        pool.submit(lambda: (i for i in range(3))).collect(timeout=5)
    assert pool.submit(pyfuncs.identity, 1).collect(timeout=5) == 1  # the worker is fine


def test_remote_error_is_a_value_too():
    e = suiro.RemoteError("msg", "simpleError", "tb", 3)
    assert suiro.wire.decode(suiro.wire.encode(e)).__reduce__() == e.__reduce__()


@pytest.mark.parametrize("name", ["not a name!", "os.", "", "a..b"])
def test_a_bad_function_name_is_refused_at_submit(pool, name):
    # refused by the grammar every face uses, before anything is sent; the pool serves on
    with pytest.raises(ValueError, match=r'^submit: argument 1: bad function reference'):
        pool.submit(name)
    with pytest.raises(ValueError, match=r'^map: function: bad function reference'):
        pool.map(name, [1])
    assert pool.submit("operator.add", 1, 2).collect(timeout=10) == 3


def test_a_bad_function_name_is_refused_for_lua_workers():
    with suiro.pool(workers=1, launcher=suiro.lua()) as p:
        with pytest.raises(ValueError, match=r'^submit: argument 1: bad function reference "not a name!"'):
            p.submit("not a name!", 1)
        assert p.submit("string.rep", "a", 2).collect(timeout=10) == "aa"


def test_pool_class_called_directly_is_suiro_pool():
    # the engine's constructor alone started workers with no command
    with suiro.Pool(1) as p:
        assert p.lang == "python" and p.submit(pow, 2, 5).collect(timeout=10) == 32
    with pytest.raises(TypeError, match="suiro.Pool: unknown option 'bogus'"):
        suiro.Pool(bogus=1)


def test_error_paths_are_separated_and_say_why():
    with suiro.pool(workers=1, launcher=suiro.lua()) as p:
        with pytest.raises(TypeError, match=r"^submit: argument 1, keyword argument 'v': set cannot be sent"):
            p.submit(suiro.call(source="return v", v={1, 2}))
        with pytest.raises(TypeError, match=r"^submit: argument 2\[1\]: set cannot be sent"):
            p.submit("string.rep", [1, {2}])
    with suiro.pool(workers=1) as p:
        # a lambda capturing its pool: the reason is in the message, with the way out
        with pytest.raises(TypeError, match=r"cannot be sent: a suiro pool cannot be sent to a worker .*current_pool"):
            p.submit(lambda: p.status())
        assert p.submit(pow, 2, 2).collect(timeout=10) == 4


def test_a_pool_stopped_during_collect_says_so():
    # the stop comes from another thread while collect waits; the message must not be a stale
    # engine error of an earlier wait slice ("collect: timed out")
    import threading
    import time
    p = suiro.pool(workers=1)
    t = p.submit(time.sleep, 30)
    stopper = threading.Timer(0.3, p.stop)
    stopper.start()
    try:
        with pytest.raises(suiro.PoolClosed) as e:
            t.collect(timeout=20)
        assert "timed out" not in str(e.value) and "stop" in str(e.value)
    finally:
        stopper.join(10)
        p.stop()
