# bench_interop.R — R and Python working together: suiro against reticulate (Python inside the R
# process) and a CSV hand-off (files and a new interpreter), side by side in one run. The R-host
# half of `scripts/bench interop` (bench/bench_interop.py is the Python-host half).
#
#   scripts/bench interop [rounds]        (scripts/rscript bench/bench_interop.R [rounds])
#
# A  100 and 10,000 small calls numpy.add(1, 2) from R, the call written per call as users write it:
#    suiro_run(pw, suiro_call("numpy.add", 1, 2)) / np$add(1, 2) / one CSV of all calls and one
#    python3 run over it
# B  numeric vectors of 8 KB, 8 MB and 80 MB to Python and back (numpy.asarray there, the sum read
#    here): fresh (a new vector each time) and resent (the same vector again); CSV: the vector
#    written, python3 reads it and writes it back, R reads it (80 MB by CSV: the first round only)
# C  R -> Python -> R of 32 doubles (as B); and Python -> R -> Python of 32 doubles with reticulate
#    (Python code calling r.identity, measured here: reticulate lives in R) — suiro's side of that
#    route is in bench_interop.py
# D  mtcars standardised with pandas ((d - d.mean()) / d.std()), the data frame back in R; and
#    reticulate's R quantile called from Python code (the suiro side is in bench_interop.py)
#
# Setup: suiro_py_setup_ms (suiro_pool with one Python worker to its first result, measured each
# round) and reticulate_setup_ms (Python started in this process and numpy imported: once, it can
# happen only once per process).
#
# Medians over interleaved rounds; every figure is milliseconds for the whole test (A: all calls).
# The last line of output is one JSON object.

suppressPackageStartupMessages(library(suiro))
args <- commandArgs(trailingOnly = TRUE)
rounds <- if (length(args)) as.integer(args[1]) else 5L
py_exe <- Sys.getenv("SUIRO_BENCH_PYTHON", "/usr/bin/python3")

clock <- function(expr) { # milliseconds of one evaluation
  t0 <- suiro:::now()
  force(expr)
  (suiro:::now() - t0) * 1e3
}

t_ret <- clock({
  Sys.setenv(RETICULATE_PYTHON = py_exe)
  suppressPackageStartupMessages(library(reticulate))
  np <- import("numpy")
  pd <- import("pandas")
})
py_run_string("
def standardise(d):
    return (d - d.mean()) / d.std()
")
identity_r <- function(x) x
assign("identity_r", identity_r, envir = globalenv())

pw <- suiro_pool(workers = 1, launcher = suiro_python(py_exe))
invisible(suiro_run(pw, suiro_call("numpy.add", 1, 2), .timeout = 60))
std_src <- "d = x.to_pandas().set_index('_row_names')\n(d - d.mean()) / d.std()"
# both sides warm: pandas imported in the worker, the reticulate function called once
invisible(suiro_run(pw, suiro_call(.source = std_src, x = mtcars), .timeout = 60))
invisible(py$standardise(mtcars))

tmp <- tempfile("suiro-interop-")
dir.create(tmp)
csv_py <- function(code, ...) { # one python3 run of code (with the file names as sys.argv)
  st <- system2(py_exe, c("-c", shQuote(code), ...), stdout = FALSE, stderr = FALSE)
  if (st != 0) stop("bench_interop: the python3 hand-off failed")
}

csv_A <- function(n) {
  f_in <- file.path(tmp, "a_in.csv"); f_out <- file.path(tmp, "a_out.csv")
  write.csv(data.frame(a = rep(1, n), b = rep(2, n)), f_in, row.names = FALSE)
  csv_py("import sys, numpy, pandas
d = pandas.read_csv(sys.argv[1])
pandas.DataFrame({'v': [numpy.add(a, b) for a, b in zip(d.a, d.b)]}).to_csv(sys.argv[2], index=False)", f_in, f_out)
  v <- read.csv(f_out)$v
  stopifnot(length(v) == n, all(v == 3))
}

csv_vec <- function(x) {
  f_in <- file.path(tmp, "b_in.csv"); f_out <- file.path(tmp, "b_out.csv")
  write(x, f_in, ncolumns = 1)
  csv_py("import sys, pandas
pandas.read_csv(sys.argv[1], header=None).to_csv(sys.argv[2], header=False, index=False)", f_in, f_out)
  y <- scan(f_out, quiet = TRUE)
  stopifnot(length(y) == length(x))
  sum(y)
}

csv_D <- function() {
  f_in <- file.path(tmp, "d_in.csv"); f_out <- file.path(tmp, "d_out.csv")
  write.csv(mtcars, f_in)
  csv_py("import sys, pandas
d = pandas.read_csv(sys.argv[1], index_col=0)
((d - d.mean()) / d.std()).to_csv(sys.argv[2])", f_in, f_out)
  read.csv(f_out, row.names = 1)
}

sizes <- c("8KB" = 1e3, "8MB" = 1e6, "80MB" = 1e7)
fresh <- function(n, r) as.numeric(seq_len(n)) + r # a new vector (its pages never sent before)

rows <- c("suiro_py_setup_ms",
          "A_100_reticulate_ms", "A_100_suiro_ms", "A_100_csv_ms",
          "A_10000_reticulate_ms", "A_10000_suiro_ms", "A_10000_csv_ms",
          as.vector(outer(names(sizes), c("fresh_reticulate", "fresh_suiro", "fresh_csv", "resend_reticulate", "resend_suiro"),
                          function(s, w) sprintf("B_%s_%s_ms", s, w))),
          "C_r_py_r_reticulate_ms", "C_r_py_r_suiro_ms", "C_r_py_r_csv_ms", "C_py_r_py_reticulate_ms",
          "D_mtcars_reticulate_ms", "D_mtcars_suiro_ms", "D_mtcars_csv_ms", "D_quantile_reticulate_ms")
m <- matrix(NA_real_, rounds, length(rows), dimnames = list(NULL, rows))
x32 <- as.numeric(1:32)

for (r in seq_len(rounds)) {
  t_round <- suiro:::now()
  m[r, "suiro_py_setup_ms"] <- clock({
    p2 <- suiro_pool(workers = 1, launcher = suiro_python(py_exe))
    suiro_run(p2, suiro_call("numpy.add", 1, 2), .timeout = 60)
  })
  suiro_pool_stop(p2)
  for (n in c(100L, 10000L)) {
    m[r, sprintf("A_%d_reticulate_ms", n)] <- clock(for (i in seq_len(n)) np$add(1, 2))
    m[r, sprintf("A_%d_suiro_ms", n)] <- clock(for (i in seq_len(n)) suiro_run(pw, suiro_call("numpy.add", 1, 2)))
    m[r, sprintf("A_%d_csv_ms", n)] <- clock(csv_A(n))
  }
  for (s in names(sizes)) {
    n <- sizes[[s]]
    k <- if (n >= 1e7) 3L else if (n >= 1e6) 10L else 100L # calls per figure (the median of them)
    one <- function(f) median(vapply(seq_len(k), function(i) f(i), 0))
    m[r, sprintf("B_%s_fresh_reticulate_ms", s)] <- one(function(i) { x <- fresh(n, i); clock(sum(np$asarray(x))) })
    m[r, sprintf("B_%s_fresh_suiro_ms", s)] <- one(function(i) {
      x <- fresh(n, i)
      clock(sum(suiro_run(pw, suiro_call("numpy.asarray", x))))
    })
    if (n < 1e7 || r == 1L) m[r, sprintf("B_%s_fresh_csv_ms", s)] <- clock(csv_vec(fresh(n, r)))
    x <- fresh(n, 0)
    invisible(suiro_run(pw, suiro_call("numpy.asarray", x)))
    m[r, sprintf("B_%s_resend_reticulate_ms", s)] <- one(function(i) clock(sum(np$asarray(x))))
    m[r, sprintf("B_%s_resend_suiro_ms", s)] <- one(function(i) clock(sum(suiro_run(pw, suiro_call("numpy.asarray", x)))))
    rm(x)
  }
  m[r, "C_r_py_r_reticulate_ms"] <- clock(for (i in 1:1000) np$asarray(x32)) / 1000
  m[r, "C_r_py_r_suiro_ms"] <- clock(for (i in 1:1000) suiro_run(pw, suiro_call("numpy.asarray", x32))) / 1000
  m[r, "C_r_py_r_csv_ms"] <- clock(for (i in 1:5) csv_vec(x32)) / 5
  py_run_string("
import time, numpy
_v = numpy.arange(32.0)
_t0 = time.perf_counter()
for _i in range(1000):
    _y = r.identity_r(_v)
_c_ms = (time.perf_counter() - _t0)
_t0 = time.perf_counter()
for _i in range(200):
    _q = r.quantile(_v, probs=[0.25, 0.5, 0.75])
_q_ms = (time.perf_counter() - _t0) * 5
")
  m[r, "C_py_r_py_reticulate_ms"] <- py$`_c_ms`
  m[r, "D_quantile_reticulate_ms"] <- py$`_q_ms`
  m[r, "D_mtcars_reticulate_ms"] <- clock(for (i in 1:100) py$standardise(mtcars)) / 100
  m[r, "D_mtcars_suiro_ms"] <- clock(for (i in 1:100) suiro_run(pw, suiro_call(.source = std_src, x = mtcars))) / 100
  m[r, "D_mtcars_csv_ms"] <- clock(for (i in 1:3) csv_D()) / 3
  cat(sprintf("round %d/%d done (%.0f s)\n", r, rounds, suiro:::now() - t_round), file = stderr())
}

# the answers agree
d_ret <- py$standardise(mtcars)
d_sui <- suiro_run(pw, suiro_call(.source = std_src, x = mtcars))
stopifnot(isTRUE(all.equal(unname(as.matrix(d_ret)), unname(as.matrix(d_sui[names(d_ret)])))))
stopifnot(isTRUE(all.equal(as.vector(suiro_run(pw, suiro_call("numpy.asarray", x32))), x32)))
stopifnot(suiro_run(pw, suiro_call("numpy.add", 1, 2)) == 3)
suiro_pool_stop(pw)
unlink(tmp, recursive = TRUE)

s <- apply(m, 2, median, na.rm = TRUE)
s[["reticulate_setup_ms"]] <- t_ret

cat("\nR host: suiro (Python workers) against reticulate and a CSV hand-off, medians of", rounds, "rounds\n\n")
cat(sprintf("  %-34s %12s %12s %12s   %s\n", "test", "reticulate", "csv", "suiro", "suiro vs reticulate"))
row <- function(label, key, csv = TRUE) {
  ret <- s[[paste0(key, "_reticulate_ms")]]
  sui <- s[[paste0(key, "_suiro_ms")]]
  cv <- if (csv) sprintf("%10.3f ms", s[[paste0(key, "_csv_ms")]]) else "-"
  cat(sprintf("  %-34s %9.3f ms %12s %9.3f ms   %.1f x\n", label, ret, cv, sui, ret / sui))
}
row("A 100 calls numpy.add", "A_100")
row("A 10,000 calls numpy.add", "A_10000")
for (sz in names(sizes)) {
  row(sprintf("B %s fresh", sz), sprintf("B_%s_fresh", sz))
  row(sprintf("B %s resent", sz), sprintf("B_%s_resend", sz), csv = FALSE)
}
row("C R -> Python -> R, 32 doubles", "C_r_py_r")
row("D mtcars standardised in pandas", "D_mtcars")
cat(sprintf("  %-34s %9.3f ms   (suiro's side: bench_interop.py)\n", "C Python -> R -> Python, reticulate", s[["C_py_r_py_reticulate_ms"]]))
cat(sprintf("  %-34s %9.3f ms   (suiro's side: bench_interop.py)\n", "D R quantile from Python, reticulate", s[["D_quantile_reticulate_ms"]]))
cat(sprintf("  setup: suiro pool of one Python worker %.1f ms; reticulate (Python + numpy + pandas in process) %.1f ms\n",
            s[["suiro_py_setup_ms"]], s[["reticulate_setup_ms"]]))

json <- c(sprintf('"bench":"interop_r","rounds":%d', rounds),
          vapply(names(s), function(k) sprintf('"%s":%s', k, format(signif(s[[k]], 6), scientific = FALSE, trim = TRUE)), ""),
          sprintf('"date":"%s"', format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))
cat("{", paste(json, collapse = ","), "}\n", sep = "")
