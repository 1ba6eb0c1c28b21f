# Promises: as.promise(task), as.promise(map), promises::then(task, ...). A watcher thread sleeps
# on the pool's eventfd and schedules .suiro_async_dispatch on later's loop when results land
# (src/rasync.c); no polling.

async_registry <- new.env(parent = emptyenv())
async_stats <- new.env(parent = emptyenv())
async_stats$dispatches <- 0

as.promise.suiro_task <- function(x) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("as.promise: install the promises and later packages", call. = FALSE)
  pool <- .Call(C_task_pool, x)
  promises::promise(function(resolve, reject) async_register(pool, x, resolve, reject))
}

as.promise.suiro_map <- function(x) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("as.promise: install the promises and later packages", call. = FALSE)
  pool <- .Call(C_map_pool, x)
  promises::promise(function(resolve, reject) async_register(pool, x, resolve, reject))
}

async_register <- function(pool, x, resolve, reject) {
  key <- pool_key(pool)
  entry <- async_registry[[key]] %||% list(pool = pool, waiting = list())
  entry$waiting[[length(entry$waiting) + 1L]] <- list(x = x, resolve = resolve, reject = reject)
  async_registry[[key]] <- entry
  .Call(C_async_watch, pool)
  later::later(function() .suiro_async_dispatch(pool), 0) # results that landed before the watch
  invisible()
}

pool_key <- function(pool) format(.Call(C_pool_addr, pool))

# Settles the promises whose task or map is done (called on later's loop).
.suiro_async_dispatch <- function(pool) {
  async_stats$dispatches <- async_stats$dispatches + 1
  key <- pool_key(pool)
  entry <- async_registry[[key]]
  if (is.null(entry)) return(invisible())
  left <- list()
  for (w in entry$waiting) {
    if (!suiro_ready(w$x)) {
      left[[length(left) + 1L]] <- w
      next
    }
    res <- tryCatch(list(ok = TRUE, value = suiro_collect(w$x, timeout = 0)),
                    error = function(e) list(ok = FALSE, value = e))
    if (res$ok) w$resolve(res$value) else w$reject(res$value)
  }
  if (length(left)) {
    entry$waiting <- left
    async_registry[[key]] <- entry
    # maps finish through their runners' results, which wake the watcher too; a map still
    # finishing its last range is looked at again shortly
    if (any(vapply(left, function(w) inherits(w$x, "suiro_map"), TRUE)))
      later::later(function() .suiro_async_dispatch(pool), 0.005)
  } else {
    rm(list = key, envir = async_registry)
  }
  invisible()
}
