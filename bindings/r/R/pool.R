# Pools: suiro_pool(), launchers, stop, status, grow and shrink.
#
# Options are checked and normalised by the Lua face's suiro.config (through the embedded Lua
# state), so R accepts what Lua accepts, with the same messages.

#' @keywords internal
new_launcher <- function(kind, opts) {
  opts <- Filter(Negate(is.null), opts)
  if (!is.null(opts$env)) opts$env <- as.list(opts$env)
  if (!is.null(opts$argv)) opts$argv <- as.list(opts$argv) # a list of strings, as config scripts give
  structure(c(list(kind = kind), opts), class = "suiro_launcher")
}

suiro_r <- function(rscript = NULL, env = NULL) new_launcher("r", list(rscript = rscript, env = env))
suiro_lua <- function(exe = NULL, argv = NULL, env = NULL) new_launcher("lua", list(exe = exe, argv = argv, env = env))
suiro_python <- function(python = NULL, argv = NULL, env = NULL)
  new_launcher("python", list(python = python, argv = argv, env = env))

print.suiro_launcher <- function(x, ...) {
  opts <- unclass(x)[setdiff(names(x), "kind")]
  cat("<suiro launcher: ", x$kind, if (length(opts)) paste0(" (", paste(names(opts), collapse = ", "), ")"), ">\n", sep = "")
  invisible(x)
}

lang_code <- c(lua = 1L, python = 2L, r = 3L)

# The environment every face gives workers of a launcher kind by default (suiro.config.worker_env:
# one thread per numeric library, R's locale); the launcher's and the pool's env override it.
worker_env_defaults <- function(kind) .Call(C_worker_env, kind)

# What this R knows of itself for suiro.config.launch, which builds every kind's worker command by
# the one rule of all hosts (the launcher's options, then SUIRO_WORKER_EXE, SUIRO_PY_WORKER,
# SUIRO_R_LIBS, then these, then what is installed): its Rscript and the library suiro was loaded
# from, first on R_LIBS before this session's .libPaths().
host_info <- function(kind, pool_env = NULL) {
  h <- list(lang = "r", pool_env = if (length(pool_env)) as.list(pool_env))
  if (kind == "r") {
    h$rscript <- file.path(R.home("bin"), "Rscript")
    h$r_libs <- dirname(getNamespaceInfo("suiro", "path"))
    h$r_lib_path <- paste(.libPaths(), collapse = ":")
  } else if (kind == "python") {
    h$cwd <- getwd()
  }
  Filter(Negate(is.null), h)
}

# What a launcher starts: list(exe, argv, env), the env with the pool's on top.
launch_spec <- function(l, pool_env = NULL) {
  enc <- function(x) .Call(C_wire_encode, x, FALSE)
  s <- tryCatch(.Call(C_launch, l$kind, enc(unclass(l)), enc(host_info(l$kind, pool_env))),
                error = function(e) stop("suiro_", l$kind, "(): ", conditionMessage(e), call. = FALSE))
  s$env <- as.list(s$env)
  s
}

suiro_pool <- function(workers = 1L, launcher = suiro_r(), timeout = NULL, start_timeout = NULL, env = NULL,
                       respawn = NULL, max_workers = NULL, ring_cap = NULL, slot_size = NULL,
                       result_slots = NULL, result_size = NULL, name = NULL, backend = NULL) {
  if (is.character(launcher) && length(launcher) == 1L) launcher <- new_launcher(launcher, list())
  if (!inherits(launcher, "suiro_launcher"))
    stop("suiro_pool: launcher must be suiro_r(), suiro_lua() or suiro_python(), got ", class(launcher)[1], call. = FALSE)
  opts <- list(workers = workers, launcher = unclass(launcher), timeout = timeout, start_timeout = start_timeout,
               env = if (!is.null(env)) as.list(env), respawn = respawn, max_workers = max_workers,
               ring_cap = ring_cap, slot_size = slot_size, result_slots = result_slots,
               result_size = result_size, name = name, backend = backend)
  pool_start(normalise_options(Filter(Negate(is.null), opts), "suiro_pool"))
}

normalise_options <- function(opts, where) {
  raw <- tryCatch(.Call(C_wire_encode, opts, FALSE), error = function(e)
    stop(where, ": ", sub("^value", "options", conditionMessage(e)), call. = FALSE))
  tryCatch(.Call(C_pool_options, raw, where), error = function(e) stop(conditionMessage(e), call. = FALSE))
}

# Starts a pool from normalised options (suiro.config's form).
pool_start <- function(o, label = NULL) {
  mpi <- identical(o$backend, "mpi") && is.null(suiro_current_pool()) # pools inside workers are local
  node <- if (mpi) cluster_enter(label %||% "suiro_pool") # ranks 1.. of an MPI job serve there and quit
  l <- o$launcher
  s <- launch_spec(l, o$env)
  env <- s$env
  if (mpi) env <- utils::modifyList(env, list(SUIRO_MPI_RANK = "0", SUIRO_MPI_HOST = node))
  spec <- list(workers = o$workers, max_workers = o$max_workers, ring_cap = o$ring_cap,
               slot_size = o$slot_size, result_slots = o$result_slots, result_size = o$result_size,
               respawn = o$respawn, start_timeout = o$start_timeout, timeout = o$timeout,
               name = o$name, exe = s$exe, argv = as.list(s$argv), env = as.list(env), lang = l$kind)
  spec <- Filter(Negate(is.null), spec)
  info <- list(kind = l$kind, workers = o$workers, name = label %||% o$name)
  # one DICT, read and checked by the engine (suiro_pool_create_from)
  pool <- tryCatch(.Call(C_pool_new, .Call(C_wire_encode, spec, FALSE), info),
                   error = function(e) stop(conditionMessage(e), call. = FALSE))
  if (mpi) pool <- cluster_attach(pool, spec, env, o$start_timeout)
  pool
}

suiro_pool_stop <- function(pool, timeout = 5) {
  cl <- cluster_of(pool)
  if (!is.null(cl$xp)) .Call(C_cluster_pool_close, cl$xp) # backend = "mpi": on every node
  .Call(C_pool_stop, pool, as.numeric(timeout))
  invisible(pool)
}

suiro_pool_status <- function(pool) .Call(C_pool_status, pool)

suiro_pool_spawn <- function(pool, n = 1L) {
  .Call(C_pool_spawn, pool, as.integer(n))
  invisible(pool)
}

suiro_pool_retire <- function(pool, slot, timeout = 5) .Call(C_pool_retire, pool, as.integer(slot), as.numeric(timeout))

print.suiro_pool <- function(x, ...) {
  info <- attr_info(x)
  if (!.Call(C_pool_alive, x)) {
    cat("<suiro pool: ", info$kind %||% "", " workers, stopped>\n", sep = "")
    return(invisible(x))
  }
  st <- suiro_pool_status(x)
  w <- st$worker
  states <- if (nrow(w)) paste(sprintf("%d:%s", w$slot, w$state), collapse = " ") else "none"
  cat(sprintf("<suiro pool %s: %d %s worker%s (%s); %g tasks run>\n",
              info$name %||% st$name, st$workers, info$kind %||% "r", if (st$workers == 1) "" else "s",
              states, st$tasks))
  invisible(x)
}

attr_info <- function(x) {
  i <- .Call(C_pool_info, x)
  if (is.list(i)) i else list(kind = "r", name = i)
}
