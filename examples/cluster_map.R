# examples/cluster_map.R: examples/cluster_map.lua from an R host. One script for one host or a
# cluster; only the command changes, and what it prints does not:
#
#   R_LIBS=build/R-lib Rscript examples/cluster_map.R                          # this host
#   R_LIBS=build/R-lib mpirun -x R_LIBS --oversubscribe -np 3 Rscript examples/cluster_map.R
#
# Every map below is dealt out in ranges over the nodes (each runs its ranges on its own
# workers). Tasks run on rank 0's pool.
library(suiro)

pool <- suiro_pool(workers = 2, backend = "mpi")
nodes <- suiro_pool_nodes(pool)
message(sprintf("cluster_map: %d host%s (%s), 2 workers each", nrow(nodes), if (nrow(nodes) == 1) "" else "s",
                paste(nodes$node, collapse = ", ")))

# 1. a typed template: 100000 squares into one f64 array
sq <- suiro_collect(suiro_map(pool, as.numeric(1:100000), function(x) x * x, .template = "f64"))
cat(sprintf("squares: %d elements, sum %.0f, last %.0f\n", length(sq), sum(sq), sq[length(sq)]))

# 2. a seeded Monte Carlo estimate of pi: each element draws from its own stream, so the
#    estimate is bitwise the same whichever node ran which element
darts <- function(i) {
  h <- 0L
  for (k in 1:500) {
    x <- suiro_random()
    y <- suiro_random()
    if (x * x + y * y <= 1) h <- h + 1L
  }
  h
}
hits <- suiro_collect(suiro_map(pool, 1:4000, darts, .template = "i32", .seed = 42))
cat(sprintf("pi ~ %.8f from %d seeded draws\n", 4 * sum(hits) / (4000 * 500), 4000L * 500L * 2L))

# 3. seeded floats, checked bit for bit: a hash of every element's 64 bits (their low 48 bits,
#    as the Lua script keeps: exact in doubles)
u <- suiro_collect(suiro_map(pool, as.numeric(1:20000), function(i) suiro_random() + i, .template = "f64", .seed = 7))
bytes <- matrix(as.integer(writeBin(u, raw(), endian = "little")), nrow = 8)
low <- colSums(bytes[1:6, , drop = FALSE] * 256^(0:5))
h <- 0
for (v in low) h <- (h * 31 + v) %% 2^48
cat(sprintf("seeded floats: hash %06x%06x\n", as.integer(h %/% 2^24), as.integer(h %% 2^24)))

# 4. a record template: a data frame with one column per field
f <- suiro_collect(suiro_map(pool, as.numeric(1:1000), function(i) list(i = i, root = sqrt(i), even = i %% 2 == 0),
                             .template = "{i: i64, root: f64, even: bool}"))
cat(sprintf("frame: %d rows, sum of roots %.6f, %d even\n", nrow(f), sum(f$root), sum(f$even)))

# 5. no template: any value comes back, in input order
words <- suiro_collect(suiro_map(pool, list("suiro", "waterway", "host", "rank", "range", "worker", "pool", "map"),
                                 function(w) list(toupper(w), nchar(w))))
cat("words: ", paste(vapply(words, function(v) sprintf("%s/%d", v[[1]], as.integer(v[[2]])), ""), collapse = " "), "\n",
    sep = "")

# 6. nested maps stay on the node running the element
sums <- suiro_collect(suiro_map(pool, list(1:25000, 25001:50000, 50001:75000), function(part)
  sum(suiro_collect(suiro_map(suiro_current_pool(), as.numeric(part), sqrt, .template = "f64"))), .template = "f64"))
cat(sprintf("nested: %.4f %.4f %.4f\n", sums[1], sums[2], sums[3]))

# 7. a failing element fails the map and names its index
err <- tryCatch(suiro_collect(suiro_map(pool, 1:10000, function(x) {
  if (x == 7777) stop("no luck with ", x)
  x
}, .template = "i32")), error = function(e) e)
cat(sprintf("error: ok=%s element=%d message=%s\n", if (inherits(err, "error")) "false" else "true",
            as.integer(err$index), sub("^element [0-9]+: ", "", err$message)))

# 8. tasks; their results come back to this script
tasks <- suiro_submit_batch(pool, function(a, b) a * b, list(list(6, 7), list(8, 9), list(10, 11), list(12, 13)))
cat("tasks: ", paste(unlist(suiro_collect_all(tasks)), collapse = " "), "\n", sep = "")
suiro_pool_stop(pool)
