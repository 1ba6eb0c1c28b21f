# Channels: streams between any two processes of a pool family (src/rchan.c over the engine's
# channels). suiro_channel() makes both ends; an end crosses in task arguments and results (and
# in messages) to any worker or host, of any language, and is then that process's.
#
#   ch <- suiro_channel(capacity = 1024)
#   suiro_submit(p, function(tx) { for (i in 1:10) suiro_send(tx, i); suiro_close(tx) }, ch$tx)
#   repeat { v <- suiro_recv(ch$rx, timeout = 5); if (suiro_is_sentinel(v)) break; ... }
#
# Outcomes are the sentinels of suiro_collect(): suiro_recv() gives suiro_closed once the sender
# closed and every queued message was received, suiro_timeout when the timeout passed;
# suiro_send() gives suiro_full when the channel stayed full, suiro_closed when the receiver
# closed. When the other end's owner process dies the queued messages still arrive, then a
# condition of class suiro_error_peer_died is signalled.

suiro_channel <- function(capacity = 1024, bytes = NULL) .Call(C_chan_new, capacity, bytes)

suiro_send <- function(tx, value, timeout = NULL) invisible(.Call(C_chan_send, tx, value, timeout))

suiro_send_batch <- function(tx, values, timeout = NULL) {
  if (is.atomic(values) && !is.null(values) && is.null(attributes(values))) values <- as.list(values)
  invisible(.Call(C_chan_send_batch, tx, values, timeout))
}

suiro_recv <- function(rx, timeout = NULL) .Call(C_chan_recv, rx, timeout)

suiro_recv_batch <- function(rx, max, timeout = NULL) .Call(C_chan_recv_batch, rx, max, timeout)

suiro_channel_status <- function(x) .Call(C_chan_status, x)

suiro_is_endpoint <- function(x) !is.null(.Call(C_chan_side, x))

print.suiro_endpoint <- function(x, ...) {
  side <- .Call(C_chan_side, x)
  cat("<suiro channel ", switch(side, tx = "sending end", rx = "receiving end", "end (sent away)"), ">\n", sep = "")
  invisible(x)
}

chan_condition <- function(cls, msg) {
  structure(class = c(cls, "suiro_error", "error", "condition"), list(message = msg, call = NULL))
}

# A promise of the next message on rx. It settles from later's loop when the receiving end's
# event fd fires (a watcher thread sleeps on it: no polling): resolved with the message, rejected
# with suiro_error_closed once the sender closed (after the queued messages), with
# suiro_error_peer_died when its owner died, with suiro_error_timeout when timeout seconds pass.
# Several promises on one end settle in the order they were made.
suiro_recv_async <- function(rx, timeout = NULL) {
  if (!requireNamespace("promises", quietly = TRUE) || !requireNamespace("later", quietly = TRUE))
    stop("suiro_recv_async: install the promises and later packages", call. = FALSE)
  env <- .Call(C_chan_async_env, rx)
  if (!is.null(timeout)) {
    if (!is.numeric(timeout) || length(timeout) != 1L || is.na(timeout) || timeout < 0)
      stop("suiro_recv_async: timeout must be zero or more seconds", call. = FALSE)
  }
  promises::promise(function(resolve, reject) {
    env$next_id <- (env$next_id %||% 0) + 1
    id <- env$next_id
    env$queue <- c(env$queue, list(list(id = id, resolve = resolve, reject = reject)))
    .Call(C_chan_async_arm, rx, length(env$queue))
    if (!is.null(timeout) && is.finite(timeout)) {
      later::later(function() {
        q <- env$queue
        k <- which(vapply(q, function(e) identical(e$id, id), NA))
        if (length(k)) {
          env$queue <- q[-k]
          .Call(C_chan_async_count, rx, length(env$queue))
          q[[k]]$reject(chan_condition("suiro_error_timeout",
                                       sprintf("suiro_recv_async: no message within %g seconds", timeout)))
        }
      }, timeout)
    }
  })
}

# Called by src/rchan.c on later's loop when rx has news: receives for the pending promises in
# order; returns how many still wait.
.suiro_chan_fire <- function(rx) {
  env <- .Call(C_chan_async_env, rx)
  while (length(env$queue)) {
    r <- tryCatch(list(ok = TRUE, value = suiro_recv(rx, timeout = 0)), error = function(e) list(ok = FALSE, value = e))
    if (r$ok && inherits(r$value, "suiro_timeout")) break
    q <- env$queue
    if (r$ok && inherits(r$value, "suiro_closed")) {
      env$queue <- list()
      cond <- chan_condition("suiro_error_closed", "suiro_recv_async: the sender closed the channel")
      for (e in q) tryCatch(e$reject(cond), error = function(e) NULL)
      break
    }
    env$queue <- q[-1L]
    tryCatch(if (r$ok) q[[1L]]$resolve(r$value) else q[[1L]]$reject(r$value), error = function(e) NULL)
  }
  length(env$queue)
}

# Wake-ups of suiro_recv_async's watcher so far (the tests check that waiting costs none).
chan_async_counts <- function() .Call(C_chan_async_counts)
