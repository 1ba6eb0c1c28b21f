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
  .Call(C_worker_set_relay, relay_handler)
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

# Relaying conditions to R hosts (docs/r.md, "Conditions"). In the worker, relay_handler is the
# calling handler of every condition while a task or map element from an R process runs: it
# records warnings, messages and other conditions (errors are the task's failure, interrupts the
# worker's) and muffles warnings and messages, so the worker no longer prints them.
relay_handler <- function(cond) {
  if (inherits(cond, "error") || inherits(cond, "interrupt")) return(invisible())
  .Call(C_worker_note_condition, relay_condition(cond))
  if (inherits(cond, "warning") && !is.null(findRestart("muffleWarning", cond))) invokeRestart("muffleWarning")
  if (inherits(cond, "message") && !is.null(findRestart("muffleMessage", cond))) invokeRestart("muffleMessage")
  invisible()
}

# A condition as it travels: every field and class kept; a call whose function is a function
# object (the task's own call, which suiro builds with the argument values in it) becomes
# `<task function>`(...) with each argument that is not a name or a small constant shown as
# `<argument>`, so that a call never carries the task's data.
relay_condition <- function(cond) {
  cl <- if (is.list(cond)) cond$call else NULL
  if (is.call(cl) && !is.symbol(cl[[1L]]) && !is.call(cl[[1L]])) {
    cl[[1L]] <- as.name("<task function>")
    for (k in seq_along(cl)[-1L]) {
      a <- cl[[k]]
      if (!(is.symbol(a) || is.call(a) || (is.atomic(a) && length(a) <= 1L && is.null(attributes(a)))))
        cl[[k]] <- as.name("<argument>")
    }
    cond$call <- cl
  }
  cond
}

relay_dropped <- function(n)
  simpleWarning(sprintf("suiro: %.0f more conditions of this task were not relayed (at most 1000 are)", n))

# In the host: the conditions of a result, signalled again in order (as the future package does):
# warnings with warning(), messages with message(), others with signalCondition().
relay_conditions <- function(conds) {
  for (cond in conds) {
    if (inherits(cond, "warning")) warning(cond)
    else if (inherits(cond, "message")) message(cond)
    else signalCondition(cond)
  }
  invisible()
}

# The error a failed task raised, as the host signals it: its own classes with suiro_error_remote
# and suiro_error before "error", its fields, and suiro's (remote_class, traceback, index, slot,
# pid) where it has none of that name. NULL when it is not an error condition held in a list.
# A map element's error keeps the message the map gives ("element 3: ...").
remote_condition <- function(cond, fields, message = NULL) {
  if (!is.list(cond) || !inherits(cond, "error")) return(NULL)
  for (nm in names(fields)) if (is.null(cond[[nm]])) cond[nm] <- fields[nm]
  if (!is.null(message) && is.character(cond$message)) cond$message <- message
  cl <- class(cond)
  cl <- cl[!cl %in% c("suiro_error_remote", "suiro_error")]
  k <- match("error", cl)
  class(cond) <- c(cl[seq_len(k - 1L)], "suiro_error_remote", "suiro_error", cl[k:length(cl)])
  cond
}

suiro_current_pool <- function() .Call(C_current_pool)
