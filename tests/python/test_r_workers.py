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


def test_scalars_whose_arrays_cross_go_as_one_element_vectors(rpool):
    # complex, datetime, date, numpy datetime64, pandas Timestamp and NA: R's scalars are vectors
    import datetime
    import zoneinfo
    import pandas as pd
    src = "paste(class(x)[1], format(x, usetz = inherits(x, 'POSIXct')))"
    cases = [
        (1 + 2j, "complex 1+2i"),
        (np.complex128(3 - 1j), "complex 3-1i"),
        (datetime.date(2024, 1, 2), "Date 2024-01-02"),
        (datetime.datetime(2024, 1, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), "POSIXct 2024-01-01 12:00:00 CET"),
        (pd.Timestamp("2024-01-01 12:00", tz="UTC"), "POSIXct 2024-01-01 12:00:00 UTC"),
        (pd.NA, "logical NA"),
    ]
    for v, want in cases:
        assert rpool.submit(suiro.call(source=src, x=v)).collect(timeout=60) == want, v
    assert rpool.submit(suiro.call(source="as.numeric(x)", x=np.datetime64("2024-01-01T00:00:00"))).collect(
        timeout=60) == 1704067200.0
    fixed = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    with pytest.raises(TypeError, match="a datetime with a fixed UTC offset has no time zone name"):
        rpool.submit(suiro.call(source="x", x=fixed))
