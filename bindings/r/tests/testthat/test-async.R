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
  before <- suiro:::async_stats$dispatches
  expect_true(run_until(function() !is.null(got)))
  expect_identical(got, 42)
  # settled by events, not by polling: a 0.3 s task took a few dispatches, not one per tick
  expect_lte(suiro:::async_stats$dispatches - before, 3)
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
