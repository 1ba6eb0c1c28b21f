# The type matrix, R -> Python -> R (issue 18, acceptance 2): every wire type and every documented
# mapping of an R host's values, sent to a Python worker that passes each on to an R pool of its
# own (started inside the worker once: a nested pool across languages, item 9; the worker's code
# is tests/matrix/matrix_relay.py) and returns what came back. Each value has one expected
# outcome: "exact" (identical(), doubles compared bit for bit: -0, NaN payloads), the documented
# change (the value that comes back is given), or a refusal whose message names the path.
# docs/wire-format.md's "What crosses: the type matrix" (R -> Python -> R) is this file's table.

matrix_route <- "R \u2192 Python \u2192 R"

f64_bits <- function(hex) readBin(rev(as.raw(strtoi(substring(hex, seq(1, 15, 2), seq(2, 16, 2)), 16L))), "double")
i64 <- function(...) structure(vapply(c(...), i64_bits, 0, USE.NAMES = FALSE), class = "integer64")

exact <- list(kind = "exact")
changed <- function(value, note) list(kind = "changed", value = value, note = note)
refused <- function(pattern, note) list(kind = "refused", pattern = pattern, note = note)

nest <- function(depth) {
  v <- 1
  for (i in seq_len(depth)) v <- list(v)
  v
}

matrix_values <- function() {
  V <- list()
  add <- function(name, cls, value, outcome = exact)
    V[[length(V) + 1L]] <<- list(name = name, cls = cls, value = value, outcome = outcome)
  big <- 40000L # elements: 320 KB of doubles, above the 256 KiB channel floor and the 32 KiB pool floor
  big_dbl <- seq_len(big) / 3
  utc <- function(s) as.POSIXct(s, tz = "UTC")

  # NULL, logicals
  add("NULL", "NULL", NULL)
  add("TRUE", "logical", TRUE)
  add("FALSE", "logical", FALSE)
  add("NA", "logical NA", NA)
  add("c(TRUE, NA, FALSE)", "logical", c(TRUE, NA, FALSE))
  add("logical(0)", "logical", logical(0))
  # integers
  for (v in list(0L, 1L, -1L, 42L, .Machine$integer.max, -.Machine$integer.max))
    add(sprintf("%dL", v), "integer", v)
  add("NA_integer_", "integer NA", NA_integer_)
  add("c(1L, NA, -3L)", "integer", c(1L, NA, -3L))
  add("1:10 (compact)", "integer", 1:10)
  add("integer(0)", "integer", integer(0))
  # doubles
  dbl <- list("0" = 0, "-0" = -0, "1.5" = 1.5, "2" = 2, "-1e300" = -1e300, "5e-324 (subnormal)" = 5e-324,
              "2.225e-308 (subnormal)" = 2.225073858507201e-308, ".Machine$double.xmax" = .Machine$double.xmax,
              "Inf" = Inf, "-Inf" = -Inf, "NaN" = NaN, "NA_real_" = NA_real_,
              "NaN payload 0x7ff800000000dead" = f64_bits("7ff800000000dead"),
              "signalling NaN 0x7ff0000000000001" = f64_bits("7ff0000000000001"), "2^53" = 2^53, "2^53 + 2" = 2^53 + 2,
              "2^31" = 2^31)
  for (n in names(dbl)) add(paste("double", n), "double", dbl[[n]])
  add("c(1.5, NA, NaN, -0, Inf)", "double", c(1.5, NA, NaN, -0, Inf))
  add("numeric(0)", "double", numeric(0))
  # integer64 (bit64's layout)
  add("integer64 2^53 + 1", "integer64", i64("9007199254740993"))
  add("integer64 max", "integer64", i64("9223372036854775807"))
  add("integer64 NA", "integer64", i64("na"))
  add("integer64 c(1, NA, -7)", "integer64", i64("1", "na", "-7"))
  # strings
  add("\"\"", "character", "")
  add("\"abc\"", "character", "abc")
  add("\"h\u00e9llo\"", "character", "h\u00e9llo")
  add("\"\u65e5\u672c\u8a9e\"", "character", "\u65e5\u672c\u8a9e")
  add("emoji", "character", "\U0001F30A")
  add("latin1-marked \"caf\u00e9\"", "character", iconv("caf\u00e9", "UTF-8", "latin1"))
  add("NA_character_", "character NA", NA_character_)
  add("c(\"a\", NA, \"\")", "character", c("a", NA, ""))
  add("character(0)", "character", character(0))
  add("1 MB string", "character", strrep("x", 2^20))
  add("300 KB non-ASCII", "character", strrep("\u00e9", 150000))
  bad <- "caf\xe9"
  Encoding(bad) <- "bytes"
  add("bytes-marked, not UTF-8", "character", bad,
      refused("argument 1: element 1 is a string marked \"bytes\" that is not UTF-8 text, which python workers cannot read",
              "refused: not UTF-8"))
  # raw, complex
  add("raw(0)", "raw", raw(0))
  add("as.raw(c(0, 255))", "raw", as.raw(c(0, 255)))
  add("raw 300 KB", "raw", as.raw(rep(0:255, 1200)))
  add("1+2i", "complex", 1 + 2i)
  add("c(1+2i, NA, -1i)", "complex", c(1 + 2i, NA, -1i))
  add("complex(0)", "complex", complex(0))
  # big vectors (by reference)
  add("double 320 KB", "double", big_dbl)
  add("integer 320 KB", "integer", seq_len(2L * big) - big)
  add("logical 320 KB", "logical", seq_len(8L * big) %% 3L == 0L)
  add("complex 320 KB", "complex", complex(real = big_dbl[1:20000], imaginary = 1))
  add("integer64 320 KB", "integer64", structure(big_dbl, class = "integer64"))
  # arrays
  add("matrix(1:6, 2)", "matrix", matrix(1:6, 2))
  add("matrix of doubles", "matrix", matrix(c(1.5, NA, -0, NaN), 2))
  add("logical matrix", "matrix", matrix(c(TRUE, NA, FALSE, TRUE), 2))
  add("complex matrix", "matrix", matrix(c(1i, 2, 3, NA), 2))
  add("array(1:24, 2:4)", "array", array(1:24, 2:4))
  add("array(1:3) (1-d)", "array", array(1:3), changed(1:3, "a plain vector (a 1-d numpy array is a vector)"))
  add("matrix 320 KB", "matrix", matrix(big_dbl, 200))
  add("matrix with dimnames", "matrix", matrix(1:4, 2, dimnames = list(c("a", "b"), NULL)),
      refused("argument 1: a matrix with dimnames cannot be sent to python workers", "refused: dimnames"))
  # factors
  add("factor", "factor", factor(c("lo", NA, "hi"), levels = c("lo", "hi")))
  add("ordered factor", "factor", factor(c("s", "l"), levels = c("s", "m", "l"), ordered = TRUE))
  add("factor, no levels", "factor", factor(character(0)))
  add("factor, non-ASCII levels", "factor", factor(c("\u00e9", "a")))
  # dates and times
  add("Date", "Date", as.Date("2024-01-01"))
  add("Date with NA", "Date", as.Date(c("2024-01-01", NA, "1969-12-31")))
  add("integer Date", "Date", structure(c(19723L, NA), class = "Date"))
  add("Date with a fraction", "Date", structure(19723.5, class = "Date"))
  add("POSIXct UTC", "POSIXct", utc(c("2024-01-01 12:00:00", NA)))
  add("POSIXct Europe/Warsaw", "POSIXct", as.POSIXct("2024-06-01 12:00:00.5", tz = "Europe/Warsaw"))
  add("POSIXct, no tzone", "POSIXct", structure(1704110400.25, class = c("POSIXct", "POSIXt")))
  add("POSIXct, tzone = \"\"", "POSIXct", as.POSIXct("2024-01-02 03:04:05"),
      changed(structure(as.numeric(as.POSIXct("2024-01-02 03:04:05")), class = c("POSIXct", "POSIXt")),
              "comes back without tzone (R reads none and \"\" alike: local time)"))
  add("POSIXct of an i64 ns timestamp", "POSIXct",
      structure(c(1704110400.123456, NA, -0.5), class = c("POSIXct", "POSIXt"), tzone = "UTC", suiro_unit = "ns"))
  add("POSIXct of an i64 ms timestamp, no tzone", "POSIXct",
      structure(c(1704110400.123, 0), class = c("POSIXct", "POSIXt"), suiro_unit = "ms"))
  add("POSIXct of an i64 s timestamp, changed by a fraction", "POSIXct",
      structure(c(1704110400.5, 1), class = c("POSIXct", "POSIXt"), tzone = "UTC", suiro_unit = "s"),
      changed(structure(c(1704110400.5, 1), class = c("POSIXct", "POSIXt"), tzone = "UTC"),
              "sent as f64 seconds, which hold it (suiro_unit dropped)"))
  add("POSIXlt", "POSIXlt", as.POSIXlt("2024-01-01", tz = "UTC"),
      refused("argument 1: a list of class \"POSIXlt\" cannot be sent to python workers", "refused: POSIXlt"))
  # lists
  add("list()", "list", list())
  add("list(1, \"a\", NULL, TRUE)", "list", list(1, "a", NULL, TRUE))
  add("nested lists", "list", list(1L, list(2, list("x", list()))))
  add("nested 40 deep", "list", nest(40))
  add("nested 70 deep", "list", nest(70), refused("argument 1(\\[\\[1\\]\\])+\\.\\.\\.(\\[\\[1\\]\\]){4}: nested more than 64 levels deep", "refused: deeper than 64"))
  add("list(a = 1, b = \"x\")", "named list", list(a = 1, b = "x"))
  add("list(b = 1, a = 2) (order)", "named list", list(b = 1, a = 2))
  add("list(a = 1, 2) (an empty name)", "named list", list(a = 1, 2))
  add("list(\"x y\" = 1, \"\u00e9\" = list(k = NULL))", "named list", stats::setNames(list(1, list(k = NULL)), c("x y", "\u00e9")))
  add("list(a = 1, a = 2) (names repeat)", "named list", list(a = 1, a = 2),
      refused("argument 1: names repeat \\(element 2 is named \"a\" again\\): python workers take names as dict keys",
              "refused: repeated names"))
  add("list(a = 1, 2, 3) (\"\" repeats)", "named list", list(a = 1, 2, 3),
      refused("argument 1: names repeat \\(element 3 is named \"\" again\\)", "refused: repeated names"))
  add("a list with an NA name", "named list", structure(list(1, 2), names = c("a", NA)),
      refused("argument 1: a list with NA names cannot be sent to python workers", "refused: an NA name"))
  add("named list inside a list", "list", list(list(a = 1:3, b = list(c = "d"))))
  # data frames
  df <- data.frame(
    lgl = c(TRUE, NA, FALSE), int = c(1L, NA, -3L), dbl = c(1.5, NA, -Inf), chr = c("a", NA, "h\u00e9"),
    cplx = c(1 + 2i, NA, 0 - 1i), fct = factor(c("lo", NA, "hi"), levels = c("lo", "hi")),
    ord = factor(c("s", "l", NA), levels = c("s", "m", "l"), ordered = TRUE),
    date = as.Date(c("2024-01-01", NA, "1969-12-31")),
    when = utc(c("2024-01-01 12:00:00", NA, "1970-01-01 00:00:01")), stringsAsFactors = FALSE)
  df$big <- i64("9007199254740993", "na", "-7")
  add("data.frame, every column kind", "data.frame", df)
  add("data.frame with row names", "data.frame", data.frame(x = c(0.5, 1.5), row.names = c("a", "b")))
  add("data.frame, 0 rows", "data.frame", data.frame(x = numeric(0), s = character(0)))
  add("data.frame, no columns", "data.frame", data.frame())
  add("mtcars", "data.frame", mtcars)
  add("iris", "data.frame", iris)
  add("data.frame 320 KB columns", "data.frame", data.frame(x = big_dbl, i = seq_len(big)))
  add("data.frame, repeated names", "data.frame", data.frame(a = 1, a = 2, check.names = FALSE))
  add("data.frame with a list column", "data.frame", structure(list(l = list(1, 2)), class = "data.frame",
                                                              row.names = 1:2),
      refused("argument 1\\$l: a list column cannot be sent to python workers", "refused: a list column"))
  # call specs as values
  add("suiro_call by name", "call", suiro_call("stats::quantile", c(1, 2, 3), probs = 0.5))
  add("suiro_call by source", "call", suiro_call(.source = "x + 1", x = 1:3))
  # what has no form for other languages
  add("attributes", "attributes", structure(1:3, note = "x"),
      refused("argument 1: an integer vector with attribute 'note' cannot be sent to python workers", "refused: attributes"))
  add("named vector", "named vector", c(a = 1, b = 2),
      refused("argument 1: a named double vector cannot be sent to python workers", "refused: names on a vector"))
  add("environment", "environment", new.env(),
      refused("argument 1: an environment cannot be sent to python workers", "refused: an environment"))
  add("function", "function", function(x) x,
      refused("argument 1: a function cannot be sent to python workers", "refused: a function"))
  add("formula", "formula", y ~ x, refused("argument 1: a formula cannot be sent to python workers", "refused: a formula"))
  add("a call", "language", quote(f(x)), refused("argument 1: a call \\(language object\\) cannot be sent to python workers", "refused: a call"))
  add("an environment in a list", "list", list(1, e = globalenv()),
      refused("argument 1\\[\\['e'\\]\\]: an environment cannot be sent to python workers", "refused, naming the element"))
  add("S4 object", "S4", methods::getClass("numeric"),
      refused("argument 1: an S4 object cannot be sent to python workers", "refused: S4"))
  V
}

py_worker_script <- function(root) {
  s <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(s)) s <- file.path(root, "bindings", "python", "suiro", "_worker.py")
  if (!file.exists(s)) stop("no Python worker at ", s, " (run scripts/build)")
  s
}

outcome_text <- function(o) if (o$kind == "exact") "exact" else o$note

# identical(), with doubles and complex compared bit for bit (-0, NaN payloads).
same <- function(a, b) identical(a, b, num.eq = FALSE)

doc_rows <- function(root, route) {
  lines <- readLines(file.path(root, "docs", "wire-format.md"), encoding = "UTF-8")
  start <- which(lines == paste("###", route))
  if (length(start) != 1L) stop("docs/wire-format.md has no section '### ", route, "'")
  rest <- lines[(start + 1L):length(lines)]
  end <- which(startsWith(rest, "#"))
  if (length(end)) rest <- rest[seq_len(end[1] - 1L)]
  rows <- rest[startsWith(rest, "| ") & !startsWith(rest, "| value |")]
  lapply(rows, function(l) {
    cells <- strsplit(sub("^\\| (.*) \\|$", "\\1", l), " | ", fixed = TRUE)[[1]]
    sub("^`(.*)`$", "\\1", cells)
  })
}

table_rows <- function() lapply(matrix_values(), function(v) c(v$name, v$cls, outcome_text(v$outcome)))

markdown <- function(rows)
  paste(c("| value | class | outcome |", "|---|---|---|",
          vapply(rows, function(r) sprintf("| `%s` | %s | %s |", r[1], r[2], r[3]), "")), collapse = "\n")

# The host's part: every value through a Python pool whose worker passes it on to an R pool of its
# own; a list of list(ok, value) or list(ok = FALSE, message).
run_chain <- function(root, vals) {
  py <- suiro_pool(workers = 1, timeout = 120, env = worker_env(), launcher = suiro_python(
    argv = c("/usr/bin/python3", "-I", py_worker_script(root)),
    # this R first on PATH: the Python worker starts its R pool as Rscript from PATH (R CMD check
    # puts a stub Rscript first there)
    env = list(SUIRO_PYTHONPATH = file.path(root, "tests", "matrix"),
               PATH = paste(R.home("bin"), Sys.getenv("PATH"), sep = .Platform$path.sep))))
  res <- lapply(vals, function(v)
    tryCatch(list(ok = TRUE, value = suiro_collect(suiro_submit(py, suiro_call("matrix_relay.to_r", v$value)),
                                                   timeout = 90)),
             error = function(e) list(ok = FALSE, message = conditionMessage(e))))
  suiro_pool_stop(py)
  # Then a pool of R workers takes large values from this host: regions of the Python worker's own
  # R pool that came back here (results by reference) were kept warm here and reused after that
  # pool had stopped and their names were gone ("shared value ... is gone (its pool stopped?)").
  p <- suiro_pool(workers = 1, env = worker_env())
  on.exit(suiro_pool_stop(p))
  after <- NULL
  for (o in list(seq_len(50000) + 0.5, as.raw(1:200), data.frame(x = seq_len(50000) + 0.5), mtcars, 1:100000))
    for (i in 1:3) {
      back <- tryCatch(suiro_collect(suiro_submit(p, function(v) v, o), timeout = 30), error = conditionMessage)
      if (!identical(back, o)) after <- c(after, if (is.character(back)) back else "a value came back changed")
    }
  list(results = res, after = after)
}

# run_chain in a child R process (the values travel back by saveRDS, which keeps them exactly): a
# host whose pools misbehave after the chain leaves the suite's process as it was.
chain_in_child <- function(root) {
  out <- tempfile(fileext = ".rds")
  child <- tempfile(fileext = ".R")
  on.exit(unlink(c(out, child)))
  writeLines(c(
    "suppressPackageStartupMessages(library(suiro))",
    "e <- new.env()",
    sprintf("sys.source(%s, envir = e)", deparse(testthat::test_path("helper-suiro.R"))),
    "e$test_that <- function(...) invisible(NULL)",
    sprintf("sys.source(%s, envir = e)", deparse(testthat::test_path("test-type-matrix.R"))),
    sprintf("saveRDS(e$run_chain(%s, e$matrix_values()), %s)", deparse(root), deparse(out))), child)
  log <- suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", shQuote(child)),
                                  stdout = TRUE, stderr = TRUE,
                                  env = paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))))
  if (!file.exists(out)) stop("the R host of the chain failed:\n", paste(log, collapse = "\n"))
  readRDS(out)
}

test_that("every value crosses R -> Python -> R (a pool inside the Python worker) as the table says", {
  root <- need_root()
  py_worker_script(root)
  vals <- matrix_values()
  expect_gte(length(vals), 100L)
  expect_false(anyDuplicated(vapply(vals, `[[`, "", "name")) > 0)
  out <- chain_in_child(root)
  expect_null(out$after) # the host's next pool reads its large values
  res <- out$results
  expect_identical(length(res), length(vals))
  bad <- character(0)
  for (k in seq_along(vals)) {
    v <- vals[[k]]
    got <- res[[k]]
    o <- v$outcome
    if (o$kind == "refused") {
      if (got$ok || !grepl(o$pattern, got$message))
        bad <- c(bad, sprintf("%s: expected a refusal matching '%s', got %s", v$name, o$pattern,
                              if (got$ok) paste(utils::capture.output(str(got$value)), collapse = " ") else got$message))
    } else if (!got$ok) {
      bad <- c(bad, sprintf("%s: %s", v$name, got$message))
    } else {
      want <- if (o$kind == "exact") v$value else o$value
      if (!same(want, got$value))
        bad <- c(bad, sprintf("%s: expected %s, got %s", v$name,
                              substr(paste(utils::capture.output(str(want)), collapse = " "), 1, 200),
                              substr(paste(utils::capture.output(str(got$value)), collapse = " "), 1, 200)))
    }
  }
  expect(length(bad) == 0L, paste0(length(bad), " of ", length(vals), " values:\n", paste(bad, collapse = "\n")))
})

test_that("docs/wire-format.md's table for R -> Python -> R is this file's table", {
  root <- need_root()
  want <- table_rows()
  out <- Sys.getenv("SUIRO_MATRIX_TABLE") # tests/matrix/update-doc.py: write the table there
  if (nzchar(out)) writeLines(enc2utf8(markdown(want)), file(out, encoding = "UTF-8"))
  expect(identical(doc_rows(root, matrix_route), want),
         paste0("docs/wire-format.md, '### ", matrix_route, "' should read:\n", markdown(want)))
})
