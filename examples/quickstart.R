# quickstart.R — the quickstart pipeline from R, on R workers.
#
#   scripts/rscript examples/quickstart.R
#
# Word statistics over a generated corpus: split the work in chunks, count in parallel, merge,
# and show what the pool did (the same steps as examples/quickstart.lua).
library(suiro)

p <- suiro_pool(workers = 2)

# 1. a trivial task
cat("1 + 2 =", suiro_collect(suiro_submit(p, function(x, y) x + y, 1, 2), timeout = 30), "\n")

# 2. a corpus, generated deterministically (the Lua example's generator; the multiplier is split
#    in 16-bit halves so that every product stays exact in a double)
words <- c("water", "way", "river", "canal", "lock", "weir", "stream", "flow", "bank", "ford")
n_lines <- 20000
picks <- integer(n_lines * 8)
seed <- 42
m <- 2147483648
for (i in seq_along(picks)) {
  seed <- (((seed * 16838) %% m) * 65536 + seed * 20077 + 12345) %% m  # seed * 1103515245 + 12345
  picks[i] <- seed %% length(words) + 1
}
lines <- vapply(split(words[picks], rep(seq_len(n_lines), each = 8)), paste, "", collapse = " ",
                USE.NAMES = FALSE)

# 3. count words per chunk on the workers
count <- function(chunk) table(unlist(strsplit(chunk, " ", fixed = TRUE)))
chunks <- split(lines, ceiling(seq_along(lines) / 2500))
t0 <- Sys.time()
partial <- suiro_collect_all(suiro_submit_batch(p, count, lapply(unname(chunks), list)), timeout = 60)

# 4. merge on the host
total <- tapply(unlist(lapply(partial, as.vector)), unlist(lapply(partial, names)), sum)
top <- total[order(-total, names(total))][1:3]
cat(sprintf("counted %d lines in %d chunks in %.1f ms\n", length(lines), length(chunks),
            as.numeric(Sys.time() - t0, units = "secs") * 1e3))
cat(sprintf("  %-8s %d\n", names(top), as.integer(top)), sep = "")

# 5. errors come back as the conditions raised (here a simpleError, also a suiro_error_remote),
#    carrying the worker's traceback
e <- tryCatch(suiro_collect(suiro_submit(p, function() stop("no such canal")), timeout = 30),
              suiro_error_remote = function(e) e)
cat("error caught:", class(e)[1], conditionMessage(e), "\n")

# 6. what the pool did
w <- suiro_pool_status(p)$worker
cat(sprintf("worker %d (pid %d): %s, %d tasks\n", w$slot, w$pid, w$state, w$tasks), sep = "")
suiro_pool_stop(p)
