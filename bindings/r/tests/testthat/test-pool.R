# Pools and tasks from an R host to R workers: the API of docs/r.md as written.

test_that("a function and its arguments by name run on a worker", {
  p <- local_pool(workers = 2)
  t <- suiro_submit(p, function(x, y) sum(x) + y, x = 1:10, y = 100)
  expect_s3_class(t, "suiro_task")
  expect_identical(suiro_collect(t, timeout = 5), 155)
  expect_error(suiro_collect(t, timeout = 5), "collected already")
})

test_that("an expression is evaluated with its arguments as variables", {
  p <- local_pool(workers = 1)
  expect_identical(suiro_collect(suiro_submit(p, quote(sum(x) + y), x = 1:10, y = 100), timeout = 5), 155)
  expect_identical(suiro_collect(suiro_submit(p, quote({ z <- x * 2; z + 1 }), x = 3L), timeout = 5), 7)
  expect_error(suiro_submit(p, quote(x + 1), 2), "argument 1 needs a name")
})

test_that("positional, named and default arguments are matched as in R", {
  p <- local_pool(workers = 1)
  f <- function(a, b = 10, ...) list(a = a, b = b, dots = list(...))
  got <- suiro_collect(suiro_submit(p, f, 1, extra = "x", b = 2), timeout = 5)
  expect_identical(got, list(a = 1, b = 2, dots = list(extra = "x")))
  expect_identical(suiro_collect(suiro_submit(p, f, a = 5), timeout = 5)$b, 10)
})

test_that("package functions go by name", {
  p <- local_pool(workers = 1)
  expect_identical(suiro_collect(suiro_submit(p, "stats::median", c(1, 5, 2)), timeout = 5), 2)
  expect_identical(suiro_collect(suiro_submit(p, "stats::quantile", c(1, 2, 3, 4), probs = 0.5, names = FALSE), timeout = 5), 2.5)
  expect_identical(suiro_collect(suiro_submit(p, stats::sd, c(2, 4, 4, 4, 5, 5, 7, 9)), timeout = 5), sd(c(2, 4, 4, 4, 5, 5, 7, 9)))
  err <- tryCatch(suiro_collect(suiro_submit(p, "nopkg::nofn", 1), timeout = 5), error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_match(conditionMessage(err), "nopkg")
})

test_that("a task sees only its arguments and the closure's own variables", {
  p <- local_pool(workers = 1)
  secret <- 42
  make <- function(k) function(x) x * k
  times3 <- make(3)
  expect_identical(suiro_collect(suiro_submit(p, times3, 5), timeout = 5), 15)
  # the captured value is a snapshot taken at submit time
  counter <- local({ n <- 1; function() n })
  t1 <- suiro_submit(p, counter)
  environment(counter)$n <- 2
  t2 <- suiro_submit(p, counter)
  expect_identical(c(suiro_collect(t1, timeout = 5), suiro_collect(t2, timeout = 5)), c(1, 2))
  # the host's globals are not there
  assign("suiro_test_global", 1, envir = globalenv())
  on.exit(rm("suiro_test_global", envir = globalenv()))
  err <- tryCatch(suiro_collect(suiro_submit(p, function() suiro_test_global), timeout = 5), error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_match(conditionMessage(err), "suiro_test_global")
  # globals a task sets do not leak into the next one's view of its arguments
  expect_identical(suiro_collect(suiro_submit(p, function(x) x, secret), timeout = 5), 42)
})

test_that("the same function submitted in a loop is serialized once and still correct", {
  p <- local_pool(workers = 2)
  f <- function(i) i * 2L
  ts <- lapply(1:200, function(i) suiro_submit(p, f, i))
  expect_identical(unlist(suiro_collect_all(ts, timeout = 20)), (1:200) * 2L)
  g <- function(i) i + 0.5
  expect_identical(suiro_collect(suiro_submit(p, g, 1), timeout = 5), 1.5)
  expect_identical(suiro_collect(suiro_submit(p, f, 3L), timeout = 5), 6L)
})

test_that("batches, collect_all and collect_any", {
  p <- local_pool(workers = 2)
  ts <- suiro_submit_batch(p, function(i) i^2, list(list(1), list(2), list(3)))
  expect_length(ts, 3)
  expect_identical(suiro_collect_all(ts, timeout = 10), list(1, 4, 9))
  ts <- suiro_submit_batch(p, function(i) i^2, list(a = list(2), b = list(3)))
  expect_identical(suiro_collect_all(ts, timeout = 10), list(a = 4, b = 9))
  ts <- suiro_submit_batch(p, function(s) { Sys.sleep(s); s }, list(list(0.5), list(0)))
  first <- suiro_collect_any(ts, timeout = 10)
  expect_identical(first, list(index = 2L, value = 0))
  expect_identical(suiro_collect_any(ts[1], timeout = 10)$value, 0.5)
  expect_error(suiro_collect_any(ts, timeout = 1), "collected already")
})

test_that("a task not ready in time gives the timeout sentinel and stays collectable", {
  p <- local_pool(workers = 1)
  t <- suiro_submit(p, function() { Sys.sleep(0.5); "done" })
  r <- suiro_collect(t, timeout = 0.05)
  expect_true(suiro_is_sentinel(r))
  expect_s3_class(r, "suiro_timeout")
  expect_identical(r, suiro_timeout())
  expect_output(print(r), "suiro_timeout")
  expect_identical(suiro_collect(t, timeout = "10s"), "done")
  ts <- list(suiro_submit(p, function() { Sys.sleep(0.5); 1 }))
  expect_true(suiro_is_sentinel(suiro_collect_all(ts, timeout = 0.05)))
  expect_identical(suiro_collect_all(ts, timeout = 10), list(1))
  expect_false(suiro_is_sentinel(list()))
})

test_that("misuse signals at once naming the argument", {
  p <- local_pool(workers = 1)
  expect_error(suiro_submit(42, function() 1), "suiro_submit: argument 1 must be a suiro_pool")
  expect_error(suiro_submit(p, 42), "argument 2 must be a function")
  expect_error(suiro_submit(p, function(x) x, x = p),
               "suiro_submit: argument 'x': an external pointer cannot be sent.*suiro_current_pool")
  expect_error(suiro_submit(p, function(x) x, 1, list(a = p)),
               "suiro_submit: argument 4\\[\\['a'\\]\\]: an external pointer")
  expect_error(suiro_collect(42), "argument 1 must be a suiro_task")
  expect_error(suiro_collect(suiro_submit(p, function() 1), timeout = -1), "timeout must be zero or more")
  expect_error(suiro_collect(suiro_submit(p, function() 1), timeout = "soon"), "timeout")
  expect_error(suiro_pool(workers = -1), "workers")
  expect_error(suiro_pool(workers = 1, bogus_option = 1), "unused argument")
  expect_error(suiro_pool(workers = 1, timeout = "1x"), "timeout")
  expect_error(suiro_submit_batch(p, function(x) x, 1), ".args must be a list")
})

test_that("values that cannot cross to R workers are few: environments cross, external pointers do not", {
  p <- local_pool(workers = 1)
  e <- new.env()
  e$v <- 7
  expect_identical(suiro_collect(suiro_submit(p, function(env) env$v, e), timeout = 5), 7)
  f <- y ~ x + z
  expect_identical(suiro_collect(suiro_submit(p, function(f) all.vars(f), f), timeout = 5), c("y", "x", "z"))
})

test_that("print methods show pools, tasks and calls", {
  p <- local_pool(workers = 1)
  expect_output(print(p), "suiro pool .*1 r worker")
  t <- suiro_submit(p, function() 1)
  expect_output(print(t), "suiro task")
  suiro_collect(t, timeout = 5)
  expect_output(print(t), "collected")
  expect_output(print(suiro_call("stats::median", 1:3)), "suiro call \"stats::median\": 1 positional")
  suiro_pool_stop(p)
  expect_output(print(p), "stopped")
  expect_error(suiro_submit(p, function() 1), "stopped")
})

test_that("status reports workers and counts; pools grow and shrink", {
  p <- local_pool(workers = 1, max_workers = 3)
  suiro_collect(suiro_submit(p, function() 1), timeout = 5)
  s <- suiro_pool_status(p)
  expect_identical(nrow(s$worker), 1L)
  expect_gte(s$tasks, 1)
  suiro_pool_spawn(p, 1)
  deadline <- Sys.time() + 20
  while (suiro_pool_status(p)$workers < 2 && Sys.time() < deadline) Sys.sleep(0.01)
  expect_identical(suiro_pool_status(p)$workers, 2)
  expect_true(suiro_pool_retire(p, 1, timeout = 10))
})

test_that("result slots: a batch larger than the free slots is cut short, a full pool says so", {
  p <- local_pool(workers = 1, result_slots = 64)
  ts <- suiro_submit_batch(p, function(i) i, lapply(1:100, list))
  expect_lte(length(ts), 64)
  expect_gte(length(ts), 1)
  held <- ts
  full <- suiro_submit(p, function() 1, .timeout = 0.2)
  expect_true(suiro_is_sentinel(full))
  expect_s3_class(full, "suiro_full")
  # collecting what submit returned instead of a task gives the same outcome back, not an error
  expect_identical(suiro_collect(full), full)
  expect_identical(unlist(suiro_collect_all(held, timeout = 10)), seq_along(held))
  expect_identical(suiro_collect(suiro_submit(p, function() "again"), timeout = 5), "again")
  # tasks dropped uncollected give their slots back
  for (i in 1:200) suiro_submit(p, function() 0)
  expect_identical(suiro_collect(suiro_submit(p, function() "still"), timeout = 10), "still")
  # fewer slots than a slab of task objects holds: dropped tasks still give theirs back
  q <- local_pool(workers = 1, result_slots = 8)
  for (i in 1:30) invisible(suiro_submit(q, function() 0, .timeout = 5))
  expect_identical(suiro_collect(suiro_submit(q, function() "small", .timeout = 5), timeout = 10), "small")
  # a kept task survives the slab its neighbours were dropped from
  keep <- suiro_submit(q, function() "kept")
  for (i in 1:20) invisible(suiro_submit(q, function() 0, .timeout = 5))
  gc()
  expect_identical(suiro_collect(keep, timeout = 10), "kept")
})

test_that("suiro_run submits and collects in one call", {
  p <- local_pool(workers = 1)
  expect_identical(suiro_run(p, function(a, b) a + b, 1, b = 2), 3)
  expect_identical(suiro_run(p, "base::max", 4, 9), 9)
  expect_identical(suiro_run(p, quote(x * 2), x = 21), 42)
  e <- tryCatch(suiro_run(p, function() stop("boom")), error = function(e) e)
  expect_s3_class(e, "suiro_error_remote")
  expect_match(conditionMessage(e), "boom")
  # its timeout covers the result too: the sentinel comes back and the task is dropped
  expect_true(suiro_is_sentinel(suiro_run(p, function() { Sys.sleep(3); 1 }, .timeout = 0.2)))
  expect_identical(suiro_run(p, function() "next", .timeout = 20), "next") # the worker is free again
  expect_error(suiro_run(p, function() 1, .timeout = -1), "suiro_run")
  suiro_pool_stop(p)
  expect_error(suiro_run(p, function() 1), "suiro_run: the pool is stopped")
})

test_that("suiro_collect tells tasks, maps and sentinels apart in C", {
  p <- local_pool(workers = 1)
  expect_identical(suiro_collect(suiro_submit(p, function() 1), timeout = 10), 1)
  expect_identical(suiro_collect(suiro_map(p, 1:3, function(x) x * 2L), timeout = 10), list(2L, 4L, 6L))
  s <- suiro_run(p, function() { Sys.sleep(3); 1 }, .timeout = 0.1)
  expect_identical(suiro_collect(s), s)
  expect_error(suiro_collect(list(1)), "suiro_collect: argument 1 must be a suiro_task or a suiro_map")
})
