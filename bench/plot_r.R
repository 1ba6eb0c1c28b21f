# plot_r.R — bench/figures/r.png from bench/results/r.json: suiro from R against R's parallel
# tools, the same task each time (log scale, lower is better).
#   scripts/rscript bench/plot_r.R
root <- Sys.getenv("SUIRO_ROOT", ".")
txt <- readLines(file.path(root, "bench", "results", "r.json"), warn = FALSE)
num <- function(key) as.numeric(sub(sprintf('.*"%s":([0-9.eE+-]+).*', key), "\\1", txt))
groups <- list(
  "trivial task round trip" = c(suiro = num("r_rt_ns") / 1e3, "PSOCK no-delay" = num("psock_rt_ns") / 1e3,
                                "PSOCK" = num("psock_default_rt_ns") / 1e3, callr = num("callr_rt_ns") / 1e3,
                                future = num("future_rt_ns") / 1e3),
  "diamonds enrich round trip" = c(suiro = num("diamonds_enrich_us"), "PSOCK no-delay" = num("psock_diamonds_enrich_us")),
  "2,000 winsum tasks" = c(suiro = num("winsum_2000_ms") * 1e3, serial = num("serial_winsum_2000_ms") * 1e3,
                           parLapply = num("parlapply_winsum_2000_ms") * 1e3, future_lapply = num("future_winsum_2000_ms") * 1e3))
png(file.path(root, "bench", "figures", "r.png"), width = 1100, height = 420, type = "cairo", res = 110)
par(mfrow = c(1, 3), mar = c(7, 4.5, 3, 1), las = 2)
for (g in names(groups)) {
  v <- groups[[g]]
  b <- barplot(v, log = "y", col = ifelse(names(v) == "suiro", "#2a7ab0", "grey70"), main = g,
               ylab = "microseconds (log scale)", ylim = c(min(v) / 3, max(v) * 3))
  text(b, v, labels = ifelse(v >= 1000, sprintf("%.3g ms", v / 1000), sprintf("%.3g us", v)), pos = 3, cex = 0.8, xpd = TRUE)
}
invisible(dev.off())
