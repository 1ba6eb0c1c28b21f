# Conditions of R workers reach R hosts as conditions of their classes (issue 18 item 6): an
# error with its classes, fields and call; warnings, messages and other conditions relayed in order
# when the result is collected, so the host's handlers see them.

# What the host's calling handlers saw, in order, and the value (or the error caught).
seen_while <- function(expr) {
  seen <- character()
  note <- function(kind) function(c) seen <<- c(seen, paste(kind, sub("\n$", "", conditionMessage(c))))
  value <- tryCatch(withCallingHandlers(expr,
                                        warning = function(w) { note("W")(w); invokeRestart("muffleWarning") },
                                        message = function(m) { note("M")(m); invokeRestart("muffleMessage") },
                                        my_note = note("C")),
                    error = identity)
  list(seen = seen, value = value)
}

test_that("a custom error class arrives with its classes, fields and call", {
  p <- local_pool(workers = 1)
  f <- function(n) stop(structure(class = c("my_error", "error", "condition"),
                                  list(message = "not enough", call = quote(check(n, 10)), data = list(have = n, need = 10L))))
  t <- suiro_submit(p, f, 3L)
  caught <- tryCatch(suiro_collect(t, timeout = 10), my_error = function(e) e)
  expect_s3_class(caught, "my_error")
  expect_identical(class(caught), c("my_error", "suiro_error_remote", "suiro_error", "error", "condition"))
  expect_identical(caught$data, list(have = 3L, need = 10L))
  expect_identical(conditionMessage(caught), "not enough")
  expect_identical(conditionCall(caught), quote(check(n, 10)))
  expect_identical(caught$remote_class, "my_error")
  expect_match(caught$traceback, "<task function>")
  # handlers written for suiro_error_remote still catch it
  expect_s3_class(tryCatch(suiro_run(p, f, 1L, .timeout = 10), suiro_error_remote = identity), "my_error")
})

test_that("conditionCall of a plain stop() is kept (the task's own call without its data)", {
  p <- local_pool(workers = 1)
  inner <- function(x) stop("bad x")
  err <- tryCatch(suiro_run(p, function(v) inner(v), 1:1e5, .timeout = 10), error = identity)
  expect_s3_class(err, "simpleError")
  expect_identical(conditionCall(err), quote(inner(v)))
  err <- tryCatch(suiro_run(p, function(v) stop("top"), 1:1e5, .timeout = 10), error = identity)
  expect_identical(conditionCall(err), as.call(list(as.name("<task function>"), as.name("<argument>"))))
})

test_that("suppressWarnings and withCallingHandlers see a worker's warnings, in order", {
  p <- local_pool(workers = 1)
  f <- function(x) {
    warning("first ", x)
    warning("second")
    x * 2
  }
  r <- seen_while(suiro_collect(suiro_submit(p, f, 21), timeout = 10))
  expect_identical(r$value, 42)
  expect_identical(r$seen, c("W first 21", "W second"))
  expect_silent(expect_identical(suppressWarnings(suiro_run(p, f, 1, .timeout = 10)), 2))
  w <- tryCatch(suiro_run(p, f, 1, .timeout = 10), warning = identity)
  expect_s3_class(w, "simpleWarning")
  expect_identical(conditionMessage(w), "first 1")
  # a custom warning class keeps it
  cw <- function() { warning(structure(class = c("my_warning", "warning", "condition"), list(message = "mine", call = NULL, n = 5L))); 1 }
  w <- tryCatch(suiro_run(p, cw, .timeout = 10), my_warning = identity)
  expect_identical(w$n, 5L)
})

test_that("messages and other conditions are relayed in order with warnings", {
  p <- local_pool(workers = 1)
  f <- function() {
    message("hello")
    warning("careful")
    signalCondition(structure(class = c("my_note", "condition"), list(message = "noted", call = NULL)))
    message("bye")
    "done"
  }
  r <- seen_while(suiro_collect(suiro_submit(p, f), timeout = 10))
  expect_identical(r$value, "done")
  expect_identical(r$seen, c("M hello", "W careful", "C noted", "M bye"))
  expect_silent(expect_identical(suppressWarnings(suppressMessages(suiro_run(p, f, .timeout = 10))), "done"))
  expect_message(suiro_run(p, function() { message("to the host"); 1 }, .timeout = 10), "to the host")
  # conditions the task handles itself are not relayed
  quiet <- function() { suppressWarnings(warning("hidden")); tryCatch(message("x"), message = function(m) NULL); 3 }
  expect_identical(seen_while(suiro_run(p, quiet, .timeout = 10))$seen, character())
})

test_that("collect_any and collect_all relay each task's conditions in task order", {
  p <- local_pool(workers = 2)
  f <- function(i) { Sys.sleep(0.05 * (3 - i)); warning("task ", i); i }
  ts <- lapply(1:3, function(i) suiro_submit(p, f, i))
  r <- seen_while(suiro_collect_all(ts, timeout = 10))
  expect_identical(r$value, list(1L, 2L, 3L))
  expect_identical(r$seen, c("W task 1", "W task 2", "W task 3"))
  t <- suiro_submit(p, f, 2L)
  r <- seen_while(suiro_collect_any(list(t), timeout = 10))
  expect_identical(r$value$value, 2L)
  expect_identical(r$seen, "W task 2")
})

test_that("a map relays each element's warnings in element order", {
  p <- local_pool(workers = 2)
  f <- function(i) { Sys.sleep(0.01 * (i %% 3)); warning("element ", i); if (i %% 2) message("odd ", i); i * 10 }
  r <- seen_while(suiro_collect(suiro_map(p, 1:6, f, .template = numeric(1)), timeout = 10))
  expect_identical(r$value, (1:6) * 10)
  expect_identical(r$seen, c("W element 1", "M odd 1", "W element 2", "W element 3", "M odd 3", "W element 4",
                             "W element 5", "M odd 5", "W element 6"))
  r <- seen_while(suiro_collect(suiro_map(p, as.list(1:4), f), timeout = 10)) # untyped results
  expect_identical(r$value, as.list((1:4) * 10))
  expect_identical(r$seen, c("W element 1", "M odd 1", "W element 2", "W element 3", "M odd 3", "W element 4"))
  # streamed: each range's conditions as the range is delivered
  m <- suiro_map(p, 1:4, function(i) { warning("s", i); i }, .template = integer(1), .stream = TRUE)
  seen <- character()
  repeat {
    part <- withCallingHandlers(suiro_map_next(m, timeout = 10),
                                warning = function(w) { seen <<- c(seen, conditionMessage(w)); invokeRestart("muffleWarning") })
    if (is.null(part)) break
  }
  expect_setequal(seen, paste0("s", 1:4))
})

test_that("an error after warnings delivers the warnings, then the error", {
  p <- local_pool(workers = 1)
  f <- function() {
    warning("about to fail")
    message("really")
    stop(structure(class = c("my_error", "error", "condition"), list(message = "failed", call = NULL, code = 7L)))
  }
  r <- seen_while(suiro_collect(suiro_submit(p, f), timeout = 10))
  expect_identical(r$seen, c("W about to fail", "M really"))
  expect_s3_class(r$value, "my_error")
  expect_identical(r$value$code, 7L)
  # in a map: the elements' warnings in element order, then the failing element's error
  g <- function(i) { warning("w", i); if (i == 3) stop(structure(class = c("my_error", "error", "condition"),
                                                                 list(message = "three", call = NULL, i = i))); i }
  r <- seen_while(suiro_collect(suiro_map(p, 1:3, g, .template = integer(1)), timeout = 10))
  expect_identical(r$seen, c("W w1", "W w2", "W w3"))
  expect_s3_class(r$value, "my_error")
  expect_identical(r$value$i, 3L)
  expect_identical(r$value$index, 3)
  expect_match(conditionMessage(r$value), "element 3: three")
  # in collect_all: every task's warnings, then the first failure
  ts <- list(suiro_submit(p, function() { warning("a"); 1 }), suiro_submit(p, f))
  r <- seen_while(suiro_collect_all(ts, timeout = 10))
  expect_identical(r$seen, c("W a", "W about to fail", "M really"))
  expect_s3_class(r$value, "my_error")
})

test_that("a nested task's warnings reach the host through the task that collected them", {
  # one worker: it runs the inner task itself while the outer one waits (its record is set aside)
  p <- local_pool(workers = 1)
  f <- function() {
    warning("outer before")
    inner <- suiro_collect(suiro_submit(suiro_current_pool(), function() { warning("inner"); 5 }), timeout = 10)
    warning("outer after")
    inner + 1
  }
  r <- seen_while(suiro_collect(suiro_submit(p, f), timeout = 20))
  expect_identical(r$value, 6)
  expect_identical(r$seen, c("W outer before", "W inner", "W outer after"))
})
