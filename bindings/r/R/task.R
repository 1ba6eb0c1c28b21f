# Tasks: submit one or a batch, collect one, any or all, cancel.
#
# suiro_submit(p, function(x, y) sum(x) + y, x = 1:10, y = 100)   a function and its arguments
# suiro_submit(p, quote(sum(x) + y), x = 1:10, y = 100)           an expression and its variables
# suiro_submit(p, "stats::median", c(1, 5, 2))                    a function by name
# suiro_submit(p, suiro_call("numpy.mean", x))                    a call spec (any language)
#
# A task sees only its arguments: a function travels with its code and, when it was made inside
# another function, a copy of the variables it captured; package functions go by name.

suiro_submit <- function(.pool, .f, ..., .timeout = NULL) .Call(C_submit, .pool, .f, list(...), .timeout)

suiro_submit_batch <- function(.pool, .f, .args, .timeout = NULL) {
  if (!is.list(.args)) stop("suiro_submit_batch: .args must be a list of argument lists", call. = FALSE)
  .Call(C_submit_batch, .pool, .f, .args, .timeout)
}

# Tasks and maps (the C side tells them apart, cluster maps included: no R-level test on the
# hot path; a cluster map goes to cluster_collect of R/cluster.R).
suiro_collect <- function(x, timeout = NULL) .Call(C_collect, x, timeout)

# Submit and collect in one call (no task object): the round trip of a single call.
suiro_run <- function(.pool, .f, ..., .timeout = NULL) .Call(C_run, .pool, .f, list(...), .timeout)

suiro_collect_any <- function(tasks, timeout = NULL) .Call(C_collect_any, tasks, timeout)

suiro_collect_all <- function(tasks, timeout = NULL) .Call(C_collect_all, tasks, timeout)

suiro_cancel <- function(x) {
  if (inherits(x, "suiro_cluster_map")) return(invisible(.Call(C_cluster_map_cancel, x$xm)))
  if (inherits(x, "suiro_map")) return(invisible(.Call(C_map_cancel, x)))
  .Call(C_task_cancel, x)
}

suiro_ready <- function(x) {
  if (inherits(x, "suiro_map")) return(.Call(C_map_ready, x))
  .Call(C_task_ready, x)
}

print.suiro_task <- function(x, ...) {
  cat("<suiro task: ", .Call(C_task_state, x), ">\n", sep = "")
  invisible(x)
}
