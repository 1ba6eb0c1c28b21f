# Parallel maps: templates (vapply-style and template strings), seeds, nesting, streaming,
# prepared maps, failures.

test_that("a map with a scalar template gives a vector", {
  p <- local_pool(workers = 2)
  m <- suiro_map(p, c(1, 4, 9, 16, 25), sqrt, .template = numeric(1), .seed = 42)
  expect_s3_class(m, "suiro_map")
  expect_identical(suiro_collect(m), c(1, 2, 3, 4, 5))
  expect_error(suiro_collect(m), "collected already")
  expect_identical(suiro_collect(suiro_map(p, 1:6, function(i) i * 2L, .template = integer(1))), (1:6) * 2L)
  expect_identical(suiro_collect(suiro_map(p, 1:4, function(i) i %% 2 == 0, .template = logical(1))), c(FALSE, TRUE, FALSE, TRUE))
  expect_identical(suiro_collect(suiro_map(p, c(a = 1, b = 2), function(x) x + 1, .template = "f64")), c(a = 2, b = 3))
  expect_identical(suiro_collect(suiro_map(p, 1:3, function(i) NA, .template = numeric(1))), c(NA_real_, NA_real_, NA_real_))
})

test_that("without a template the results are a list, in order, names kept", {
  p <- local_pool(workers = 2)
  got <- suiro_collect(suiro_map(p, list(a = 1:3, b = letters[1:2], c = NULL), function(x) rev(x)))
  expect_identical(got, list(a = 3:1, b = c("b", "a"), c = NULL))
  got <- suiro_collect(suiro_map(p, 1:100, function(i) list(i = i, sq = i^2)))
  expect_identical(got, lapply(1:100, function(i) list(i = i, sq = i^2)))
})

test_that("array and record templates give matrices and data frames", {
  p <- local_pool(workers = 2)
  m <- suiro_collect(suiro_map(p, 1:3, function(i) c(lo = i - 1, hi = i + 1), .template = c(lo = 0, hi = 0)))
  expect_identical(m, vapply(1:3, function(i) c(lo = i - 1, hi = i + 1), c(lo = 0, hi = 0)))
  m <- suiro_collect(suiro_map(p, 1:2, function(i) matrix(i, 2, 2), .template = matrix(0, 2, 2)))
  expect_identical(dim(m), c(2L, 2L, 2L))
  expect_identical(m[, , 2], matrix(2, 2, 2))
  df <- suiro_collect(suiro_map(p, 1:3, function(i) list(mean = i / 2, n = i), .template = list(mean = numeric(1), n = integer(1))))
  expect_identical(df, data.frame(mean = (1:3) / 2, n = 1:3))
  df <- suiro_collect(suiro_map(p, 1:2, function(i) c(mean = i, sd = 0), .template = "{mean: f64, sd: f64}"))
  expect_identical(df, data.frame(mean = c(1, 2), sd = c(0, 0)))
  m <- suiro_collect(suiro_map(p, 1:2, function(i) c(i, i), .template = "f64[2]"))
  expect_identical(m, matrix(c(1, 1, 2, 2), 2))
  expect_error(suiro_map(p, 1:2, identity, .template = "f65"), "template")
  expect_error(suiro_map(p, 1:2, identity, .template = "a"), ".template")
  expect_error(suiro_map(p, 1:2, identity, .template = list(1)), "named list")
})

test_that("extra arguments reach every call", {
  p <- local_pool(workers = 2)
  expect_identical(suiro_collect(suiro_map(p, 1:4, function(x, k, off = 0) x * k + off, 10, off = 1, .template = numeric(1))),
                   (1:4) * 10 + 1)
})

test_that("the first failing element fails the map with its index", {
  p <- local_pool(workers = 2)
  err <- tryCatch(suiro_collect(suiro_map(p, 1:50, function(i) if (i == 37) stop("no 37") else i, .template = numeric(1))),
                  error = identity)
  expect_s3_class(err, "suiro_error_remote")
  expect_identical(err$index, 37)
  expect_match(conditionMessage(err), "element 37: no 37")
  err <- tryCatch(suiro_collect(suiro_map(p, 1:5, function(i) if (i == 3) "x" else i, .template = numeric(1))),
                  error = identity)
  expect_identical(err$index, 3)
  expect_match(conditionMessage(err), "element 3: template f64 cannot hold character")
  err <- tryCatch(suiro_collect(suiro_map(p, 1:5, function(i) c(i, i), .template = numeric(1))), error = identity)
  expect_match(conditionMessage(err), "wants one f64 value, got an integer of length 2")
  # the pool is still fine
  expect_identical(suiro_collect(suiro_map(p, 1:3, identity, .template = integer(1))), 1:3)
})

test_that("the seeds' nested map gives 2635310 4818361 6239529 7388808 on 1 and 2 workers", {
  parts <- split(as.numeric(1:100000), rep(1:4, each = 25000))
  for (w in c(1, 2)) {
    p <- suiro_pool(workers = w)
    m <- suiro_map(p, parts, function(part) {
      nested <- suiro_map(suiro_current_pool(), part, sqrt, .template = numeric(1))
      sum(suiro_collect(nested))
    }, .template = numeric(1))
    got <- suiro_collect(m, timeout = 60)
    suiro_pool_stop(p)
    expect_identical(round(got), c(`1` = 2635310, `2` = 4818361, `3` = 6239529, `4` = 7388808), label = paste(w, "workers"))
    expect_equal(unname(got), vapply(parts, function(x) sum(sqrt(x)), 0, USE.NAMES = FALSE), tolerance = 1e-12)
  }
})

draws <- function(p, n, seed) {
  suiro_collect(suiro_map(p, seq_len(n), function(i) suiro_random() + suiro_random(6) * 10 + suiro_random(-5, 5) * 100,
                          .template = numeric(1), .seed = seed), timeout = 60)
}

test_that("seeded maps are bitwise equal on 1, 2 and 4 workers", {
  got <- lapply(c(1, 2, 4), function(w) {
    p <- suiro_pool(workers = w)
    on.exit(suiro_pool_stop(p))
    draws(p, 3000, 42)
  })
  expect_true(identical(got[[1]], got[[2]], num.eq = FALSE))
  expect_true(identical(got[[1]], got[[3]], num.eq = FALSE))
  p <- local_pool(workers = 2)
  expect_false(identical(draws(p, 3000, 43), got[[1]]))
})

test_that("R's own generators in a seeded map draw one stream per element, for any worker count", {
  f <- function(i) c(runif(1), sample.int(1000, 1), rnorm(1))
  got <- lapply(c(1, 2), function(w) {
    p <- suiro_pool(workers = w)
    on.exit(suiro_pool_stop(p))
    list(suiro_collect(suiro_map(p, 1:200, f, .template = numeric(3), .seed = 7), timeout = 60),
         suiro_collect(suiro_map(p, 1:200, f, .template = numeric(3), .seed = 7), timeout = 60))
  })
  expect_true(identical(got[[1]][[1]], got[[1]][[2]], num.eq = FALSE)) # run again: the same
  expect_true(identical(got[[1]][[1]], got[[2]][[1]], num.eq = FALSE)) # 2 workers: the same
  p <- local_pool(workers = 1)
  other <- suiro_collect(suiro_map(p, 1:200, f, .template = numeric(3), .seed = 8), timeout = 60)
  expect_false(identical(other, got[[1]][[1]]))
  expect_equal(length(unique(got[[1]][[1]][1, ])), 200) # elements draw different numbers
  # suiro_random() is untouched by it, and the worker's own RNG state is as before the map
  expect_identical(draws(p, 50, 42), draws(p, 50, 42))
  had <- function() exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  expect_false(suiro_collect(suiro_submit(p, had), timeout = 10))
  # .seed = TRUE takes the map's seed from the host's generator: set.seed() makes it repeat
  set.seed(1)
  a <- suiro_collect(suiro_map(p, 1:20, f, .template = numeric(3), .seed = TRUE), timeout = 60)
  set.seed(1)
  b <- suiro_collect(suiro_map(p, 1:20, f, .template = numeric(3), .seed = TRUE), timeout = 60)
  expect_identical(a, b)
})

test_that("suiro_random() draws the streams of tests/vectors/rng.txt, as Lua and Python do", {
  root <- need_root()
  lines <- readLines(file.path(root, "tests", "vectors", "rng.txt"))
  lines <- lines[!startsWith(lines, "#")]
  p <- local_pool(workers = 2)
  # every seed, elements 0, 1, 7 (map indexes) and 999999
  seeds <- unique(vapply(strsplit(lines, " "), `[`, "", 2))
  checked <- 0
  for (s in seeds) {
    seed <- if (s == "18446744073709551615") -1 else as.numeric(s)
    n <- 8
    u <- suiro_collect(suiro_map(p, seq_len(n), function(i) c(suiro_random(), suiro_random(), suiro_random()),
                                 .template = numeric(3), .seed = seed))
    r6 <- suiro_collect(suiro_map(p, seq_len(n), function(i) c(suiro_random(6), suiro_random(6), suiro_random(6), suiro_random(6)),
                                  .template = integer(4), .seed = seed))
    r5 <- suiro_collect(suiro_map(p, seq_len(n), function(i) c(suiro_random(-5, 5), suiro_random(-5, 5), suiro_random(-5, 5), suiro_random(-5, 5)),
                                  .template = integer(4), .seed = seed))
    for (l in lines) {
      tk <- strsplit(l, " ")[[1]]
      if (tk[2] != s || !tk[3] %in% c("0", "1", "7")) next
      col <- as.integer(tk[3]) + 1L
      if (tk[1] == "unit") {
        expect_identical(sprintf("%.17g", u[, col]), tk[4:6], label = l)
        checked <- checked + 1
      } else if (tk[1] == "range" && tk[4] == "1") {
        expect_identical(r6[, col], as.integer(tk[6:9]), label = l)
        checked <- checked + 1
      } else if (tk[1] == "range" && tk[4] == "-5") {
        expect_identical(r5[, col], as.integer(tk[6:9]), label = l)
        checked <- checked + 1
      }
    }
  }
  expect_identical(checked, 5 * 3 * 3)
  # element 999999 of seed 42
  big <- suiro_collect(suiro_map(p, seq_len(1e6), function(i) if (i == 1e6) suiro_random() else 0, .template = numeric(1),
                                 .seed = 42), timeout = 120)
  want <- strsplit(grep("^unit 42 999999 ", lines, value = TRUE), " ")[[1]][4]
  expect_identical(sprintf("%.17g", big[1e6]), want)
  # outside a seeded map it is R's generator
  expect_true(suiro_random() < 1)
  expect_true(suiro_random(3) %in% 1:3)
})

test_that("a streamed map hands out ranges as they finish", {
  p <- local_pool(workers = 2)
  m <- suiro_map(p, 1:500, function(i) i * 3, .template = numeric(1), .stream = TRUE)
  seen <- numeric(0)
  vals <- numeric(0)
  deadline <- Sys.time() + 60
  repeat {
    r <- suiro_map_next(m, timeout = 10)
    if (is.null(r)) break
    expect_false(suiro_is_sentinel(r))
    seen <- c(seen, r$index)
    vals <- c(vals, r$value)
    if (Sys.time() > deadline) break
  }
  expect_identical(sort(seen), as.numeric(1:500))
  expect_identical(vals[order(seen)], (1:500) * 3)
  expect_error(suiro_map_next(suiro_map(p, 1:2, identity)), "not made with .stream")
})

test_that("a prepared map runs again and again, with new input of the same shape", {
  p <- local_pool(workers = 2)
  pm <- suiro_map_prepare(p, c(1, 2, 3), function(x) x * 10, .template = numeric(1))
  expect_output(print(pm), "prepared")
  expect_identical(suiro_map_run(pm), c(10, 20, 30))
  expect_identical(suiro_map_run(pm, c(4, 5, 6)), c(40, 50, 60))
  expect_identical(suiro_map_run(pm), c(40, 50, 60))
  expect_error(suiro_map_run(pm, c(1, 2)), "length 3")
  expect_error(suiro_map_run(pm, 1:3), "f64 vector")
})

test_that("a map waits with a timeout and stays collectable", {
  p <- local_pool(workers = 1)
  m <- suiro_map(p, 1:2, function(i) { Sys.sleep(0.3); i }, .template = integer(1))
  expect_true(suiro_is_sentinel(suiro_collect(m, timeout = 0.05)))
  expect_output(print(m), "running")
  expect_identical(suiro_collect(m, timeout = 10), 1:2)
  err <- tryCatch(suiro_collect(suiro_map(p, 1:2, "no_such_function", .template = 1)), error = identity)
  expect_match(conditionMessage(err), "element 1: cannot find function \"no_such_function\"")
})

test_that("a seeded map draws the same numbers in R, Lua and Python", {
  root <- need_root()
  p <- local_pool(workers = 2)
  r <- suiro_collect(suiro_map(p, seq_len(50), function(i) suiro_random() + suiro_random(1, 1000), .template = numeric(1), .seed = 7))
  lua <- tempfile(fileext = ".lua")
  writeLines(c('local suiro = require "suiro"',
               'local p <close> = suiro.pool { workers = 2 }',
               'local m = p:map(function(i) return suiro.random() + suiro.random(1, 1000) end, suiro.range(1, 50), { template = "f64", seed = 7 }):collect()',
               'for i = 1, #m do print(string.format("%.17g", m[i])) end'), lua)
  out <- system2(lua_exe(), c("run", lua), stdout = TRUE, stderr = TRUE)
  expect_identical(out, sprintf("%.17g", r))
  py <- tempfile(fileext = ".py")
  writeLines(c("import suiro",
               "with suiro.pool(2) as p:",
               "    m = p.map('suiro_seed_f.f', range(1, 51), template='f64', seed=7).collect()",
               "    for v in m: print('%.17g' % v)"), py)
  writeLines(c("import suiro", "def f(i):", "    return suiro.random() + suiro.random(1, 1000)"), file.path(tempdir(), "suiro_seed_f.py"))
  out <- system2("/usr/bin/python3", py, stdout = TRUE, stderr = TRUE,
                 env = paste0("PYTHONPATH=", file.path(root, "bindings", "python"), ":", tempdir()))
  expect_identical(out, sprintf("%.17g", r), label = paste(out, collapse = "\n"))
})
