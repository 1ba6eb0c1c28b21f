# plot_r.R — bench/figures/r.png from bench/results/r.json: suiro from R against R's parallel
# tools, the same task each time (log scale, lower is better).
#   scripts/rscript bench/plot_r.R
root <- Sys.getenv("SUIRO_ROOT", ".")
source(file.path(root, "bench", "plot_bars.R"))
txt <- readLines(file.path(root, "bench", "results", "r.json"), warn = FALSE)
num <- function(key) as.numeric(sub(sprintf('.*"%s":([0-9.eE+-]+).*', key), "\\1", txt))
groups <- list(
  "trivial task round trip" = c(suiro = num("r_rt_ns") / 1e3, "PSOCK no-delay" = num("psock_rt_ns") / 1e3,
                                "PSOCK" = num("psock_default_rt_ns") / 1e3, callr = num("callr_rt_ns") / 1e3,
                                future = num("future_rt_ns") / 1e3),
  "diamonds enrich round trip" = c(suiro = num("diamonds_enrich_us"), "PSOCK no-delay" = num("psock_diamonds_enrich_us")),
  "2,000 winsum tasks" = c(suiro = num("winsum_2000_ms") * 1e3, serial = num("serial_winsum_2000_ms") * 1e3,
                           parLapply = num("parlapply_winsum_2000_ms") * 1e3, future_lapply = num("future_winsum_2000_ms") * 1e3))
png(file.path(root, "bench", "figures", "r.png"), width = 1200, height = 460, type = "cairo", res = 110)
par(mfrow = c(1, 3), mar = c(8.5, 5, 3, 1), las = 2, mgp = c(3.8, 0.7, 0))
lab <- function(v) ifelse(v >= 1000, sprintf("%.3g ms", v / 1000), sprintf("%.3g us", v))
log_bars(groups, lab)
invisible(dev.off())

# The README's R table (markdown, to stdout).
us <- function(x) if (x >= 1000) sprintf("%.1f ms", x / 1000) else if (x >= 10) sprintf("%.0f µs", x) else sprintf("%.2f µs", x)
ok <- function(pass) if (pass) "✓" else "✗ missed"
rt <- num("r_rt_ns") / 1e3
rows <- rbind(
  c("trivial task round trip, 1 R worker", us(rt),
    sprintf("PSOCK no-delay %s (%.0f×), PSOCK %s, callr %s, future %s", us(num("psock_rt_ns") / 1e3), num("psock_rt_ns") / 1e3 / rt,
            us(num("psock_default_rt_ns") / 1e3), us(num("callr_rt_ns") / 1e3), us(num("future_rt_ns") / 1e3)),
    paste("≥ 100× PSOCK", ok(num("psock_rt_ns") / 1e3 / rt >= 100))),
  c("pipelined tasks/s, 1 R worker", sprintf("%.0f k/s", num("r_pipelined_tasks_per_s") / 1e3), "", "—"),
  c("diamonds enrich (3.3 MB frame there, a column added, back)", us(num("diamonds_enrich_us")),
    sprintf("PSOCK no-delay %s (%.0f×); suiro's mean %s", us(num("psock_diamonds_enrich_us")),
            num("psock_diamonds_enrich_us") / num("diamonds_enrich_us"), us(num("diamonds_enrich_mean_us"))),
    paste("≥ 20×", ok(num("psock_diamonds_enrich_us") / num("diamonds_enrich_us") >= 20))),
  c("winsum: 2,000 window mean/sd tasks, 2 workers", us(num("winsum_2000_ms") * 1e3),
    sprintf("lapply %s (%.2f× speedup), parLapply %s, future_lapply %s (%.0f×)", us(num("serial_winsum_2000_ms") * 1e3),
            num("serial_winsum_2000_ms") / num("winsum_2000_ms"), us(num("parlapply_winsum_2000_ms") * 1e3),
            us(num("future_winsum_2000_ms") * 1e3), num("future_winsum_2000_ms") / num("winsum_2000_ms")),
    sprintf("≥ 1.7× serial %s, ≥ 20× future_lapply %s", ok(num("serial_winsum_2000_ms") / num("winsum_2000_ms") >= 1.7),
            ok(num("future_winsum_2000_ms") / num("winsum_2000_ms") >= 20))),
  c("R worker start (pool to first result)", us(num("r_worker_start_ms") * 1e3), "", paste("≤ 150 ms", ok(num("r_worker_start_ms") <= 150))),
  c("80 MB made fresh, x * 2 in a worker, back, sum", us(num("r_80mb_fresh_ms") * 1e3),
    sprintf("memcpy of 80 MB %s (%.0f×)", us(num("memcpy_80mb_ms") * 1e3), num("r_80mb_fresh_ms") / num("memcpy_80mb_ms")), "—"),
  c("80 MB view sent to a worker and back", us(num("r_80mb_view_resend_us")), "", paste("≤ 50 µs", ok(num("r_80mb_view_resend_us") <= 50))))
cat("| figure | suiro | baseline in the same run | target |\n|---|---|---|---|\n")
cat(paste0("| ", apply(rows, 1, paste, collapse = " | "), " |\n"), sep = "")
date <- sub('.*"date":"([^"]+)".*', "\\1", txt)
cat(sprintf("\nFrom `bench/results/r.json` (%s, %d rounds, medians; floor %.0f ns in that run).\n", date,
            as.integer(num("rounds")), num("floor_rt_ns")))
