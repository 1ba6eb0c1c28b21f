# fork (issue 17, item 8): children of mcparallel/mclapply inherit the parent's pools, which are
# inert there: using one fails at once with "this pool belongs to process N", the child's exit
# never touches the pool, and the parent's pool is whole afterwards. Views stay readable. Every
# wait on a child is bounded: a child still running after its deadline is killed and fails.

skip_if_not(.Platform$OS.type == "unix" && requireNamespace("parallel", quietly = TRUE), "needs fork")

# Collects a mcparallel job within `secs` seconds (killing it after that): its value.
collect_job <- function(job, secs = 30) {
  deadline <- Sys.time() + secs
  repeat {
    got <- parallel::mccollect(job, wait = FALSE, timeout = 0.2)
    if (!is.null(got)) return(got[[1]])
    if (Sys.time() > deadline) {
      tools::pskill(job$pid, tools::SIGKILL)
      parallel::mccollect(job, wait = FALSE)
      stop("forked child ", job$pid, " did not finish within ", secs, " s")
    }
  }
}

child_error <- function(expr) tryCatch({ force(expr); "no error" }, error = function(e) conditionMessage(e))

test_that("a mcparallel child using the parent's pool gets a clear error, the parent's pool is whole", {
  p <- local_pool(workers = 2)
  expect_identical(suiro_collect(suiro_submit(p, function(x) x + 1, 1), timeout = 10), 2)
  before <- sort(suiro_pool_status(p)$worker$pid)
  parent <- Sys.getpid()
  job <- parallel::mcparallel(list(
    submit = child_error(suiro_submit(p, function(x) x, 1)),
    map = child_error(suiro_collect(suiro_map(p, 1:10, function(x) x), timeout = 5)),
    stop = child_error(suiro_pool_stop(p))
  ))
  got <- collect_job(job)
  expect_match(got$submit, paste0("belongs to process ", parent), fixed = TRUE)
  expect_match(got$map, paste0("belongs to process ", parent), fixed = TRUE)
  expect_identical(got$stop, "no error") # refused quietly: the parent's pool is not the child's
  expect_identical(sort(suiro_pool_status(p)$worker$pid), before)
  expect_identical(unlist(lapply(1:50, function(i) suiro_collect(suiro_submit(p, function(x) x * 2, i), timeout = 10))),
                   (1:50) * 2)
})

test_that("two children submitting at once neither hang nor corrupt the parent's pool", {
  p <- local_pool(workers = 1)
  jobs <- lapply(1:2, function(k) parallel::mcparallel({
    n <- 0L
    for (i in 1:3000) if (!identical(child_error(suiro_submit(p, function(x) x, i)), "no error")) n <- n + 1L
    n
  }))
  expect_identical(vapply(jobs, collect_job, 0L), c(3000L, 3000L))
  # the ring holds 4096 entries: the parent submits more than that, all of them land
  ts <- lapply(1:5000, function(i) suiro_submit(p, function(x) x, i))
  expect_identical(unlist(suiro_collect_all(ts, timeout = 60)), 1:5000)
})

test_that("mclapply children get the error at once; the parent's maps still run", {
  p <- local_pool(workers = 2)
  parent <- Sys.getpid()
  got <- parallel::mclapply(1:2, function(i) child_error(suiro_submit(p, function(x) x, i)), mc.cores = 2)
  for (g in got) expect_match(g, paste0("belongs to process ", parent), fixed = TRUE)
  expect_identical(unlist(suiro_collect(suiro_map(p, 1:100, function(x) x + 1), timeout = 30)), as.numeric(2:101))
})

test_that("views of the parent's values stay readable in a child", {
  p <- local_pool(workers = 1)
  v <- suiro_collect(suiro_submit(p, function(n) as.numeric(seq_len(n)), 200000), timeout = 10)
  total <- sum(v)
  job <- parallel::mcparallel(c(sum(v), v[123]))
  expect_identical(collect_job(job), c(total, 123))
  expect_identical(sum(v), total)
  expect_identical(suiro_collect(suiro_submit(p, function(x) sum(x), v), timeout = 10), total)
})
