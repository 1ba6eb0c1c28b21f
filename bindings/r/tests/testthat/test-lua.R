# R and Lua, both ways: an R host with Lua workers (call specs, "module.fn" names, maps), and a
# Lua host with R workers (suiro.call { "stats::quantile", ... }), values unchanged both ways.

lua_pool <- function(workers = 1, env = parent.frame()) {
  local_pool(workers = workers, launcher = suiro_lua(exe = lua_exe()), env = env)
}

# A data frame with every column kind, NA in each.
every_kind_frame <- function() {
  df <- data.frame(
    lgl = c(TRUE, NA, FALSE),
    int = c(1L, NA, -3L),
    dbl = c(1.5, NA, -Inf),
    chr = c("a", NA, "h\u00e9"),
    cplx = c(1 + 2i, NA, 0 - 1i),
    fct = factor(c("lo", NA, "hi"), levels = c("lo", "hi")),
    ord = factor(c("s", "l", NA), levels = c("s", "m", "l"), ordered = TRUE),
    date = as.Date(c("2024-01-01", NA, "1969-12-31")),
    when = as.POSIXct(c("2024-01-01 12:00:00", NA, "1970-01-01 00:00:01"), tz = "UTC"),
    stringsAsFactors = FALSE)
  # integer64 (bit64's layout; data.frame() itself needs bit64 loaded to take it)
  df$big <- structure(c(i64_bits("9007199254740993"), i64_bits("na"), i64_bits("-7")), class = "integer64")
  df
}

test_that("an R host runs call specs and names on Lua workers", {
  lp <- lua_pool()
  expect_identical(suiro_collect(suiro_submit(lp, "string.rep", "ab", 3L), timeout = 10), "ababab")
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return a + b", a = 1, b = 2)), timeout = 10), 3)
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call("string.format", "%d-%s", 7L, "x")), timeout = 10), "7-x")
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return #t", t = list(1, 2, 3))), timeout = 10), 3L)
  got <- suiro_collect(suiro_submit(lp, suiro_call(.source = "return { n = #xs, first = xs[1] }", xs = c(5, 6, 7))), timeout = 10)
  expect_identical(got, list(first = 5, n = 3L))
})

test_that("a Lua function's several results come back as a list, none as NULL", {
  lp <- lua_pool()
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return 1, 2, 'x'")), timeout = 10),
                   list(1L, 2L, "x")) # Lua integers arrive as R integers
  expect_identical(suiro_collect(suiro_submit(lp, "string.byte", "abc", 1L, 3L), timeout = 10), list(97L, 98L, 99L))
  expect_null(suiro_collect(suiro_submit(lp, suiro_call(.source = "return")), timeout = 10))
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return 7.5")), timeout = 10), 7.5)
})

test_that("R values cross to Lua and come back unchanged", {
  lp <- lua_pool()
  vals <- list(NULL, TRUE, NA, 1L, 2.5, "x", c("a", NA), c(1.5, NA, NaN), c(1L, NA), c(TRUE, NA),
               as.raw(0:3), list(a = 1, b = list(c = "d")), list(), factor(c("x", NA, "y")),
               as.Date("2020-02-29"), matrix(as.numeric(1:6), 2, 3), complex(real = 1, imaginary = -1))
  for (v in vals) {
    back <- suiro_collect(suiro_submit(lp, suiro_call(.source = "return v", v = v)), timeout = 10)
    expect_identical(back, v)
  }
  big <- as.numeric(seq_len(200000))
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return x:sum()", x = big)), timeout = 10), sum(big))
  back <- suiro_collect(suiro_submit(lp, suiro_call(.source = "return x", x = big)), timeout = 10)
  expect_true(suiro_is_view(back))
  expect_identical(back, big)
})

test_that("a data frame with every column kind and NA in each crosses R -> Lua -> R unchanged", {
  lp <- lua_pool()
  df <- every_kind_frame()
  back <- suiro_collect(suiro_submit(lp, suiro_call(.source = "return df", df = df)), timeout = 10)
  expect_identical(back, df)
  # row names that are not automatic travel as a column and come back as row names
  rn <- data.frame(x = 1:3, row.names = c("a", "b", "c"))
  expect_identical(suiro_collect(suiro_submit(lp, suiro_call(.source = "return df", df = rn)), timeout = 10), rn)
  # a large frame: numeric columns by reference
  n <- 50000
  lg <- data.frame(x = as.numeric(seq_len(n)), k = seq_len(n), f = factor(rep(c("a", "b"), n / 2)))
  back <- suiro_collect(suiro_submit(lp, suiro_call(.source = "return df", df = lg)), timeout = 10)
  expect_identical(back, lg)
  expect_true(suiro_is_view(back$x))
})

test_that("Lua workers map over R vectors with a function name", {
  lp <- lua_pool(workers = 2)
  expect_identical(suiro_collect(suiro_map(lp, c(1, 4, 9), "math.sqrt", .template = numeric(1))), c(1, 2, 3))
  expect_identical(suiro_collect(suiro_map(lp, list("a", "bc"), "string.upper")), list("A", "BC"))
  expect_error(suiro_map(lp, 1:3, function(x) x), "lua workers map a \"module.fn\" name")
})

test_that("what Lua cannot take is refused at send time, naming the part", {
  lp <- lua_pool()
  expect_error(suiro_submit(lp, function(x) x, 1), "lua workers cannot run an R function")
  expect_error(suiro_submit(lp, "string.rep", x = "a", n = 2), "named arguments to lua workers need a call spec")
  expect_error(suiro_submit(lp, suiro_call(.source = "return v", v = c(a = 1))),
               "argument 'v': a named double vector cannot be sent to lua workers")
  expect_error(suiro_submit(lp, suiro_call(.source = "return v", v = list(1, new.env()))),
               "argument 'v'\\[\\[2\\]\\]: an environment cannot be sent to lua workers")
  expect_error(suiro_submit(lp, suiro_call(.source = "return v", v = y ~ x)), "a formula cannot be sent to lua workers")
  expect_error(suiro_submit(lp, suiro_call(.source = "return v", v = function() 1)), "a function cannot be sent to lua workers")
  err <- tryCatch(suiro_collect(suiro_submit(lp, suiro_call(.source = "error('boom')")), timeout = 10), error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_identical(err$remote_class, "remote")
  expect_match(conditionMessage(err), "boom")
})

test_that("a Lua host runs R workers: call specs, values, frames, errors", {
  root <- need_root()
  exe <- lua_exe()
  script <- tempfile(fileext = ".lua")
  writeLines(c(
    'local suiro = require "suiro"',
    'local r <close> = suiro.pool { workers = 1, launcher = suiro.r {} }',
    'local x = suiro.f64 { 1, 2, 3, 4 }',
    'local q = r:submit(suiro.call { "stats::quantile", x, probs = suiro.f64 { .25, .5, .75 }, names = false }):collect(30)',
    'print("quantile", q[1], q[2], q[3])',
    'print("mean", r:submit(suiro.call { source = "mean(x)", x = x }):collect(30))',
    'print("int", math.type(r:submit(suiro.call { "base::sum", 1, 2 }):collect(30)))',
    'local f = r:submit(suiro.call { source = "aggregate(mpg ~ cyl, data = mtcars, FUN = mean)" }):collect(30)',
    'print("frame", f:nrow(), f.cyl[1], f.cyl[3], string.format("%.5f", f.mpg[1]))',
    'local ok, err = pcall(function() return r:submit(suiro.call { source = "stop(\'nope\')" }):collect(30) end)',
    'print("error", err.class, err.message)',
    'local ok2, err2 = pcall(function() return r:submit(suiro.call { "stats::quantile", x }):collect(30) end)',
    'print("named", err2.message)',
    'local big = suiro.array("f64", 100000)',
    'for i = 1, #big do big[i] = i end',
    'print("big", r:submit(suiro.call { "base::sum", big }):collect(30))',
    'local back = r:submit(suiro.call { "base::identity", big }):collect(30)',
    'print("back", #back, back[100000])',
    'local df = suiro.frame { { "a", suiro.i32 { 1, 2 } }, { "s", suiro.strings { "x", suiro.NA } } }',
    'local df2 = r:submit(suiro.call { "base::identity", df }):collect(30)',
    'print("df", suiro.wire.encode(df) == suiro.wire.encode(df2))'
  ), script)
  out <- system2(exe, c("run", script), stdout = TRUE, stderr = TRUE,
                 env = c(paste0("SUIRO_R_LIBS=", file.path(root, "build", "R-lib")), rscript_path_env()))
  expect_identical(attr(out, "status"), NULL, label = paste(out, collapse = "\n"))
  expect_true("quantile\t1.75\t2.5\t3.25" %in% out, label = paste(out, collapse = "\n"))
  expect_true("mean\t2.5" %in% out)
  expect_true("int\tinteger" %in% out)
  expect_true("frame\t3\t4.0\t8.0\t26.66364" %in% out)
  expect_true(any(grepl("^error\tsimpleError\tnope$", out)), label = paste(out, collapse = "\n"))
  expect_true(any(grepl("^named\t.*a named double vector cannot be sent", out)), label = paste(out, collapse = "\n"))
  expect_true("big\t5000050000.0" %in% out, label = paste(out, collapse = "\n"))
  expect_true("back\t100000\t100000.0" %in% out, label = paste(out, collapse = "\n"))
  expect_true("df\ttrue" %in% out, label = paste(out, collapse = "\n"))
})

test_that("R-serialized payloads from Lua workers are refused, naming them", {
  lp <- lua_pool()
  src <- paste("local s = require('suiro')",
               "return s.wire.func { lang = 'r', key = 0, name = 'base::unserialize', captured = { b } }")
  err <- tryCatch(suiro_collect(suiro_submit(lp, suiro_call(.source = src, b = serialize(c(1, 2), NULL))),
                                timeout = 10), error = identity)
  expect_s3_class(err, "error")
  expect_match(conditionMessage(err), "from lua workers is refused")
  # attributes (the structure() wrapper) and functions by name are R forms too
  src2 <- "return require('suiro').wire.func { lang = 'r', key = 0, name = 'base::structure', captured = { 1, { class = 'foo' } } }"
  expect_error(suiro_collect(suiro_submit(lp, suiro_call(.source = src2)), timeout = 10), "from lua workers is refused")
  ts <- suiro_submit_batch(lp, suiro_call(.source = src2), list(list(), list()))
  expect_error(suiro_collect_all(ts, timeout = 10), "from lua workers is refused")
  # the pool serves on
  expect_identical(suiro_collect(suiro_submit(lp, "string.rep", "ab", 2L), timeout = 10), "abab")
})
