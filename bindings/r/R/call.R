# Call specs: a function by name or source text, with positional and named arguments, for
# workers of any language.
#
# suiro_call("stats::quantile", x, probs = c(.25, .5, .75), names = FALSE)
# suiro_call(.source = "import numpy as np\nnp.std(x)", x = x)
# Source text runs with the named arguments as variables (R: positional ones are ...).

suiro_call <- function(.name = NULL, ..., .source = NULL) {
  args <- list(...)
  # With .source, a first positional argument lands in .name: it is an argument, not a name
  if (!is.null(.source) && !is.null(.name) && !(".name" %in% names(sys.call()))) {
    args <- c(list(.name), args)
    .name <- NULL
  }
  nm <- names(args) %||% rep("", length(args))
  if (is.null(.name) == is.null(.source))
    stop("suiro_call: give a function name (\"pkg::fn\", \"module.fn\") or .source, not both", call. = FALSE)
  if (!is.null(.name)) {
    if (!is.character(.name) || length(.name) != 1L || is.na(.name))
      stop("suiro_call: the function name must be one string, got ", class(.name)[1], call. = FALSE)
    tryCatch(.Call(C_fnref_check, .name), error = function(e)
      stop("suiro_call: ", conditionMessage(e), call. = FALSE))
  } else if (!is.character(.source) || length(.source) != 1L || is.na(.source)) {
    stop("suiro_call: .source must be one string", call. = FALSE)
  }
  pos <- args[!nzchar(nm)]
  named <- args[nzchar(nm)]
  if (!length(named)) named <- structure(list(), names = character(0))
  structure(list(target = .name, source = .source, args = unname(pos), named = named), class = "suiro_call")
}

print.suiro_call <- function(x, ...) {
  what <- if (!is.null(x$target)) sprintf("\"%s\"", x$target) else "source"
  cat(sprintf("<suiro call %s: %d positional, %d named%s>\n", what, length(x$args), length(x$named),
              if (length(x$named)) paste0(" (", paste(names(x$named), collapse = ", "), ")") else ""))
  invisible(x)
}
