# plot_bars.R — the bar chart every bench/plot_*.R draws: one panel per group, suiro in blue
# and the baselines of the same run in grey, on a log scale (lower is better).
#   source(file.path(root, "bench", "plot_bars.R")); log_bars(groups, lab, ylab)
# groups: a named list of named numeric vectors (one panel each); lab: value -> label text.
log_bars <- function(groups, lab, ylab = "time (log scale, lower is better)", cex.main = 1, cex.axis = 0.85) {
  for (g in names(groups)) {
    v <- groups[[g]]
    v <- v[!is.na(v)]
    ylim <- c(min(v) / 3, max(v) * 3)
    b <- barplot(v, log = "y", col = ifelse(names(v) == "suiro", "#2a7ab0", "grey70"), main = g,
                 cex.main = cex.main, ylab = ylab, ylim = ylim, yaxt = "n")
    ticks <- as.vector(outer(c(1, 2, 5), 10^(floor(log10(ylim[1])):ceiling(log10(ylim[2])))))
    ticks <- ticks[ticks >= ylim[1] & ticks <= ylim[2]]
    axis(2, at = ticks, labels = lab(ticks), cex.axis = cex.axis)
    text(b, v, labels = lab(v), pos = 3, cex = 0.8, xpd = TRUE)
  }
}
