# bench_channels.R — channels from R against serialize() over a socketConnection (what PSOCK
# clusters do), in one run.
#
#   scripts/bench channels [rounds]      (scripts/rscript bench/bench_channels.R [rounds])
#
# r_chan_msgs_per_s                  small messages (an integer) one way: suiro_send in an R
#                                    worker, suiro_recv here, from the first message on
# r_socket_serialize_msgs_per_s      the same through a socket from a child Rscript: serialize()
#                                    per message (xdr = FALSE, as parallel's PSOCK nodes), R's
#                                    default socket options; _nodelay_ with socketOptions =
#                                    "no-delay" on both ends
# r_chan_pingpong_ns                 send here, the worker sends it back over a second channel
# r_pool_rt_ns                       the same face's pool round trip (suiro_submit + suiro_collect)
#
# The channel rows need the R binding's channels (suiro_channel); without them they are reported
# missing (null) and the baselines are still measured. Medians over interleaved rounds; the last
# line of output is one JSON object.

suppressPackageStartupMessages(library(suiro))
args <- commandArgs(trailingOnly = TRUE)
rounds <- if (length(args)) as.integer(args[1]) else 3L
now <- function() as.numeric(suiro:::now())
ns <- asNamespace("suiro")
has_chan <- all(vapply(c("suiro_channel", "suiro_send", "suiro_recv", "suiro_close"), exists, NA,
                       envir = ns, inherits = FALSE))
N_SMALL <- 200000L
N_SOCK <- 100000L
N_PING <- 5000L

socket_serialize <- function(n, nodelay) {
  srv <- NULL
  for (try in 1:20) {
    port <- sample(20000:60000, 1)
    srv <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (!is.null(srv)) break
  }
  stopifnot(!is.null(srv))
  on.exit(close(srv), add = TRUE)
  opt <- if (nodelay) 'options(socketOptions = "no-delay"); ' else ""
  code <- sprintf(paste0('%scon <- socketConnection("localhost", %d, open = "a+b", blocking = TRUE); ',
                         'for (i in seq_len(%d)) serialize(i, con, xdr = FALSE); serialize(NULL, con, xdr = FALSE); ',
                         'invisible(close(con))'), opt, port, n)
  if (nodelay) options(socketOptions = "no-delay") else options(socketOptions = NULL)
  system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", "-e", shQuote(code)), wait = FALSE)
  con <- socketAccept(srv, blocking = TRUE, open = "a+b", timeout = 60)
  on.exit(close(con), add = TRUE)
  unserialize(con)
  t0 <- now()
  got <- 1L
  while (!is.null(unserialize(con))) got <- got + 1L
  dt <- now() - t0
  stopifnot(got == n)
  (n - 1) / dt
}

chan_one_way <- function(p, n) {
  ch <- suiro_channel(capacity = 4096)
  t <- suiro_submit(p, function(tx, n) {
    for (i in seq_len(n)) suiro::suiro_send(tx, i)
    suiro::suiro_close(tx)
    n
  }, ch$tx, n)
  suiro_recv(ch$rx, timeout = 30)
  rx <- ch$rx
  t0 <- now()
  for (i in seq_len(n - 1L)) suiro_recv(rx)
  dt <- now() - t0
  stopifnot(suiro_collect(t) == n)
  (n - 1) / dt
}

pingpong <- function(p, n, warm = 500L) {
  a <- suiro_channel()
  b <- suiro_channel()
  t <- suiro_submit(p, function(inp, out, k) {
    for (i in seq_len(k)) suiro::suiro_send(out, suiro::suiro_recv(inp))
    k
  }, a$rx, b$tx, n + warm)
  atx <- a$tx
  brx <- b$rx
  for (i in seq_len(warm)) {
    suiro_send(atx, i)
    suiro_recv(brx, timeout = 30)
  }
  t0 <- now()
  for (i in seq_len(n)) {
    suiro_send(atx, i)
    suiro_recv(brx)
  }
  dt <- now() - t0
  suiro_collect(t)
  dt / n * 1e9
}

pool_rt <- function(p, n, warm = 500L) {
  f <- function(x) x
  for (i in seq_len(warm)) suiro_collect(suiro_submit(p, f, 1))
  t0 <- now()
  for (i in seq_len(n)) suiro_collect(suiro_submit(p, f, 1))
  (now() - t0) / n * 1e9
}

keys <- c("r_chan_msgs_per_s", "r_socket_serialize_msgs_per_s", "r_socket_serialize_nodelay_msgs_per_s",
          "r_chan_pingpong_ns", "r_pool_rt_ns")
figs <- setNames(lapply(keys, function(k) numeric(0)), keys)
missing_why <- if (has_chan) NULL else "the R binding has no channels yet (suiro_channel)"
try_chan <- function(expr) {
  if (!is.null(missing_why)) return(NA_real_)
  tryCatch(expr, error = function(e) {
    missing_why <<- conditionMessage(e)
    NA_real_
  })
}
p <- suiro_pool(1)
for (r in seq_len(rounds)) {
  figs$r_chan_msgs_per_s <- c(figs$r_chan_msgs_per_s, try_chan(chan_one_way(p, N_SMALL)))
  figs$r_socket_serialize_msgs_per_s <- c(figs$r_socket_serialize_msgs_per_s, socket_serialize(N_SOCK, FALSE))
  figs$r_socket_serialize_nodelay_msgs_per_s <- c(figs$r_socket_serialize_nodelay_msgs_per_s,
                                                  socket_serialize(N_SOCK, TRUE))
  figs$r_chan_pingpong_ns <- c(figs$r_chan_pingpong_ns, try_chan(pingpong(p, N_PING)))
  figs$r_pool_rt_ns <- c(figs$r_pool_rt_ns, pool_rt(p, N_PING))
}
suiro_pool_stop(p)
med <- vapply(figs, function(v) if (all(is.na(v))) NA_real_ else median(v, na.rm = TRUE), 0)
note <- c(
  r_chan_msgs_per_s = sprintf("%.1fx serialize over a socket (>= 50x)",
                              med[["r_chan_msgs_per_s"]] / med[["r_socket_serialize_msgs_per_s"]]),
  r_socket_serialize_msgs_per_s = "socketConnection, R's defaults",
  r_socket_serialize_nodelay_msgs_per_s = "socketConnection, no-delay",
  r_chan_pingpong_ns = sprintf("%.2fx the pool round trip (<= 1.5x)", med[["r_chan_pingpong_ns"]] / med[["r_pool_rt_ns"]]),
  r_pool_rt_ns = "")
for (k in keys) cat(sprintf("%-38s %14.1f  %s\n", k, med[[k]], note[[k]]))
if (!is.null(missing_why)) cat("R channel rows missing:", missing_why, "\n")
val <- function(x) if (is.na(x)) "null" else sprintf("%.3f", x)
json <- paste0('{"bench":"channels_r","rounds":', rounds, ",",
               paste(sprintf('"%s":%s', keys, vapply(med, val, "")), collapse = ","),
               if (!is.null(missing_why)) sprintf(',"r_missing":"%s"', gsub('["\\\\]', "'", missing_why)) else "",
               "}")
cat(json, "\n", sep = "")
