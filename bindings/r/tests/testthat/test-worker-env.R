# One environment rule for workers of every kind, from every host (suiro.config.worker_env, as the
# Lua and Python hosts apply it): each numeric library limited to one thread, R in a UTF-8 locale;
# the pool's env overrides a default.

thread_vars <- c("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS",
                 "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")

env_pool <- function(launcher, env = parent.frame()) {
  p <- suiro_pool(workers = 1, launcher = launcher, timeout = 60,
                  env = c(worker_env(), list(MKL_NUM_THREADS = "3")))
  withr_defer(suiro_pool_stop(p), env)
  p
}

want <- ifelse(thread_vars == "MKL_NUM_THREADS", "3", "1")

test_that("R workers get the thread limits and the locale; the pool's env wins", {
  p <- env_pool(suiro_r())
  got <- suiro_collect(suiro_submit(p, function(ks) unname(Sys.getenv(ks)), thread_vars), timeout = 60)
  expect_identical(got, want)
  expect_identical(suiro_collect(suiro_submit(p, function() Sys.getenv("LANG")), timeout = 60), "C.UTF-8")
})

test_that("Lua workers from an R host get the same limits", {
  p <- env_pool(suiro_lua(exe = lua_exe()))
  spec <- suiro_call(.source = "local out = {} for i = 1, #ks do out[i] = os.getenv(ks[i]) or '' end return out",
                     ks = thread_vars)
  expect_identical(unlist(suiro_collect(suiro_submit(p, spec), timeout = 60)), want)
})

test_that("Python workers from an R host get the same limits", {
  script <- Sys.getenv("SUIRO_PY_WORKER")
  if (!nzchar(script)) script <- file.path(need_root(), "bindings", "python", "suiro", "_worker.py")
  p <- env_pool(suiro_python(argv = c("/usr/bin/python3", "-I", script)))
  spec <- suiro_call(.source = "[__import__('os').environ.get(k, '') for k in ks]", ks = thread_vars)
  expect_identical(unlist(suiro_collect(suiro_submit(p, spec), timeout = 60)), want)
})
