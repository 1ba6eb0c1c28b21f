# suiro_open: the Lua face's config scripts, read by the same Lua code (same checks, messages).

test_that("suiro_open reads examples/pools.lua and starts its pools on first use", {
  root <- need_root()
  Sys.setenv(SUIRO_WORKER_EXE = lua_exe())
  pools <- suiro_open(file.path(root, "examples", "pools.lua"))
  on.exit(suiro_close(pools))
  expect_identical(names(pools), c("parse", "score"))
  expect_output(print(pools), "suiro pools from .*pools.lua: parse, score")
  p <- pools$parse
  expect_s3_class(p, "suiro_pool")
  expect_identical(suiro_pool_status(p)$workers, 2)
  expect_identical(pools[["parse"]], p) # created once
  # the config's env reaches the workers; its timeout is the pool's default
  expect_identical(suiro_collect(suiro_submit(p, suiro_call("os.getenv", "PIPELINE_STAGE"))), "parse")
  expect_identical(suiro_collect(suiro_submit(pools$score, "string.rep", "x", 2L), timeout = 10), "xx")
  expect_error(pools$nope, "no pool \"nope\" in .*pools.lua \\(pools: parse, score\\)")
  suiro_close(pools)
  expect_output(print(p), "stopped")
})

test_that("an mpi pool in a config script is one node outside mpirun, a local one starts", {
  f <- tempfile(fileext = ".lua")
  writeLines('return { m = { workers = 1, backend = "mpi" }, l = { workers = 1, backend = "local" } }', f)
  pools <- suiro_open(f)
  on.exit(suiro_close(pools))
  need_root() # the pools run Lua workers: the checkout's build/bin/suiro
  Sys.setenv(SUIRO_WORKER_EXE = lua_exe())
  expect_identical(suiro_collect(suiro_submit(pools$l, "string.rep", "x", 2L), timeout = 10), "xx")
  expect_identical(suiro_pool_nodes(pools$m)$rank, 0L) # without mpirun: the local pool, one node
  expect_identical(suiro_collect(suiro_submit(pools$m, "string.rep", "y", 2L), timeout = 10), "yy")
})

test_that("an R pool in a config script, and errors naming file, pool and key", {
  f <- tempfile(fileext = ".lua")
  writeLines(c("return {", "  rw = { workers = 1, launcher = suiro.r {}, timeout = \"20s\" },",
               "  bad = { workers = 1, timeout = \"1m30\" },", "}"), f)
  expect_error(suiro_open(f), "pool \"bad\": timeout: bad duration")
  writeLines(c("return {", "  rw = { workers = 1, launcher = suiro.r {}, timeout = \"20s\" },", "}"), f)
  pools <- suiro_open(f)
  on.exit(suiro_close(pools))
  expect_identical(suiro_collect(suiro_submit(pools$rw, function(x) x + 1, 1)), 2)
  writeLines("return { x = { workers = 1, bogus = 2 } }", f)
  expect_error(suiro_open(f), "unknown key \"bogus\"")
  expect_error(suiro_open(file.path(tempdir(), "missing.lua")), "missing.lua")
  expect_error(suiro_open(1), "argument 1 must be a file name")
})
