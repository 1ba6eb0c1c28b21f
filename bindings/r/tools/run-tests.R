# Runs the testthat suite for scripts/test and prints one line "r: N passed, M failed" (a test
# block passes when it has no failure, error or skip: a suite that cannot run is a failure).
suppressPackageStartupMessages({
  library(testthat)
  library(suiro)
})
dir <- file.path(Sys.getenv("SUIRO_ROOT", "."), "bindings", "r", "tests", "testthat")
res <- testthat::test_dir(dir, reporter = testthat::ProgressReporter$new(show_praise = FALSE),
                          stop_on_failure = FALSE, stop_on_warning = FALSE)
df <- as.data.frame(res)
bad <- df$failed > 0 | df$error | df$skipped
for (i in which(bad)) cat(sprintf("FAIL r: %s: %s\n", df$file[i], df$test[i]))
cat(sprintf("r: %d passed, %d failed\n", sum(!bad), sum(bad)))
