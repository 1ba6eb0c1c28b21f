# The R worker: `Rscript --vanilla --default-packages=NULL -e 'suiro:::worker_main()'
# --suiro-worker TOKEN` (the engine appends the last two). It attaches the packages named in
# SUIRO_R_ATTACH (default stats, utils, datasets) and suiro, gives C the calling handler that
# records errors reaching the top of a task (condition and call stack, for the traceback), then
# runs tasks until the pool stops.

worker_main <- function() {
  args <- commandArgs(trailingOnly = TRUE)
  i <- match("--suiro-worker", args)
  if (is.na(i) || i == length(args)) stop("suiro worker: no --suiro-worker TOKEN in the arguments")
  options(warn = 1L, show.error.messages = FALSE, keep.source = FALSE)
  attach <- strsplit(Sys.getenv("SUIRO_R_ATTACH", "stats,utils,datasets"), ",", fixed = TRUE)[[1]]
  for (p in attach[nzchar(attach)]) suppressPackageStartupMessages(library(p, character.only = TRUE))
  suppressPackageStartupMessages(library("suiro", character.only = TRUE))
  .Call(C_worker_set_handler, function(e) .Call(C_worker_note_error, e, sys.calls()))
  rc <- .Call(C_worker_run, args[[i + 1L]])
  quit(save = "no", status = rc, runLast = FALSE)
}

# "pkg::fn", "pkg:::fn" or a plain name seen from the global environment.
resolve_function <- function(name) {
  f <- if (grepl(":::", name, fixed = TRUE)) {
    p <- strsplit(name, ":::", fixed = TRUE)[[1]]
    get(p[2], envir = asNamespace(p[1]), inherits = FALSE)
  } else if (grepl("::", name, fixed = TRUE)) {
    p <- strsplit(name, "::", fixed = TRUE)[[1]]
    getExportedValue(p[1], p[2])
  } else {
    get0(name, envir = globalenv(), mode = "function", ifnotfound = NULL)
  }
  if (!is.function(f)) stop(sprintf("cannot find function \"%s\"", name), call. = FALSE)
  f
}

# class, message and traceback of a condition that reached the top of a task
error_parts <- function(cond, calls) {
  cls <- class(cond)[1]
  msg <- conditionMessage(cond)
  lines <- vapply(calls, function(cl) paste(deparse(cl, nlines = 1L, width.cutoff = 80L)[1], collapse = ""), "")
  # drop the worker's own frames (worker_main) and the handler's (the last ones)
  keep <- !grepl("^(worker_main|suiro:::worker_main|\\.handleSimpleError|h\\(simpleError|stop\\(|\\(function\\(e\\) \\.Call)", lines)
  keep[1] <- FALSE
  n <- length(lines)
  while (n > 0 && grepl("^(\\.handleSimpleError|h\\(|\\(function\\(e\\))", lines[n])) {
    keep[n] <- FALSE
    n <- n - 1L
  }
  tb <- lines[keep]
  tb <- if (length(tb)) paste(sprintf("%d: %s", rev(seq_along(tb)), rev(tb)), collapse = "\n") else ""
  c(cls, msg, tb)
}

suiro_current_pool <- function() .Call(C_current_pool)
