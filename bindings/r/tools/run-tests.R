# Runs the testthat suite for scripts/test, one file at a time (SUIRO_R_TEST_FILES: only these).
# After each file it prints "r-ran: FILE" (scripts/test counts these against the test files there, so a suite that stops
# early fails for every file it did not run), and at the end one line "r: N passed, M failed"
# (a test block passes when it has no failure, error or skip).
suppressPackageStartupMessages({
  library(testthat)
  library(suiro)
})
dir <- file.path(Sys.getenv("SUIRO_ROOT", "."), "bindings", "r", "tests", "testthat")
files <- sort(list.files(dir, pattern = "^test.*\\.[rR]$", full.names = TRUE))
only <- strsplit(Sys.getenv("SUIRO_R_TEST_FILES"), " ", fixed = TRUE)[[1]]
if (length(only)) files <- file.path(dir, only) # a subset (scripts/test's r-asan)
dfs <- list()
for (f in files) {
  res <- testthat::test_file(f, reporter = testthat::ProgressReporter$new(show_praise = FALSE),
                             stop_on_failure = FALSE, stop_on_warning = FALSE)
  dfs[[length(dfs) + 1L]] <- as.data.frame(res)
  cat(sprintf("r-ran: %s\n", basename(f)))
}
df <- do.call(rbind, dfs)
bad <- df$failed > 0 | df$error | df$skipped
for (i in which(bad)) cat(sprintf("FAIL r: %s: %s\n", df$file[i], df$test[i]))
cat(sprintf("r: %d passed, %d failed\n", sum(!bad), sum(bad)))
