# What a function takes with it: its code (formals and body) and, when it was made inside another
# function, the values of the variables it uses from there (codetools finds them). Package
# functions and functions of the global environment take nothing: workers have their own.

free_variables <- function(fn) {
  # codetools is in Imports but not imported: its namespace loads on first use, not in every
  # worker at start
  tryCatch(codetools::findGlobals(fn, merge = TRUE), error = function(e) NULL)
}

is_terminal_env <- function(env) {
  identical(env, globalenv()) || identical(env, emptyenv()) || identical(env, baseenv()) ||
    isNamespace(env) || !is.null(attr(env, "name")) && startsWith(attr(env, "name"), "package:")
}

# A copy of fn whose environment holds only the captured variables it uses (functions among them
# stripped the same way), above the first global or namespace environment of its chain.
strip_closure <- function(fn, depth = 0L) {
  env <- environment(fn)
  if (is.null(env) || is_terminal_env(env) || depth > 8L) return(fn)
  top <- env
  while (!is_terminal_env(top)) top <- parent.env(top)
  vars <- free_variables(fn)
  keep <- new.env(parent = top)
  for (v in if (is.null(vars)) character(0) else vars) {
    e <- env
    while (!identical(e, top)) {
      if (exists(v, envir = e, inherits = FALSE)) {
        val <- get(v, envir = e, inherits = FALSE)
        if (identical(val, fn)) break # itself: bound below
        if (is.function(val) && !is.primitive(val)) val <- strip_closure(val, depth + 1L)
        assign(v, val, envir = keep)
        break
      }
      e <- parent.env(e)
    }
  }
  out <- fn
  environment(out) <- keep
  for (v in vars) if (exists(v, envir = env) && identical(get(v, envir = env), fn)) assign(v, out, envir = keep)
  out
}
