# Package load: the Lua face's readers (config scripts, templates, durations) run in a private Lua
# state that finds lua/suiro/{config,parse}.lua under the installed package's lua/ directory.
.onLoad <- function(libname, pkgname) {
  dir <- system.file("lua", package = pkgname, lib.loc = libname)
  .Call(C_embed_set_dir, dir)
  invisible()
}

`%||%` <- function(a, b) if (is.null(a)) b else a

# The engine's monotonic clock in seconds (for benchmarks and timing loops).
now <- function() .Call(C_now)
