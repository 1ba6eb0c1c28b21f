# The worker loop's handlers are established once (rworker.c's fast path): a task that fails,
# is interrupted or recurses without end is caught at its own frame, runs its on.exit code, and
# leaves the worker as it found it; a task run while another waits keeps its own handlers.

seen_in <- function(expr) {
  seen <- character()
  value <- tryCatch(withCallingHandlers(expr,
                                        warning = function(w) { seen <<- c(seen, paste("W", conditionMessage(w)))
                                                                invokeRestart("muffleWarning") },
                                        message = function(m) { seen <<- c(seen, paste("M", sub("\n$", "", conditionMessage(m))))
                                                                invokeRestart("muffleMessage") }),
                    error = identity)
  list(seen = seen, value = value)
}

test_that("a failing task runs its on.exit code and the worker goes on relaying", {
  p <- local_pool(workers = 1)
  boom <- function() {
    on.exit(assign("suiro_test_cleaned", "yes", envir = globalenv()))
    warning("before")
    stop("boom")
  }
  r <- seen_in(suiro_run(p, boom, .timeout = 10))
  expect_s3_class(r$value, "suiro_error_remote")
  expect_identical(conditionMessage(r$value), "boom")
  expect_identical(r$seen, "W before")
  expect_identical(suiro_run(p, function() get0("suiro_test_cleaned", envir = globalenv()), .timeout = 10), "yes")
  # the next tasks relay their own conditions only, and a task that succeeds after many failures
  for (i in 1:50) expect_error(suiro_run(p, function(i) stop("fail ", i), i, .timeout = 10), paste("fail", i))
  r <- seen_in(suiro_run(p, function() { message("after"); 7 }, .timeout = 10))
  expect_identical(r$value, 7)
  expect_identical(r$seen, "M after")
})

test_that("endless recursion and an interrupt fail the task, not the worker", {
  p <- local_pool(workers = 1)
  deep <- function() { f <- function(n) f(n + 1); f(0) }
  e <- tryCatch(suiro_run(p, deep, .timeout = 30), error = identity)
  expect_s3_class(e, "suiro_error_remote")
  expect_match(conditionMessage(e), "nested too deeply|stack", ignore.case = TRUE)
  intr <- function() {
    on.exit(assign("suiro_test_interrupted", TRUE, envir = globalenv()))
    tools::pskill(Sys.getpid(), tools::SIGINT)
    Sys.sleep(5)
    "not interrupted"
  }
  e <- tryCatch(suiro_run(p, intr, .timeout = 30), error = identity)
  expect_s3_class(e, "suiro_error_remote")
  expect_true(suiro_run(p, function() get0("suiro_test_interrupted", envir = globalenv(), ifnotfound = FALSE),
                        .timeout = 10))
  # the evaluation depth came back: a recursion of 1000 still fits
  expect_identical(suiro_run(p, function() { f <- function(n) if (n) f(n - 1) else "bottom"; f(1000) }, .timeout = 10),
                   "bottom")
})

test_that("a task run while another waits does not see the waiting task's handlers", {
  # one worker: it runs the inner task itself while the outer one waits in its handlers
  p <- local_pool(workers = 1)
  outer <- function() {
    seen <- character()
    got <- tryCatch(withCallingHandlers(
      suiro_collect(suiro_submit(suiro_current_pool(), function() { warning("inner"); stop("inner failed") }),
                    timeout = 10),
      warning = function(w) seen <<- c(seen, conditionMessage(w))), # not muffled: on to the relay
      error = function(e) paste(inherits(e, "suiro_error_remote"), conditionMessage(e)))
    list(seen = seen, got = got)
  }
  r <- seen_in(suiro_run(p, outer, .timeout = 20))
  expect_identical(r$seen, "W inner") # relayed on by the outer task
  r <- r$value
  # the inner failure and warning reach the outer task when it collects (the failure as the
  # remote error), not also while the inner task ran under the outer task's handlers
  expect_identical(r$seen, "inner")
  expect_identical(r$got, "TRUE inner failed")
})
