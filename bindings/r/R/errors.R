# Outcomes and errors.
#
# suiro_collect() returns a sentinel when the task is not ready in time (suiro_timeout), its pool
# stopped (suiro_closed) or no worker can serve it (suiro_peer_gone); test with
# suiro_is_sentinel(). A failed task signals a condition: suiro_error_remote (remote_class,
# message, traceback, index), suiro_error_worker_died (slot, pid), suiro_error_cancelled.

suiro_timeout <- function() .Call(C_sentinel, "timeout")
suiro_is_sentinel <- function(x) .Call(C_is_sentinel, x)
suiro_is_timeout <- function(x) identical(x, .Call(C_sentinel, "timeout"))

print.suiro_sentinel <- function(x, ...) {
  cat("<", class(x)[1], ">\n", sep = "")
  invisible(x)
}

print.suiro_error_remote <- function(x, ...) {
  idx <- if (!is.null(x$index) && !is.na(x$index)) sprintf(" (element %g)", x$index) else ""
  cat(sprintf("<suiro remote error%s: %s: %s>\n", idx, x$remote_class, x$message))
  if (nzchar(x$traceback %||% "")) cat("remote traceback:\n", x$traceback, "\n", sep = "")
  invisible(x)
}

print.suiro_error_worker_died <- function(x, ...) {
  cat(sprintf("<suiro worker died: slot %d, pid %d: %s>\n", x$slot, x$pid, x$message))
  invisible(x)
}

print.suiro_error_cancelled <- function(x, ...) {
  cat("<suiro task cancelled: ", x$message, ">\n", sep = "")
  invisible(x)
}

suiro_is_remote_error <- function(x) inherits(x, "suiro_error_remote")
