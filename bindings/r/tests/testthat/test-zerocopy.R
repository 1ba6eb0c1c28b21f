# Zero-copy: vectors from the 32 KiB floor up cross as ALTREP views of shared pages that behave as
# private copies (a change, by R or by C code in place, stays in this process); a view sent on
# unchanged goes by reference, changed by value; views survive gc() while referenced and give
# their regions back after; views behave like plain vectors everywhere (copy on change, saveRDS).

region_of <- function(x) .Call(suiro:::C_view_region, x)

shm_names <- function() {
  mine <- sprintf("suiro_%x_", Sys.getpid())
  f <- list.files("/dev/shm")
  f[startsWith(f, mine)]
}

test_that("a large vector arrives in a worker as a view and comes back by reference", {
  p <- local_pool(workers = 1)
  x <- as.numeric(1:100000) # 800 KB
  info <- suiro_collect(suiro_submit(p, function(v) list(view = suiro_is_view(v), sum = sum(v), region = .Call(suiro:::C_view_region, v)), x),
                        timeout = 10)
  expect_true(info$view)
  expect_identical(info$sum, sum(x))
  expect_match(info$region, "^/suiro_")
  # the worker returns its view unchanged: the host gets a view of the same region
  back <- suiro_collect(suiro_submit(p, function(v) v, x), timeout = 10)
  expect_true(suiro_is_view(back))
  expect_identical(back, x)
  r1 <- region_of(back)
  # and a view sent on travels by reference: the worker maps the same region
  again <- suiro_collect(suiro_submit(p, function(v) .Call(suiro:::C_view_region, v), back), timeout = 10)
  expect_identical(again, r1)
  # small vectors are copied
  expect_false(suiro_collect(suiro_submit(p, function(v) suiro_is_view(v), 1:10), timeout = 5))
})

test_that("views of every numeric kind keep their values and attributes", {
  p <- local_pool(workers = 1)
  n <- 20000
  vals <- list(
    dbl = c(NA, NaN, -Inf, seq_len(n)),
    int = c(NA_integer_, seq_len(n)),
    cplx = complex(real = seq_len(n), imaginary = -seq_len(n)),
    raw = as.raw(rep(0:255, length.out = 50000)),
    mat = matrix(as.numeric(seq_len(n * 2)), n, 2),
    date = structure(as.numeric(seq_len(n)), class = "Date"),
    named = structure(as.numeric(seq_len(n)), names = paste0("n", seq_len(n))),
    fct = factor(rep(c("a", "b", NA), length.out = n * 2)))
  got <- suiro_collect(suiro_submit(p, function(v) lapply(v, function(e) list(view = suiro_is_view(unclass(e)) || suiro_is_view(e), v = e)), vals),
                       timeout = 20)
  for (k in names(vals)) {
    expect_identical(got[[k]]$v, vals[[k]], label = k)
    expect_true(got[[k]]$view, label = paste(k, "is a view in the worker"))
  }
  i64 <- structure(as.numeric(seq_len(n)), class = "integer64")
  back <- suiro_collect(suiro_submit(p, identity, i64), timeout = 10)
  expect_identical(back, i64)
})

test_that("a view is read-only: changing it copies, others never see the change", {
  p <- local_pool(workers = 1)
  v <- suiro_collect(suiro_submit(p, function() as.numeric(1:50000)), timeout = 10)
  expect_true(suiro_is_view(v))
  w <- v
  w[1] <- -1
  expect_identical(v[1], 1)
  expect_identical(w[1], -1)
  # what a worker sees of v is still the original
  expect_identical(suiro_collect(suiro_submit(p, function(a) a[1], v), timeout = 10), 1)
  # functions that ask for a writable pointer work (a private copy-on-write mapping)
  expect_identical(cumsum(v)[50000], sum(as.numeric(1:50000)))
  expect_identical(sort(v, decreasing = TRUE)[1], 50000)
  expect_identical(rev(v)[1], 50000)
  # and it serializes as a plain vector
  f <- tempfile(fileext = ".rds")
  saveRDS(v, f)
  r <- readRDS(f)
  expect_false(suiro_is_view(r))
  expect_identical(r, as.numeric(1:50000))
  expect_identical(unserialize(serialize(v, NULL)), as.numeric(1:50000))
})

test_that("a view behaves as a private copy: x[1] <- 0 and C writes in place stay here", {
  p <- local_pool(workers = 2)
  n <- 1e6
  v <- suiro_collect(suiro_submit(p, function(x) x, as.numeric(seq_len(n))), timeout = 20)
  w <- suiro_collect(suiro_submit(p, function(x) x, v), timeout = 20) # another view of the region
  expect_true(suiro_is_view(v))
  expect_identical(region_of(w), region_of(v))
  ends <- function(a) c(a[1], a[length(a)])
  in_worker <- function(a) suiro_collect(suiro_submit(p, function(x) c(x[1], x[length(x)]), a), timeout = 20)
  # R-level: x[1] <- 0 on the view
  x <- v
  x[1] <- 0
  expect_identical(ends(x), c(0, n))
  expect_identical(ends(v), c(1, n))
  expect_identical(in_worker(v), c(1, n))
  expect_identical(in_worker(x), c(0, n)) # sent as it reads here
  # C-level: REAL(v)[0] written in place, R's copy rules bypassed (before: the host read the new
  # value while a view sent on still went by reference, so workers read the old one)
  .Call(suiro:::C_view_poke, v, 0, -7)
  expect_identical(ends(v), c(-7, n))
  expect_identical(ends(w), c(1, n)) # another holder of the region
  expect_identical(in_worker(w), c(1, n))
  expect_identical(in_worker(v), c(-7, n))
  # the same in a worker: its write reaches neither the host nor the other worker
  got <- suiro_collect(suiro_submit(p, function(a) {
    .Call(suiro:::C_view_poke, a, length(a) - 1, -9)
    c(a[1], a[length(a)])
  }, w), timeout = 20)
  expect_identical(got, c(1, -9))
  expect_identical(ends(w), c(1, n))
  expect_identical(in_worker(w), c(1, n))
})

test_that("views survive gc() while referenced and are released after", {
  p <- local_pool(workers = 1)
  gc()
  base <- suiro_view_stats()[["views"]]
  vs <- lapply(1:5, function(i) suiro_collect(suiro_submit(p, function(k) as.numeric(seq_len(20000)) * k, i), timeout = 10))
  gc()
  expect_identical(suiro_view_stats()[["views"]], base + 5)
  expect_identical(vs[[3]][20000], 60000)
  rm(vs)
  gc()
  expect_identical(suiro_view_stats()[["views"]], base)
})

test_that("views count the shared memory they newly pin; a view sent on and back pins nothing new", {
  p <- local_pool(workers = 1)
  gc()
  base <- suiro_view_stats()[["pinned"]]
  v <- suiro_collect(suiro_submit(p, function(x) x * 2, as.numeric(seq_len(1e5))), timeout = 10)
  expect_true(suiro_is_view(v))
  expect_identical(suiro_view_stats()[["pinned"]], base + 8e5)
  for (i in 1:3) {
    r <- suiro_collect(suiro_submit(p, function(x) x, v), timeout = 10)
    expect_true(suiro_is_view(r))
  }
  expect_identical(suiro_view_stats()[["pinned"]], base + 8e5)
  rm(v, r)
  gc()
  expect_identical(suiro_view_stats()[["pinned"]], base)
})

test_that("a large data frame crosses column by column as views", {
  p <- local_pool(workers = 1)
  n <- 60000
  df <- data.frame(x = as.numeric(seq_len(n)), y = seq_len(n), f = factor(rep(c("lo", "hi"), n / 2)),
                   s = rep(c("a", "b", "c"), n / 3), stringsAsFactors = FALSE)
  got <- suiro_collect(suiro_submit(p, function(d) {
    d$z <- d$x * 2
    list(views = vapply(d[c("x", "y")], suiro_is_view, NA), d = d)
  }, df), timeout = 20)
  expect_identical(got$views, c(x = TRUE, y = TRUE))
  expect_identical(got$d, transform(df, z = x * 2))
  expect_true(suiro_is_view(got$d$x))
})

test_that("nothing of a pool is left in /dev/shm once it stops", {
  gc() # pools of earlier tests that are garbage stop now
  before <- shm_names()
  p <- suiro_pool(workers = 1)
  name <- sub("^/", "", suiro_pool_status(p)$name)
  v <- suiro_collect(suiro_submit(p, function() as.numeric(1:100000)), timeout = 10)
  x <- suiro_collect(suiro_submit(p, function(v) sum(v), as.numeric(1:100000)), timeout = 10)
  expect_true(any(startsWith(shm_names(), name)))
  suiro_pool_stop(p)
  expect_identical(v[100000], 100000) # a view stays readable after its pool stopped
  rm(v)
  gc()
  left <- shm_names()
  expect_false(any(startsWith(left, name)))
  new <- setdiff(left, before)
  # this process's own warm regions go with its last pool; while another pool lives they stay
  own <- sprintf("suiro_%x_", Sys.getpid())
  if (.Call(suiro:::C_zc_active)) new <- new[!grepl(paste0("^", own, "[0-9a-f]+_a"), new)]
  expect_identical(new, character(0))
})
