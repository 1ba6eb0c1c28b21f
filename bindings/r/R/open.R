# Config scripts: the same Lua files the Lua face opens (examples/pools.lua).
#
# pools <- suiro_open("pools.lua"); pools$fast      # created on first use
# suiro_close(pools)                               # stops those created

suiro_open <- function(path) {
  if (!is.character(path) || length(path) != 1L) stop("suiro_open: argument 1 must be a file name", call. = FALSE)
  specs <- tryCatch(.Call(C_config_load, path), error = function(e) stop(conditionMessage(e), call. = FALSE))
  env <- new.env(parent = emptyenv())
  env$specs <- specs
  env$path <- path
  env$pools <- list()
  reg.finalizer(env, function(e) suiro_close(structure(list(env = e), class = "suiro_pools")), onexit = TRUE)
  structure(list(env = env), class = "suiro_pools")
}

`$.suiro_pools` <- function(x, name) x[[name]]

`[[.suiro_pools` <- function(x, i) {
  env <- unclass(x)$env
  if (!is.null(env$pools[[i]])) return(env$pools[[i]])
  o <- env$specs[[i]]
  if (is.null(o)) stop(sprintf("no pool \"%s\" in %s (pools: %s)", i, env$path, paste(names(env$specs), collapse = ", ")), call. = FALSE)
  p <- tryCatch(pool_start(o, label = i), error = function(e)
    stop(sprintf("%s: pool \"%s\": %s", env$path, i, sub(paste0("^", i, ": "), "", conditionMessage(e))), call. = FALSE))
  env$pools[[i]] <- p
  p
}

names.suiro_pools <- function(x) names(unclass(x)$env$specs)

# suiro_close(x): x is suiro_open()'s pools (stops the pools it created), a channel endpoint
# (closes that end: R/channel.R), or a channel, suiro_channel()'s list (closes both ends).
suiro_close <- function(x) {
  if (suiro_is_endpoint(x)) return(invisible(.Call(C_chan_close, x)))
  if (is.list(x) && !inherits(x, "suiro_pools") && length(x) && all(vapply(x, suiro_is_endpoint, NA))) {
    for (e in x) if (.Call(C_chan_side, e) != "sent") .Call(C_chan_close, e)
    return(invisible())
  }
  if (!inherits(x, "suiro_pools"))
    stop("suiro_close: argument 1 must be suiro_open()'s pools or a channel endpoint, got ", class(x)[1], call. = FALSE)
  env <- unclass(x)$env
  for (p in rev(env$pools)) if (.Call(C_pool_alive, p)) suiro_pool_stop(p)
  env$pools <- list()
  invisible()
}

print.suiro_pools <- function(x, ...) {
  env <- unclass(x)$env
  cat("<suiro pools from ", env$path, ": ", paste(names(env$specs), collapse = ", "), ">\n", sep = "")
  invisible(x)
}
