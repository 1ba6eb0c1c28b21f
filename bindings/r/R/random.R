# suiro_random(): R's counterpart of Lua's suiro.random. Inside an element of a seeded map it
# draws from the element's stream (the same numbers in every face: tests/vectors/rng.txt);
# elsewhere from R's generator.
#   suiro_random()       a double in [0, 1)
#   suiro_random(m)      an integer in 1..m
#   suiro_random(m, n)   an integer in m..n

suiro_random <- function(m = NULL, n = NULL) {
  v <- .Call(C_random, m, n)
  if (!is.null(v)) return(v)
  if (is.null(m)) return(stats::runif(1))
  if (is.null(n)) return(sample.int(m, 1L))
  m + sample.int(n - m + 1L, 1L) - 1L
}
