# tests/mpi/failing_map.R K: tests/mpi/failing_map.lua from an R host (tests/mpi/stress.sh r): a
# 3-rank job whose map fails at an element that depends on K; untyped results for even K, typed
# cells for odd K; for K divisible by 3 the script itself fails with its map running.
# Prints "pids <node pids and rank 0's worker pids>" to stderr first.
library(suiro)
args <- commandArgs(trailingOnly = TRUE)
k <- if (length(args)) as.integer(args[[1]]) else 1L
pool <- suiro_pool(workers = 2, backend = "mpi")
pids <- c(suiro_pool_nodes(pool)$pid, suiro_pool_status(pool)$worker$pid)
message("pids ", paste(pids, collapse = " "))
n <- 60000
bad <- 1 + (k * 7919) %% n
f <- local({
  bad <- bad # captured: a closure of the global environment takes no variables along
  k <- k
  function(x) {
    if (x == bad) stop("element ", x, " fails on purpose")
    if (k %% 2 == 1) x else list(x, as.character(x))
  }
})
m <- suiro_map(pool, as.numeric(1:n), f, .template = if (k %% 2 == 1) "f64")
if (k %% 3 == 0) stop("the script fails on purpose with its map running")
suiro_collect(m, 30)
cat("not reached\n")
