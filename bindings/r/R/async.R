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

# One promise for a list of tasks (what suiro_submit_batch returns): resolved with the list of
# results in order (what suiro_collect_all(tasks) returns) once every task is done, rejected with
# the condition suiro_collect_all would signal (the first failure in task order; every task is
# collected either way, so the other results are dropped), with suiro_error_closed when the pool
# stops first, or with suiro_error_timeout (nothing collected) when timeout seconds pass. One
# entry on the pool's pending list: settled from the same watcher callback as as.promise(task).
suiro_collect_async <- function(tasks, timeout = NULL) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("suiro_collect_async: install the promises and later packages", call. = FALSE)
  if (!is.list(tasks))
    stop(sprintf("suiro_collect_async: tasks must be a list of tasks (as suiro_submit_batch returns), got %s",
                 class(tasks)[1L]), call. = FALSE)
  if (!length(tasks)) return(promises::promise_resolve(suiro_collect_all(tasks)))
  if (!inherits(tasks[[1L]], "suiro_task") || typeof(tasks[[1L]]) != "externalptr")
    stop("suiro_collect_async: tasks[[1]] is not a suiro_task", call. = FALSE)
  pool <- .Call(C_task_pool, tasks[[1L]])
  fns <- NULL
  p <- promises::promise(function(resolve, reject) fns <<- list(resolve, reject))
  # outside the promise's executor: a bad argument is an error here, not a rejection
  batch <- structure(list(tasks, timeout), class = "suiro_async_batch")
  st <- .Call(C_async_add, pool, batch, fns[[1L]], fns[[2L]]) # list(state, seconds)
  secs <- st[[2L]]
  if (secs >= 0 && is.finite(secs)) {
    state <- st[[1L]]
    reject <- fns[[2L]]
    state$cancel <- later::later(function() {
      if (is.null(state$done)) {
        state$done <- TRUE # src/rasync.c drops the entry; the tasks stay uncollected
        reject(chan_condition("suiro_error_timeout",
                              sprintf("suiro_collect_async: not every task was done within %g seconds", secs)))
      }
    }, secs)
  }
  p
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

# A batch entry's outcome (suiro_collect_async): every task is settled, or the pool stopped.
settle_batch <- function(tasks) {
  if (identical(.Call(C_task_state, tasks[[1L]]), "pool stopped"))
    return(list(ok = FALSE, value = chan_condition("suiro_error_closed",
                                                   "the tasks' pool stopped before their results were collected")))
  tryCatch(list(ok = TRUE, value = suiro_collect_all(tasks, timeout = 0)),
           error = function(e) list(ok = FALSE, value = e))
}

# Settles the promises of entries list(x, resolve, reject, ...) whose task, map or batch is done
# (called by src/rasync.c on later's loop).
.suiro_async_settle <- function(ready) {
  for (w in ready) {
    x <- w[[1L]]
    if (length(w) == 5L && is.function(w[[5L]]$cancel)) w[[5L]]$cancel() # its timeout's timer
    res <- if (length(w) == 5L) settle_batch(x)
           else tryCatch(list(ok = TRUE, value = suiro_collect(x, timeout = 0)),
                         error = function(e) list(ok = FALSE, value = e))
    if (res$ok && suiro_is_sentinel(res$value)) res <- list(ok = FALSE, value = closed_condition(x, res$value))
    # one failing settle must not keep the rest of the batch from theirs
    tryCatch(if (res$ok) w[[2L]](res$value) else w[[3L]](res$value), error = function(e) NULL)
  }
  invisible()
}
