# backend = "mpi" for R hosts (docs/r.md): the same script on every node of an MPI job.
#
#   mpirun -np 3 Rscript script.R      # rank 0 runs the script; ranks 1 and 2 serve
#
# Every rank runs the script up to its first suiro_pool(backend = "mpi"); there ranks 1..K-1
# serve (C only: the serving loop of engine/cluster starts the pools from the worker command rank
# 0 sends) and quit when rank 0 ends the job, so only rank 0 runs the rest. Maps are dealt out in
# ranges over every node, rank 0's local pool included; tasks run on rank 0's local pool. Outside
# mpirun (or with one rank) the pool is the local pool, one node. The tier is
# build/lib/suiro/cluster.so (engine/include/suiro_cluster.h), loaded only here (src/rcluster.c).

cluster_state <- new.env(parent = emptyenv())

cluster_in_job <- function() {
  s <- suppressWarnings(as.integer(Sys.getenv("OMPI_COMM_WORLD_SIZE", "")))
  !is.na(s) && s > 1L
}

# SUIRO_CLUSTER_SO, the checkout's build/lib/suiro/cluster.so (the package installed in
# build/R-lib), or the one installed with the suiro command on PATH (lib/lua/5.4/suiro/ of its
# prefix or rock tree).
cluster_library <- function() {
  env <- Sys.getenv("SUIRO_CLUSTER_SO")
  if (nzchar(env)) return(env)
  places <- file.path(dirname(dirname(system.file(package = "suiro"))), "lib", "suiro", "cluster.so")
  exe <- Sys.which("suiro")
  if (nzchar(exe)) { # a checkout's build/bin/suiro, or an installed one (scripts/install, the rock)
    prefix <- dirname(dirname(normalizePath(exe)))
    places <- c(places, file.path(prefix, "lib", "suiro", "cluster.so"),
                file.path(prefix, "lib", "lua", "5.4", "suiro", "cluster.so"))
  }
  for (p in places) if (file.exists(p)) return(normalizePath(p))
  NULL
}

# Brings MPI up inside a job (once); ranks 1.. serve here and quit. This node's name on rank 0.
cluster_enter <- function(where) {
  if (!cluster_in_job()) return(Sys.info()[["nodename"]])
  if (is.null(cluster_state$job)) {
    path <- cluster_library()
    if (is.null(path))
      stop(where, ': backend "mpi": the cluster library is not built (no build/lib/suiro/cluster.so): install ',
           "openmpi-bin and libopenmpi-dev (scripts/setup) and run scripts/build, or set SUIRO_CLUSTER_SO",
           call. = FALSE)
    .Call(C_cluster_load, path)
    cluster_state$job <- .Call(C_cluster_start)
  }
  job <- cluster_state$job
  if (job[[1]] != 0L) {
    code <- .Call(C_cluster_serve)
    quit(save = "no", status = code, runLast = FALSE)
  }
  job[[3]]
}

# Makes pool (rank 0's local pool) the pool of every node, from its resolved command.
cluster_attach <- function(pool, spec, env, start_timeout) {
  xp <- NULL
  job <- cluster_state$job
  if (!is.null(job) && job[[2]] > 1L) {
    keys <- c("workers", "max_workers", "ring_cap", "slot_size", "result_slots", "result_size", "respawn",
              "start_timeout")
    s <- Filter(Negate(is.null), spec[keys])
    s$exe <- spec$exe
    if (!is.null(spec$argv)) s$argv <- as.list(spec$argv) # else the engine's default, as locally
    s$env <- as.list(env)
    raw <- .Call(C_wire_encode, s, FALSE)
    xp <- tryCatch(.Call(C_cluster_pool, pool, raw, as.numeric(start_timeout %||% 10)), error = function(e) {
      suiro_pool_stop(pool)
      stop(conditionMessage(e), call. = FALSE)
    })
  }
  attr(pool, "suiro_cluster") <- list(xp = xp)
  pool
}

cluster_of <- function(pool) {
  if (typeof(pool) != "externalptr") return(NULL)
  attr(pool, "suiro_cluster", exact = TRUE)
}

# The nodes of an MPI pool: a data frame (rank, node, pid, cpus, workers), rank 0 first.
suiro_pool_nodes <- function(pool) {
  cl <- cluster_of(pool)
  if (is.null(cl)) stop("suiro_pool_nodes: argument 1 must be a pool made with backend = \"mpi\"", call. = FALSE)
  if (is.null(cl$xp))
    return(data.frame(rank = 0L, node = Sys.info()[["nodename"]], pid = Sys.getpid(), cpus = NA_integer_,
                      workers = suiro_pool_status(pool)$workers))
  .Call(C_cluster_nodes, cl$xp)
}

cluster_map <- function(cl, pool, x, f, extras, template, seed, stream, timeout) {
  staged <- .Call(C_map_new, pool, x, f, extras, template, seed, FALSE, TRUE, timeout)
  xm <- .Call(C_cluster_map, cl$xp, staged, !is.null(seed), as.numeric(seed %||% 0), isTRUE(stream))
  structure(list(xm = xm, pool = pool, timeout = timeout, state = new.env(parent = emptyenv())),
            class = "suiro_cluster_map")
}

cluster_collect <- function(m, timeout = NULL) {
  if (isTRUE(m$state$collected)) stop("suiro_collect: the results were collected already", call. = FALSE)
  t <- timeout %||% m$timeout
  t <- if (is.null(t)) -1 else if (is.character(t)) .Call(C_duration, t) else as.numeric(t)
  if (is.infinite(t)) t <- -1
  r <- .Call(C_cluster_map_wait, m$xm, t)
  if (r < 0) stop("suiro_collect: the map's pool was stopped", call. = FALSE)
  if (r == 0) return(suiro_timeout())
  m$state$collected <- TRUE
  .Call(C_cluster_map_results, m$xm, unname(lang_code[[attr_info(m$pool)$kind %||% "r"]]))
}

print.suiro_cluster_map <- function(x, ...) {
  cat(sprintf("<suiro map over the nodes of an MPI job: %g done>\n", .Call(C_cluster_map_done, x$xm)))
  invisible(x)
}
