# suiro_collect_async(tasks): one promise for a batch, settled from the pool's watcher callback.

run_until <- function(done, seconds = 20) {
  deadline <- Sys.time() + seconds
  while (!done() && Sys.time() < deadline) later::run_now(0.05)
  done()
}

# then() on p; out$state becomes "fulfilled" or "rejected", out$n counts the callbacks run.
watch_promise <- function(p) {
  out <- new.env()
  out$n <- 0L
  promises::then(p, function(v) { out$n <- out$n + 1L; out$state <- "fulfilled"; out$value <- v },
                 function(e) { out$n <- out$n + 1L; out$state <- "rejected"; out$value <- e })
  out
}

test_that("2,000 tasks resolve to their results in order, one wake-up per burst", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  p <- local_pool(workers = 2)
  n <- 2000L
  ts <- suiro_submit_batch(p, function(i) i * 2L, lapply(seq_len(n), list))
  before <- suiro:::async_counts()
  out <- watch_promise(suiro_collect_async(ts, timeout = 30))
  expect_true(run_until(function() !is.null(out$state), 30))
  expect_identical(out$state, "fulfilled")
  expect_identical(out$value, as.list(seq_len(n) * 2L))
  after <- suiro:::async_counts()
  expect_identical(after[["settled"]] - before[["settled"]], 1) # one entry, settled once
  # one wake-up per burst of results (how many bursts depends on the timing), never one per task
  expect_lt(after[["wakeups"]] - before[["wakeups"]], n)
  # the tasks were collected
  expect_error(suiro_collect(ts[[1]], timeout = 0), "collected already")
  # tasks done before their batch's promise: one kick settles it
  ts <- suiro_submit_batch(p, function(i) i, lapply(seq_len(n), list))
  deadline <- Sys.time() + 30
  while (!all(vapply(ts, suiro_ready, NA)) && Sys.time() < deadline) Sys.sleep(0.01)
  expect_true(all(vapply(ts, suiro_ready, NA)))
  before <- suiro:::async_counts()
  out <- watch_promise(suiro_collect_async(ts))
  expect_true(run_until(function() !is.null(out$state), 30))
  expect_identical(out$value, as.list(seq_len(n)))
  after <- suiro:::async_counts()
  expect_identical(after[["settled"]] - before[["settled"]], 1)
  expect_lte(after[["wakeups"]] - before[["wakeups"]], 2)
})

test_that("names are kept, and the values equal suiro_collect_all's", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  f <- function(x) list(x, letters[x])
  a <- suiro_submit_batch(p, f, list(a = list(1), b = list(2), c = list(3)))
  b <- suiro_submit_batch(p, f, list(a = list(1), b = list(2), c = list(3)))
  out <- watch_promise(suiro_collect_async(a))
  expect_true(run_until(function() !is.null(out$state)))
  expect_identical(out$value, suiro_collect_all(b, timeout = 10))
  expect_named(out$value, c("a", "b", "c"))
})

test_that("a failing task rejects with the condition suiro_collect_all raises", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  f <- function(i) if (i == 3) stop("batch boom ", i) else i
  ts <- suiro_submit_batch(p, f, lapply(1:5, list))
  out <- watch_promise(suiro_collect_async(ts))
  expect_true(run_until(function() !is.null(out$state)))
  expect_identical(out$state, "rejected")
  ref <- tryCatch(suiro_collect_all(suiro_submit_batch(p, f, lapply(1:5, list)), timeout = 10), error = identity)
  expect_s3_class(out$value, "suiro_error_remote")
  expect_identical(class(out$value), class(ref))
  expect_identical(conditionMessage(out$value), "batch boom 3")
  # every task was collected, the other results dropped
  for (t in ts) expect_error(suiro_collect(t, timeout = 0), "collected already")
})

test_that("a dead worker rejects with suiro_error_worker_died", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 1)
  pid <- suiro_collect(suiro_submit(p, function() Sys.getpid()), timeout = 5)
  ts <- suiro_submit_batch(p, function(s) { Sys.sleep(s); s }, list(list(0), list(30)))
  out <- watch_promise(suiro_collect_async(ts))
  deadline <- Sys.time() + 10
  while (suiro_pool_status(p)$worker$state[1] != "busy" && Sys.time() < deadline) Sys.sleep(0.01)
  later::run_now(0.05)
  expect_null(out$state)
  tools::pskill(pid, tools::SIGKILL)
  expect_true(run_until(function() !is.null(out$state), 20))
  expect_identical(out$state, "rejected")
  expect_s3_class(out$value, "suiro_error_worker_died")
})

test_that("an empty list resolves to list()", {
  skip_if_not_installed("promises")
  out <- watch_promise(suiro_collect_async(list()))
  expect_true(run_until(function() !is.null(out$state), 5))
  expect_identical(out$state, "fulfilled")
  expect_identical(out$value, list())
})

test_that("bad arguments are errors naming them", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 1)
  q <- local_pool(workers = 1)
  t <- suiro_submit(p, function() 1)
  u <- suiro_submit(q, function() 2)
  expect_error(suiro_collect_async(t), "suiro_collect_async: tasks must be a list of tasks")
  expect_error(suiro_collect_async(1:3), "suiro_collect_async: tasks must be a list")
  expect_error(suiro_collect_async(list(1)), "tasks\\[\\[1\\]\\] is not a suiro_task")
  expect_error(suiro_collect_async(list(t, "x")), "suiro_collect_async: tasks\\[\\[2\\]\\] is not a suiro_task")
  expect_error(suiro_collect_async(list(t, u)), "tasks\\[\\[2\\]\\] belongs to another pool")
  expect_error(suiro_collect_async(list(t), timeout = -1), "suiro_collect_async: timeout must be zero or more")
  expect_error(suiro_collect_async(list(t), timeout = "soon"), "suiro_collect_async: timeout")
  # the task is still there
  expect_identical(suiro_collect(t, timeout = 10), 1)
})

test_that("with later's loop otherwise empty it settles exactly once", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  ts <- suiro_submit_batch(p, function(i) { Sys.sleep(0.05); i }, lapply(1:10, list))
  out <- watch_promise(suiro_collect_async(ts, timeout = 20))
  expect_true(run_until(function() out$n > 0L))
  # later's loop empties within 2 s (the 20 s timeout's timer was cancelled; what is left is the
  # promise chain's own step), and settles nothing again on the way
  deadline <- Sys.time() + 2
  while (!later::loop_empty() && Sys.time() < deadline) later::run_now(0.05)
  expect_true(later::loop_empty())
  expect_identical(out$n, 1L)
  expect_identical(out$value, as.list(1:10))
})

test_that("a timeout rejects with suiro_error_timeout and collects nothing", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 1)
  gate <- tempfile()
  on.exit(unlink(gate), add = TRUE)
  ts <- suiro_submit_batch(p, function(i, gate) {
    t0 <- Sys.time()
    while (!file.exists(gate) && Sys.time() - t0 < 20) Sys.sleep(0.01)
    i
  }, list(list(1, gate), list(2, gate)))
  out <- watch_promise(suiro_collect_async(ts, timeout = 0.2))
  expect_true(run_until(function() !is.null(out$state), 10))
  expect_identical(out$state, "rejected")
  expect_s3_class(out$value, "suiro_error_timeout")
  file.create(gate)
  expect_identical(suiro_collect_all(ts, timeout = 20), list(1, 2))
  deadline <- Sys.time() + 0.5
  while (Sys.time() < deadline) later::run_now(0.05)
  expect_identical(out$n, 1L)
})

test_that("a batch whose pool stops is rejected with suiro_error_closed", {
  skip_if_not_installed("promises")
  p <- suiro_pool(1, env = worker_env())
  ts <- suiro_submit_batch(p, function() { Sys.sleep(30); 1 }, list(list(), list()))
  out <- watch_promise(suiro_collect_async(ts))
  later::run_now(0.1)
  suiro_pool_stop(p, 0.1)
  expect_true(run_until(function() !is.null(out$state), 10))
  expect_identical(out$state, "rejected")
  expect_s3_class(out$value, "suiro_error_closed")
  expect_identical(out$n, 1L)
})
