# Failures: remote errors with class, message, traceback; a worker killed mid-task; cancellation.

test_that("a task that fails signals suiro_error_remote with class, message and traceback", {
  p <- local_pool(workers = 1)
  deep <- function(x) inner(x)
  inner <- function(x) stop("bad value: ", x)
  err <- tryCatch(suiro_collect(suiro_submit(p, deep, 7), timeout = 5), error = identity)
  expect_s3_class(err, c("simpleError", "suiro_error_remote", "suiro_error", "error", "condition"), exact = TRUE)
  expect_identical(conditionMessage(err), "bad value: 7")
  expect_identical(err$remote_class, "simpleError")
  expect_match(err$traceback, "inner\\(x\\)")
  expect_match(err$traceback, "1: <task function>\\(7\\)")
  expect_no_match(err$traceback, "worker_main|handleSimpleError")
  expect_true(is.na(err$index))
  expect_output(print(err), "suiro remote error: simpleError: bad value: 7")
  # a condition of the task's own class keeps it
  cond <- function() stop(structure(class = c("my_error", "error", "condition"), list(message = "mine", call = NULL)))
  err <- tryCatch(suiro_collect(suiro_submit(p, cond), timeout = 5), error = identity)
  expect_identical(err$remote_class, "my_error")
  expect_identical(conditionMessage(err), "mine")
  # errors the task catches itself are not failures
  ok <- function() tryCatch(stop("inner"), error = function(e) "caught")
  expect_identical(suiro_collect(suiro_submit(p, ok), timeout = 5), "caught")
  # the worker survives and keeps serving
  expect_identical(suiro_collect(suiro_submit(p, function() "after"), timeout = 5), "after")
})

test_that("a result that cannot be encoded fails the task naming the path", {
  p <- local_pool(workers = 1)
  err <- tryCatch(suiro_collect(suiro_submit(p, function() list(a = 1, b = list(c = suiro_current_pool()))), timeout = 5),
                  error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_match(conditionMessage(err), "result\\[\\['b'\\]\\]\\[\\['c'\\]\\]: an external pointer cannot be sent")
})

test_that("a worker killed mid-task fails that task with suiro_error_worker_died; the pool goes on", {
  p <- local_pool(workers = 1)
  pid <- suiro_collect(suiro_submit(p, function() Sys.getpid()), timeout = 5)
  t <- suiro_submit(p, function() { Sys.sleep(30); "never" })
  # wait (bounded) until the worker is running it
  deadline <- Sys.time() + 10
  while (suiro_pool_status(p)$worker$state[1] != "busy" && Sys.time() < deadline) Sys.sleep(0.01)
  expect_identical(suiro_pool_status(p)$worker$state[1], "busy")
  tools::pskill(pid, tools::SIGKILL)
  err <- tryCatch(suiro_collect(t, timeout = 10), error = identity)
  expect_s3_class(err, "suiro_error_worker_died")
  expect_identical(err$pid, as.integer(pid))
  expect_identical(err$slot, 0L)
  expect_output(print(err), "worker died: slot 0")
  # respawned: the next task runs on a new worker
  pid2 <- suiro_collect(suiro_submit(p, function() Sys.getpid()), timeout = 20)
  expect_false(identical(pid2, pid))
  expect_gte(suiro_pool_status(p)$deaths, 1)
})

test_that("a task cancelled before it starts fails with suiro_error_cancelled", {
  p <- local_pool(workers = 1)
  blocker <- suiro_submit(p, function() { Sys.sleep(0.5); 1 })
  queued <- suiro_submit(p, function() 2)
  expect_true(suiro_cancel(queued))
  err <- tryCatch(suiro_collect(queued, timeout = 10), error = identity)
  expect_s3_class(err, "suiro_error_cancelled")
  expect_identical(suiro_collect(blocker, timeout = 10), 1)
  expect_false(suiro_cancel(blocker))
})

test_that("collect_all signals the first failure with its index", {
  p <- local_pool(workers = 2)
  ts <- suiro_submit_batch(p, function(i) if (i == 3) stop("three") else i, lapply(1:4, list))
  err <- tryCatch(suiro_collect_all(ts, timeout = 10), error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_identical(err$index, 3)
  expect_identical(conditionMessage(err), "three")
})
