# Worker commands from an R host: suiro.config.launch (through suiro_conf_launch) resolves them by
# the rule every host shares: the launcher's option beats the variable (SUIRO_WORKER_EXE,
# SUIRO_PY_WORKER, SUIRO_R_LIBS), which beats what this R knows of itself (its Rscript, the library
# suiro was loaded from, .libPaths()), then what is installed.

launch <- function(launcher, pool_env = NULL) suiro:::launch_spec(unclass(launcher), pool_env)

# Sets variables for the calling test (unset when "" is given), restored when it ends.
local_vars <- function(..., env = parent.frame()) {
  vars <- list(...)
  old <- Sys.getenv(names(vars), unset = NA, names = TRUE)
  for (k in names(vars)) if (nzchar(vars[[k]])) do.call(Sys.setenv, vars[k]) else Sys.unsetenv(k)
  withr_defer(for (k in names(old)) if (is.na(old[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, as.list(old[k])),
              env)
}

test_that("R workers: this R's Rscript and library; SUIRO_R_LIBS first; rscript = beats", {
  local_vars(SUIRO_R_LIBS = "")
  s <- launch(suiro_r())
  rscript <- file.path(R.home("bin"), "Rscript")
  expect_identical(s$exe, rscript)
  expect_identical(unlist(s$argv), c(rscript, "--vanilla", "--default-packages=NULL", "-e", "suiro:::worker_main()"))
  lib <- dirname(getNamespaceInfo("suiro", "path"))
  expect_identical(strsplit(s$env$R_LIBS, ":")[[1]][1], lib)
  expect_identical(s$env$SUIRO_HOST_LANG, "r")
  expect_identical(s$env$LANG, "C.UTF-8")
  other <- tempfile("rlib")
  dir.create(file.path(other, "suiro"), recursive = TRUE)
  file.create(file.path(other, "suiro", "DESCRIPTION"))
  local_vars(SUIRO_R_LIBS = other)
  expect_identical(strsplit(launch(suiro_r())$env$R_LIBS, ":")[[1]][1], other)
  expect_identical(launch(suiro_r(rscript = "/bin/sh"))$exe, "/bin/sh")
  local_vars(SUIRO_R_LIBS = "/nonexistent")
  expect_error(launch(suiro_r()), "R package in /nonexistent (SUIRO_R_LIBS)", fixed = TRUE)
})

test_that("Python workers: argv beats SUIRO_PY_WORKER, which beats the installed package", {
  script <- file.path(need_root(), "bindings", "python", "suiro", "_worker.py")
  local_vars(SUIRO_PY_WORKER = script)
  s <- launch(suiro_python())
  expect_identical(unlist(s$argv), c("/usr/bin/python3", "-I", script))
  expect_identical(s$env$SUIRO_CWD, getwd())
  expect_identical(unlist(launch(suiro_python(python = "/o/py"))$argv), c("/o/py", "-I", script))
  local_vars(SUIRO_PY_WORKER = "/nonexistent.py")
  expect_error(launch(suiro_python()), "SUIRO_PY_WORKER names no file (/nonexistent.py)", fixed = TRUE)
  expect_identical(unlist(launch(suiro_python(argv = c("/o/py", "x.py")))$argv), c("/o/py", "x.py"))
})

test_that("Lua workers: exe = beats SUIRO_WORKER_EXE", {
  local_vars(SUIRO_WORKER_EXE = "/v/suiro")
  expect_identical(launch(suiro_lua())$exe, "/v/suiro")
  expect_identical(launch(suiro_lua(exe = "/o/suiro"))$exe, "/o/suiro")
})

test_that("env: the launcher's beats the defaults, the pool's beats the launcher's; the host's language stays", {
  s <- launch(suiro_lua(exe = "/o/suiro", env = list(OMP_NUM_THREADS = "2", MKL_NUM_THREADS = "2",
                                                     SUIRO_HOST_LANG = "x")),
              pool_env = list(MKL_NUM_THREADS = "3"))
  expect_identical(c(s$env$OPENBLAS_NUM_THREADS, s$env$OMP_NUM_THREADS, s$env$MKL_NUM_THREADS, s$env$SUIRO_HOST_LANG),
                   c("1", "2", "3", "r"))
})

test_that("a Python worker starts from R through SUIRO_PY_WORKER (no argv)", {
  script <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(script)) script <- file.path(need_root(), "bindings", "python", "suiro", "_worker.py")
  local_vars(SUIRO_PY_WORKER = script)
  p <- suiro_pool(workers = 1, launcher = suiro_python(), timeout = 60, env = worker_env())
  on.exit(suiro_pool_stop(p))
  expect_identical(suiro_collect(suiro_submit(p, suiro_call(.source = "import sys\nsys.argv[0]")), timeout = 60), script)
})
