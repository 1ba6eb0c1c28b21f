# Parallel maps: the function and the input are staged once in shared memory; one runner per
# worker claims ranges of elements from a shared cursor.
#
# m <- suiro_map(p, c(1, 4, 9, 16, 25), sqrt, .template = numeric(1), .seed = 42)
# suiro_collect(m)                                  # 1 2 3 4 5
# .template is like vapply's FUN.VALUE (numeric(1), integer(3), a matrix, a named list of
# scalars for a data frame) or a template string ("f64", "f64[3]", "{mean: f64, sd: f64}").

# .seed = TRUE: a seed drawn from the host's R generator (set.seed() before the map repeats it).
map_seed <- function(seed) if (isTRUE(seed)) sample.int(.Machine$integer.max, 1L) else seed

suiro_map <- function(.pool, .x, .f, ..., .template = NULL, .seed = NULL, .stream = FALSE, .timeout = NULL) {
  .x <- map_input(.x, "suiro_map")
  .seed <- map_seed(.seed)
  cl <- cluster_of(.pool)
  if (!is.null(cl$xp)) # backend = "mpi" inside an MPI job: dealt out over every node (R/cluster.R)
    return(cluster_map(cl, .pool, .x, .f, list(...), .template, .seed, .stream, .timeout))
  .Call(C_map_new, .pool, .x, .f, list(...), .template, .seed, isTRUE(.stream), FALSE, .timeout)
}

suiro_map_prepare <- function(.pool, .x, .f, ..., .template = NULL, .seed = NULL, .timeout = NULL) {
  .x <- map_input(.x, "suiro_map_prepare")
  .seed <- map_seed(.seed)
  .Call(C_map_new, .pool, .x, .f, list(...), .template, .seed, FALSE, TRUE, .timeout)
}

suiro_map_run <- function(pm, .x = NULL, .timeout = NULL) .Call(C_map_run, pm, .x, .timeout)

suiro_map_next <- function(m, timeout = NULL) .Call(C_map_next, m, timeout)

suiro_map_progress <- function(m) {
  if (inherits(m, "suiro_cluster_map")) return(c(done = .Call(C_cluster_map_done, m$xm), n = NA_real_))
  p <- .Call(C_map_progress, m)
  c(done = p[[1]], n = p[[2]])
}


# Classed vectors (factors, dates) are mapped element by element like lapply does.
map_input <- function(x, verb) {
  if (is.null(x)) return(list()) # as lapply(NULL, f): no elements
  if (is.object(x) && is.atomic(x) && !inherits(x, "integer64")) return(as.list(x))
  if (is.function(x) || is.environment(x))
    stop(verb, ": argument 2 must be a vector or a list, got ", typeof(x), call. = FALSE)
  x
}

print.suiro_map <- function(x, ...) {
  i <- .Call(C_map_info, x)
  p <- .Call(C_map_progress, x)
  cat(sprintf("<suiro map%s%s: %g elements, %s, %g done>\n", if (i$prepared) " (prepared)" else "",
              if (i$stream) " (streamed)" else "", i$n, i$state, p[[1]]))
  invisible(x)
}
