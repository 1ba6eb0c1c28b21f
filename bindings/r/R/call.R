# Call specs: a function by name or source text, with positional and named arguments, for
# workers of any language.
#
# suiro_call("stats::quantile", x, probs = c(.25, .5, .75), names = FALSE)
# suiro_call(.source = "import numpy as np\nnp.std(x)", x = x)
# Source text runs with the named arguments as variables (R: positional ones are ...).

suiro_call <- function(.name = NULL, ..., .source = NULL) {
  # With .source, a first positional argument lands in .name: it is an argument, not a name
  if (!is.null(.source) && !is.null(.name) && !(".name" %in% names(sys.call())))
    return(.Call(C_call_new, NULL, c(list(.name), list(...)), .source))
  .Call(C_call_new, .name, list(...), .source)
}

print.suiro_call <- function(x, ...) {
  what <- if (!is.null(x$target)) sprintf("\"%s\"", x$target) else "source"
  cat(sprintf("<suiro call %s: %d positional, %d named%s>\n", what, length(x$args), length(x$named),
              if (length(x$named)) paste0(" (", paste(names(x$named), collapse = ", "), ")") else ""))
  invisible(x)
}
