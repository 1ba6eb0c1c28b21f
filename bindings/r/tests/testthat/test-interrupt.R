# Waits check for interrupts: Ctrl-C (SIGINT) stops a collect at once, loses nothing, and the
# session carries on with the same pool.

test_that("SIGINT interrupts a collect waiting for a long task", {
  skip_if_not_installed("processx")
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "library(suiro)",
    "p <- suiro_pool(workers = 2)",
    "t <- suiro_submit(p, function() { Sys.sleep(60); 'late' })",
    "cat('waiting\\n')",
    "t0 <- Sys.time()",
    "r <- tryCatch(suiro_collect(t), interrupt = function(e) 'interrupted')",
    "cat(r, as.numeric(Sys.time() - t0, units = 'secs') < 30, '\\n')",
    "cat('after', suiro_collect(suiro_submit(p, function() 'fine'), timeout = 10), '\\n')",
    "cat('state', .Call(suiro:::C_task_state, t), '\\n')"), script)
  px <- processx::process$new(file.path(R.home("bin"), "Rscript"), script, stdout = "|", stderr = "|",
                              env = c("current", R_LIBS = paste(.libPaths(), collapse = ":")))
  on.exit(px$kill())
  out <- ""
  deadline <- Sys.time() + 30
  while (!grepl("waiting", out) && Sys.time() < deadline) {
    px$poll_io(200)
    out <- paste0(out, px$read_output())
  }
  expect_match(out, "waiting")
  Sys.sleep(0.3) # inside the collect now
  px$interrupt()
  px$wait(20000)
  out <- paste0(out, px$read_all_output())
  expect_false(px$is_alive())
  expect_match(out, "interrupted TRUE")
  expect_match(out, "after fine")
  expect_match(out, "state pending") # the interrupted task was not lost: still there to collect
})
