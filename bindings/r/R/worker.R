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
# must = FALSE (the worker's task names): NULL when there is no such function, so the engine
# gives its one message for every language; errors only when a package fails otherwise
resolve_function <- function(name, must = TRUE) {
  internal <- grepl(":::", name, fixed = TRUE)
  f <- if (internal || grepl("::", name, fixed = TRUE)) {
    p <- strsplit(name, if (internal) ":::" else "::", fixed = TRUE)[[1]]
    if (!must && (length(p) != 2L || !nzchar(p[1]) || !requireNamespace(p[1], quietly = TRUE))) NULL
    else if (internal) get0(p[2], envir = asNamespace(p[1]), inherits = FALSE, ifnotfound = NULL)
    else if (!must && !(p[2] %in% getNamespaceExports(p[1]))) NULL
    else getExportedValue(p[1], p[2])
  } else {
    get0(name, envir = globalenv(), mode = "function", ifnotfound = NULL)
  }
  if (!is.function(f)) {
    if (!must) return(NULL)
    stop(sprintf("cannot find function \"%s\"", name), call. = FALSE)
  }
  f
}

# class, message and traceback of a condition that reached the top of a task: the calls from the
# task's function to where the error was signalled, most recent first (as traceback() shows them)
error_parts <- function(cond, calls) {
  show <- function(cl) {
    if (is.call(cl) && !is.symbol(cl[[1]]) && !is.call(cl[[1]])) cl[[1]] <- as.name("<task function>")
    sub("^`<task function>`", "<task function>", paste(deparse(cl, nlines = 1L, width.cutoff = 80L)[1], collapse = ""))
  }
  lines <- vapply(calls, show, "")
  # the worker's own frames come first (worker_main), the handler's last
  n <- length(lines)
  while (n > 0 && grepl("^(\\.handleSimpleError|h\\(|\\(function\\(e\\)|<task function>\\(e\\)|stop\\()", lines[n]) &&
         !grepl("^stop\\(", lines[n])) n <- n - 1L
  first <- 1L
  while (first <= n && grepl("^(worker_main|suiro:::worker_main)\\(", lines[first])) first <- first + 1L
  tb <- if (first <= n) lines[first:n] else character(0)
  tb <- tb[!grepl("^\\.handleSimpleError\\(", tb)]
  tb <- if (length(tb)) paste(sprintf("%d: %s", rev(seq_along(tb)), rev(tb)), collapse = "\n") else ""
  c(class(cond)[1], conditionMessage(cond), tb)
}

suiro_current_pool <- function() .Call(C_current_pool)
