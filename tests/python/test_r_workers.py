"""A Python host on R workers started by the default launcher, suiro.r(): the R package's worker
main under Rscript, found in the checkout's build/R-lib (scripts/build installs it there)."""
import numpy as np
import pytest

import suiro


@pytest.fixture(scope="module")
def rpool():
    with suiro.pool(workers=1, launcher=suiro.r(), timeout=60) as p:
        yield p


def test_call_specs_by_name_and_source(rpool):
    q = rpool.submit(suiro.call("stats::quantile", np.array([1.0, 2.0, 3.0, 10.0]),
                                probs=np.array([0.25, 0.5, 0.75]), names=False)).collect(timeout=60)
    assert isinstance(q, np.ndarray) and q.tolist() == [1.75, 2.5, 4.75]
    assert rpool.submit(suiro.call(source="mean(v)", v=np.array([1.0, 2.0, 3.0, 10.0]))).collect(timeout=60) == 4.0


def test_an_r_data_frame_arrives_as_a_frame(rpool):
    f = rpool.submit(suiro.call(source="aggregate(mpg ~ cyl, data = mtcars, FUN = mean)")).collect(timeout=60)
    df = f.to_pandas()
    assert list(df.columns) == ["cyl", "mpg"]
    assert df["cyl"].tolist() == [4.0, 6.0, 8.0]
    assert np.allclose(df["mpg"].to_numpy(), [26.663636, 19.742857, 15.1])


def test_r_errors_carry_their_class(rpool):
    with pytest.raises(suiro.RemoteError) as e:
        rpool.submit(suiro.call(source="stop('bad thing')")).collect(timeout=60)
    assert e.value.remote_class == "simpleError" and e.value.message == "bad thing"
    assert rpool.submit(suiro.call(source="1 + 1")).collect(timeout=60) == 2  # and the pool serves on


def test_a_missing_rscript_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"R workers need Rscript \(/nonexistent/Rscript not found"):
        suiro.pool(workers=1, launcher=suiro.r(rscript="/nonexistent/Rscript"))


def test_a_python_worker_passes_shared_arrays_to_its_own_r_pool():
    # a worker's own pools share its family's trust: the array (80 KB, a shared region) and the
    # 4 KB string go down, R's results come back up through the Python worker, twice
    import pyfuncs
    n = 10000
    with suiro.pool(workers=1, timeout=120) as p:
        out, y = p.submit(pyfuncs.via_r_pool, n).collect(timeout=120)
    want = float(n * (n - 1) / 2 + n)
    assert out == [(want, 4097), (want, 4097)]
    assert isinstance(y, np.ndarray) and y[0] == 1.0 and y[-1] == float(n)
