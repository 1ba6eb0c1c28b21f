# Promises: tasks and maps settle through later's loop when the pool's eventfd fires (no polling).

run_until <- function(done, seconds = 20) {
  deadline <- Sys.time() + seconds
  while (!done() && Sys.time() < deadline) later::run_now(0.05)
  done()
}

test_that("a task is a promise: then() gets its value", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  p <- local_pool(workers = 1)
  t <- suiro_submit(p, function(x) { Sys.sleep(0.3); x * 2 }, 21)
  got <- NULL
  promises::then(t, function(v) got <<- v)
  before <- suiro:::async_counts()[["wakeups"]]
  expect_true(run_until(function() !is.null(got)))
  expect_identical(got, 42)
  # settled by events, not by polling: a 0.3 s task took a few wake-ups, not one per tick
  expect_lte(suiro:::async_counts()[["wakeups"]] - before, 3)
})

test_that("a failing task rejects its promise with the remote error", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 1)
  err <- NULL
  promises::catch(promises::as.promise(suiro_submit(p, function() stop("async boom"))), function(e) err <<- e)
  expect_true(run_until(function() !is.null(err)))
  expect_s3_class(err, "suiro_error_remote")
  expect_identical(conditionMessage(err), "async boom")
})

test_that("many tasks settle, in any order, and a map is a promise too", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  vals <- numeric(0)
  for (i in 1:20) promises::then(suiro_submit(p, function(i) i^2, i), function(v) vals <<- c(vals, v))
  expect_true(run_until(function() length(vals) == 20))
  expect_identical(sort(vals), (1:20)^2)
  m <- suiro_map(p, 1:100, function(i) i + 0.5, .template = numeric(1))
  got <- NULL
  promises::then(promises::as.promise(m), function(v) got <<- v)
  expect_true(run_until(function() !is.null(got)))
  expect_identical(got, (1:100) + 0.5)
  # chains compose
  res <- NULL
  promises::then(promises::then(suiro_submit(p, function() 1), function(v) v + 1), function(v) res <<- v)
  expect_true(run_until(function() !is.null(res)))
  expect_identical(res, 2)
})

test_that("a pending map promise costs no wake-ups while it runs", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  gate <- tempfile()
  on.exit(unlink(gate), add = TRUE)
  # the elements wait for a file (bounded: 20 s), so the map stays pending while R's loop runs
  m <- suiro_map(p, 1:2, function(i, gate) {
    t0 <- Sys.time()
    while (!file.exists(gate) && Sys.time() - t0 < 20) Sys.sleep(0.01)
    i
  }, gate, .template = numeric(1))
  got <- NULL
  promises::then(promises::as.promise(m), function(v) got <<- v)
  before <- suiro:::async_counts()[["wakeups"]]
  deadline <- Sys.time() + 0.5
  while (Sys.time() < deadline) later::run_now(0.05)
  expect_null(got)
  # 0.5 s of a pending map: no callback ran (polling every 5 ms ran about 100)
  expect_identical(suiro:::async_counts()[["wakeups"]] - before, 0)
  file.create(gate)
  expect_true(run_until(function() !is.null(got)))
  expect_identical(got, c(1, 2))
})

test_that("2,000 task promises settle in a few wake-ups, each settled once", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 2)
  n <- 2000L
  ts <- suiro_submit_batch(p, function(i) i, lapply(seq_len(n), list))
  expect_length(ts, n)
  expect_identical(suiro_collect_all(ts[n], timeout = 20), list(n)) # all ran (FIFO)
  before <- suiro:::async_counts()
  got <- integer(0)
  for (t in ts[-n]) promises::then(t, function(v) got[length(got) + 1L] <<- v)
  expect_true(run_until(function() length(got) == n - 1L, 30))
  expect_identical(sort(got), seq_len(n - 1L))
  after <- suiro:::async_counts()
  # the tasks were done before their promises: one kick settles them all
  expect_identical(after[["settled"]] - before[["settled"]], n - 1)
  expect_lte(after[["wakeups"]] - before[["wakeups"]], 2)
})

test_that("a promise whose pool stops is rejected, not fulfilled with a sentinel", {
  skip_if_not_installed("promises")
  p <- suiro_pool(1, env = worker_env())
  t <- suiro_submit(p, function() { Sys.sleep(30); 1 })
  m <- suiro_map(p, 1:3, function(i) { Sys.sleep(30); i })
  out <- list()
  promises::then(t, function(v) out$task <<- list("fulfilled", v), function(e) out$task <<- list("rejected", e))
  promises::then(promises::as.promise(m), function(v) out$map <<- list("fulfilled", v),
                 function(e) out$map <<- list("rejected", e))
  later::run_now(0.1)
  suiro_pool_stop(p, 0.1)
  expect_true(run_until(function() length(out) == 2, 10))
  expect_identical(out$task[[1]], "rejected")
  expect_s3_class(out$task[[2]], "suiro_error_closed")
  expect_match(conditionMessage(out$task[[2]]), "pool stopped")
  expect_identical(out$map[[1]], "rejected")
  expect_s3_class(out$map[[2]], "error")
  # a promise made after the stop is rejected too
  late <- NULL
  promises::catch(promises::as.promise(t), function(e) late <<- e)
  expect_true(run_until(function() !is.null(late), 5))
  expect_s3_class(late, "error")
})

test_that("then() on a collected task settles (rejected: its value was taken)", {
  skip_if_not_installed("promises")
  p <- local_pool(workers = 1)
  t <- suiro_submit(p, function() 7)
  expect_identical(suiro_collect(t, timeout = 10), 7)
  err <- NULL
  promises::then(t, function(v) err <<- "fulfilled", function(e) err <<- e)
  expect_true(run_until(function() !is.null(err), 5))
  expect_s3_class(err, "error")
  expect_match(conditionMessage(err), "collected already")
  # a finished task that was never collected settles with its value, at once
  t2 <- suiro_submit(p, function() 8)
  expect_true(run_until(function() suiro_ready(t2), 10))
  v <- NULL
  promises::then(t2, function(x) v <<- x)
  expect_true(run_until(function() !is.null(v), 5))
  expect_identical(v, 8)
})
