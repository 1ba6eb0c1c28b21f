# Channels (src/rchan.c, R/channel.R): streams between an R host and R, Lua and Python workers,
# endpoints crossing in arguments and results, outcomes as sentinels, a dead peer as
# suiro_error_peer_died after the queued messages, promises woken by the event fd, bad inputs,
# nothing left in /dev/shm.

chan_regions <- function() {
  mine <- sprintf("suiro_%x_", Sys.getpid())
  f <- list.files("/dev/shm")
  f[startsWith(f, mine) & grepl("_ch", f)]
}

# Receives with random batch sizes until the sender closes; every wait bounded.
drain <- function(rx, seed) {
  set.seed(seed)
  got <- list()
  repeat {
    b <- suiro_recv_batch(rx, sample.int(100L, 1L), timeout = 30)
    if (inherits(b, "suiro_closed")) break
    if (suiro_is_sentinel(b)) stop("drain: ", class(b)[1])
    got[[length(got) + 1L]] <- b
  }
  as.numeric(unlist(got))
}

n_msgs <- 100000L

# Runs what is due on later's loop (promise handlers run there), bounded.
drain_later <- function() {
  deadline <- Sys.time() + 10
  while (!later::loop_empty() && Sys.time() < deadline) later::run_now(0.05)
  later::loop_empty()
}

test_that("the basics: values in order, batches, outcomes as sentinels, status", {
  ch <- suiro_channel(capacity = 4)
  expect_named(ch, c("tx", "rx"))
  expect_true(suiro_is_endpoint(ch$tx))
  expect_false(suiro_is_endpoint(list()))
  expect_output(print(ch$rx), "receiving end")
  expect_true(suiro_send(ch$tx, list(a = 1, b = "x")))
  suiro_send_batch(ch$tx, list(1:3, NULL, factor("q")))
  expect_identical(suiro_channel_status(ch$tx)$queued, 4)
  expect_s3_class(suiro_send(ch$tx, 5, timeout = 0), "suiro_full")
  expect_identical(suiro_recv(ch$rx, timeout = 1), list(a = 1, b = "x"))
  expect_identical(suiro_recv_batch(ch$rx, 10, timeout = 1), list(1:3, NULL, factor("q")))
  expect_s3_class(suiro_recv(ch$rx, timeout = 0.05), "suiro_timeout")
  st <- suiro_channel_status(ch$rx)
  expect_identical(st[c("side", "queued", "sent", "received", "capacity", "closed", "peer")],
                   list(side = "rx", queued = 0, sent = 4, received = 4, capacity = 4, closed = FALSE, peer = "open"))
  expect_identical(st$peer_pid, Sys.getpid())
  suiro_send(ch$tx, "last")
  suiro_close(ch$tx)
  expect_identical(suiro_recv(ch$rx, timeout = 1), "last") # queued messages first
  expect_s3_class(suiro_recv(ch$rx, timeout = 1), "suiro_closed")
  expect_s3_class(suiro_recv_batch(ch$rx, 5, timeout = 1), "suiro_closed")
  ch2 <- suiro_channel()
  suiro_close(ch2$rx)
  expect_s3_class(suiro_send(ch2$tx, 1), "suiro_closed")
  suiro_close(ch2) # both ends: idempotent
})

test_that("an R worker streams to the host: FIFO, nothing lost, random batch sizes", {
  p <- local_pool(workers = 1)
  ch <- suiro_channel(capacity = 1024)
  t <- suiro_submit(p, function(tx, n, seed) {
    set.seed(seed)
    i <- 0L
    while (i < n) {
      k <- min(n - i, sample.int(64L, 1L))
      stopifnot(isTRUE(suiro_send_batch(tx, as.list(seq.int(i + 1L, i + k)), timeout = 30)))
      i <- i + k
    }
    suiro_close(tx)
    "done"
  }, ch$tx, n_msgs, 7L)
  expect_error(suiro_send(ch$tx, 1), "sent to another process")
  expect_output(print(ch$tx), "sent away")
  expect_identical(drain(ch$rx, 1), as.numeric(seq_len(n_msgs)))
  expect_identical(suiro_collect(t, timeout = 30), "done")
})

test_that("the host streams to an R worker, which sums what it receives", {
  p <- local_pool(workers = 1)
  ch <- suiro_channel(capacity = 16)
  t <- suiro_submit(p, function(rx) {
    s <- 0
    repeat {
      v <- suiro_recv_batch(rx, 7L, timeout = 30)
      if (inherits(v, "suiro_closed")) break
      if (suiro_is_sentinel(v)) stop("recv: ", class(v)[1])
      s <- s + sum(unlist(v))
    }
    s
  }, ch$rx)
  for (i in 1:1000) expect_true(suiro_send(ch$tx, i, timeout = 30))
  suiro_close(ch$tx)
  expect_identical(suiro_collect(t, timeout = 30), sum(1:1000) + 0)
})

test_that("an endpoint crosses in a result: an R worker hands back a receiving end", {
  p <- local_pool(workers = 1)
  rx <- suiro_collect(suiro_submit(p, function() {
    ch <- suiro_channel()
    suiro_send_batch(ch$tx, list("a", "b", "c"))
    suiro_close(ch$tx)
    ch$rx
  }), timeout = 30)
  expect_true(suiro_is_endpoint(rx))
  expect_identical(suiro_recv_batch(rx, 10, timeout = 10), list("a", "b", "c"))
  expect_s3_class(suiro_recv(rx, timeout = 10), "suiro_closed")
})

test_that("a Lua worker streams to the R host: FIFO, nothing lost, random batch sizes", {
  lp <- local_pool(workers = 1, launcher = suiro_lua(exe = lua_exe()))
  ch <- suiro_channel(capacity = 1024)
  t <- suiro_submit(lp, suiro_call(.source = paste(
    "math.randomseed(seed) local i = 0",
    "while i < n do local k = math.min(n - i, math.random(1, 64)) local b = {}",
    "  for j = 1, k do b[j] = i + j end assert(tx:send_batch(b, 30)) i = i + k end",
    "tx:close() return 'done'", sep = "\n"), tx = ch$tx, n = n_msgs, seed = 3L))
  expect_identical(drain(ch$rx, 2), as.numeric(seq_len(n_msgs)))
  expect_identical(suiro_collect(t, timeout = 30), "done")
})

test_that("a Python worker streams to the R host: FIFO, nothing lost, random batch sizes", {
  script <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(script)) script <- file.path(need_root(), "bindings", "python", "suiro", "_worker.py")
  if (!file.exists(script)) skip("no Python face built")
  py <- local_pool(workers = 1, launcher = suiro_python(argv = c("/usr/bin/python3", "-I", script)))
  ch <- suiro_channel(capacity = 1024)
  t <- suiro_submit(py, suiro_call(.source = paste(
    "import random",
    "r = random.Random(seed)",
    "i = 0",
    "while i < n:",
    "    k = min(n - i, r.randint(1, 64))",
    "    tx.send_batch(list(range(i + 1, i + k + 1)), timeout=30)",
    "    i += k",
    "tx.close()",
    "'done'", sep = "\n"), tx = ch$tx, n = n_msgs, seed = 5L))
  expect_identical(drain(ch$rx, 3), as.numeric(seq_len(n_msgs)))
  expect_identical(suiro_collect(t, timeout = 30), "done")
})

test_that("the host streams to a Lua worker, which sums what it receives", {
  lp <- local_pool(workers = 1, launcher = suiro_lua(exe = lua_exe()))
  ch <- suiro_channel(capacity = 8)
  t <- suiro_submit(lp, suiro_call(.source = paste(
    "local s = 0",
    "for v in rx:values() do s = s + v end",
    "return s", sep = "\n"), rx = ch$rx))
  expect_true(suiro_send_batch(ch$tx, as.list(as.numeric(1:1000)), timeout = 30))
  suiro_close(ch$tx)
  expect_identical(suiro_collect(t, timeout = 30), sum(1:1000) + 0)
})

test_that("a Python host streams to an R worker (an endpoint an R worker gets from Python)", {
  root <- need_root()
  script <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(script)) script <- file.path(root, "bindings", "python", "suiro", "_worker.py")
  if (!file.exists(script)) skip("no Python face built")
  py <- tempfile(fileext = ".py")
  writeLines(c(
    "import os, suiro",
    "launcher = suiro.r(exe='Rscript', argv=['Rscript', '--vanilla', '--default-packages=NULL', '-e', 'suiro:::worker_main()'],",
    "                   env={'R_LIBS': os.environ['SUIRO_R_LIBS'], 'LANG': 'C.UTF-8'})",
    "src = '''",
    "n <- 0; s <- 0",
    "repeat {",
    "  v <- suiro::suiro_recv_batch(rx, 10L, timeout = 60)",
    "  if (inherits(v, 'suiro_closed')) break",
    "  if (suiro::suiro_is_sentinel(v)) stop('stalled')",
    "  n <- n + length(v); s <- s + sum(unlist(v))",
    "}",
    "c(n, s)'''",
    "with suiro.pool(1, launcher=launcher) as pool:",
    "    tx, rx = suiro.channel(capacity=64)",
    "    t = pool.submit(suiro.call(source=src, rx=rx))",
    "    tx.send_batch(list(range(1, 5001)), timeout=60)",
    "    tx.close()",
    "    print('r got', list(t.collect(timeout=60)))"), py)
  out <- system2("/usr/bin/python3", py, stdout = TRUE, stderr = TRUE,
                 env = c(paste0("PYTHONPATH=", file.path(root, "bindings", "python")),
                         paste0("SUIRO_R_LIBS=", file.path(root, "build", "R-lib")), rscript_path_env()))
  txt <- paste(out, collapse = "\n")
  expect_identical(attr(out, "status"), NULL, label = txt)
  expect_true("r got [5000.0, 12502500.0]" %in% out, label = txt)
})

test_that("SIGINT interrupts a suiro_recv waiting for ever; the endpoint stays usable", {
  skip_if_not_installed("processx")
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "library(suiro)",
    "ch <- suiro_channel()",
    "cat('waiting\\n')",
    "r <- tryCatch(suiro_recv(ch$rx), interrupt = function(e) 'interrupted')",
    "suiro_send(ch$tx, 'after')",
    "cat(r, suiro_recv(ch$rx, timeout = 5), '\\n')"), script)
  px <- processx::process$new(file.path(R.home("bin"), "Rscript"), script, stdout = "|", stderr = "|",
                              env = c("current", R_LIBS = paste(.libPaths(), collapse = ":")))
  on.exit(px$kill())
  out <- ""
  deadline <- Sys.time() + 30
  while (!grepl("waiting", out) && Sys.time() < deadline) {
    px$poll_io(200)
    out <- paste0(out, px$read_output())
  }
  expect_match(out, "waiting")
  Sys.sleep(0.3) # inside the wait now
  px$interrupt()
  px$wait(20000)
  out <- paste0(out, px$read_all_output())
  expect_false(px$is_alive())
  expect_match(out, "interrupted after")
})

test_that("a killed sender: its queued messages arrive, then suiro_error_peer_died", {
  p <- local_pool(workers = 1)
  ch <- suiro_channel(capacity = 64)
  t <- suiro_submit(p, function(tx) {
    suiro_send(tx, Sys.getpid())
    suiro_send_batch(tx, as.list(1:5))
    Sys.sleep(60)
    "never"
  }, ch$tx)
  pid <- suiro_recv(ch$rx, timeout = 30)
  deadline <- Sys.time() + 10
  while (suiro_channel_status(ch$rx)$queued < 5 && Sys.time() < deadline) Sys.sleep(0.01)
  expect_identical(suiro_channel_status(ch$rx)$queued, 5)
  tools::pskill(pid, tools::SIGKILL)
  expect_identical(vapply(1:5, function(i) as.numeric(suiro_recv(ch$rx, timeout = 10)), 0), as.numeric(1:5))
  err <- tryCatch(suiro_recv(ch$rx, timeout = 10), error = identity)
  expect_s3_class(err, "suiro_error_peer_died")
  expect_s3_class(err, "suiro_error")
  expect_match(conditionMessage(err), "sending end's owner of the channel died")
  expect_identical(err$pid, as.integer(pid))
  expect_identical(suiro_channel_status(ch$rx)$peer, "died")
  expect_error(suiro_recv_batch(ch$rx, 3, timeout = 1), class = "suiro_error_peer_died") # and again
  expect_error(suiro_collect(t, timeout = 10), class = "suiro_error_worker_died")
})

test_that("a killed receiver: the sender gets suiro_error_peer_died", {
  p <- local_pool(workers = 1)
  ch <- suiro_channel(capacity = 4)
  t <- suiro_submit(p, function(rx) {
    suiro_recv(rx, timeout = 30)
    tools::pskill(Sys.getpid(), tools::SIGKILL)
  }, ch$rx)
  suiro_send(ch$tx, "first", timeout = 30)
  err <- tryCatch({
    for (i in 1:100) {
      v <- suiro_send(ch$tx, i, timeout = 10)
      if (suiro_is_sentinel(v)) stop("unexpected outcome: ", class(v)[1])
    }
    NULL
  }, error = identity)
  expect_s3_class(err, "suiro_error_peer_died")
  expect_match(conditionMessage(err), "receiving end's owner of the channel died")
  expect_error(suiro_collect(t, timeout = 10), class = "suiro_error_worker_died")
})

test_that("suiro_recv_async settles from the event fd, not by polling", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  p <- local_pool(workers = 1)
  ch <- suiro_channel()
  ack <- suiro_channel()
  t <- suiro_submit(p, function(tx, ack_rx) {
    suiro_send(tx, Sys.getpid())
    Sys.sleep(0.5)
    suiro_send(tx, 42)
    # closing pokes the event fd too: only after the host counted its wake-ups, or a loaded host
    # may run a second callback (for the close) before its promise handler
    suiro_recv(ack_rx, timeout = 30)
    suiro_close(tx)
    TRUE
  }, ch$tx, ack$rx)
  pid <- suiro_recv(ch$rx, timeout = 30) # the worker owns the sending end now
  got <- NULL
  promises::then(suiro_recv_async(ch$rx), function(v) got <<- v)
  expect_true(drain_later())
  w0 <- suiro:::chan_async_counts()
  r0 <- suiro_channel_status(ch$rx)$received
  deadline <- Sys.time() + 20
  empty <- TRUE
  while (is.null(got) && Sys.time() < deadline) {
    # while nothing has arrived, nothing is scheduled on later's loop: no timer polls the channel
    # (the loop is looked at first: a callback the message scheduled implies it is queued or
    # received after; once received, the promise's handler is scheduled on the loop)
    e <- later::loop_empty()
    st <- suiro_channel_status(ch$rx)
    if (st$queued == 0 && st$received == r0 && st$peer == "open") empty <- empty && e
    later::run_now(0.5) # sleeps until a callback is scheduled (the watcher's) or 0.5 s pass
  }
  expect_true(empty)
  expect_identical(got, 42)
  expect_identical(suiro:::chan_async_counts() - w0, 1) # one wake-up, the event's
  expect_true(suiro_send(ack$tx, TRUE))
  expect_true(suiro_collect(t, timeout = 30))
  # after the sender closed: rejected with suiro_error_closed
  err <- NULL
  promises::then(suiro_recv_async(ch$rx), onRejected = function(e) err <<- e)
  deadline <- Sys.time() + 10
  while (is.null(err) && Sys.time() < deadline) later::run_now(0.2)
  expect_s3_class(err, "suiro_error_closed")
})

test_that("suiro_recv_async: several promises settle in order; a timeout rejects", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  ch <- suiro_channel()
  got <- list()
  for (k in 1:3) promises::then(suiro_recv_async(ch$rx), function(v) got[[length(got) + 1L]] <<- v)
  later::run_now(0)
  suiro_send_batch(ch$tx, list("a", "b", "c"))
  deadline <- Sys.time() + 10
  while (length(got) < 3 && Sys.time() < deadline) later::run_now(0.2)
  expect_identical(got, list("a", "b", "c"))
  err <- NULL
  promises::then(suiro_recv_async(ch$rx, timeout = 0.1), onRejected = function(e) err <<- e)
  deadline <- Sys.time() + 10
  while (is.null(err) && Sys.time() < deadline) later::run_now(0.2)
  expect_s3_class(err, "suiro_error_timeout")
  suiro_send(ch$tx, "after") # the timed-out promise took nothing
  expect_identical(suiro_recv(ch$rx, timeout = 1), "after")
})

test_that("bad inputs are refused naming the argument", {
  expect_error(suiro_channel(capacity = 0), "capacity must be a whole number of messages in 1..16777216, got 0")
  expect_error(suiro_channel(capacity = 2^25), "capacity must be")
  expect_error(suiro_channel(capacity = 1.5), "capacity must be")
  expect_error(suiro_channel(capacity = "a"), "capacity must be a number")
  expect_error(suiro_channel(bytes = 10), "bytes must be a whole number in 64..1073741824, got 10")
  ch <- suiro_channel(capacity = 8, bytes = 256)
  expect_error(suiro_send(ch$tx, strrep("x", 1000)), "1[0-9]{3}") # its size
  expect_error(suiro_send(ch$rx, 1), "suiro_send: tx is the receiving end of the channel")
  expect_error(suiro_recv(ch$tx), "suiro_recv: rx is the sending end of the channel")
  expect_error(suiro_recv(42), "suiro_recv: rx must be a channel endpoint")
  expect_error(suiro_send_batch(ch$tx, mean), "values must be a list")
  expect_error(suiro_recv_batch(ch$rx, 0), "max must be a whole number in 1..1048576, got 0")
  expect_error(suiro_recv(ch$rx, timeout = -1), "timeout must be zero or more seconds")
  expect_error(suiro_send(ch$tx, function(x) x), "value: a function cannot be sent to a channel's receiver")
  expect_error(suiro_send(ch$tx, new.env()), "value: .*cannot be sent")
  expect_error(suiro_close(1), "suiro_close: argument 1 must be")
  expect_identical(suiro_channel_status(ch$tx)$queued, 0) # nothing refused was queued
  # an endpoint in a message that fails to encode stays here, usable
  expect_error(suiro_wire_encode(list(ch$tx, new.env())))
  expect_true(suiro_send(ch$tx, "still mine"))
  expect_identical(suiro_recv(ch$rx, timeout = 1), "still mine")
  expect_error(suiro_wire_encode(list(ch$tx, ch$tx)), "twice in one message")
  expect_true(suiro_send(ch$tx, 1))
})

test_that("an endpoint crosses as wire bytes once; forged bytes are refused", {
  ch <- suiro_channel()
  b <- suiro_wire_encode(ch$tx)
  expect_error(suiro_send(ch$tx, 1), "sent to another process")
  tx2 <- suiro_wire_decode(b)
  suiro_send(tx2, "again")
  expect_identical(suiro_recv(ch$rx, timeout = 1), "again")
  expect_error(suiro_wire_decode(b), "already")
  forged <- b
  forged[17] <- xor(forged[17], as.raw(1)) # the token
  expect_error(suiro_wire_decode(forged), "forged")
})

test_that("nothing is left in /dev/shm once both ends are gone", {
  if (requireNamespace("later", quietly = TRUE)) drain_later() # promise handlers holding endpoints
  gc()
  before <- chan_regions()
  ch <- suiro_channel()
  suiro_send(ch$tx, 1)
  expect_gt(length(chan_regions()), length(before))
  rm(ch)
  gc()
  expect_identical(chan_regions(), before)
  # and after channels that crossed to workers
  p <- suiro_pool(workers = 1, env = worker_env())
  ch <- suiro_channel()
  t <- suiro_submit(p, function(tx) { suiro_send(tx, 1); suiro_close(tx); TRUE }, ch$tx)
  expect_identical(suiro_recv(ch$rx, timeout = 30), 1)
  expect_true(suiro_collect(t, timeout = 30))
  suiro_pool_stop(p) # the worker's end goes with the worker
  rm(ch)
  gc()
  expect_identical(chan_regions(), before)
})
