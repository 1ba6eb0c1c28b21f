# plot_interop.R — bench/figures/interop.png from bench/results/interop.json: suiro between R and
# Python against reticulate (in process) and a CSV hand-off, the same work each time (log scale,
# lower is better), and the README's table on stdout.
#   scripts/rscript bench/plot_interop.R
root <- Sys.getenv("SUIRO_ROOT", ".")
source(file.path(root, "bench", "plot_bars.R"))
txt <- paste(readLines(file.path(root, "bench", "results", "interop.json"), warn = FALSE), collapse = "")
num <- function(key) {
  m <- regmatches(txt, regexec(sprintf('"%s":([0-9.eE+-]+)', key), txt))[[1]]
  if (length(m) < 2) NA_real_ else as.numeric(m[2])
}
flag <- function(key) grepl(sprintf('"%s":true', key), txt, fixed = TRUE)
date <- sub('.*"date":"([^"]*)".*', "\\1", txt)
rounds <- num("rounds")

cells <- list(
  list("A", "10,000 calls `numpy.add(1, 2)` R → Python, spec built per call", "A_10000", TRUE),
  list("A", "100 such calls", "A_100", TRUE),
  list("B", "8 KB vector to Python and back, fresh", "B_8KB_fresh", FALSE),
  list("B", "8 MB, fresh", "B_8MB_fresh", FALSE),
  list("B", "80 MB, fresh", "B_80MB_fresh", FALSE),
  list("B", "8 KB, the same vector resent", "B_8KB_resend", FALSE),
  list("B", "8 MB, resent", "B_8MB_resend", FALSE),
  list("B", "80 MB, resent", "B_80MB_resend", FALSE),
  list("C", "32 doubles R → Python → R", "C_r_py_r", TRUE),
  list("C", "32 doubles Python → R → Python", "C_py_r_py", TRUE),
  list("D", "mtcars standardised in NumPy (R host)", "D_mtcars", TRUE),
  list("D", "an R quantile from a Python host", "D_quantile", TRUE))

ms <- function(x) if (is.na(x)) "-" else if (x >= 100) sprintf("%.0f ms", x) else if (x >= 1) sprintf("%.2f ms", x) else sprintf("%.0f µs", x * 1e3)
target <- c(A = "A_10000_5x_reticulate", C = "C_3x_reticulate", D = "D_2x_reticulate")
cat(sprintf("| test | what | suiro | reticulate | CSV | suiro vs reticulate |\n|---|---|---|---|---|---|\n"))
for (c in cells) {
  s <- num(paste0(c[[3]], "_suiro_ms"))
  r <- num(paste0(c[[3]], "_reticulate_ms"))
  v <- if (c[[4]]) num(paste0(c[[3]], "_csv_ms")) else NA_real_
  cat(sprintf("| %s | %s | %s | %s | %s | %.1f× |\n", c[[1]], c[[2]], ms(s), ms(r), ms(v), r / s))
}
cat(sprintf("| E | 32 heavy R tasks (~50 ms each) | 1 worker %.2f×, 2 workers %.2f×, 4 workers %.2f× over serial R (%s) | | | |\n",
            num("E_1w_speedup"), num("E_2w_speedup"), num("E_4w_speedup"), ms(num("E_serial_ms"))))
cat(sprintf("\nSetup: a suiro pool of one Python worker to its first result %s, of one R worker %s; reticulate (Python, numpy and pandas in the R process) %s.\n",
            ms(num("suiro_py_setup_ms")), ms(num("suiro_r_setup_ms")), ms(num("reticulate_setup_ms"))))
ok <- c(A = flag("A_10000_5x_reticulate"), "B fresh" = flag("B_fresh_3x_reticulate"),
        "B resend" = flag("B_resend_10x_reticulate"), C = flag("C_3x_reticulate"), D = flag("D_2x_reticulate"),
        E = flag("E_1.8x_on_2_workers"))
cat(sprintf("Targets (A ≥ 5×, B fresh ≥ 3× and resent ≥ 10×, C ≥ 3×, D ≥ 2× reticulate, E ≥ 1.8× on 2 workers): %s.\n",
            paste(sprintf("%s %s", names(ok), ifelse(ok, "met", "missed")), collapse = ", ")))
cat(sprintf("From bench/results/interop.json (%s, %g rounds, medians).\n", date, rounds))

groups <- list(
  "A: 10,000 small calls" = "A_10000", "B: 80 MB fresh" = "B_80MB_fresh", "B: 80 MB resent" = "B_80MB_resend",
  "C: R -> Python -> R" = "C_r_py_r", "D: mtcars in NumPy" = "D_mtcars", "D: R quantile from Python" = "D_quantile")
png(file.path(root, "bench", "figures", "interop.png"), width = 1500, height = 460, type = "cairo", res = 110)
par(mfrow = c(1, length(groups)), mar = c(6, 4.5, 3, 0.5), las = 2, mgp = c(3.4, 0.7, 0))
lab <- function(v) ifelse(v >= 1, sprintf("%.3g ms", v), sprintf("%.3g us", v * 1e3))
log_bars(lapply(groups, function(k) c(suiro = num(paste0(k, "_suiro_ms")), reticulate = num(paste0(k, "_reticulate_ms")),
                                      CSV = num(paste0(k, "_csv_ms")))),
         lab, ylab = "ms (log scale, lower is better)", cex.main = 0.9, cex.axis = 0.8)
invisible(dev.off())
