# Promises: as.promise(task), as.promise(map), promises::then(task, ...). A watcher thread sleeps
# on the pool's eventfd and, when results land, one callback on later's loop picks the promises
# whose task or map is done (src/rasync.c) and settles them here; no polling. A promise whose
# pool stops is rejected (a suiro_error_closed condition), and one made for a task that was
# collected already is rejected at once (its value was taken).

as.promise.suiro_task <- function(x) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("as.promise: install the promises and later packages", call. = FALSE)
  pool <- .Call(C_task_pool, x)
  promises::promise(function(resolve, reject) .Call(C_async_add, pool, x, resolve, reject))
}

as.promise.suiro_map <- function(x) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("as.promise: install the promises and later packages", call. = FALSE)
  pool <- .Call(C_map_pool, x)
  promises::promise(function(resolve, reject) .Call(C_async_add, pool, x, resolve, reject))
}

# Callbacks run and promises settled so far (the tests check that waiting costs no wake-ups).
async_counts <- function() .Call(C_async_counts)

closed_condition <- function(x, sentinel) {
  what <- if (inherits(x, "suiro_map")) "map" else "task"
  msg <- if (inherits(sentinel, "suiro_closed")) sprintf("the %s's pool stopped before its result was collected", what)
         else sprintf("the %s cannot be collected (%s)", what, class(sentinel)[1])
  structure(class = c("suiro_error_closed", "suiro_error", "error", "condition"),
            list(message = msg, call = NULL))
}

# Settles the promises of entries list(x, resolve, reject) whose task or map is done (called by
# src/rasync.c on later's loop).
.suiro_async_settle <- function(ready) {
  for (w in ready) {
    x <- w[[1L]]
    res <- tryCatch(list(ok = TRUE, value = suiro_collect(x, timeout = 0)),
                    error = function(e) list(ok = FALSE, value = e))
    if (res$ok && suiro_is_sentinel(res$value)) res <- list(ok = FALSE, value = closed_condition(x, res$value))
    # one failing settle must not keep the rest of the batch from theirs
    tryCatch(if (res$ok) w[[2L]](res$value) else w[[3L]](res$value), error = function(e) NULL)
  }
  invisible()
}
