# R and Python, both ways: an R host with Python workers (call specs, pandas, numpy views), a
# Python host with R workers; the seeds' two interop examples as printed there.

py_worker <- function() {
  s <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(s)) {
    root <- need_root()
    s <- file.path(root, "bindings", "python", "suiro", "_worker.py")
  }
  if (!file.exists(s)) {
    if (nzchar(Sys.getenv("SUIRO_ROOT"))) stop("no Python worker at ", s, " (run scripts/build)")
    skip("no Python face built")
  }
  s
}

py_pool <- function(workers = 1, env = parent.frame()) {
  script <- py_worker()
  local_pool(workers = workers, launcher = suiro_python(argv = c("/usr/bin/python3", "-I", script)), env = env)
}

test_that("repeated names are refused by name for other languages, kept between R processes", {
  py <- py_pool()
  expect_error(suiro_submit(py, suiro_call(.source = "x", x = list(a = 1, a = 2, 3))),
               "argument 'x': names repeat \\(element 2 is named \"a\" again\\): python workers take names as dict keys")
  expect_error(suiro_submit(py, suiro_call(.source = "x", x = list(a = 1, 2, 3))), "element 3 is named \"\" again")
  expect_identical(suiro_collect(suiro_submit(py, suiro_call(.source = "x", x = list(a = 1, 2))), timeout = 30),
                   list(a = 1, 2))
  rp <- local_pool(workers = 1)
  x <- list(a = 1, a = 2, 3)
  expect_identical(suiro_collect(suiro_submit(rp, identity, x), timeout = 30), x)
})

test_that("a string marked bytes that is not UTF-8 is refused by name; UTF-8 ones cross", {
  py <- py_pool()
  x <- "caf\xe9"
  Encoding(x) <- "bytes"
  expect_error(suiro_submit(py, suiro_call(.source = "s", s = c("a", x))),
               "argument 's': element 2 is a string marked \"bytes\" that is not UTF-8 text, which python workers cannot read")
  y <- "ab\u00e9"
  Encoding(y) <- "bytes" # the bytes of UTF-8 text: they cross as text
  expect_identical(suiro_collect(suiro_submit(py, suiro_call(.source = "s", s = y)), timeout = 30), "ab\u00e9")
  rp <- local_pool(workers = 1) # between R processes the mark itself crosses
  back <- suiro_collect(suiro_submit(rp, identity, x), timeout = 30)
  expect_identical(back, x)
  expect_identical(Encoding(back), "bytes")
})

test_that("an R host's mtcars is summarised by Python workers with pandas (the seed's example)", {
  p <- py_pool(workers = 2)
  t <- suiro_submit(p, suiro_call(.source = "x.to_pandas().groupby('cyl')['mpg'].mean().reset_index()", x = mtcars))
  got <- suiro_collect(t, timeout = 60)
  expect_s3_class(got, "data.frame")
  expect_identical(names(got), c("cyl", "mpg"))
  expect_equal(got$cyl, c(4, 6, 8))
  expect_equal(got$mpg, as.vector(tapply(mtcars$mpg, mtcars$cyl, mean)), tolerance = 1e-12)
  expect_output(print(got), "1   4 26.66364\n2   6 19.74286\n3   8 15.10000", fixed = TRUE)
})

test_that("numpy call specs, views both ways, errors with the Python class", {
  p <- py_pool()
  expect_identical(suiro_collect(suiro_submit(p, suiro_call("numpy.mean", c(1, 2, 3, 10))), timeout = 30), 4)
  x <- as.numeric(seq_len(100000))
  expect_equal(suiro_collect(suiro_submit(p, suiro_call(.source = "import numpy as np\nnp.std(x)", x = x)), timeout = 30),
               sqrt(mean((x - mean(x))^2)))
  twice <- suiro_collect(suiro_submit(p, suiro_call(.source = "x * 2", x = x)), timeout = 30)
  expect_true(suiro_is_view(twice))
  expect_identical(twice, x * 2)
  back <- suiro_collect(suiro_submit(p, suiro_call(.source = "x", x = twice)), timeout = 30)
  expect_identical(back, x * 2)
  err <- tryCatch(suiro_collect(suiro_submit(p, suiro_call(.source = "1 / 0")), timeout = 30), error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_identical(err$remote_class, "ZeroDivisionError")
  expect_match(err$traceback, "ZeroDivisionError")
  expect_error(suiro_submit(p, function(x) x, 1), "python workers cannot run an R function")
  expect_error(suiro_submit(p, suiro_call("numpy.mean", c(a = 1))), "named double vector cannot be sent to python workers")
})

test_that("a data frame with every column kind and NA in each crosses R -> Python -> R unchanged", {
  p <- py_pool()
  df <- data.frame(
    lgl = c(TRUE, NA, FALSE), int = c(1L, NA, -3L), dbl = c(1.5, NA, -Inf), chr = c("a", NA, "h\u00e9"),
    cplx = c(1 + 2i, NA, 0 - 1i), fct = factor(c("lo", NA, "hi"), levels = c("lo", "hi")),
    ord = factor(c("s", "l", NA), levels = c("s", "m", "l"), ordered = TRUE),
    date = as.Date(c("2024-01-01", NA, "1969-12-31")),
    when = as.POSIXct(c("2024-01-01 12:00:00", NA, "1970-01-01 00:00:01"), tz = "UTC"),
    stringsAsFactors = FALSE)
  df$big <- structure(c(i64_bits("9007199254740993"), i64_bits("na"), i64_bits("-7")), class = "integer64")
  back <- suiro_collect(suiro_submit(p, suiro_call(.source = "df", df = df)), timeout = 30)
  expect_identical(back, df)
  # and through pandas, the values (pandas has no complex NA or integer64 NA of its own)
  rn <- data.frame(x = c(0.5, 1.5), row.names = c("a", "b"))
  expect_identical(suiro_collect(suiro_submit(p, suiro_call(.source = "df", df = rn)), timeout = 30), rn)
})

test_that("a Python host gets aggregate(mpg ~ cyl, data = mtcars, FUN = mean) from R workers", {
  root <- need_root()
  py_worker()
  script <- tempfile(fileext = ".py")
  writeLines(c(
    "import os, suiro",
    "launcher = suiro.r(exe='Rscript', argv=['Rscript', '--vanilla', '--default-packages=NULL', '-e', 'suiro:::worker_main()'],",
    "                   env={'R_LIBS': os.environ['SUIRO_R_LIBS'], 'LANG': 'C.UTF-8'})",
    "with suiro.pool(1, launcher=launcher) as pool:",
    "    task = pool.submit(suiro.call(source='aggregate(mpg ~ cyl, data = mtcars, FUN = mean)'))",
    "    df = task.collect(timeout=60).to_pandas()",
    "    print(type(df).__name__, df.shape)",
    "    print(df.to_string())",
    "    import numpy as np",
    "    q = pool.submit(suiro.call('stats::quantile', np.array([1.0, 2, 3, 4]), probs=np.array([.25, .5, .75]), names=False)).collect(timeout=60)",
    "    print('quantile', list(q))",
    "    try:",
    "        pool.submit(suiro.call(source=\"stop('nope')\")).collect(timeout=60)",
    "    except Exception as e:",
    "        print('error', type(e).__name__, e)"), script)
  out <- system2("/usr/bin/python3", script, stdout = TRUE, stderr = TRUE,
                 env = c(paste0("PYTHONPATH=", file.path(root, "bindings", "python")),
                         paste0("SUIRO_R_LIBS=", file.path(root, "build", "R-lib")), rscript_path_env()))
  txt <- paste(out, collapse = "\n")
  expect_identical(attr(out, "status"), NULL, label = txt)
  expect_true("DataFrame (3, 2)" %in% out, label = txt)
  expect_match(txt, "0  4.0  26.663636\n1  6.0  19.742857\n2  8.0  15.100000", fixed = TRUE)
  expect_true("quantile [1.75, 2.5, 3.25]" %in% out, label = txt)
  expect_match(txt, "error RemoteError .*nope")
})

# issue 18 item 8: a Date column came back POSIXct through pandas (to_pandas gives datetime64[ns])
test_that("a data frame's Date columns come back Dates through pandas", {
  pp <- py_pool()
  d <- data.frame(d = as.Date(c("2024-01-02", NA, "1960-03-04")), v = 1:3)
  back <- suiro_collect(suiro_submit(pp, suiro_call(.source = "x.to_pandas()", x = d)), timeout = 60)
  expect_identical(back, d)
  kept <- suiro_collect(suiro_submit(pp, suiro_call(.source = "y = x.to_pandas()\ny[y.v > 1]", x = d)), timeout = 60)
  expect_s3_class(kept$d, "Date")
  expect_identical(kept$d, d$d[2:3])
  # changed to times of day: timestamps, as any datetime64 column
  moved <- suiro_collect(suiro_submit(pp, suiro_call(
    .source = "import pandas as pd\ny = x.to_pandas()\ny['d'] = y['d'] + pd.Timedelta(hours=1)\ny", x = d)), timeout = 60)
  expect_s3_class(moved$d, "POSIXct")
})
