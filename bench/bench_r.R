# bench_r.R — suiro from R against the floor and R's own parallel tools, in one run: the rows of
# the mizu benchmarks vignette and README, measured here side by side.
#
#   scripts/bench r [rounds]        (scripts/rscript bench/bench_r.R [rounds])
#
# floor_rt_ns                two processes ping-ponging on shared cache lines (bench_core --floor)
# r_rt_ns                    submit + collect of a trivial R function, one R worker;
#                            r_run_rt_ns: the same through suiro_run (one call, no task object)
# psock_rt_ns                parallel::clusterCall on a 1-worker PSOCK cluster, socketOptions =
#                            "no-delay" on both ends; psock_default_rt_ns with R's defaults
# future_rt_ns               value(future(NULL)) with plan(multisession, workers = 1)
# callr_rt_ns                callr::r_session$run(function() NULL)
# r_pipelined_tasks_per_s    one R worker, a window of 64 tasks in flight
# diamonds_enrich_us         the vignette's enrich(): ggplot2's 3.3 MB diamonds there, a column
#                            added, back (suiro: one R worker; psock_*: the no-delay PSOCK worker);
#                            the median of single runs as bench::mark reports it, and _mean_us the
#                            mean (R's collections included)
# winsum_2000_ms             the vignette's 2,000 sliding-window mean/sd tasks, suiro_map on 2
#                            workers; serial_ (lapply), parlapply_ (2 PSOCK workers), future_
#                            (future.apply::future_lapply, 2 multisession workers)
# r_callspec_build_us        suiro_call("numpy.add", 1, 2): building a call spec, as users write it
#                            per call (no pool involved)
# r_promise_settle_2000_ms   2,000 tasks submitted on 2 workers, each made a promise with then(),
#                            until every callback ran (later's loop); r_collect_all_2000_ms: the
#                            same 2,000 tasks collected with suiro_collect_all;
#                            promises_pkg_2000_ms: the promises package alone, 2,000
#                            promise_resolve() + then() run the same way (the floor for any promise)
# r_promise_batch_2000_ms    the same 2,000 tasks as one promise, suiro_collect_async(tasks), until
#                            its then() callback ran (later's loop)
# r_worker_start_ms          suiro_pool(1) to the first result of a trivial task
# r_80mb_fresh_ms            a fresh 80 MB double vector to a worker, x * 2 there, back as a
#                            view, its sum read; r_80mb_view_resend_us: that view sent to a worker
#                            and returned unchanged; memcpy_80mb_ms: one memcpy of 80 MB
#
# Medians over interleaved rounds (every row measured once per round, in turn); ratios are to
# baselines measured in the same run. The last line of output is one JSON object.

suppressPackageStartupMessages({
  library(suiro)
  library(parallel)
})
args <- commandArgs(trailingOnly = TRUE)
rounds <- if (length(args)) as.integer(args[1]) else 7L
root <- Sys.getenv("SUIRO_ROOT", normalizePath("."))
# the memcpy floor: a test build of its own (tests/probe/rprobe.c), not in the package
dyn.load(file.path(root, "build", "tests", "r", "suiro_probe.so"))

per <- function(n, expr) { # seconds per iteration of expr (an expression), n iterations
  e <- substitute(expr)
  f <- eval(call("function", NULL, call("for", as.name("i"), call("seq_len", n), e)), parent.frame())
  t0 <- proc.time()[[3]]
  f()
  (proc.time()[[3]] - t0) / n
}
each <- function(n, expr) { # the median of n timed evaluations of expr (as bench::mark reports)
  e <- substitute(expr)
  env <- parent.frame()
  t <- numeric(n)
  for (i in seq_len(n)) {
    t0 <- suiro:::now()
    eval(e, env)
    t[i] <- suiro:::now() - t0
  }
  median(t)
}
clock <- function(expr) { # seconds of one evaluation
  e <- substitute(expr)
  t0 <- suiro:::now()
  eval(e, parent.frame())
  suiro:::now() - t0
}

floor_ns <- function() {
  out <- system2(file.path(root, "build", "bin", "bench_core"), c("--floor", "--rounds", "3"), stdout = TRUE)
  as.numeric(sub('.*"floor_rt_ns":([0-9.]+).*', "\\1", tail(out, 1)))
}

# ---- setup (not timed) ------------------------------------------------------------------------

trivial <- function() NULL
enrich <- evalq(function(dat) {
  dat$price_per_carat <- dat$price / dat$carat
  dat
}, baseenv())
winsum <- evalq(function(i) {
  w <- ggplot2::diamonds$price[i:(i + 999L)]
  c(mean = mean(w), sd = stats::sd(w))
}, baseenv())
diamonds <- ggplot2::diamonds
double_it <- function(x) x * 2
same <- function(x) x

p1 <- suiro_pool(workers = 1)
p2 <- suiro_pool(workers = 2)
invisible(suiro_collect(suiro_map(p2, 1:2000, winsum), timeout = 120)) # workers load ggplot2's data

old <- options(socketOptions = "no-delay")
cl_nd <- makeCluster(1, type = "PSOCK", rscript_args = c("-e", shQuote("options(socketOptions = 'no-delay')")))
options(old)
invisible(clusterEvalQ(cl_nd, options(socketOptions = "no-delay")))
cl_def <- makeCluster(1, type = "PSOCK")
cl2 <- makeCluster(2, type = "PSOCK")
invisible(clusterCall(cl2, function() nrow(ggplot2::diamonds)))
suppressPackageStartupMessages(library(future))
have_future <- requireNamespace("future.apply", quietly = TRUE)
plan(multisession, workers = 2)
invisible(future.apply::future_lapply(1:4, winsum))
rs <- callr::r_session$new()
invisible(rs$run(trivial))

big <- as.numeric(seq_len(1e7)) # 80 MB
view <- suiro_collect(suiro_submit(p1, double_it, big), timeout = 60)
stopifnot(suiro_is_view(view))

# ---- rounds -----------------------------------------------------------------------------------

rows <- c("floor_rt_ns", "r_rt_ns", "r_run_rt_ns", "psock_rt_ns", "psock_default_rt_ns", "future_rt_ns", "callr_rt_ns",
          "r_pipelined_tasks_per_s", "diamonds_enrich_us", "diamonds_enrich_mean_us", "psock_diamonds_enrich_us",
          "winsum_2000_ms", "r_callspec_build_us", "r_promise_settle_2000_ms", "r_collect_all_2000_ms",
          "promises_pkg_2000_ms", "r_promise_batch_2000_ms",
          "serial_winsum_2000_ms", "parlapply_winsum_2000_ms", "future_winsum_2000_ms", "r_worker_start_ms",
          "r_80mb_fresh_ms", "r_80mb_view_resend_us", "memcpy_80mb_ms")
m <- matrix(NA_real_, rounds, length(rows), dimnames = list(NULL, rows))

pipelined <- function(p, n, window = 64L) {
  ts <- vector("list", window)
  t0 <- suiro:::now()
  for (i in seq_len(n)) {
    k <- (i - 1L) %% window + 1L
    if (!is.null(ts[[k]])) suiro_collect(ts[[k]])
    ts[[k]] <- suiro_submit(p, trivial)
  }
  for (t in ts) if (!is.null(t)) suiro_collect(t)
  n / (suiro:::now() - t0)
}

settle_2000 <- function(p) { # every promise's callback run, through later's loop
  got <- 0L
  ts <- suiro_submit_batch(p, trivial, rep(list(list()), 2000L))
  for (t in ts) promises::then(t, function(v) got <<- got + 1L)
  end <- suiro:::now() + 60
  while (got < 2000L && suiro:::now() < end) later::run_now(0.05)
  stopifnot(got == 2000L)
}
batch_2000 <- function(p) { # one suiro_collect_async promise, its callback run through later's loop
  got <- NULL
  ts <- suiro_submit_batch(p, trivial, rep(list(list()), 2000L))
  promises::then(suiro_collect_async(ts, timeout = 60), function(v) got <<- v)
  end <- suiro:::now() + 60
  while (is.null(got) && suiro:::now() < end) later::run_now(0.05)
  stopifnot(length(got) == 2000L)
}
promises_2000 <- function() {
  got <- 0L
  for (i in seq_len(2000L)) promises::then(promises::promise_resolve(NULL), function(v) got <<- got + 1L)
  end <- suiro:::now() + 60
  while (got < 2000L && suiro:::now() < end) later::run_now(0.05)
  stopifnot(got == 2000L)
}

for (r in seq_len(rounds)) {
  m[r, "floor_rt_ns"] <- floor_ns()
  m[r, "r_rt_ns"] <- per(20000, suiro_collect(suiro_submit(p1, trivial))) * 1e9
  m[r, "r_run_rt_ns"] <- per(20000, suiro_run(p1, trivial)) * 1e9
  m[r, "psock_rt_ns"] <- per(1000, clusterCall(cl_nd, trivial)) * 1e9
  m[r, "psock_default_rt_ns"] <- per(1000, clusterCall(cl_def, trivial)) * 1e9
  m[r, "future_rt_ns"] <- per(20, value(future(NULL))) * 1e9
  m[r, "callr_rt_ns"] <- per(50, rs$run(trivial)) * 1e9
  m[r, "r_pipelined_tasks_per_s"] <- pipelined(p1, 50000)
  m[r, "diamonds_enrich_us"] <- each(200, suiro_collect(suiro_submit(p1, enrich, dat = diamonds))) * 1e6
  m[r, "diamonds_enrich_mean_us"] <- per(200, suiro_collect(suiro_submit(p1, enrich, dat = diamonds))) * 1e6
  m[r, "psock_diamonds_enrich_us"] <- each(10, clusterCall(cl_nd, enrich, diamonds)) * 1e6
  m[r, "winsum_2000_ms"] <- clock(suiro_collect(suiro_map(p2, 1:2000, winsum))) * 1e3
  m[r, "r_callspec_build_us"] <- per(20000, suiro_call("numpy.add", 1, 2)) * 1e6
  m[r, "r_promise_settle_2000_ms"] <- clock(settle_2000(p2)) * 1e3
  m[r, "promises_pkg_2000_ms"] <- clock(promises_2000()) * 1e3
  m[r, "r_promise_batch_2000_ms"] <- clock(batch_2000(p2)) * 1e3
  m[r, "r_collect_all_2000_ms"] <- clock(suiro_collect_all(suiro_submit_batch(p2, trivial, rep(list(list()), 2000L)),
                                                          timeout = 60)) * 1e3
  m[r, "serial_winsum_2000_ms"] <- clock(lapply(1:2000, winsum)) * 1e3
  m[r, "parlapply_winsum_2000_ms"] <- clock(parLapply(cl2, 1:2000, winsum)) * 1e3
  m[r, "future_winsum_2000_ms"] <- clock(future.apply::future_lapply(1:2000, winsum)) * 1e3
  m[r, "r_worker_start_ms"] <- clock({
    ps <- suiro_pool(workers = 1)
    suiro_collect(suiro_submit(ps, trivial))
  }) * 1e3
  suiro_pool_stop(ps)
  m[r, "r_80mb_fresh_ms"] <- clock({
    x <- as.numeric(seq_len(1e7)) # made fresh
    y <- suiro_collect(suiro_submit(p1, double_it, x))
    s <- sum(y)
  }) * 1e3
  stopifnot(s == 1e7 * (1e7 + 1))
  rm(x, y)
  m[r, "r_80mb_view_resend_us"] <- each(50, suiro_collect(suiro_submit(p1, same, view))) * 1e6
  m[r, "memcpy_80mb_ms"] <- .Call("rprobe_memcpy_ms", 8e7, 5L, PACKAGE = "suiro_probe")
  cat(sprintf("round %d/%d done\n", r, rounds), file = stderr())
}

# sanity: the answers are the same
d1 <- suiro_collect(suiro_submit(p1, enrich, dat = diamonds))
stopifnot(isTRUE(all.equal(d1$price_per_carat, diamonds$price / diamonds$carat)))
w1 <- suiro_collect(suiro_map(p2, 1:2000, winsum))
stopifnot(identical(w1, lapply(1:2000, winsum)))

s <- apply(m, 2, median)
s[["winsum_2000_speedup"]] <- s[["serial_winsum_2000_ms"]] / s[["winsum_2000_ms"]]

stopCluster(cl_nd)
stopCluster(cl_def)
stopCluster(cl2)
plan(sequential)
rs$close()
suiro_pool_stop(p1)
suiro_pool_stop(p2)

# ---- report -----------------------------------------------------------------------------------

ratio <- function(a, b) s[[a]] / s[[b]]
fmt_ns <- function(v) if (v >= 1e6) sprintf("%.2f ms", v / 1e6) else if (v >= 1e3) sprintf("%.2f us", v / 1e3) else sprintf("%.0f ns", v)
cat("\nsuiro from R, medians of", rounds, "interleaved rounds\n\n")
line <- function(what, value, note = "") cat(sprintf("  %-44s %12s   %s\n", what, value, note))
line("floor: cross-process spin round trip", fmt_ns(s[["floor_rt_ns"]]))
line("R round trip, trivial task (1 R worker)", fmt_ns(s[["r_rt_ns"]]), sprintf("%.1f x floor", ratio("r_rt_ns", "floor_rt_ns")))
line("R round trip through suiro_run", fmt_ns(s[["r_run_rt_ns"]]), sprintf("%.1f x floor", ratio("r_run_rt_ns", "floor_rt_ns")))
line("PSOCK round trip, no-delay", fmt_ns(s[["psock_rt_ns"]]), sprintf("suiro %.0f x faster", ratio("psock_rt_ns", "r_rt_ns")))
line("PSOCK round trip, default options", fmt_ns(s[["psock_default_rt_ns"]]), sprintf("suiro %.0f x faster", ratio("psock_default_rt_ns", "r_rt_ns")))
line("future (multisession) round trip", fmt_ns(s[["future_rt_ns"]]), sprintf("suiro %.0f x faster", ratio("future_rt_ns", "r_rt_ns")))
line("callr r_session round trip", fmt_ns(s[["callr_rt_ns"]]), sprintf("suiro %.0f x faster", ratio("callr_rt_ns", "r_rt_ns")))
line("pipelined tasks/s, 1 R worker", sprintf("%.0f", s[["r_pipelined_tasks_per_s"]]))
line("diamonds enrich round trip (suiro)", sprintf("%.1f us", s[["diamonds_enrich_us"]]),
     sprintf("mean %.1f us (collections included)", s[["diamonds_enrich_mean_us"]]))
line("diamonds enrich round trip (PSOCK no-delay)", sprintf("%.1f us", s[["psock_diamonds_enrich_us"]]),
     sprintf("suiro %.0f x faster", ratio("psock_diamonds_enrich_us", "diamonds_enrich_us")))
line("winsum 2000: suiro_map, 2 workers", sprintf("%.2f ms", s[["winsum_2000_ms"]]),
     sprintf("%.2f x serial", s[["winsum_2000_speedup"]]))
line("winsum 2000: serial lapply", sprintf("%.2f ms", s[["serial_winsum_2000_ms"]]))
line("winsum 2000: parLapply, 2 PSOCK workers", sprintf("%.2f ms", s[["parlapply_winsum_2000_ms"]]),
     sprintf("suiro %.1f x faster", ratio("parlapply_winsum_2000_ms", "winsum_2000_ms")))
line("winsum 2000: future_lapply, 2 workers", sprintf("%.2f ms", s[["future_winsum_2000_ms"]]),
     sprintf("suiro %.0f x faster", ratio("future_winsum_2000_ms", "winsum_2000_ms")))
line("call spec build, suiro_call(\"numpy.add\", 1, 2)", sprintf("%.2f us", s[["r_callspec_build_us"]]),
     sprintf("%.2f x the R round trip", s[["r_callspec_build_us"]] * 1e3 / s[["r_rt_ns"]]))
line("2,000 task promises settled (2 workers)", sprintf("%.1f ms", s[["r_promise_settle_2000_ms"]]),
     sprintf("%.2f x suiro_collect_all", ratio("r_promise_settle_2000_ms", "r_collect_all_2000_ms")))
line("2,000 tasks as one suiro_collect_async promise", sprintf("%.1f ms", s[["r_promise_batch_2000_ms"]]),
     sprintf("%.2f x suiro_collect_all", ratio("r_promise_batch_2000_ms", "r_collect_all_2000_ms")))
line("2,000 tasks, suiro_collect_all (2 workers)", sprintf("%.1f ms", s[["r_collect_all_2000_ms"]]))
line("2,000 promises of the promises package alone", sprintf("%.1f ms", s[["promises_pkg_2000_ms"]]),
     sprintf("suiro's task promises %.2f x this", ratio("r_promise_settle_2000_ms", "promises_pkg_2000_ms")))
line("R worker start (pool to first result)", sprintf("%.1f ms", s[["r_worker_start_ms"]]))
line("80 MB fresh: to a worker, x * 2, back, sum", sprintf("%.1f ms", s[["r_80mb_fresh_ms"]]),
     sprintf("%.1f x memcpy", ratio("r_80mb_fresh_ms", "memcpy_80mb_ms")))
line("80 MB view sent on and returned", sprintf("%.1f us", s[["r_80mb_view_resend_us"]]))
line("memcpy of 80 MB", sprintf("%.2f ms", s[["memcpy_80mb_ms"]]))

json <- c(sprintf('"bench":"r","rounds":%d', rounds),
          vapply(names(s), function(k) sprintf('"%s":%s', k, format(signif(s[[k]], 6), scientific = FALSE, trim = TRUE)), ""),
          sprintf('"r_vs_psock":%.1f', ratio("psock_rt_ns", "r_rt_ns")),
          sprintf('"diamonds_vs_psock":%.1f', ratio("psock_diamonds_enrich_us", "diamonds_enrich_us")),
          sprintf('"winsum_vs_future":%.1f', ratio("future_winsum_2000_ms", "winsum_2000_ms")),
          sprintf('"r_promise_batch_vs_collect_all":%.2f', ratio("r_promise_batch_2000_ms", "r_collect_all_2000_ms")),
          sprintf('"date":"%s"', format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))
cat("{", paste(json, collapse = ","), "}\n", sep = "")
